"""Where a command computes when its options do not say: in this process or on a local cluster.

Starting a local cluster costs seconds (5-17 s on a small shared machine) and pays off only when
the work is large. So without ``--cluster``, ``--scheduler``, ``--workers``, ``--memory-limit``
or ``--performance-report`` (nor a pipeline's ``cluster`` file) the CLI computes a small input
in this process, with Dask's threaded scheduler and one BLAS thread (as
:mod:`ppa_dask.utils.compute` does for the package), and starts a local cluster otherwise.
Small means under :func:`in_process_limit`: :data:`IN_PROCESS_MAX_BYTES` (1 GiB), or
:data:`IN_PROCESS_MEMORY_FRACTION` (a tenth) of the machine's memory when that is less. Under
1 GiB a local cluster's start (seconds) costs more than a second worker process gains; the
fit may keep its residual (float64, twice a float32 input) in memory beside the input, so a
tenth of the memory leaves room for it on a machine that also runs other work.

The input's size is read from its metadata before any of it is (:func:`input_nbytes`): the shape
and dtype of a Zarr array, the header of a GeoTIFF or of NetCDF files (netCDF-3 or -4: the
variables ``--variable`` names, else all of them), the file size of a CSV or Parquet table; a
pipeline's from its data section (:func:`pipeline_data_nbytes`). An input whose size cannot be
known that way gets the local cluster, as before; the commands open their input before that
(a missing file or variable is reported before any cluster starts).

:func:`choose` makes the choice and returns the command's first line, which says which, why,
and how to force the other (``--workers N`` or ``--cluster local`` for a cluster,
``--scheduler threads`` for this process).
"""

from __future__ import annotations

import inspect
import os

from ppa_dask import datasets, store
from ppa_dask.store.results import open_zarr_dataset

__all__ = [
    "DEFAULT_WORKERS",
    "IN_PROCESS_MAX_BYTES",
    "IN_PROCESS_MEMORY_FRACTION",
    "LOCAL_CLUSTER",
    "MIN_WORKER_MEMORY",
    "check_local_workers",
    "check_memory_limit",
    "choose",
    "in_process_limit",
    "input_nbytes",
    "pipeline_data_nbytes",
]

#: Inputs under this many bytes are computed in this process (unless memory is smaller).
IN_PROCESS_MAX_BYTES = 2**30
#: ... and under this fraction of the machine's memory.
IN_PROCESS_MEMORY_FRACTION = 0.1
#: Worker processes of the local cluster when ``--workers`` is not given.
DEFAULT_WORKERS = 2
#: ``--cluster local``: the default local cluster, without a configuration file.
LOCAL_CLUSTER = "local"
#: Least memory a local worker process is given or counted at: its interpreter, Dask and numpy
#: take about 100 MiB before any task, and a worker whose limit is below what it holds pauses
#: at once and never runs a task (``--memory-limit 1B`` hung).
MIN_WORKER_MEMORY = 256 * 2**20


def check_memory_limit(text):
    """The text of ``--memory-limit`` if a worker can run under it: ``auto``, ``0`` (no limit,
    as distributed reads it) or a size of at least :data:`MIN_WORKER_MEMORY`.

    Raises
    ------
    ValueError
        For a size distributed cannot read or one below the floor.

    Examples
    --------
    >>> check_memory_limit("2GiB"), check_memory_limit("auto")
    ('2GiB', 'auto')
    >>> check_memory_limit("1B")
    Traceback (most recent call last):
    ...
    ValueError: expected at least 256.00 MiB per worker (its process alone takes about 100 MiB), got '1B'
    """
    if text == "auto":
        return text  # the default: checked without importing dask (the CLI's start stays light)
    from dask.utils import parse_bytes

    try:
        nbytes = parse_bytes(text)
    except (ValueError, TypeError):
        raise ValueError(f"expected 'auto' or a size such as 2GiB, got {text!r}") from None
    if nbytes != 0 and nbytes < MIN_WORKER_MEMORY:
        raise ValueError(
            f"expected at least {_size(MIN_WORKER_MEMORY)} per worker (its process alone takes "
            f"about 100 MiB), got {text!r}"
        )
    return text


