"""Dask clusters for ppa-dask: local clusters, cluster files, batch jobs, Kubernetes, scheduler
probing, progress bars and the PPA fits page beside the Dask dashboard.

The package imports nothing of ppa-dask but :mod:`ppa_dask.utils` (the import-linter layers in
``pyproject.toml``), so the library's cluster helpers come without the command line. One module
per concept:

* :mod:`.local` -- :func:`local_client`, a LocalCluster of one-BLAS-thread worker processes on
  the loopback interface, and :func:`dashboard_link`; :mod:`.cores` pins its workers to cores
  of their own, :mod:`.closing` keeps out of the output what distributed logs of a shutdown
  working as intended;
* :mod:`.files` -- cluster files (:func:`read_cluster_config`), their schema, TLS
  (:func:`make_security`) and the types of SLURM / PBS ``options``;
* :mod:`.jobqueue` -- SLURM and PBS clusters through dask-jobqueue (:func:`job_script`), and
  :mod:`.batchjobs`, the watch of their jobs;
* :mod:`.kubernetes` -- a dask-kubernetes ``DaskCluster`` manifest
  (:func:`validate_daskcluster`);
* :mod:`.probe` -- :func:`probe_scheduler`, a bounded check that a Dask scheduler answers;
* :mod:`.client` -- :func:`open_client`, the one opener of all of the above;
* :mod:`.progress` -- :func:`step_reporter` and :func:`compute_with_progress`;
* :mod:`.dashboard` -- the PPA fits page served by the scheduler next to its dashboard;
* :mod:`.errors` -- :class:`ClusterConfigError` and :class:`ClusterConnectError`.

>>> from ppa_dask.cluster import local_client
"""

from ppa_dask.cluster.client import open_client
from ppa_dask.cluster.errors import ClusterConfigError, ClusterConnectError
from ppa_dask.cluster.files import make_security, read_cluster_config
from ppa_dask.cluster.jobqueue import job_script
from ppa_dask.cluster.kubernetes import validate_daskcluster
from ppa_dask.cluster.local import dashboard_link, local_client
from ppa_dask.cluster.probe import probe_scheduler
from ppa_dask.cluster.progress import compute_with_progress, step_reporter

__all__ = [
    "local_client",
    "dashboard_link",
    "ClusterConfigError",
    "ClusterConnectError",
    "probe_scheduler",
    "read_cluster_config",
    "make_security",
    "open_client",
    "job_script",
    "validate_daskcluster",
    "step_reporter",
    "compute_with_progress",
]
