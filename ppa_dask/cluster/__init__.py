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

from ppa_dask.utils.lazy import attach as _attach

# each name is imported from its module on first use (ppa_dask.utils.lazy): the command reads
# the defaults of cluster files (.files) without importing distributed
__getattr__, __dir__ = _attach(
    __name__,
    {
        "open_client": "ppa_dask.cluster.client",
        "ClusterConfigError": "ppa_dask.cluster.errors",
        "ClusterConnectError": "ppa_dask.cluster.errors",
        "make_security": "ppa_dask.cluster.files",
        "read_cluster_config": "ppa_dask.cluster.files",
        "job_script": "ppa_dask.cluster.jobqueue",
        "validate_daskcluster": "ppa_dask.cluster.kubernetes",
        "dashboard_link": "ppa_dask.cluster.local",
        "local_client": "ppa_dask.cluster.local",
        "probe_scheduler": "ppa_dask.cluster.probe",
        "compute_with_progress": "ppa_dask.cluster.progress",
        "step_reporter": "ppa_dask.cluster.progress",
    },
)

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
