"""Dask clusters for the CLI, the pipelines, the benchmarks and interactive use.

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

Other clusters are described by YAML files (the repository's ``cluster/`` folder holds one per
kind; see ``cluster/README.md``) and opened with :func:`open_client`:

* ``type: local`` -- a LocalCluster as above, ``options`` are :func:`local_client`'s arguments;
* ``type: slurm`` / ``type: pbs`` -- a dask-jobqueue ``SLURMCluster`` / ``PBSCluster``,
  ``options`` are its keyword arguments, ``scale: {jobs: N}`` or ``adapt: {...}`` sizes it;
* ``type: scheduler`` -- connect to a running scheduler at ``address``;
* a dask-kubernetes ``DaskCluster`` manifest (``kind: DaskCluster``), which is also what
  ``kubectl apply -f`` takes; it is checked against the operator's published resource schema.

Each may carry a ``security:`` block (TLS through :class:`distributed.Security`). Bad files raise
:class:`ClusterConfigError` naming the file, the key and what was expected.

Every wait is bounded: connecting to a scheduler (the TCP/TLS connection, distributed's
handshake and the scheduler's identity reply) takes at most ``connect_timeout`` seconds
(:data:`DEFAULT_CONNECT_TIMEOUT`), and a batch-job cluster fails when its submission command is
missing or fails, or when no worker has joined after ``worker_timeout`` seconds
(:data:`DEFAULT_WORKER_TIMEOUT`). Both raise :class:`ClusterConnectError` with one line naming
the address or the command.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import numbers
import os
import re
import shlex
import shutil
import time

from ppa_dask.app.batchjobs import (
    DEFAULT_JOB_CHECK_INTERVAL,
    DEFAULT_MAX_JOB_RESTARTS,
    JobWatch,
    check_jobqueue_options,
    pbs_log_places,
)
from ppa_dask.app.dashboard import open_page
from ppa_dask.ppa import fused
from ppa_dask.utils.blas import BLAS_THREAD_VARIABLES, one_blas_thread
from ppa_dask.utils.progress import bar_line, step_progress
from ppa_dask.utils.signals import keep_signal_handlers
from ppa_dask.utils.yamlfile import YAMLFileError, load_yaml

__all__ = [
    "local_client",
    "dashboard_link",
    "ClusterConfigError",
    "ClusterConnectError",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_WORKER_TIMEOUT",
    "check_seconds",
    "read_cluster_config",
    "make_security",
    "open_client",
    "probe_scheduler",
    "job_script",
    "validate_daskcluster",
    "step_reporter",
    "compute_with_progress",
    "command_session",
]

#: Loggers quietened while the cluster runs (the scheduler, nanny and worker chatter).
_NOISY_LOGGERS = ("distributed", "bokeh", "tornado")
#: ``--scheduler`` values computing in this process with Dask's local schedulers (no Client).
_IN_PROCESS = ("threads", "synchronous", "sync", "single-threaded")
#: Seconds allowed for connecting to a scheduler: connection, handshake and identity reply.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Seconds a batch-job cluster may take until its first worker joins (queue wait included).
DEFAULT_WORKER_TIMEOUT = 600.0


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
def _worker_environment():
    """Make the nanny spawn its worker processes with one BLAS thread, glibc's own malloc
    thresholds (no ``MALLOC_TRIM_THRESHOLD_`` unless the caller's environment sets one), a
    profiler sampling every :data:`PROFILE_INTERVAL` and event loops checked every
    :data:`TICK_INTERVAL` (:data:`QUIET_SETTINGS`, each unless the caller's configuration
    changed Dask's default; the nanny hands the configuration to its workers, and the
    scheduler made in this context reads it too).

    The nanny reads ``distributed.nanny.pre-spawn-environ`` when it is created, but lets a
    variable already set in the parent's environment override the configured value (a value of
    None drops it), and exports the result into the parent's environment before spawning. So
    the variables are set in the configuration *and* temporarily in ``os.environ``; the parent's
    previous values are put back afterwards (the nanny keeps its own copy for worker restarts).
    """
    import dask

    one = {name: "1" for name in BLAS_THREAD_VARIABLES}
    pre_spawn = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    pre_spawn.update(one)
    if MALLOC_TRIM_VARIABLE not in os.environ:
        pre_spawn[MALLOC_TRIM_VARIABLE] = None
    settings = {"distributed.nanny.pre-spawn-environ": pre_spawn}
    shipped = dask.config.merge(*dask.config.defaults)
    for key, value in QUIET_SETTINGS.items():
        if dask.config.get(key) == dask.config.get(key, config=shipped):
            settings[key] = value
    saved = {name: os.environ.get(name) for name in (*one, MALLOC_TRIM_VARIABLE)}
    os.environ.update(one)
    try:
        with dask.config.set(settings):
            yield one
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _DropRecorded(logging.Filter):
    """Drops the log records of exceptions already reported (jobqueue's failed submissions,
    which asyncio and tornado log once more as unretrieved task exceptions)."""

    def __init__(self, failures):
        super().__init__()
        self.failures = failures

    def filter(self, record):
        from distributed.client import AllExit

        exc = record.exc_info[1] if record.exc_info else None
        # AllExit: what a gather interrupted by a signal leaves behind in the event loop
        return not (isinstance(exc, AllExit) or any(exc is f for f in self.failures))


@contextlib.contextmanager
def _dropping_logs_of(failures):
    import gc

    loggers = [logging.getLogger(name) for name in ("asyncio", "tornado.application")]
    drop = _DropRecorded(failures)
    for logger in loggers:
        logger.addFilter(drop)
    try:
        yield
    finally:
        gc.collect()  # orphaned failed tasks report themselves now, while the filter is on
        for logger in loggers:
            logger.removeFilter(drop)


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
    **cluster_kwargs
        Further keyword arguments for :class:`distributed.LocalCluster`.

    Yields
    ------
    client : distributed.Client
        The default client while the context is open.
    """
    from distributed import Client, LocalCluster

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
        with _worker_environment():
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
            nanny_log = logging.getLogger("distributed.nanny")
            nanny_log.addFilter(_slow_exit_at_close)
            try:
                cluster.close()
            finally:
                nanny_log.removeFilter(_slow_exit_at_close)


