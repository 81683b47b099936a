"""Cluster files: the YAML that describes a cluster, its schema, and its TLS settings.

Clusters other than the default local one are described by YAML files (the repository's
``cluster/`` folder holds one per kind; see ``cluster/README.md``), read and checked by
:func:`read_cluster_config` before anything starts:

* ``type: local`` -- a LocalCluster (:func:`ppa_dask.cluster.local_client`), ``options`` are
  its arguments;
* ``type: slurm`` / ``type: pbs`` -- a dask-jobqueue ``SLURMCluster`` / ``PBSCluster``,
  ``options`` are its keyword arguments (their types checked by :func:`check_jobqueue_options`),
  ``scale: {jobs: N}`` or ``adapt: {...}`` sizes it;
* ``type: scheduler`` -- connect to a running scheduler at ``address``;
* a dask-kubernetes ``DaskCluster`` manifest (``kind: DaskCluster``), which is also what
  ``kubectl apply -f`` takes; it is checked against the operator's published resource schema
  (:mod:`ppa_dask.cluster.kubernetes`).

Each may carry a ``security:`` block (TLS through :class:`distributed.Security`,
:func:`make_security`). Bad files raise :class:`ClusterConfigError` naming the file, the key
and what was expected.

Examples
--------
>>> walltime_seconds("1-02:00:00"), walltime_seconds("30:00"), walltime_seconds("90")
(93600, 1800, 5400)
"""

from __future__ import annotations

import numbers
import os
import re

from ppa_dask.cluster.batchjobs import DEFAULT_MAX_JOB_RESTARTS
from ppa_dask.cluster.errors import ClusterConfigError
from ppa_dask.cluster.kubernetes import validate_daskcluster
from ppa_dask.utils.files import NotARegularFile, open_regular
from ppa_dask.utils.params import unknown_key
from ppa_dask.utils.signals import keep_signal_handlers
from ppa_dask.utils.yamlfile import YAMLFileError, load_yaml

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_WORKER_TIMEOUT",
    "SECURITY_KEYS",
    "LOCAL_OPTIONS",
    "JOBQUEUE_CLASSES",
    "check_seconds",
    "check_jobqueue_options",
    "walltime_seconds",
    "make_security",
    "jobqueue_class",
    "read_cluster_config",
]

#: Seconds allowed for connecting to a scheduler: connection, handshake and identity reply.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Seconds a batch-job cluster may take until its first worker joins (queue wait included).
DEFAULT_WORKER_TIMEOUT = 600.0

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

#: The dask-jobqueue cluster class of each batch-system ``type``.
JOBQUEUE_CLASSES = {"slurm": "SLURMCluster", "pbs": "PBSCluster"}
#: Top-level keys of SLURM / PBS files for the watch of their jobs (ppa_dask.cluster.batchjobs).
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
    extra = sorted(set(mapping) - set(allowed))
    if extra:
        key = f"{section}.{extra[0]}" if section else extra[0]
        raise ClusterConfigError(unknown_key(_where(path, key), extra[0], allowed))


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


def jobqueue_class(kind, path):
    """The dask-jobqueue cluster class of ``kind`` (``slurm``, ``pbs``); ClusterConfigError
    naming ``path`` when dask-jobqueue is not installed."""
    try:
        with keep_signal_handlers():  # dask-jobqueue's import makes SIGINT call sys.exit()
            import dask_jobqueue
    except ImportError:
        raise ClusterConfigError(
            f"{path}: type {kind!r} needs dask-jobqueue (pip install 'ppa-dask[cluster]')"
        ) from None
    return getattr(dask_jobqueue, JOBQUEUE_CLASSES[kind])


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
        # a regular file only (a FIFO would block the read, a device never end it); strict: a
        # key given twice is refused
        with open_regular(path, "r") as f:
            raw = load_yaml(f)
    except NotARegularFile as exc:
        raise ClusterConfigError(str(exc)) from None
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
    elif kind in JOBQUEUE_CLASSES:
        cls = jobqueue_class(kind, path)
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


