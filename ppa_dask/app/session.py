"""The cluster session of a command: the Client its options ask for, with its lines.

:func:`read_cluster_option` reads and validates the cluster file a command computes on, once,
before any work starts; :func:`command_session` turns a command's options (``--cluster``,
``--scheduler``, ``--workers``, ``--memory-limit``, timeouts, ``--performance-report``) and
that configuration into a Client opened with :func:`ppa_dask.cluster.open_client` (which does
not read the file again), and says on the command's reporter where it computes: the
scheduler, its workers, the dashboard and the PPA fits page
(:mod:`ppa_dask.cluster.dashboard`). It is the command line's glue, so it lives in the
application; the clusters themselves are :mod:`ppa_dask.cluster`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

from ppa_dask.app.placement import LOCAL_CLUSTER
from ppa_dask.cluster import dashboard_link, open_client, read_cluster_config
from ppa_dask.cluster.client import IN_PROCESS_SCHEDULERS
from ppa_dask.cluster.dashboard import open_page
from ppa_dask.ppa import first_run
from ppa_dask.store.sinks import report_file

__all__ = ["command_session", "read_cluster_option"]

_BOTH = "give either --cluster or --scheduler, not both"


def read_cluster_option(cluster, scheduler=None):
    """The cluster file a command computes on, read and validated (before any work starts).

    Parameters
    ----------
    cluster : str or None
        The command's ``--cluster``; ``'local'`` (:data:`~ppa_dask.app.placement.LOCAL_CLUSTER`)
        names the default local cluster, no file.
    scheduler : str, optional
        The command's ``--scheduler``: refused beside a cluster file, before the file is read.

    Returns
    -------
    dict or None
        :func:`ppa_dask.cluster.read_cluster_config`'s configuration, for
        :func:`command_session` to open; None without a file.

    Raises
    ------
    ValueError
        For both a cluster file and a scheduler; :class:`ClusterConfigError`: one line naming
        the file, the key and what was expected.

    Examples
    --------
    >>> read_cluster_option(None) is None and read_cluster_option("local") is None
    True
    >>> read_cluster_option("absent.yaml")
    Traceback (most recent call last):
    ...
    ppa_dask.cluster.errors.ClusterConfigError: cluster configuration 'absent.yaml' does not exist
    """
    if not cluster or cluster == LOCAL_CLUSTER:
        return None
    if scheduler is not None:
        raise ValueError(_BOTH)
    return read_cluster_config(cluster)


@contextlib.contextmanager
def command_session(args, progress, local_directory=None, cluster=None):
    """The Client a command's options ask for: open it, report its dashboard, record a
    performance report.

    Parameters
    ----------
    args : argparse.Namespace
        The command's options ``cluster``, ``scheduler``, ``workers``, ``memory_limit``,
        ``connect_timeout``, ``worker_timeout``, ``performance_report`` and ``overwrite``
        (which lets the report replace one ppa-dask wrote; absent options take their
        defaults).
    progress : ppa_dask.utils.progress.Reporter
        Where the connection, scheduler and dashboard lines go.
    local_directory : str, optional
        Scratch folder of a local cluster's workers.
    cluster : dict, optional
        The cluster file the command computes on, as :func:`read_cluster_option` read it
        before any work started (``--cluster``, or a pipeline's ``cluster``); opened as it is,
        not read again. Without it, ``args.cluster``'s file is read when the cluster opens.

    Yields
    ------
    distributed.Client or None
        None for ``--scheduler threads`` (or ``synchronous``): computed in this process.

    Raises
    ------
    ValueError
        For contradicting options or a performance report that cannot be written;
        :class:`ClusterConnectError` for a scheduler that cannot be reached or workers that
        cannot start.

    Examples
    --------
    >>> import argparse, io
    >>> from ppa_dask.utils.progress import Reporter
    >>> options = argparse.Namespace(scheduler="threads")
    >>> with command_session(options, Reporter(io.StringIO())) as client:
    ...     client is None
    True
    """
    if cluster is None:  # a path, read by open_client ('local': no file)
        cluster = getattr(args, "cluster", None)
        cluster = None if cluster == LOCAL_CLUSTER else cluster
    scheduler = getattr(args, "scheduler", None)
    report = getattr(args, "performance_report", None)
    if cluster is not None and scheduler is not None:
        raise ValueError(_BOTH)
    if report is not None:
        parent = os.path.dirname(os.path.abspath(report))
        if not os.path.isdir(parent):
            raise ValueError(f"--performance-report: folder {parent!r} does not exist")
        if scheduler in IN_PROCESS_SCHEDULERS:
            raise ValueError(
                f"--performance-report needs a distributed scheduler, not --scheduler {scheduler}"
            )
    workers = getattr(args, "workers", None) or 2
    what = (
        f"cluster from {cluster['path'] if isinstance(cluster, Mapping) else cluster}"
        if cluster
        else f"scheduler {scheduler}"
        if scheduler
        else f"local cluster ({workers} worker process(es), 1 thread each)"
    )
    if scheduler not in IN_PROCESS_SCHEDULERS:  # in process: the line below says so
        progress.say(f"connecting: {what}")
    if cluster is None:
        # on a first run on this machine the kernels are compiled in a process of their own while
        # the local workers start and the data are read: every process then loads the cache
        # instead of compiling it (ppa.fused)
        first_run.compile_in_background()
    with open_client(
        cluster=cluster,
        scheduler=scheduler,
        n_workers=workers,
        memory_limit=getattr(args, "memory_limit", "auto"),
        local_directory=local_directory,
        connect_timeout=getattr(args, "connect_timeout", None),
        worker_timeout=getattr(args, "worker_timeout", None),
        notify=progress.say,
    ) as client:
        if client is None:
            if not getattr(args, "where_said", False):  # the command's first line said why
                progress.say(
                    f"computing in this process (dask scheduler {scheduler!r}); no dashboard"
                )
            yield None
            return
        n = len(client.scheduler_info(n_workers=-1).get("workers", {}))
        progress.say(f"scheduler {client.scheduler.address}, {n} worker(s)")
        link = dashboard_link(client)
        progress.say(f"dashboard: {link or '(not available)'}")
        page, note = open_page(client, link)  # the PPA fits page, served beside the dashboard
        progress.say(f"PPA fits: {page}" if page else f"note: {note}")
        if report is None:
            yield client
        else:
            from distributed import performance_report

            # written to a temporary sibling, closed with ppa-dask's record and renamed into
            # place: never over a file ppa-dask did not write (the command checked it first)
            overwrite = bool(getattr(args, "overwrite", False))
            with report_file(report, overwrite) as tmp, performance_report(filename=tmp):
                yield client
            progress.say(f"performance report: {os.path.abspath(report)}")