def _slow_exit_at_close(record):
    # closing the cluster kills a worker process that has not exited 4 s after being asked to
    # (a loaded machine): that is the shutdown working as intended, not a fault to report
    return not record.getMessage().startswith("Worker process still alive after")


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


# ---------------------------------------------------------------------------------------------
# cluster configuration files
# ---------------------------------------------------------------------------------------------


class ClusterConfigError(ValueError):
    """A cluster configuration file (or value) that cannot be used; the message says why."""


class ClusterConnectError(ClusterConfigError):
    """A scheduler that cannot be reached, or a cluster whose workers cannot start.

    The message is one line naming the address (timed out, refused, not a Dask scheduler) or
    the job submission command (missing, failed, no worker in time).
    """


#: Keys of a ``security:`` block: :class:`distributed.Security`'s file-based TLS settings.
SECURITY_KEYS = (
    "require_encryption",
    "tls_ca_file",
    "tls_ciphers",
    "tls_client_cert",
    "tls_client_key",
    "tls_scheduler_cert",
    "tls_scheduler_key",
    "tls_worker_cert",
    "tls_worker_key",
)
_SECURITY_FILES = tuple(k for k in SECURITY_KEYS if k.endswith(("_file", "_cert", "_key")))

#: ``options`` accepted by ``type: local`` (the arguments of :func:`local_client`, plus the
#: LocalCluster settings that make sense in a file).
LOCAL_OPTIONS = (
    "n_workers",
    "threads_per_worker",
    "memory_limit",
    "dashboard_address",
    "local_directory",
    "protocol",
    "scheduler_port",
)

_JOBQUEUE_CLASSES = {"slurm": "SLURMCluster", "pbs": "PBSCluster"}
#: Top-level keys of SLURM / PBS files for the watch of their jobs (ppa_dask.app.batchjobs).
_JOB_WATCH_KEYS = ("worker_timeout", "max_job_restarts", "job_check_interval")
_CONFIG_KEYS = {
    "local": ("type", "options", "security"),
    "slurm": ("type", "options", "scale", "adapt", "security", *_JOB_WATCH_KEYS),
    "pbs": ("type", "options", "scale", "adapt", "security", *_JOB_WATCH_KEYS),
    "scheduler": ("type", "address", "security", "connect_timeout"),
}
#: Top-level keys of the files holding a number of seconds.
_TIMEOUT_KEYS = ("connect_timeout", "worker_timeout", "job_check_interval")


