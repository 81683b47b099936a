"""The sections of ``ppa-dask bench``, each a function returning its rows (see :mod:`..sizes`).

The in-process sections take ``(sizes, say)`` and run in this process with one BLAS thread; the
cluster sections take ``(sizes, say, tmp)`` and run on the bench's shared local cluster (the
current client). Two bring or need their own cluster: ``ooc`` (``(sizes, say, tmp, client)``, a
cluster with the out-of-core memory limit) and ``scaling`` (``(sizes, say, tmp, scratch)``, one
cluster per configuration).

Examples
--------
>>> list(IN_PROCESS_SECTIONS), list(ON_CLUSTER_SECTIONS)  # doctest: +NORMALIZE_WHITESPACE
(['memory', 'table2', 'cost', 'wide', 'first_run', 'startup'],
 ['dask', 'cube', 'passes', 'ensembles', 'wide_ooc'])
"""

from __future__ import annotations

from ppa_dask.app.bench.sections.cube import section_cube
from ppa_dask.app.bench.sections.dask_arrays import section_dask, section_passes
from ppa_dask.app.bench.sections.ensembles import section_ensembles
from ppa_dask.app.bench.sections.first_run import section_first_run
from ppa_dask.app.bench.sections.in_memory import section_cost, section_memory, section_table2
from ppa_dask.app.bench.sections.out_of_core import section_ooc
from ppa_dask.app.bench.sections.scaling import section_scaling
from ppa_dask.app.bench.sections.startup import section_startup
from ppa_dask.app.bench.sections.wide import section_wide, section_wide_ooc

#: Sections run in this process, in this order.
IN_PROCESS_SECTIONS = {
    "memory": section_memory,
    "table2": section_table2,
    "cost": section_cost,
    "wide": section_wide,
    "first_run": section_first_run,
    "startup": section_startup,
}
#: Sections run on the shared cluster, in this order (``ooc`` joins them when its memory limit
#: is the cluster's).
ON_CLUSTER_SECTIONS = {
    "dask": section_dask,
    "cube": section_cube,
    "passes": section_passes,
    "ensembles": section_ensembles,
    "wide_ooc": section_wide_ooc,
}

__all__ = ["IN_PROCESS_SECTIONS", "ON_CLUSTER_SECTIONS", "section_ooc", "section_scaling"]