_STRINGS = (
    "account",
    "dashboard_address",
    "host",
    "interface",
    "job_name",
    "local_directory",
    "log_directory",
    "name",
    "project",
    "protocol",
    "python",
    "queue",
    "resource_spec",
    "shared_temp_directory",
    "shebang",
    "worker_command",
)
_STRING_LISTS = (
    "env_extra",
    "extra",
    "header_skip",
    "job_directives_skip",
    "job_extra",
    "job_extra_directives",
    "job_script_prologue",
    "worker_extra_args",
)
_POSITIVE_INTS = ("cores", "processes", "job_cpu")


def walltime_seconds(text):
    """Seconds of a SLURM / PBS time limit: ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``,
    ``D-HH:MM``, ``D-HH:MM:SS``; ValueError otherwise."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", str(text).strip())
    if not match:
        raise ValueError(f"not a time limit: {text!r}")
    days, a, b, c = match.groups()
    if days is None:
        parts = [int(a)] + [int(x) for x in (b, c) if x is not None]
        # MM, MM:SS, HH:MM:SS (SLURM's reading of one and two fields)
        h, m, s = (0, parts[0], 0) if len(parts) == 1 else ([0] * (3 - len(parts)) + parts)
    else:
        h, m, s = int(a), int(b or 0), int(c or 0)
    if m >= 60 and (b is not None or days is not None) or s >= 60:
        raise ValueError(f"not a time limit: {text!r}")
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def _kind(value):
    return f"{type(value).__name__} {value!r}"


def check_jobqueue_options(options, where):
    """Check the types of a SLURM / PBS file's ``options`` (ValueError naming the option).

    Strings, lists of strings (``job_script_prologue``, ``worker_extra_args``, ...), positive
    integers (``cores``, ``processes``), a memory size parseable by Dask (``memory``,
    ``job_mem``), a time limit (``walltime``), a mapping (``scheduler_options``) and booleans.

    Examples
    --------
    >>> check_jobqueue_options({"cores": 1, "memory": "2GiB", "walltime": "01:00:00"}, "f.yaml")
    >>> check_jobqueue_options({"job_script_prologue": ["module load x", False]}, "f.yaml")
    Traceback (most recent call last):
    ...
    ValueError: f.yaml: options.job_script_prologue[1]: expected a string (a shell line), got bool False
    """
    from dask.utils import parse_bytes

    for key, value in options.items():
        at = f"{where}: options.{key}"
        if value is None:
            continue
        if key in _STRINGS and not isinstance(value, str):
            raise ValueError(f"{at}: expected a string, got {_kind(value)}")
        if key in _STRING_LISTS:
            if not isinstance(value, list):
                raise ValueError(f"{at}: expected a list of strings, got {_kind(value)}")
            for i, item in enumerate(value):
                if not isinstance(item, str):
                    what = " (a shell line)" if key in ("job_script_prologue", "env_extra") else ""
                    raise ValueError(f"{at}[{i}]: expected a string{what}, got {_kind(item)}")
        if key in _POSITIVE_INTS and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(f"{at}: expected a positive integer, got {_kind(value)}")
        if key in ("memory", "job_mem"):
            ok = isinstance(value, (str, numbers.Integral)) and not isinstance(value, bool)
            try:
                ok = ok and parse_bytes(value) > 0
            except (ValueError, TypeError):
                ok = False
            if not ok:
                raise ValueError(
                    f"{at}: expected a memory size such as '4GiB', got {_kind(value)}"
                )
        if key == "walltime":
            if not isinstance(value, str):
                raise ValueError(
                    f"{at}: expected a quoted time limit such as '02:00:00', got {_kind(value)} "
                    "(YAML reads an unquoted time such as 2:00:00 as a number)"
                )
            try:
                walltime_seconds(value)
            except ValueError:
                raise ValueError(
                    f"{at}: expected a time limit such as '02:00:00' or '1-00:00:00', "
                    f"got {value!r}"
                ) from None
        if key in ("nanny",) and not isinstance(value, bool):
            raise ValueError(f"{at}: expected true or false, got {_kind(value)}")
        if key == "death_timeout" and (
            isinstance(value, bool) or not isinstance(value, numbers.Real) or value <= 0
        ):
            raise ValueError(f"{at}: expected a positive number of seconds, got {_kind(value)}")
        if key == "scheduler_options" and not isinstance(value, dict):
            raise ValueError(f"{at}: expected a mapping, got {_kind(value)}")
        if key == "silence_logs" and not isinstance(value, (str, bool, int)):
            raise ValueError(f"{at}: expected a log level such as 'error', got {_kind(value)}")