def check_local_workers(n, available=None):
    """Refuse more local worker processes than this machine's memory can start, before any is
    started: each needs :data:`MIN_WORKER_MEMORY` (``--workers 10000`` climbed until killed).

    Parameters
    ----------
    n : int
        The worker processes asked for.
    available : int, optional
        The memory available, in bytes (default: ``psutil.virtual_memory().available``).

    Raises
    ------
    ValueError
        Naming the count, what they need and what is available.

    Examples
    --------
    >>> check_local_workers(8, available=24 * 2**30)
    >>> check_local_workers(10_000, available=24 * 2**30)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: 10,000 local worker processes need at least 2.44 TiB (256.00 MiB each), ...
    """
    if available is None:
        import psutil

        available = psutil.virtual_memory().available
    fit = max(1, available // MIN_WORKER_MEMORY)
    if n > fit:
        raise ValueError(
            f"{n:,} local worker processes need at least {_size(n * MIN_WORKER_MEMORY)} "
            f"({_size(MIN_WORKER_MEMORY)} each), more than the {_size(available)} of memory "
            f"available; at most {fit:,} fit"
        )


def in_process_limit(total_memory=None):
    """Bytes under which an input is computed in this process.

    Parameters
    ----------
    total_memory : int, optional
        The machine's memory in bytes (default: ``psutil.virtual_memory().total``).

    Returns
    -------
    int
        ``min(IN_PROCESS_MAX_BYTES, IN_PROCESS_MEMORY_FRACTION * total_memory)``.

    Examples
    --------
    >>> in_process_limit(64 * 2**30) == IN_PROCESS_MAX_BYTES
    True
    >>> in_process_limit(4 * 2**30) == int(0.4 * 2**30)  # a tenth of 4 GiB
    True
    """
    if total_memory is None:
        import psutil

        total_memory = psutil.virtual_memory().total
    return min(IN_PROCESS_MAX_BYTES, int(IN_PROCESS_MEMORY_FRACTION * total_memory))


def _file_bytes(path):
    """Bytes of the files a path, glob or folder (a Parquet dataset) names."""
    total = 0
    for item in store.sources.expand_paths(path):
        if os.path.isdir(item):
            for folder, _, names in os.walk(item):
                total += sum(os.path.getsize(os.path.join(folder, n)) for n in names)
        else:
            total += os.path.getsize(item)
    return total


def _zarr_nbytes(path, variable):
    try:
        return int(store.open_input(path, variable=variable).nbytes)
    except ValueError:  # a group of several arrays: an xarray dataset
        ds = open_zarr_dataset(path)
        if variable is not None:
            return int(ds[variable].nbytes)
        return int(sum(v.nbytes for v in ds.data_vars.values()))


def input_nbytes(path, variable=None):
    """The bytes an input holds, from its metadata alone; None when they cannot be known so.

    Parameters
    ----------
    path : str
        An input of the CLI: a Zarr store (path or URL), a NetCDF file or series, a GeoTIFF
        (array metadata: shape times item size), a Parquet or CSV table (its file size).
    variable : str, optional
        The array or variable inside a Zarr group or NetCDF file (default: all of them).

    Returns
    -------
    int or None
        None when the input cannot be opened: the command reports why when it opens it.

    Examples
    --------
    >>> import os, tempfile
    >>> from ppa_dask.datasets import write_zarr
    >>> path = write_zarr(os.path.join(tempfile.mkdtemp(), "d.zarr"), 1000, n_features=4)
    >>> input_nbytes(path)  # 1000 x 4 float64
    32000
    >>> input_nbytes(os.path.join(tempfile.mkdtemp(), "missing.zarr")) is None
    True
    """
    fmt = store.sources.file_format(path)
    try:
        if fmt in store.sources.TABLE_FORMATS:
            return _file_bytes(path)
        if fmt == "netcdf" or store.sources.is_series(path):
            # the variables' sizes in the files' headers: one, several (a,b,c, all) or every
            # data variable (an upper bound, as for a Zarr group)
            return store.sources.netcdf_nbytes(path, variable)
        if fmt in store.sources.CUBE_FORMATS:
            return int(store.open_cube(path).nbytes)  # a GeoTIFF's bands are its only array
        return _zarr_nbytes(path, variable)
    except Exception:  # noqa: BLE001 - unknown size; opening the input reports the error
        return None


def _make_cube_nbytes(params):
    import numpy as np

    bound = inspect.signature(datasets.make_cube).bind_partial(**params)
    bound.apply_defaults()
    a = bound.arguments
    return (
        int(a["n_bands"] * a["ny"] * a["nx"] * (a["n_times"] or 1)) * np.dtype(a["dtype"]).itemsize
    )


def pipeline_data_nbytes(data):
    """The bytes of a validated pipeline's data section, known before it runs, and what it is.

    Parameters
    ----------
    data : dict
        The ``data`` section of :func:`ppa_dask.app.pipeline.load_pipeline`'s configuration.

    Returns
    -------
    nbytes : int or None
        Files and stores: as :func:`input_nbytes`; ``make_cube`` and ``generated``: from their
        parameters (bands x pixels x item size, samples x features x 8); a bundled data set:
        its array, loaded (they are small tables).
    what : str
        The data named for the command's first line, e.g. ``"data (make_cube)"``.

    Examples
    --------
    >>> pipeline_data_nbytes({"source": "generated", "n_samples": 1000, "n_features": 10})
    (80000, 'data (generated)')
    """
    source = data.get("source")
    what = f"data ({source})"
    try:
        if source == "make_cube":
            return _make_cube_nbytes(data.get("params") or {}), what
        if source == "generated":
            return int(data["n_samples"]) * int(data["n_features"]) * 8, what
        if source == "dataset":
            import numpy as np

            X = datasets.TABLE_LOADERS[data["name"]](return_X_y=True)[0]
            return int(np.asarray(X, dtype=np.float64).nbytes), f"data (data set {data['name']})"
        if source in ("zarr", "xarray", *store.sources.FORMATS):
            return input_nbytes(data["path"], data.get("variable")), what
    except Exception:  # noqa: BLE001 - unknown size; the load stage reports the error
        return None, what
    return None, what


def _size(nbytes):
    from dask.utils import format_bytes

    return format_bytes(nbytes)


def choose(args, nbytes, what="input", cluster_file=None, total_memory=None):
    """Decide where a command computes; the line saying so, or None when the options chose.

    With none of ``--cluster``, ``--scheduler``, ``--workers``, ``--memory-limit`` and
    ``--performance-report`` (nor ``cluster_file``), an input under :func:`in_process_limit`
    is computed in this process (``args.scheduler`` is set to ``"threads"``) and any other
    input on a local cluster of :data:`DEFAULT_WORKERS` workers. ``--cluster local`` asks for
    the local cluster without a file (``args.cluster`` is cleared). ``args.workers`` is filled
    in when a local cluster may start.

    Parameters
    ----------
    args : argparse.Namespace
        The command's options (absent ones count as not given).
    nbytes : int or None
        The input's size (:func:`input_nbytes`); None: not known, a local cluster.
    what : str, default="input"
        How the line names the input.
    cluster_file : str, optional
        A cluster file chosen elsewhere (a pipeline's ``cluster``): the options chose.
    total_memory : int, optional
        For :func:`in_process_limit`.

    Returns
    -------
    str or None
        The command's first line, e.g. ``computing in this process (input 57.22 MiB < 1.00
        GiB); --workers N or --cluster local for a local cluster``.

    Examples
    --------
    >>> import argparse
    >>> args = argparse.Namespace(workers=None)
    >>> print(choose(args, 60 * 2**20, total_memory=24 * 2**30).split(";")[0])
    computing in this process (input 60.00 MiB < 1.00 GiB)
    >>> args.scheduler
    'threads'
    >>> choose(argparse.Namespace(workers=3), 60 * 2**20) is None  # --workers 3: a cluster
    True
    """
    if getattr(args, "cluster", None) == LOCAL_CLUSTER:
        args.cluster = None
        args.workers = getattr(args, "workers", None) or DEFAULT_WORKERS
        return None
    chosen = (
        getattr(args, "cluster", None)
        or cluster_file
        or getattr(args, "scheduler", None)
        or getattr(args, "workers", None)
        or getattr(args, "memory_limit", "auto") not in (None, "auto")
        or getattr(args, "performance_report", None)
    )
    if chosen:
        args.workers = getattr(args, "workers", None) or DEFAULT_WORKERS
        return None
    limit = in_process_limit(total_memory)
    below = f"{_size(limit)}" + (
        "" if limit == IN_PROCESS_MAX_BYTES else ", a tenth of this machine's memory"
    )
    if nbytes is not None and nbytes < limit:
        args.scheduler = "threads"
        return (
            f"computing in this process ({what} {_size(nbytes)} < {below}); "
            "--workers N or --cluster local for a local cluster"
        )
    args.workers = DEFAULT_WORKERS
    why = (
        f"{what} {_size(nbytes)} >= {below}"
        if nbytes is not None
        else f"the size of the {what} is not known from its metadata"
    )
    return (
        f"starting a local cluster of {DEFAULT_WORKERS} workers ({why}); "
        "--scheduler threads to compute in this process"
    )
