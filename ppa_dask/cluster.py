"""Dask clusters for ppa-dask (re-exported from :mod:`ppa_dask.app.cluster`, where it lives).

>>> from ppa_dask.cluster import local_client
"""

from ppa_dask.app.cluster import (
    ClusterConfigError,
    ClusterConnectError,
    compute_with_progress,
    dashboard_link,
    job_script,
    local_client,
    make_security,
    open_client,
    probe_scheduler,
    read_cluster_config,
    step_reporter,
    validate_daskcluster,
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
