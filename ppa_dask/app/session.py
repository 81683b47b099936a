"""The cluster session of a command: the Client its options ask for, with its lines.

:func:`command_session` turns a command's options (``--cluster``, ``--scheduler``,
``--workers``, ``--memory-limit``, timeouts, ``--performance-report``) into a Client opened
with :func:`ppa_dask.cluster.open_client`, and says on the command's reporter where it computes:
the scheduler, its workers, the dashboard and the PPA fits page
(:mod:`ppa_dask.cluster.dashboard`). It is the command line's glue, so it lives in the
application; the clusters themselves are :mod:`ppa_dask.cluster`.
"""

from __future__ import annotations

import contextlib
import os

from ppa_dask.cluster import dashboard_link, open_client
from ppa_dask.cluster.client import IN_PROCESS_SCHEDULERS
from ppa_dask.cluster.dashboard import open_page
from ppa_dask.ppa import fused

__all__ = ["command_session"]


@contextlib.contextmanager
def command_session(args, progress, local_directory=None, cluster_file=None):
    """The Client a command's options ask for: open it, report its dashboard, record a
    performance report.

    Parameters
    ----------
    args : argparse.Namespace
        The command's options ``cluster``, ``scheduler``, ``workers``, ``memory_limit``,
        ``connect_timeout``, ``worker_timeout`` and ``performance_report`` (absent ones take
        their defaults).
    progress : ppa_dask.utils.progress.Reporter
        Where the connection, scheduler and dashboard lines go.
    local_directory : str, optional
        Scratch folder of a local cluster's workers.
    cluster_file : str, optional
        A cluster file used when ``args.cluster`` is not given (a pipeline's ``cluster``).

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
    cluster = getattr(args, "cluster", None) or cluster_file
    scheduler = getattr(args, "scheduler", None)
    report = getattr(args, "performance_report", None)
    if cluster is not None and scheduler is not None:
        raise ValueError("give either --cluster or --scheduler, not both")
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
        f"cluster from {cluster}"
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
        fused.compile_in_background()
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

            with performance_report(filename=report):
                yield client
            progress.say(f"performance report: {os.path.abspath(report)}")
