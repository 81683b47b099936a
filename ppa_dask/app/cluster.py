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
"""

from __future__ import annotations

import contextlib
import functools
import logging
import numbers
import os

from ppa_dask.utils.blas import BLAS_THREAD_VARIABLES
from ppa_dask.utils.progress import bar_line, step_progress

__all__ = [
    "local_client",
    "dashboard_link",
    "ClusterConfigError",
    "read_cluster_config",
    "make_security",
    "open_client",
    "job_script",
    "validate_daskcluster",
    "step_reporter",
    "compute_with_progress",
    "command_session",
]

#: Loggers quietened while the cluster runs (the scheduler, nanny and worker chatter).
_NOISY_LOGGERS = ("distributed", "bokeh", "tornado")


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


@contextlib.contextmanager
def _one_blas_thread_for_spawned_workers():
    """Make the nanny spawn its worker processes with one BLAS thread.

    The nanny reads ``distributed.nanny.pre-spawn-environ`` when it is created, but lets a
    variable already set in the parent's environment override the configured value, and exports
    the result into the parent's environment before spawning. So the variables are set in the
    configuration *and* temporarily in ``os.environ``; the parent's previous values are put back
    afterwards (the nanny keeps its own copy for worker restarts).
    """
    import dask

    one = {name: "1" for name in BLAS_THREAD_VARIABLES}
    pre_spawn = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    pre_spawn.update(one)
    saved = {name: os.environ.get(name) for name in one}
    os.environ.update(one)
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": pre_spawn}):
            yield one
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
    **cluster_kwargs,
):
    """Start a local cluster of worker processes and yield a Client connected to it.

    Parameters
    ----------
    n_workers : int, default=2
        Number of worker processes (each behind a nanny).
    threads_per_worker : int, default=1
        Worker threads per process. Each process runs one BLAS thread whatever this is.
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
        with _one_blas_thread_for_spawned_workers():
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
            cluster.close()


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
_CONFIG_KEYS = {
    "local": ("type", "options", "security"),
    "slurm": ("type", "options", "scale", "adapt", "security"),
    "pbs": ("type", "options", "scale", "adapt", "security"),
    "scheduler": ("type", "address", "security"),
}


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
            raw = yaml.safe_load(f)
    except FileNotFoundError:
        raise ClusterConfigError(f"cluster configuration {path!r} does not exist") from None
    except yaml.YAMLError as exc:
        raise ClusterConfigError(
            f"{path}: not valid YAML ({' '.join(str(exc).split())})"
        ) from None
    base_dir = os.path.dirname(os.path.abspath(path))
    if not isinstance(raw, dict):
        raise ClusterConfigError(f"{path}: expected a mapping at the top, got {raw!r}")
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
    config = {"type": kind, "options": options, "security": security, "path": path}
    if kind == "local":
        _unknown_keys(options, LOCAL_OPTIONS, path, "options")
        if security is not None:
            options.setdefault("protocol", "tls://")
    elif kind in _JOBQUEUE_CLASSES:
        cls = _jobqueue_class(kind, path)
        _unknown_keys(options, _jobqueue_options(cls), path, "options")
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


def _jobqueue_cluster(config):
    cls = _jobqueue_class(config["type"], config["path"])
    options = dict(config["options"])
    options["job_script_prologue"] = _blas_prologue(options.get("job_script_prologue"))
    if config["security"] is not None:
        options["security"] = config["security"]
        options.setdefault("protocol", "tls://")
    try:
        return cls(**options)
    except (TypeError, ValueError) as exc:
        raise ClusterConfigError(f"{config['path']}: options: {exc}") from None


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


@contextlib.contextmanager
def open_client(
    cluster=None,
    scheduler=None,
    n_workers=2,
    memory_limit="auto",
    local_directory=None,
    log_level=logging.WARNING,
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

    Yields
    ------
    client : distributed.Client or None
    """
    import dask
    from distributed import Client

    if cluster is not None and scheduler is not None:
        raise ClusterConfigError("give either a cluster file or a scheduler, not both")
    if scheduler in ("threads", "synchronous", "sync", "single-threaded"):
        with dask.config.set(scheduler=scheduler):
            yield None
        return
    if scheduler is not None:
        if "://" not in scheduler and ":" not in scheduler:
            raise ClusterConfigError(
                f"scheduler: expected an address such as tcp://127.0.0.1:8786 (or 'threads'), "
                f"got {scheduler!r}"
            )
        with Client(scheduler, set_as_default=True) as client:
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
        with Client(config["address"], security=config["security"], set_as_default=True) as client:
            yield client
    elif kind == "kubernetes":
        try:
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
        jobs = _jobqueue_cluster(config)
        try:
            if "adapt" in config:
                jobs.adapt(**config["adapt"])
            else:
                jobs.scale(**config.get("scale", {"jobs": 1}))
            with Client(jobs, set_as_default=True) as client:
                yield client
        finally:
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
        The command's options ``cluster``, ``scheduler``, ``workers``, ``memory_limit`` and
        ``performance_report`` (absent ones take their defaults).
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
        For contradicting options or a performance report that cannot be written.

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
        if scheduler in ("threads", "synchronous", "sync", "single-threaded"):
            raise ValueError(
                f"--performance-report needs a distributed scheduler, not --scheduler {scheduler}"
            )
    what = (
        f"cluster from {cluster}"
        if cluster
        else f"scheduler {scheduler}"
        if scheduler
        else f"local cluster ({getattr(args, 'workers', 2)} worker process(es), 1 thread each)"
    )
    progress.say(f"connecting: {what}")
    with open_client(
        cluster=cluster,
        scheduler=scheduler,
        n_workers=getattr(args, "workers", 2),
        memory_limit=getattr(args, "memory_limit", "auto"),
        local_directory=local_directory,
    ) as client:
        if client is None:
            progress.say(f"computing in this process (dask scheduler {scheduler!r}); no dashboard")
            yield None
            return
        n = len(client.scheduler_info(n_workers=-1).get("workers", {}))
        progress.say(f"scheduler {client.scheduler.address}, {n} worker(s)")
        progress.say(f"dashboard: {dashboard_link(client) or '(not available)'}")
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
        for f in futures:
            f.release()


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