def check_seconds(name, value):
    """A positive, finite number of seconds as a float; ValueError naming ``name`` otherwise.

    Examples
    --------
    >>> check_seconds("--connect-timeout", 2)
    2.0
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0 < float(value) < float("inf")
    ):
        raise ValueError(f"{name}: expected a positive number of seconds, got {value!r}")
    return float(value)


def _where(path, key=None):
    return f"{path}: {key}" if key else f"{path}"


def _expect_mapping(value, path, key):
    if not isinstance(value, dict):
        raise ClusterConfigError(
            f"{_where(path, key)}: expected a mapping, got {type(value).__name__} {value!r}"
        )
    return value


def _unknown_keys(mapping, allowed, path, section):
    import difflib

    extra = sorted(set(mapping) - set(allowed))
    if extra:
        close = difflib.get_close_matches(str(extra[0]), list(allowed), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ClusterConfigError(
            f"{_where(path, section + '.' + extra[0] if section else extra[0])}: unknown "
            f"key{hint}; expected one of {', '.join(sorted(allowed))}"
        )


def make_security(spec, base_dir=None, where="security"):
    """A :class:`distributed.Security` from a ``security:`` block (or None for none).

    Parameters
    ----------
    spec : None, "temporary", True or mapping
        None/False: no TLS. ``"temporary"`` or True: self-signed certificates made in memory
        (:meth:`distributed.Security.temporary`; for a LocalCluster or a jobqueue cluster with
        a shared temporary directory). A mapping: the keys of :data:`SECURITY_KEYS`; file paths
        are relative to ``base_dir`` and must exist.
    base_dir : str, optional
        Folder of the configuration file.

    Examples
    --------
    >>> make_security(None) is None
    True
    """
    from distributed.security import Security

    if spec is None or spec is False:
        return None
    if spec is True or spec == "temporary":
        try:
            return Security.temporary()
        except ImportError as exc:  # the cryptography package is missing
            raise ClusterConfigError(f"{where}: temporary certificates need {exc}") from None
    if not isinstance(spec, dict):
        raise ClusterConfigError(
            f"{where}: expected 'temporary' or a mapping of {', '.join(SECURITY_KEYS)}, got "
            f"{spec!r}"
        )
    _unknown_keys(spec, SECURITY_KEYS, where.split(": ")[0], "security")
    kwargs = {}
    for key, value in spec.items():
        if value is None:
            continue
        if key == "require_encryption":
            if not isinstance(value, bool):
                raise ClusterConfigError(f"{where}.{key}: expected true or false, got {value!r}")
        elif not isinstance(value, str):
            raise ClusterConfigError(f"{where}.{key}: expected a string, got {value!r}")
        elif key in _SECURITY_FILES:
            value = os.path.expanduser(value)
            if base_dir is not None and not os.path.isabs(value):
                value = os.path.join(base_dir, value)
            if not os.path.isfile(value):
                raise ClusterConfigError(f"{where}.{key}: no such file {value!r}")
        kwargs[key] = value
    if not any(k in kwargs for k in _SECURITY_FILES):
        raise ClusterConfigError(f"{where}: names no certificate file (tls_ca_file, ...)")
    kwargs.setdefault("require_encryption", True)
    return Security(**kwargs)


def _jobqueue_class(kind, path):
    try:
        with keep_signal_handlers():  # dask-jobqueue's import makes SIGINT call sys.exit()
            import dask_jobqueue
    except ImportError:
        raise ClusterConfigError(
            f"{path}: type {kind!r} needs dask-jobqueue (pip install 'ppa-dask[cluster]')"
        ) from None
    return getattr(dask_jobqueue, _JOBQUEUE_CLASSES[kind])


def _jobqueue_options(cls):
    """Keyword arguments a jobqueue cluster class accepts (its own, its job class's, Job's)."""
    import inspect

    from dask_jobqueue.core import Job, JobQueueCluster

    names = set()
    for fn in (JobQueueCluster.__init__, cls.__init__, cls.job_cls.__init__, Job.__init__):
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                names.add(p.name)
    # set by ppa-dask or meaningless in a file
    return sorted(
        names
        - {
            "self",
            "loop",
            "asynchronous",
            "job_cls",
            "security",
            "scheduler",
            "scheduler_cls",
            "n_workers",
            "config_name",
        }
    )


def _check_scale(config, path):
    if "scale" in config and "adapt" in config:
        raise ClusterConfigError(f"{path}: give either scale or adapt, not both")
    if "scale" in config:
        scale = _expect_mapping(config["scale"], path, "scale")
        _unknown_keys(scale, ("jobs", "n"), path, "scale")
        if len(scale) != 1:
            raise ClusterConfigError(f"{path}: scale: expected exactly one of jobs, n")
        for key, value in scale.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ClusterConfigError(
                    f"{path}: scale.{key}: expected a positive integer, got {value!r}"
                )
    if "adapt" in config:
        adapt = _expect_mapping(config["adapt"], path, "adapt")
        allowed = (
            "minimum",
            "maximum",
            "minimum_jobs",
            "maximum_jobs",
            "interval",
            "wait_count",
            "target_duration",
        )
        _unknown_keys(adapt, allowed, path, "adapt")


def read_cluster_config(path, overrides=None):
    """Read and validate a cluster configuration file.

    Parameters
    ----------
    path : str or os.PathLike
        A YAML file (see the module docstring and ``cluster/README.md``).
    overrides : mapping, optional
        Entries merged into ``options`` (e.g. ``{"scheduler_options": {"host": "127.0.0.1"}}``).

    Returns
    -------
    config : dict
        ``type``, ``options``, ``security`` (a Security or None), ``path``, and ``scale`` /
        ``adapt`` / ``address`` / ``spec`` as the type needs. Nothing is started.

    Raises
    ------
    ClusterConfigError
        Naming the file, the key and what was expected.
    """
    import yaml

    path = os.fspath(path)
    try:
        with open(path) as f:
            raw = load_yaml(f)  # strict: a key given twice is refused
    except FileNotFoundError:
        raise ClusterConfigError(f"cluster configuration {path!r} does not exist") from None
    except YAMLFileError as exc:  # a key given twice, too large, too deep
        raise ClusterConfigError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise ClusterConfigError(
            f"{path}: not valid YAML ({' '.join(str(exc).split())})"
        ) from None
    base_dir = os.path.dirname(os.path.abspath(path))
    if not isinstance(raw, dict):
        raise ClusterConfigError(f"{path}: expected a mapping at the top, got {raw!r}")
    timeouts = {}
    for key in _TIMEOUT_KEYS:
        if key in raw and raw.get("kind") != "DaskCluster":
            try:
                timeouts[key] = check_seconds(f"{path}: {key}", raw[key])
            except ValueError as exc:
                raise ClusterConfigError(str(exc)) from None
    if raw.get("kind") == "DaskCluster":
        validate_daskcluster(raw, where=path)
        return {
            "type": "kubernetes",
            "spec": raw,
            "options": dict(overrides or {}),
            "security": None,
            "path": path,
        }
    kind = raw.get("type")
    if kind not in _CONFIG_KEYS:
        raise ClusterConfigError(
            f"{path}: type: expected one of {', '.join(sorted(_CONFIG_KEYS))} (or a "
            f"dask-kubernetes 'kind: DaskCluster' manifest), got {kind!r}"
        )
    _unknown_keys(raw, _CONFIG_KEYS[kind], path, "")
    options = dict(_expect_mapping(raw.get("options") or {}, path, "options"))
    options.update(overrides or {})
    security = make_security(raw.get("security"), base_dir, where=f"{path}: security")
    config = {"type": kind, "options": options, "security": security, "path": path, **timeouts}
    if kind == "local":
        _unknown_keys(options, LOCAL_OPTIONS, path, "options")
        if security is not None:
            options.setdefault("protocol", "tls://")
    elif kind in _JOBQUEUE_CLASSES:
        cls = _jobqueue_class(kind, path)
        _unknown_keys(options, _jobqueue_options(cls), path, "options")
        try:
            check_jobqueue_options(options, path)
        except ValueError as exc:
            raise ClusterConfigError(str(exc)) from None
        restarts = raw.get("max_job_restarts", DEFAULT_MAX_JOB_RESTARTS)
        if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
            raise ClusterConfigError(
                f"{path}: max_job_restarts: expected a non-negative integer, got {restarts!r}"
            )
        config["max_job_restarts"] = restarts
        _check_scale(raw, path)
        for key in ("scale", "adapt"):
            if key in raw:
                config[key] = dict(raw[key])
    else:  # scheduler
        address = raw.get("address")
        if not isinstance(address, str) or "://" not in address:
            raise ClusterConfigError(
                f"{path}: address: expected a scheduler address such as "
                f"'tcp://10.0.0.5:8786', got {address!r}"
            )
        config["address"] = address
    return config


def _blas_prologue(lines):
    """A jobqueue job script prologue that also exports one BLAS thread per worker."""
    lines = list(lines or [])
    have = " ".join(lines)
    for name in BLAS_THREAD_VARIABLES:
        if name not in have:
            lines.append(f"export {name}=1")
    return lines


def _jobqueue_cluster(config, failures=None):
    """The jobqueue cluster of ``config``; with a ``failures`` list, every job whose
    submission raises appends its exception there (jobqueue itself only logs it)."""
    cls = _jobqueue_class(config["type"], config["path"])
    options = dict(config["options"])
    options["job_script_prologue"] = _blas_prologue(options.get("job_script_prologue"))
    if config["security"] is not None:
        options["security"] = config["security"]
        options.setdefault("protocol", "tls://")
    if failures is not None:
        options["job_cls"] = _recording_job_class(cls.job_cls, failures)
    try:
        return cls(**options)
    except (TypeError, ValueError) as exc:
        raise ClusterConfigError(f"{config['path']}: options: {exc}") from None


def _recording_job_class(job_cls, failures):
    """A subclass of the jobqueue ``job_cls`` that records why a job could not start."""

    from distributed.core import Status

    class RecordingJob(job_cls):
        async def start(self):
            try:
                await super().start()
            except Exception as exc:
                failures.append(exc)
                self.status = Status.failed  # so that closing the cluster does not trip on it
                raise

    RecordingJob.__name__ = RecordingJob.__qualname__ = job_cls.__name__
    return RecordingJob


def _submit_command(config):
    """The program a jobqueue cluster submits its jobs with (``sbatch``, ``qsub``)."""
    cls = _jobqueue_class(config["type"], config["path"])
    return shlex.split(cls.job_cls.submit_command)[0]


def _check_submit_command(config):
    command = _submit_command(config)
    if shutil.which(command) is None:
        raise ClusterConnectError(
            f"{config['path']}: cannot start workers: the job submission command {command!r} "
            f"is not on PATH (run ppa-dask on a {config['type'].upper()} login node)"
        )


def _job_failure_line(exc, command):
    """One line saying why a job submission failed (jobqueue's RuntimeError is multi-line)."""
    text = str(exc)
    code = re.search(r"Exit code: (-?\d+)", text)
    err = re.search(r"stderr:\n(.*)", text, re.S)
    detail = " ".join(err.group(1).split()) if err and err.group(1).strip() else ""
    if code:
        return f"{command!r} exited with status {code.group(1)}" + (
            f": {detail}" if detail else ""
        )
    return f"{command!r} failed: {type(exc).__name__}: {' '.join(text.split())}"


def _needs_workers_at_start(config):
    """False for an adaptive cluster allowed to have no job before work arrives."""
    if "adapt" not in config:
        return True
    adapt = config["adapt"]
    return bool(adapt.get("minimum") or adapt.get("minimum_jobs"))


def _wait_for_first_worker(client, config, timeout, failures):
    """Return once a worker has joined; ClusterConnectError naming the submission command when
    a submission failed or no worker joined within ``timeout`` seconds."""
    command = _submit_command(config)
    deadline = time.monotonic() + timeout
    while True:
        if failures:
            raise ClusterConnectError(
                f"{config['path']}: cannot start workers: "
                + _job_failure_line(failures[0], command)
            )
        left = deadline - time.monotonic()
        if left <= 0:
            raise ClusterConnectError(
                f"{config['path']}: no worker joined within {timeout:g} s of submitting jobs "
                f"with {command!r} (queue wait or failing jobs; see the job logs, or raise "
                "--worker-timeout / worker_timeout)"
            )
        try:
            client.wait_for_workers(1, timeout=min(0.5, left))
            return
        except TimeoutError:
            continue


def job_script(path, overrides=None):
    """The batch job script a SLURM/PBS configuration submits, without submitting anything.

    A jobqueue cluster object is created (its scheduler starts in this process, bound as the
    file or ``overrides`` say) and closed again; no job is submitted.

    Examples
    --------
    >>> print(job_script("cluster/slurm.yaml",
    ...                  {"scheduler_options": {"host": "127.0.0.1"}}))  # doctest: +SKIP
    #!/usr/bin/env bash
    #SBATCH -J ppa-dask
    ...
    """
    config = read_cluster_config(path, overrides)
    if config["type"] not in _JOBQUEUE_CLASSES:
        raise ClusterConfigError(
            f"{path}: job scripts exist for slurm and pbs, not {config['type']!r}"
        )
    cluster = _jobqueue_cluster(config)
    try:
        return cluster.job_script()
    finally:
        cluster.close()


def _refused(exc):
    """Whether a connection failure was the peer refusing it (nothing listening)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ConnectionRefusedError) or "refused" in str(exc).lower():
            return True
        exc = exc.__cause__ or exc.__context__
    return False


async def _scheduler_identity(address, timeout, connection_args, phase):
    """Connect to ``address`` and ask for its identity (distributed's ``identity`` op);
    ``phase["listening"]`` is set once a plain TCP connection to the port succeeded."""
    import asyncio

    from distributed.comm import connect
    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(address)
    if scheme in ("tcp", "tls"):
        # a bare TCP connection first tells "nothing listening" from "not speaking Dask"
        host, port = parse_host_port(location)
        _, writer = await asyncio.open_connection(host, port)
        writer.close()
        phase["listening"] = True
    comm = await connect(address, timeout=timeout, **connection_args)
    try:
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    finally:
        comm.abort()


def probe_scheduler(address, timeout=DEFAULT_CONNECT_TIMEOUT, security=None):
    """Check within ``timeout`` seconds that a Dask scheduler answers at ``address``.

    distributed bounds the TCP connection by its timeout but then waits without a limit for
    the peer's handshake, so a web server or a silent port would hang a Client forever. The
    whole exchange (connection, handshake, identity reply) runs here under one deadline, in a
    thread of its own (callable whether or not an event loop runs in this one).

    Returns
    -------
    identity : dict
        The scheduler's identity (``type``, ``id``, ``address``, ...).

    Raises
    ------
    ClusterConnectError
        One line naming ``address``: refused, timed out, or not a Dask scheduler.

    Examples
    --------
    >>> try:
    ...     probe_scheduler("tcp://127.0.0.1:1", timeout=1)
    ... except ClusterConnectError as exc:
    ...     print("refused" in str(exc))
    True
    """
    import asyncio
    import concurrent.futures

    from distributed.comm.core import CommClosedError
    from distributed.security import Security

    timeout = check_seconds("connect_timeout", timeout)
    args = (security or Security()).get_connection_args("client")

    phase = {"listening": False}

    async def bounded():
        return await asyncio.wait_for(_scheduler_identity(address, timeout, args, phase), timeout)

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ppa-dask-probe") as pool:
        future = pool.submit(asyncio.run, bounded())
        try:
            identity = future.result()
        except TimeoutError:
            raise ClusterConnectError(
                f"scheduler {address}: timed out after {timeout:g} s: "
                + (
                    "the port accepts connections but no Dask scheduler answered (not a Dask "
                    "scheduler?)"
                    if phase["listening"]
                    else "no connection (host down or filtered?); raise --connect-timeout for "
                    "a slow network"
                )
            ) from None
        except CommClosedError:
            raise ClusterConnectError(
                f"scheduler {address}: the peer closed the connection during Dask's "
                "handshake: not a Dask scheduler"
            ) from None
        except OSError as exc:
            what = (
                "connection refused (nothing listening there)"
                if _refused(exc)
                else f"cannot connect ({' '.join(str(exc).split())})"
            )
            raise ClusterConnectError(f"scheduler {address}: {what}") from None
        except Exception as exc:  # garbage instead of Dask's messages
            raise ClusterConnectError(
                f"scheduler {address}: not a Dask scheduler (its reply is not Dask's protocol: "
                f"{type(exc).__name__})"
            ) from None
    if not isinstance(identity, dict) or identity.get("type") != "Scheduler":
        kind = identity.get("type") if isinstance(identity, dict) else type(identity).__name__
        raise ClusterConnectError(
            f"scheduler {address}: not a Dask scheduler (it identifies as {kind!r})"
        )
    return identity


@contextlib.contextmanager
def _connected_client(address, security, timeout):
    """A Client of the scheduler at ``address``, probed first; every later connection of the
    Client is bounded by ``timeout`` too (distributed's ``comm.timeouts.connect``)."""
    import dask
    from distributed import Client

    probe_scheduler(address, timeout, security)
    with dask.config.set({"distributed.comm.timeouts.connect": f"{timeout}s"}):
        try:
            client = Client(address, security=security, timeout=timeout, set_as_default=True)
        except OSError as exc:  # the scheduler went away between the probe and now
            raise ClusterConnectError(
                f"scheduler {address}: {' '.join(str(exc).split())}"
            ) from None
        with client:
            yield client


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
    cluster : str or os.PathLike, optional
        A cluster configuration file (:func:`read_cluster_config`).
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
        :class:`ppa_dask.app.batchjobs.JobWatch`).

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
    from distributed import Client

    if cluster is not None and scheduler is not None:
        raise ClusterConfigError("give either a cluster file or a scheduler, not both")
    if scheduler in _IN_PROCESS:
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
        with _connected_client(scheduler, None, timeout) as client:
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
    config = read_cluster_config(cluster)
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
        with _connected_client(config["address"], config["security"], timeout) as client:
            yield client
    elif kind == "kubernetes":
        try:
            with keep_signal_handlers():
                from dask_kubernetes.operator import KubeCluster
        except ImportError:
            raise ClusterConfigError(
                f"{cluster}: a DaskCluster needs dask-kubernetes (pip install "
                "'ppa-dask[cluster]') and the Dask operator in the Kubernetes cluster"
            ) from None
        spec = config["spec"]
        namespace = (spec.get("metadata") or {}).get("namespace")
        with KubeCluster(
            custom_cluster_spec=spec, namespace=namespace, **config["options"]
        ) as kube:
            with Client(kube, set_as_default=True) as client:
                yield client
    else:
        timeout = check_seconds(
            "worker_timeout",
            worker_timeout
            if worker_timeout is not None
            else config.get("worker_timeout", DEFAULT_WORKER_TIMEOUT),
        )
        _check_submit_command(config)  # before a scheduler is started
        failures = []
        with _dropping_logs_of(failures):
            jobs = _jobqueue_cluster(config, failures)
            watch = JobWatch(
                jobs,
                kind,
                notify,
                max_job_restarts=config["max_job_restarts"],
                worker_timeout=timeout,
                interval=config.get("job_check_interval", DEFAULT_JOB_CHECK_INTERVAL),
                where=config["path"],
                adaptive="adapt" in config,
                expect_workers=_needs_workers_at_start(config),
                # PBS's qstat names no log file: found from the script's -e/-o, or where
                # qsub ran (PBS's default)
                log_places=pbs_log_places(jobs.job_script()) if kind == "pbs" else None,
                folder=os.getcwd(),
            )
            try:
                if "adapt" in config:
                    jobs.adapt(**config["adapt"])
                else:
                    jobs.scale(**config.get("scale", {"jobs": 1}))
                watch.start()
                with Client(jobs, set_as_default=True) as client:
                    if _needs_workers_at_start(config):
                        # the watch says first which jobs are waiting, and why; this bound
                        # is the last resort
                        last_resort = timeout + 2 * watch.interval + 5
                        _wait_for_first_worker(client, config, last_resort, failures)
                    yield client
                watch.stop()
            except BaseException as exc:
                watch.stop()  # before the jobs are cancelled, which it would see as lost
                # the error being raised says what went wrong; closing may fail after it
                # (a cancel command that is missing too), which must not replace it
                with contextlib.suppress(Exception):
                    jobs.close()
                if watch.fault is not None and isinstance(exc, KeyboardInterrupt):
                    raise ClusterConnectError(watch.fault) from None  # the watch interrupted
                raise
            jobs.close()


# ---------------------------------------------------------------------------------------------
# the Kubernetes DaskCluster resource
# ---------------------------------------------------------------------------------------------

#: Where dask-kubernetes ships the DaskCluster custom resource definition (fully expanded).
_DASKCLUSTER_CRD = (
    "operator",
    "deployment",
    "helm",
    "dask-kubernetes-operator",
    "crds",
    "daskcluster.yaml",
)


@functools.lru_cache(maxsize=1)
def daskcluster_schema():
    """The OpenAPI v3 schema of ``DaskCluster`` from the installed dask-kubernetes, or None.

    Read from the operator's published custom resource definition without importing
    dask-kubernetes (which would start its Kubernetes machinery).
    """
    import importlib.util

    import yaml

    spec = importlib.util.find_spec("dask_kubernetes")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        crd_path = os.path.join(root, *_DASKCLUSTER_CRD)
        if os.path.isfile(crd_path):
            with open(crd_path) as f:
                # a large file: the C loader when PyYAML has it
                crd = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            for version in crd["spec"]["versions"]:
                if version["name"] == "v1":
                    return version["schema"]["openAPIV3Schema"]
    return None


_OPENAPI_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def _schema_errors(value, schema, where, errors):
    """Check ``value`` against a Kubernetes structural schema (types, required, enum, unknown
    fields: Kubernetes prunes fields its schema does not know, so they are errors here)."""
    if value is None:  # the API server drops null fields (not nullable) before validating
        return
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            errors.append(f"{where}: expected an integer or a string, got {value!r}")
        return
    kind = schema.get("type")
    if kind is not None:
        expected = _OPENAPI_TYPES[kind]
        bad = not isinstance(value, expected) or (
            isinstance(value, bool) and kind in ("integer", "number")
        )
        if bad:
            errors.append(f"{where}: expected {kind}, got {type(value).__name__} {value!r}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: expected one of {schema['enum']}, got {value!r}")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                errors.append(f"{where}.{key}: required")
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if props is not None and key in props:
                _schema_errors(item, props[key], f"{where}.{key}", errors)
            elif isinstance(extra, dict):
                _schema_errors(item, extra, f"{where}.{key}", errors)
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(
                    f"{where}.{key}: unknown field (expected one of {', '.join(sorted(props))})"
                )
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _schema_errors(item, schema["items"], f"{where}[{i}]", errors)


def validate_daskcluster(spec, schema=None, where="DaskCluster"):
    """Check a ``DaskCluster`` manifest without a Kubernetes cluster.

    Checks the resource header, that scheduler and worker pods name a container running
    ``dask scheduler`` / ``dask worker``, that the scheduler's service reaches its ports, and,
    when dask-kubernetes is installed (or ``schema`` is given), every field against the
    operator's published OpenAPI schema.

    Raises
    ------
    ClusterConfigError
        Listing the first few problems with their paths (e.g. ``spec.worker.replicas``).
    """
    errors = []
    if spec.get("apiVersion") != "kubernetes.dask.org/v1":
        errors.append(
            f"apiVersion: expected 'kubernetes.dask.org/v1', got {spec.get('apiVersion')!r}"
        )
    if spec.get("kind") != "DaskCluster":
        errors.append(f"kind: expected 'DaskCluster', got {spec.get('kind')!r}")
    schema = daskcluster_schema() if schema is None else schema
    if schema is not None:
        # every resource has these; a CRD's schema describes only the rest
        implicit = {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        }
        schema = dict(schema, properties={**implicit, **schema.get("properties", {})})
        _schema_errors(spec, schema, "", errors)
        errors = [e.lstrip(".") for e in errors]
    body = spec.get("spec") if isinstance(spec.get("spec"), dict) else {}
    for role, command in (("scheduler", "scheduler"), ("worker", "worker")):
        part = body.get(role)
        if not isinstance(part, dict):
            errors.append(f"spec.{role}: required")
            continue
        containers = ((part.get("spec") or {}).get("containers")) or []
        words = [
            " ".join(map(str, (c.get("command") or []) + (c.get("args") or [])))
            for c in containers
            if isinstance(c, dict)
        ]
        if not any(f"dask {command}" in w or f"dask-{command}" in w for w in words):
            errors.append(f"spec.{role}.spec.containers: no container runs 'dask {command}'")
        if role == "scheduler":
            ports = {
                p.get("name")
                for c in containers
                if isinstance(c, dict)
                for p in c.get("ports") or []
            }
            for port in ((part.get("service") or {}).get("ports")) or []:
                target = port.get("targetPort")
                if isinstance(target, str) and target not in ports:
                    errors.append(
                        f"spec.scheduler.service.ports: targetPort {target!r} is not "
                        f"a named port of the scheduler container ({sorted(ports)})"
                    )
    if errors:
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise ClusterConfigError(f"{where}: " + "; ".join(errors[:3]) + more)


# ---------------------------------------------------------------------------------------------
# the session of a command
# ---------------------------------------------------------------------------------------------


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
        if scheduler in _IN_PROCESS:
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
    if scheduler not in _IN_PROCESS:  # in process: the line below says so
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


# ---------------------------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------------------------


def step_reporter(stream, label="fit", width=20):
    """A ``progress(p, k)`` callable for :meth:`ppa_dask.PPA.fit` printing one bar per step.

    Examples
    --------
    >>> import io, numpy as np
    >>> from ppa_dask import PPA
    >>> out = io.StringIO()
    >>> _ = PPA(degree=2).fit(np.random.default_rng(0).normal(size=(200, 3)),
    ...                       progress=step_reporter(out))
    >>> out.getvalue().splitlines()[-1].split("]")[0]
    '  fit [####################'
    """
    return step_progress(stream, label=label, width=width)


def compute_with_progress(*collections, label="compute", stream=None):
    """``dask.compute(*collections)`` with a progress bar of the fan-out (its tasks).

    On a distributed Client the bar follows the scheduler's task counts (distributed's progress
    plugin); on a non-terminal stream it prints a line per quarter. Without a Client it is
    ``dask.diagnostics.ProgressBar``.
    """
    import sys

    import dask

    stream = sys.stdout if stream is None else stream
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        client = None
    if client is None:
        from dask.diagnostics import ProgressBar

        with ProgressBar(out=stream, minimum=1.0):
            return dask.compute(*collections)
    futures = client.compute(list(collections))
    try:
        _FanoutBar(futures, label, stream, scheduler=client.scheduler.address)
        return tuple(client.gather(futures))
    finally:
        # cancel, not release: Future.release reaches the scheduler only after a graph
        # submitted next (one more hop through the client's event loop), which then meets
        # these tasks still there, fused differently, and distributed warns of a different
        # run_spec (dask/dask#9888); cancel-keys goes out now, ahead of any later graph
        client.cancel(futures)


def _fanout_bar_class():
    from distributed.diagnostics.progressbar import TextProgressBar

    class FanoutBar(TextProgressBar):
        """distributed's text bar, written to a given stream, line by line off a terminal."""

        def __init__(self, futures, label, stream, **kwargs):
            self._label, self._stream = label, stream
            self._tty = bool(getattr(stream, "isatty", lambda: False)())
            self._printed = -1
            super().__init__(futures, interval="250ms", width=20, **kwargs)

        def _draw_bar(self, remaining, all, **kwargs):
            frac = (1 - remaining / all) if all else 1.0
            quarter = int(4 * frac)
            line = bar_line(self._label, all - remaining, all, self.elapsed)
            if self._tty:
                self._stream.write("\r" + line)
                self._stream.flush()
            elif quarter > self._printed:
                self._printed = quarter
                print(line, file=self._stream, flush=True)

        def _draw_stop(self, **kwargs):
            if self._tty:
                self._stream.write("\n")
                self._stream.flush()

    return FanoutBar


def _FanoutBar(futures, label, stream, **kwargs):
    return _fanout_bar_class()(futures, label, stream, **kwargs)
