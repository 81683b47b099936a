"""Local Dask clusters: worker processes on this machine, bound to the loopback interface.

:func:`local_client` starts a :class:`distributed.LocalCluster` of worker *processes* bound to the
loopback interface (the scheduler, the workers and the dashboard listen on 127.0.0.1 only) and
yields a connected :class:`distributed.Client`, closing both on exit::

    from ppa_dask.cluster import local_client, dashboard_link

    with local_client(n_workers=2) as client:
        print(dashboard_link(client))
        model = PPA().fit(X)          # X a dask array: fitted on the cluster

Every worker process is started with one BLAS/OpenMP thread (``OMP_NUM_THREADS=1`` and friends,
set by the nanny before the worker process is spawned): the PPA kernels work on blocks that are
far too small for a threaded BLAS to pay off, and ``threads_per_worker`` worker threads each
running a multi-threaded BLAS would oversubscribe the cores.
"""

from __future__ import annotations

import contextlib
import logging
import numbers
import os

from ppa_dask.cluster import closing, cores
from ppa_dask.utils.blas import BLAS_THREAD_VARIABLES

__all__ = [
    "local_client",
    "dashboard_link",
    "MALLOC_TRIM_VARIABLE",
    "PROFILE_INTERVAL",
    "TICK_INTERVAL",
    "QUIET_SETTINGS",
]

#: Loggers quietened while the cluster runs (the scheduler, nanny and worker chatter).
_NOISY_LOGGERS = ("distributed", "bokeh", "tornado")


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


#: glibc's malloc variable distributed's nanny sets for its workers (65536). Set, it stops glibc
#: raising its mmap threshold, so every array above 128 KiB is a fresh mapping whose pages fault
#: in when first written: a fit's new residual blocks then cost more in page faults than in
#: arithmetic (docs/guide/performance.md). :func:`local_client` leaves it unset.
MALLOC_TRIM_VARIABLE = "MALLOC_TRIM_THRESHOLD_"
#: How often :func:`local_client`'s workers sample their threads' stacks for the dashboard's
#: Profile page, unless the caller's Dask configuration sets it. Distributed samples every
#: 10 ms on the worker's event loop; on 2 cores that took 0.6 s of CPU per worker in a 12 s
#: fan-out and made it 10 % slower. Every 100 ms still fills the page.
PROFILE_INTERVAL_KEY = "distributed.worker.profile.interval"
PROFILE_INTERVAL = "100ms"
#: How often the event loops of :func:`local_client`'s scheduler, nannies and workers wake to
#: check that they are not blocked, unless the caller's Dask configuration sets it. Distributed
#: wakes every 20 ms; each wake-up takes the GIL from a task's thread, and on 2 cores it took
#: the cores from the tasks: 2 workers fitting trees at once ran 1.12x the time of the same
#: fits one after another in one process, and 1.03x with 500 ms (docs/guide/performance.md).
#: A loop blocked longer than ``distributed.admin.tick.limit`` (3 s) is still reported.
TICK_INTERVAL_KEY = "distributed.admin.tick.interval"
TICK_INTERVAL = "500ms"
#: The settings :func:`local_client` gives its cluster where the caller's configuration has
#: distributed's own default.
QUIET_SETTINGS = {PROFILE_INTERVAL_KEY: PROFILE_INTERVAL, TICK_INTERVAL_KEY: TICK_INTERVAL}


@contextlib.contextmanager
def _worker_environment(layout=None):
    """Make the nanny spawn its worker processes with one BLAS thread, glibc's own malloc
    thresholds (no ``MALLOC_TRIM_THRESHOLD_`` unless the caller's environment sets one), a
    profiler sampling every :data:`PROFILE_INTERVAL` and event loops checked every
    :data:`TICK_INTERVAL` (:data:`QUIET_SETTINGS`, each unless the caller's configuration
    changed Dask's default; the nanny hands the configuration to its workers, and the
    scheduler made in this context reads it too). Each worker preloads
    :mod:`ppa_dask.cluster.closing`, which keeps its shutdown quiet, and with ``layout`` (a
    :func:`ppa_dask.cluster.cores.cores_layout`) also :mod:`ppa_dask.cluster.cores`, which pins
    it to cores of its own.

    The nanny reads ``distributed.nanny.pre-spawn-environ`` when it is created, but lets a
    variable already set in the parent's environment override the configured value (a value of
    None drops it), and exports the result into the parent's environment before spawning. So
    the variables are set in the configuration *and* temporarily in ``os.environ``; the parent's
    previous values are put back afterwards (the nanny keeps its own copy for worker restarts).
    """
    import dask

    exported = {name: "1" for name in BLAS_THREAD_VARIABLES}
    if layout is not None:
        exported[cores.CORES_VARIABLE] = layout
    pre_spawn = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    pre_spawn.update(exported)
    if MALLOC_TRIM_VARIABLE not in os.environ:
        pre_spawn[MALLOC_TRIM_VARIABLE] = None
    settings = {"distributed.nanny.pre-spawn-environ": pre_spawn}
    preload = list(dask.config.get("distributed.worker.preload", default=[]) or [])
    for module in (closing, cores) if layout is not None else (closing,):
        if module.__name__ not in preload:
            preload.append(module.__name__)
    settings["distributed.worker.preload"] = preload
    shipped = dask.config.merge(*dask.config.defaults)
    for key, value in QUIET_SETTINGS.items():
        if dask.config.get(key) == dask.config.get(key, config=shipped):
            settings[key] = value
    saved = {name: os.environ.get(name) for name in (*exported, MALLOC_TRIM_VARIABLE)}
    os.environ.update(exported)
    try:
        with dask.config.set(settings):
            yield exported
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _quiet_loggers(level):
    """Raise the level of distributed's (and its web stack's) loggers in this process."""
    if level is None:
        yield
        return
    saved = []
    for name in _NOISY_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        if logger.getEffectiveLevel() < level:
            logger.setLevel(level)
    try:
        yield
    finally:
        for logger, old in saved:
            logger.setLevel(old)


