"""Result arrays and datasets written atomically, and Zarr inputs read with their chunks.

Results
-------
:func:`write_array` writes a numpy or Dask array to a Zarr v3 array (Zarr chunks = the Dask
chunks, made regular when needed) with one task per chunk on the current Dask scheduler (the
distributed Client if there is one), so the array is never gathered. Two guards make an
interrupted write never look complete:

1. a completion marker: the array is created with ``attrs["ppa_dask"]["complete"] = False`` and
   the flag is set to ``True`` only after every chunk is stored; :func:`open_array` and
   :func:`~ppa_dask.store.open_input` refuse an array whose flag is ``False``;
2. on a local file system, the array is written to a hidden temporary sibling and renamed into
   place after the marker is set, so the target path only ever holds a complete array. Object
   stores (fsspec URLs such as ``s3://``) have no rename: there the marker alone guards.

:func:`write_dataset` / :func:`open_dataset` do the same for xarray objects.

Inputs
------
:func:`open_zarr_input` (public as :func:`ppa_dask.store.open_input`) opens any Zarr
array, or a variable of a Zarr group, by local path or fsspec URL, as a Dask array whose chunks
are the store's chunks; :func:`open_zarr_dataset` opens an xarray Zarr store;
:meth:`ppa_dask.PPA.fit` also accepts a ``zarr.Array`` directly (:func:`as_dask_if_zarr`).

Paths
-----
:func:`is_remote`, :func:`local_path`, :func:`zarr_node_type`, :func:`check_target` and
:func:`move_into_place` are the local-path rules shared with :mod:`.model_files`: a finished
Zarr tree is renamed into place, swapping out an old one only when it is of the kind allowed to
be replaced.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time

import numpy as np

from ppa_dask.store.zarr_chunks import strict_store
from ppa_dask.utils.arrays import is_dask
from ppa_dask.utils.compute import uses_local_scheduler
from ppa_dask.utils.files import read_json_file, remove_path, temp_sibling
from ppa_dask.utils.version import VERSION

__all__ = [
    "RESULT_FORMAT_VERSION",
    "ATTRS_KEY",
    "write_array",
    "open_array",
    "write_dataset",
    "open_dataset",
    "open_zarr_input",
    "open_zarr_dataset",
    "as_dask_if_zarr",
    "is_remote",
    "local_path",
    "zarr_node_type",
    "check_target",
    "move_into_place",
    "is_replaceable_result",
]

#: Version of the result-array marker written by :func:`write_array`.
RESULT_FORMAT_VERSION = 1
#: Attribute key of the package's JSON records in Zarr attributes (results and model files).
ATTRS_KEY = "ppa_dask"
_RESULT_FORMAT = "ppa-dask-result"
_DATASET_FORMAT = "ppa-dask-dataset"
_NUMERIC_KINDS = "biufc"


# -------------------------------------------------------------------------------------------
# paths and atomic moves
# -------------------------------------------------------------------------------------------


def is_remote(path):
    """True for fsspec URLs other than local files.

    Examples
    --------
    >>> is_remote("s3://bucket/x.zarr"), is_remote("file:///tmp/x.zarr"), is_remote("x.zarr")
    (True, False, False)
    """
    path = os.fspath(path)
    if "://" not in path:
        return False
    return path.split("://", 1)[0] not in ("file", "local")


def local_path(path):
    """Absolute local path of a path or ``file://`` / ``local://`` URL.

    Examples
    --------
    >>> local_path("file:///tmp/x.zarr")
    '/tmp/x.zarr'
    """
    path = os.fspath(path)
    if path.startswith(("file://", "local://")):
        path = path.split("://", 1)[1]
    return os.path.abspath(path)


def zarr_node_type(path):
    """``"array"`` / ``"group"`` for a local Zarr v3 node, None otherwise.

    Examples
    --------
    >>> import tempfile
    >>> zarr_node_type(tempfile.mkdtemp()) is None
    True
    """
    meta = _zarr_metadata(path)
    return meta.get("node_type") if meta is not None else None


def _zarr_metadata(path):
    """The JSON object of a local node's ``zarr.json``, read within the bounds of
    :func:`~ppa_dask.utils.files.read_json_file`; None when absent or not such an object."""
    try:
        meta = read_json_file(os.path.join(path, "zarr.json"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def check_target(path, overwrite, replaceable, what):
    """Refuse an existing ``path`` unless ``overwrite`` and ``replaceable(path)``.

    Raises FileExistsError naming ``what`` may be replaced.

    Examples
    --------
    >>> import tempfile
    >>> try:
    ...     check_target(tempfile.mkdtemp(), True, lambda p: False, "model")
    ... except FileExistsError as exc:
    ...     print("not a model" in str(exc))
    True
    """
    if not os.path.lexists(path):
        return
    if not overwrite:
        raise FileExistsError(f"{path!r} already exists; pass overwrite=True to replace it")
    if not replaceable(path):
        raise FileExistsError(
            f"{path!r} exists and is not a {what}; refusing to replace it even with overwrite=True"
        )


def move_into_place(tmp, path, overwrite, replaceable, what):
    """Rename the finished ``tmp`` to ``path``, swapping out an old one when allowed.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> os.mkdir(os.path.join(d, ".new"))
    >>> move_into_place(os.path.join(d, ".new"), os.path.join(d, "x"), False, None, "")
    >>> os.listdir(d)
    ['x']
    """
    if os.path.lexists(path):
        check_target(path, overwrite, replaceable, what)  # it may have appeared meanwhile
        old = temp_sibling(path, "old")
        os.rename(path, old)
        os.rename(tmp, path)
        remove_path(old)
    else:
        os.rename(tmp, path)


# -------------------------------------------------------------------------------------------
# results
# -------------------------------------------------------------------------------------------


def _regular_chunks(x, first=False):
    """Dask chunks that Zarr can hold: per dimension equal chunks except a smaller last one.

    Returns ``(target, regular)``: the chunk size per dimension (the largest chunk, or the
    first with ``first=True``) and whether ``x.chunks`` already fit it."""
    target = []
    regular = True
    for c in x.chunks:
        if any(isinstance(s, float) and math.isnan(s) for s in c):
            raise ValueError(
                "the array has unknown chunk sizes; call compute_chunk_sizes() before writing"
            )
        size = (c[0] if first else max(c)) if c else 1
        if len(c) > 1 and (any(s != c[0] for s in c[:-1]) or c[-1] > c[0]):
            regular = False
        target.append(max(int(size), 1))
    return tuple(target), regular


def _default_numpy_chunks(shape, itemsize):
    """Row chunks of about 8 MiB, every other dimension whole."""
    if not shape:
        return ()
    per_row = itemsize * int(np.prod(shape[1:], dtype=np.int64)) or itemsize
    rows = max(1, min(shape[0], (8 << 20) // per_row))
    return (max(rows, 1),) + tuple(max(s, 1) for s in shape[1:])


def _check_attrs(attrs):
    attrs = dict(attrs or {})
    if ATTRS_KEY in attrs:
        raise ValueError(f"attrs must not use the reserved key {ATTRS_KEY!r}")
    try:
        json.dumps(attrs, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"attrs must be JSON-serialisable: {exc}") from None
    return attrs


def _result_marker(complete, extra=None):
    marker = {
        "format": _RESULT_FORMAT,
        "format_version": RESULT_FORMAT_VERSION,
        "library_version": VERSION,
        "complete": bool(complete),
    }
    marker.update(extra or {})
    return marker


def written_by_us(path, node_type, file_format):
    """Whether ``path`` is a local Zarr ``node_type`` ("array" / "group") whose record says
    this library wrote it as ``file_format``: only such a node may be replaced on overwrite."""
    meta = _zarr_metadata(path)
    if meta is None or meta.get("node_type") != node_type:
        return False
    attrs = meta.get("attributes")
    record = attrs.get(ATTRS_KEY) if isinstance(attrs, dict) else None
    return isinstance(record, dict) and record.get("format") == file_format


def _is_result_array(path):
    return written_by_us(path, "array", _RESULT_FORMAT)


# -------------------------------------------------------------------------------------------
# temporaries: marked with their writer, cleaned up on failure, stale ones removed with proof
# -------------------------------------------------------------------------------------------

#: The file a temporary folder holds first: who writes it (host, pid) and for which target.
WRITER_FILE = "ppa-dask-writer.json"
_STORE_DIR = "zarr"
#: In-process bookkeeping of the chunk writes of each temporary (keyed by its marker path).
_WRITES = threading.Condition()
_IN_FLIGHT = {}
_ABANDONED = set()


def _alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def stale_temporaries(path):
    """The temporaries beside ``path`` that a dead ppa-dask writer on this host left behind.

    Only folders named like this library's temporaries of ``path`` whose writer file says this
    host, the target ``path``, and a process id that is no longer alive: anything else (no
    marker, another host, a live writer) is never listed.

    Examples
    --------
    >>> import tempfile
    >>> stale_temporaries(os.path.join(tempfile.mkdtemp(), "x.zarr"))
    []
    """
    parent, base = os.path.split(os.path.abspath(os.fspath(path)))
    prefix = f".{base}.tmp-"
    try:
        names = sorted(n for n in os.listdir(parent) if n.startswith(prefix))
    except OSError:
        return []
    stale = []
    for name in names:
        folder = os.path.join(parent, name)
        try:
            record = read_json_file(os.path.join(folder, WRITER_FILE))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict):
            continue
        pid = record.get("pid")
        if (
            record.get("writer") == "ppa-dask"
            and record.get("host") == socket.gethostname()
            and record.get("target") == base
            and isinstance(pid, int)
            and not isinstance(pid, bool)
            and not _alive(pid)
        ):
            stale.append(folder)
    return stale


def _begin_temporary(path, inside=True):
    """A fresh marked temporary folder beside ``path``; returns it and the store path: a
    folder in it, or (``inside=False``) the temporary itself, its writer file removed before
    it is renamed into place.

    Stale temporaries of ``path`` (see :func:`stale_temporaries`) are removed first."""
    for folder in stale_temporaries(path):
        remove_path(folder)
    tmp = temp_sibling(path)
    os.makedirs(os.path.dirname(tmp), exist_ok=True)
    os.mkdir(tmp)
    record = {
        "writer": "ppa-dask",
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "target": os.path.basename(path),
    }
    with open(os.path.join(tmp, WRITER_FILE), "w") as f:
        json.dump(record, f)
    return tmp, (os.path.join(tmp, _STORE_DIR) if inside else tmp)


#: After a failed write on worker processes: the temporary must stay absent this long (seconds)
#: before it counts as removed, and removal stops trying after ``_SETTLE_LIMIT``.
_SETTLE_QUIET = 1.0
_SETTLE_LIMIT = 30.0


def _abandon_temporary(tmp):
    """Remove a failed write's temporary once no chunk write of this process is in flight;
    later chunk writes, in any process, find its marker gone and write nothing.

    A worker process's chunk write already under way when the marker goes can still create its
    chunk's folders, the temporary among them, once: under a distributed Client the temporary is
    removed again until it has stayed absent for ``_SETTLE_QUIET`` seconds (at most
    ``_SETTLE_LIMIT``)."""
    marker = os.path.join(tmp, WRITER_FILE)
    with _WRITES:
        _ABANDONED.add(marker)
        _WRITES.wait_for(lambda: _IN_FLIGHT.get(marker, 0) == 0, timeout=60)
        # the marker first: from now on no chunk write starts
        if os.path.exists(marker):
            os.remove(marker)
        remove_path(tmp)
        _ABANDONED.discard(marker)
    if uses_local_scheduler():
        return
    start = absent_since = time.monotonic()
    while time.monotonic() - start < _SETTLE_LIMIT:
        if os.path.lexists(tmp):
            remove_path(tmp)
            absent_since = time.monotonic()
        elif time.monotonic() - absent_since >= _SETTLE_QUIET:
            return
        time.sleep(0.05)


class _MarkedChunks:
    """A ``da.store`` target writing a chunk only while its temporary's marker is there, so a
    task still running after a failure does not recreate the removed temporary."""

    def __init__(self, z, marker):
        self.z, self.marker = z, marker

    def __setitem__(self, key, value):
        with _WRITES:
            if self.marker in _ABANDONED or not os.path.exists(self.marker):
                return
            _IN_FLIGHT[self.marker] = _IN_FLIGHT.get(self.marker, 0) + 1
        try:
            self.z[key] = value
        finally:
            with _WRITES:
                _IN_FLIGHT[self.marker] -= 1
                if not _IN_FLIGHT[self.marker]:
                    del _IN_FLIGHT[self.marker]
                _WRITES.notify_all()


def _store_into(x, z, marker=None):
    """Fill the Zarr array ``z`` from ``x`` (numpy in-process, Dask one task per chunk)."""

    if is_dask(x):
        import dask.array as da

        target = z if marker is None else _MarkedChunks(z, marker)
        # Dask chunks coincide with Zarr chunks, so tasks never share a chunk: no lock
        da.store(x, target, lock=False, compute=True)
    else:
        z[...] = x


def write_array(
    x, path, name=None, attrs=None, overwrite=False, chunks=None, storage_options=None
):
    """Write a numpy or Dask array to Zarr without gathering it; never leaves it half-looking.

    Parameters
    ----------
    x : numpy.ndarray or dask.array.Array
        A Dask array is stored chunk by chunk on the current scheduler (the distributed Client
        if any; its workers must see ``path``). Zarr chunks are its chunks (rechunked to equal
        sizes if they are irregular); numpy arrays get row chunks of about 8 MiB.
    path : str or os.PathLike
        Local path or fsspec URL of the array, or of a group when ``name`` is given.
    name : str, optional
        Write the array as ``name`` inside the group at ``path`` (created if missing).
    attrs : dict, optional
        JSON attributes stored with the array (the key ``"ppa_dask"`` is reserved).
    overwrite : bool, default=False
        Replace an existing result array. Other things at the target are never replaced.
    chunks : tuple of int, optional
        Zarr chunk shape; the Dask array is rechunked to it (default: its own chunks).
    storage_options : dict, optional
        Passed to fsspec for URLs.

    Returns
    -------
    target : str
        Path or URL of the written array.

    Notes
    -----
    Local paths: the array is written to a hidden temporary sibling, its completion marker
    (``attrs["ppa_dask"]["complete"]``) set once every chunk is stored, then renamed into place;
    on an exception the temporary is removed. URLs (object stores cannot rename): the array is
    written in place, marked incomplete until every chunk is stored. :func:`open_array` refuses
    an incomplete array either way. (After a failure the temporary is removed; a chunk task that
    was still running may leave a piece of it behind, hidden and marked incomplete.)

    Examples
    --------
    >>> import os, tempfile, numpy as np, dask.array as da
    >>> from ppa_dask.store import write_array, open_array
    >>> x = da.ones((10, 2), chunks=(4, 2))
    >>> p = write_array(x, os.path.join(tempfile.mkdtemp(), "r.zarr"))
    >>> open_array(p).chunks
    ((4, 4, 2), (2,))
    """
    import zarr

    attrs = _check_attrs(attrs)
    if not is_dask(x):
        x = np.asarray(x)
        if x.dtype.kind not in _NUMERIC_KINDS:
            raise TypeError(f"x must hold numbers, got dtype {x.dtype}")
        zchunks = (
            tuple(chunks)
            if chunks is not None
            else _default_numpy_chunks(x.shape, x.dtype.itemsize)
        )
    else:
        if chunks is not None:
            x = x.rechunk(tuple(chunks))
        zchunks, regular = _regular_chunks(x)
        if not regular:
            x = x.rechunk(zchunks)
    if name is not None and (
        not isinstance(name, str) or not name or "/" in name or name.startswith("__")
    ):
        raise ValueError(f"name must be a non-empty str without '/', got {name!r}")
    marker_extra = {"shape": list(x.shape), "dtype": np.dtype(x.dtype).str}

    def create(store, overwrite_store):
        return zarr.create_array(
            store=store,
            shape=x.shape,
            chunks=zchunks,
            dtype=x.dtype,
            zarr_format=3,
            attributes={**attrs, ATTRS_KEY: _result_marker(False, marker_extra)},
            overwrite=overwrite_store,
            storage_options=storage_options,
            # every chunk on disk, those of only zeros too: an input's missing chunk file is
            # an error (zarr_chunks.strict_store), so a result must read back whole
            config={"write_empty_chunks": True},
        )

    def finish(z):
        z.attrs[ATTRS_KEY] = _result_marker(True, marker_extra)

    if is_remote(path):
        target = os.fspath(path).rstrip("/") + ("/" + name if name else "")
        if name is not None:
            zarr.open_group(os.fspath(path), mode="a", storage_options=storage_options)
        try:
            existing = zarr.open(target, mode="r", storage_options=storage_options)
        except Exception:
            existing = None
        if existing is not None:
            if not overwrite:
                raise FileExistsError(f"{target!r} already exists; pass overwrite=True")
            record = existing.attrs.get(ATTRS_KEY)
            if not (
                isinstance(existing, zarr.Array)
                and isinstance(record, dict)
                and record.get("format") == _RESULT_FORMAT
            ):
                raise FileExistsError(
                    f"{target!r} exists and is not a ppa-dask result array; refusing to replace it"
                )
        z = create(target, True)
        _store_into(x, z)
        finish(z)
        return target

    path = local_path(path)
    if name is None:
        target = path
    else:
        kind = zarr_node_type(path)
        if os.path.lexists(path) and kind != "group":
            raise FileExistsError(f"{path!r} exists and is not a Zarr group")
        if kind is None:
            zarr.open_group(path, mode="w-", zarr_format=3)
        target = os.path.join(path, name)
    check_target(target, overwrite, _is_result_array, "ppa-dask result array")
    # the temporary sits beside the target's group, not inside it, so it is never a member
    # the array is the temporary itself: an interrupted write leaves an incomplete array there
    tmp, _ = _begin_temporary(path if name is None else path + "." + name, inside=False)
    marker = os.path.join(tmp, WRITER_FILE)
    try:
        z = create(tmp, False)
        _store_into(x, z, marker=marker)
        finish(z)
        os.remove(marker)  # every chunk is stored: no write can come after this
        move_into_place(tmp, target, overwrite, _is_result_array, "ppa-dask result array")
    except BaseException:
        _abandon_temporary(tmp)
        raise
    return target


def _open_node(path, storage_options=None):
    import zarr

    store = path
    if not is_remote(path):
        path = local_path(path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no Zarr store at {path!r}")
        # a chunk whose file is missing is an error naming it, never the fill value (zeros)
        store = strict_store(zarr.storage.LocalStore(path, read_only=True))
    try:
        return zarr.open(store, mode="r", storage_options=storage_options)
    except Exception as exc:
        raise ValueError(f"cannot open {path!r} as Zarr: {exc}") from None


def _check_complete(node, where):
    record = node.attrs.get(ATTRS_KEY)
    if isinstance(record, dict) and record.get("format") in (_RESULT_FORMAT, _DATASET_FORMAT):
        if record.get("format_version", 1) > RESULT_FORMAT_VERSION:
            raise ValueError(
                f"{where!r} was written in result format version {record.get('format_version')};"
                f" this ppa-dask reads up to {RESULT_FORMAT_VERSION}"
            )
        if record.get("complete") is not True:
            raise ValueError(
                f"{where!r} is an incomplete write (its completion marker is not set): the "
                "writing job was interrupted; write it again"
            )
        return True
    return False


def open_array(path, storage_options=None):
    """Open a result written by :func:`write_array` as a Dask array with the store's chunks.

    Raises ValueError for an incomplete write (interrupted job) or for an array that was not
    written by :func:`write_array` (use :func:`~ppa_dask.store.open_input` for arbitrary Zarr
    arrays).
    """
    import dask.array as da
    import zarr

    node = _open_node(path, storage_options)
    if not isinstance(node, zarr.Array):
        raise ValueError(f"{path!r} is a Zarr group, not an array")
    if not _check_complete(node, path):
        raise ValueError(
            f"{path!r} is not a ppa-dask result (no completion marker); open arbitrary Zarr "
            "arrays with open_input"
        )
    return da.from_zarr(node, chunks=node.chunks)


def open_zarr_input(path_or_url, variable=None, storage_options=None):
    """A Zarr array, or a variable of a Zarr group, as a Dask array aligned with its chunks.

    :func:`ppa_dask.store.open_input` is the public front of this reader (it also opens the
    file formats of :mod:`.sources`).

    Parameters
    ----------
    path_or_url : str or os.PathLike
        Local path or fsspec URL (``file://``, ``s3://``, ...) of a Zarr array or group.
    variable : str, optional
        Path of the array inside the group (``"x"`` or ``"sub/x"``); may be omitted when the
        group holds exactly one array.
    storage_options : dict, optional
        Passed to fsspec for URLs (credentials, endpoint...).

    Returns
    -------
    X : dask.array.Array
        One Dask chunk per Zarr chunk.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from ppa_dask import PPA
    >>> from ppa_dask.datasets import write_zarr
    >>> p = write_zarr(os.path.join(tempfile.mkdtemp(), "d.zarr"), 3000, chunk_rows=1000,
    ...                random_state=0)
    >>> X = open_zarr_input(p)
    >>> X.chunks[0]
    (1000, 1000, 1000)
    >>> model = PPA(degree=2, random_state=0).fit(X)
    """
    import dask.array as da
    import zarr

    node = _open_node(path_or_url, storage_options)
    where = os.fspath(path_or_url)
    if isinstance(node, zarr.Group):
        if variable is None:
            names = sorted(node.array_keys())
            if len(names) != 1:
                raise ValueError(
                    f"{where!r} is a Zarr group with arrays {names}; pass variable= to choose one"
                )
            variable = names[0]
        try:
            node = node[variable]
        except KeyError:
            raise ValueError(
                f"{where!r} has no variable {variable!r}; arrays: {sorted(node.array_keys())}"
            ) from None
        if not isinstance(node, zarr.Array):
            raise ValueError(f"{where!r}: {variable!r} is a group, not an array")
    elif variable is not None:
        raise ValueError(f"{where!r} is a Zarr array; variable={variable!r} applies to groups")
    _check_complete(node, where)
    return da.from_zarr(node, chunks=node.chunks)


def as_dask_if_zarr(X):
    """A ``zarr.Array`` as a Dask array aligned with its chunks; anything else unchanged."""
    import sys

    zarr = sys.modules.get("zarr")
    if zarr is not None and isinstance(X, zarr.Array):
        import dask.array as da

        _check_complete(X, str(X.store_path))
        return da.from_zarr(X, chunks=X.chunks)
    return X


# -------------------------------------------------------------------------------------------
# xarray objects
# -------------------------------------------------------------------------------------------


def write_dataset(obj, path, overwrite=False):
    """Write an xarray Dataset (or named DataArray) to a local Zarr v3 group, atomically.

    Dask-backed variables are computed chunk by chunk on the current scheduler, never gathered.
    Zarr chunks are the Dask chunks; a variable whose Dask chunks are irregular (as
    :meth:`ppa_dask.PPA.transform` makes them from a cube chunked along several dimensions) is
    rechunked, lazily, to equal chunks of its first chunk size along each dimension. Like
    :func:`write_array`: written to a hidden temporary sibling, marked complete in the group
    attributes (``attrs["ppa_dask"]["complete"]``) and renamed into place.

    Returns
    -------
    path : str

    Examples
    --------
    >>> import os, tempfile, dask.array as da, xarray as xr
    >>> from ppa_dask.store import open_dataset, write_dataset
    >>> a = xr.DataArray(da.ones((10, 4), chunks=((3, 3, 2, 2), 4)), dims=("y", "x"), name="a")
    >>> p = write_dataset(a, os.path.join(tempfile.mkdtemp(), "d.zarr"))
    >>> open_dataset(p)["a"].chunks
    ((3, 3, 3, 1), (4,))
    """
    import xarray as xr

    if isinstance(obj, xr.DataArray):
        obj = obj.to_dataset(name=obj.name if obj.name is not None else "data")
    if not isinstance(obj, xr.Dataset):
        raise TypeError(f"write_dataset needs an xarray Dataset or DataArray, got {type(obj)}")
    obj = _zarr_regular(obj)
    if is_remote(path):
        raise ValueError(f"write_dataset writes local paths; got the URL {path!r}")
    if ATTRS_KEY in obj.attrs:
        raise ValueError(f"the Dataset's attrs must not use the reserved key {ATTRS_KEY!r}")
    path = local_path(path)
    check_target(path, overwrite, _is_dataset_dir, "ppa-dask dataset")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp, tmp_store = _begin_temporary(path)
    try:
        obj.to_zarr(  # every chunk on disk, as write_array writes them
            tmp_store, mode="w-", zarr_format=3, consolidated=False, write_empty_chunks=True
        )
        import zarr

        group = zarr.open_group(tmp_store, mode="r+")
        marker = _result_marker(True)
        marker["format"] = _DATASET_FORMAT
        group.attrs[ATTRS_KEY] = marker
        move_into_place(tmp_store, path, overwrite, _is_dataset_dir, "ppa-dask dataset")
    except BaseException:
        _abandon_temporary(tmp)
        raise
    remove_path(tmp)  # only its writer file is left
    return path


def _zarr_regular(ds):
    """``ds`` with every Dask-backed variable rechunked (lazily) to chunks Zarr can hold: equal
    chunks of its first chunk size along each dimension, a smaller last one."""
    changed = {}
    for name, var in ds.variables.items():
        if not is_dask(var.data):
            continue
        target, regular = _regular_chunks(var.data, first=True)
        if regular:
            continue
        var = var.chunk(dict(zip(var.dims, target)))
        # storage chunks recorded when it was read would no longer match its Dask chunks
        var.encoding = {
            k: v for k, v in var.encoding.items() if k not in ("chunks", "preferred_chunks")
        }
        changed[name] = var
    if not changed:
        return ds
    ds = ds.copy()
    for name, var in changed.items():
        if name in ds.coords:
            ds = ds.assign_coords({name: var})
        else:
            ds[name] = var
    return ds


def _is_dataset_dir(path):
    return written_by_us(path, "group", _DATASET_FORMAT)


def is_replaceable_result(path):
    """Whether the local ``path`` is a result array or dataset ppa-dask wrote: what
    :func:`write_array` / :func:`write_dataset` replace with ``overwrite=True``.

    Examples
    --------
    >>> import tempfile
    >>> is_replaceable_result(tempfile.mkdtemp())  # an empty folder is not one
    False
    """
    return _is_result_array(path) or _is_dataset_dir(path)


def open_dataset(path, chunks=None):
    """Open a Dataset written by :func:`write_dataset` lazily (Dask chunks = store chunks).

    ``chunks`` is passed to ``xarray.open_zarr``; the default ``None`` uses the store's chunks.

    Raises ValueError if the write was interrupted or ``path`` was not written by
    :func:`write_dataset` (use ``xarray.open_zarr`` for other stores).
    """
    import xarray as xr
    import zarr

    node = _open_node(path)
    if not isinstance(node, zarr.Group) or not _check_complete(node, path):
        raise ValueError(f"{path!r} is not a Dataset written by ppa_dask.store.write_dataset")
    ds = xr.open_zarr(
        local_path(path), consolidated=False, chunks={} if chunks is None else chunks
    )
    ds.attrs.pop(ATTRS_KEY, None)
    return ds


def open_zarr_dataset(path):
    """An xarray Dataset from a Zarr store (lazy): one written by :func:`write_dataset`
    (checked complete) or any other xarray Zarr store, by local path or fsspec URL.

    Examples
    --------
    >>> import os, tempfile, numpy as np, xarray as xr
    >>> p = write_dataset(xr.DataArray(np.ones((2, 3)), dims=("band", "x"), name="r"),
    ...                   os.path.join(tempfile.mkdtemp(), "c.zarr"))
    >>> list(open_zarr_dataset(p).data_vars)
    ['r']
    """
    import warnings

    import xarray as xr

    if "://" not in os.fspath(path) and not os.path.exists(path):  # a URL is checked on open
        raise FileNotFoundError(f"no Zarr store at {path!r}")
    try:
        return open_dataset(path)
    except ValueError as exc:
        if "incomplete" in str(exc):
            raise
    with warnings.catch_warnings():
        # stores without consolidated metadata are fine, only slower to open
        warnings.filterwarnings("ignore", message=".*consolidated metadata.*")
        return xr.open_zarr(path, consolidated=None)
