"""The errors of the cluster package: a cluster file or value that cannot be used, and a
scheduler or batch cluster that cannot be reached or started.

Examples
--------
>>> issubclass(ClusterConnectError, ClusterConfigError), issubclass(ClusterConfigError, ValueError)
(True, True)
"""

from __future__ import annotations

__all__ = ["ClusterConfigError", "ClusterConnectError"]


class ClusterConfigError(ValueError):
    """A cluster configuration file (or value) that cannot be used; the message says why."""


class ClusterConnectError(ClusterConfigError):
    """A scheduler that cannot be reached, or a cluster whose workers cannot start.

    The message is one line naming the address (timed out, refused, not a Dask scheduler) or
    the job submission command (missing, failed, no worker in time).
    """