@contextlib.contextmanager
def local_client(
    n_workers=2,
    threads_per_worker=1,
    memory_limit="auto",
    dashboard_address="127.0.0.1:0",
    local_directory=None,
    log_level=logging.WARNING,
    pin_workers="auto",
    **cluster_kwargs,
):
    """Start a local cluster of worker processes and yield a Client connected to it.

    Parameters
    ----------
    n_workers : int, default=2
        Number of worker processes (each behind a nanny).
    threads_per_worker : int, default=1
        Worker threads per process. Each process runs one BLAS thread whatever this is, and
        glibc's default malloc thresholds: distributed's ``MALLOC_TRIM_THRESHOLD_=65536`` is not
        passed on (it made a fit on a Dask array 1.4-1.5x slower, in page faults), unless this
        process's environment sets the variable itself. The workers' profiler samples every
        100 ms, not 10 ms (:data:`PROFILE_INTERVAL`), unless this process's Dask configuration
        sets ``distributed.worker.profile.interval`` to something other than distributed's
        default (a configured 10 ms cannot be told from the default and becomes 100 ms). The
        scheduler's, nannies' and workers' event loops check themselves every 500 ms, not 20 ms
        (:data:`TICK_INTERVAL`), on the same terms for ``distributed.admin.tick.interval``.
    memory_limit : str, float, int or None, default="auto"
        Memory limit *per worker* (e.g. ``"4GiB"``); ``"auto"`` shares the machine's memory
        between the workers, ``0`` or ``None`` means no limit. Passed to the workers as is.
    dashboard_address : str or None, default="127.0.0.1:0"
        Where the scheduler's dashboard listens. A port of 0 picks a free port; a bare port
        (``":0"``, ``":8787"``) is bound to 127.0.0.1. ``None`` starts no dashboard.
    local_directory : str or os.PathLike, optional
        Scratch directory of the workers (spilled data, worker files). Defaults to Dask's
        (``<tempdir>/dask-scratch-space``); pass a path to keep everything in one place.
    log_level : int or None, default=logging.WARNING
        Level below which the scheduler/nanny/worker log messages are silenced, in this
        process and in the workers. ``None`` leaves the logging configuration alone.
    pin_workers : "auto" or False, default="auto"
        ``"auto"``: when the workers' threads fit in the CPUs this process may use, pin each
        worker process to cores of its own (:mod:`ppa_dask.cluster.cores`; the scheduler and the
        client are not pinned). False: leave placement to the operating system.
    **cluster_kwargs
        Further keyword arguments for :class:`distributed.LocalCluster`.

    Yields
    ------
    client : distributed.Client
        The default client while the context is open.
    """
    from distributed import Client, LocalCluster

    if pin_workers not in ("auto", False):
        raise ValueError(f"pin_workers must be 'auto' or False, got {pin_workers!r}")
    n_workers = _check_positive_int("n_workers", n_workers)
    threads_per_worker = _check_positive_int("threads_per_worker", threads_per_worker)
    if dashboard_address is not None:
        dashboard_address = str(dashboard_address)
        if dashboard_address.startswith(":"):
            dashboard_address = "127.0.0.1" + dashboard_address
    if local_directory is not None:
        local_directory = os.fspath(local_directory)
        os.makedirs(local_directory, exist_ok=True)
        cluster_kwargs.setdefault("local_directory", local_directory)
    cluster_kwargs.setdefault("host", "127.0.0.1")
    # no dashboards on the workers themselves: the scheduler's shows everything
    cluster_kwargs.setdefault("worker_dashboard_address", None)
    silence = False if log_level is None else log_level

    with _quiet_loggers(log_level):
        layout = cores.cores_layout(n_workers, threads_per_worker) if pin_workers else None
        with _worker_environment(layout):
            cluster = LocalCluster(
                n_workers=n_workers,
                threads_per_worker=threads_per_worker,
                processes=True,
                memory_limit=memory_limit,
                dashboard_address=dashboard_address,
                silence_logs=silence,
                **cluster_kwargs,
            )
        try:
            client = Client(cluster, set_as_default=True)
            try:
                yield client
            finally:
                client.close()
        finally:
            noise = closing.ClosingClusterNoise()
            loggers = [logging.getLogger(name) for name in noise.LOGGERS]
            for logger in loggers:
                logger.addFilter(noise)
            try:
                cluster.close()
            finally:
                for logger in loggers:
                    logger.removeFilter(noise)


def dashboard_link(client):
    """URL of the dashboard of ``client``'s scheduler, or None if it runs no dashboard."""
    try:
        info = client.scheduler_info()
    except Exception:  # pragma: no cover - a closed client
        info = {}
    if "dashboard" not in (info.get("services") or {}):
        return None
    link = client.dashboard_link
    return link or None
