"""Opening a cluster: one entry for a cluster file, a scheduler address or a local cluster.

:func:`open_client` is how the command, the pipelines and the scripts get their Dask Client:
from a cluster file (:func:`ppa_dask.cluster.read_cluster_config`: local, SLURM, PBS, a
scheduler, a Kubernetes ``DaskCluster``; or the configuration that function returned, so that
a command reads its file once, validated before any work starts), from the address of a
running scheduler (probed first, :func:`ppa_dask.cluster.probe_scheduler`), or a LocalCluster
of worker processes (:func:`ppa_dask.cluster.local_client`); ``scheduler="threads"`` (or
``"synchronous"``) computes in this process without a Client.

Every wait is bounded: connecting to a scheduler (the TCP/TLS connection, distributed's
handshake and the scheduler's identity reply) takes at most ``connect_timeout`` seconds
(:data:`ppa_dask.cluster.files.DEFAULT_CONNECT_TIMEOUT`), and a batch-job cluster fails when
its submission command is missing or fails, or when no worker has joined after
``worker_timeout`` seconds (:data:`ppa_dask.cluster.files.DEFAULT_WORKER_TIMEOUT`). Both raise
:class:`ppa_dask.cluster.ClusterConnectError` with one line naming the address or the command.

Examples
--------
>>> with open_client(scheduler="threads") as client:
...     client is None
True
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

from ppa_dask.cluster.errors import ClusterConfigError
from ppa_dask.cluster.files import DEFAULT_CONNECT_TIMEOUT, check_seconds, read_cluster_config
from ppa_dask.cluster.jobqueue import jobqueue_client
from ppa_dask.cluster.kubernetes import kubernetes_client
from ppa_dask.cluster.local import local_client
from ppa_dask.cluster.probe import connected_client
from ppa_dask.utils.blas import one_blas_thread

__all__ = ["open_client", "IN_PROCESS_SCHEDULERS"]

#: ``--scheduler`` values computing in this process with Dask's local schedulers (no Client).
IN_PROCESS_SCHEDULERS = ("threads", "synchronous", "sync", "single-threaded")


@contextlib.contextmanager
def open_client(
    cluster=None,
    scheduler=None,
    n_workers=2,
    memory_limit="auto",
    local_directory=None,
    log_level=logging.WARNING,
    connect_timeout=None,
    worker_timeout=None,
    notify=None,
):
    """Yield a distributed Client for a cluster file, a scheduler address or a LocalCluster.

    Parameters
    ----------
    cluster : str, os.PathLike or dict, optional
        A cluster configuration file, read here with :func:`read_cluster_config`, or the
        configuration that function returned for one (used as it is: a command validates its
        file before any work starts and passes the result on, so the file is read once).
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:port``, ``tls://...``), or ``"threads"`` /
        ``"synchronous"`` for Dask's in-process schedulers (then None is yielded: no Client).
    n_workers, memory_limit, local_directory
        For the default LocalCluster (neither ``cluster`` nor ``scheduler``), and defaults for a
        ``type: local`` file.
    connect_timeout : float, optional
        Seconds allowed for connecting to a scheduler (connection, handshake, identity reply).
        Default: the file's ``connect_timeout``, else :data:`DEFAULT_CONNECT_TIMEOUT`. It is
        also distributed's ``comm.timeouts.connect`` while the Client is open.
    worker_timeout : float, optional
        SLURM/PBS files: seconds until the first worker must have joined, and that the
        cluster may go without any worker later (its jobs lost and their replacements queued).
        Default: the file's ``worker_timeout``, else :data:`DEFAULT_WORKER_TIMEOUT`.
    notify : callable, optional
        SLURM/PBS files: receives a line for each thing the watch of the jobs reports (a job
        pending for resources, a worker connected, a lost job replaced;
        :class:`ppa_dask.cluster.batchjobs.JobWatch`).

    Yields
    ------
    client : distributed.Client or None

    Raises
    ------
    ClusterConnectError
        One line naming the address that timed out, refused the connection or is not a Dask
        scheduler, or the job submission command that is missing or failed; for SLURM/PBS,
        also jobs that failed before their worker started, lost jobs beyond
        ``max_job_restarts``, or no worker for ``worker_timeout`` seconds (naming the jobs,
        their states and their log files), raised in place of the interrupted computation.
    """
    import dask

    if cluster is not None and scheduler is not None:
        raise ClusterConfigError("give either a cluster file or a scheduler, not both")
    if scheduler in IN_PROCESS_SCHEDULERS:
        # one BLAS thread for everything computed in here (the writes too), as
        # ppa_dask.utils.compute gives the package's own computes
        with dask.config.set(scheduler=scheduler), one_blas_thread():
            yield None
        return
    if scheduler is not None:
        if "://" not in scheduler and ":" not in scheduler:
            raise ClusterConfigError(
                f"scheduler: expected an address such as tcp://127.0.0.1:8786 (or 'threads'), "
                f"got {scheduler!r}"
            )
        timeout = check_seconds(
            "connect_timeout",
            DEFAULT_CONNECT_TIMEOUT if connect_timeout is None else connect_timeout,
        )
        with connected_client(scheduler, None, timeout) as client:
            yield client
        return
    if cluster is None:
        with local_client(
            n_workers=n_workers,
            memory_limit=memory_limit,
            local_directory=local_directory,
            log_level=log_level,
        ) as client:
            yield client
        return
    config = cluster if isinstance(cluster, Mapping) else read_cluster_config(cluster)
    kind = config["type"]
    if kind == "local":
        options = {
            "n_workers": n_workers,
            "memory_limit": memory_limit,
            "local_directory": local_directory,
        }
        options.update(config["options"])
        if config["security"] is not None:
            options["security"] = config["security"]
        with local_client(log_level=log_level, **options) as client:
            yield client
    elif kind == "scheduler":
        timeout = check_seconds(
            "connect_timeout",
            connect_timeout
            if connect_timeout is not None
            else config.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT),
        )
        with connected_client(config["address"], config["security"], timeout) as client:
            yield client
    elif kind == "kubernetes":
        with kubernetes_client(config) as client:
            yield client
    else:
        with jobqueue_client(config, worker_timeout, notify) as client:
            yield client
