"""A Zarr array's chunks read straight from their files, in the calling thread.

zarr 3 reads every chunk through its event loop: about 0.33 ms a chunk on this project's
machine, whatever the chunk's size and even when one slice reads thousands of them (a 256-row
chunk of 10 float64 values). Reading the chunk's file and decoding it with the same numcodecs
codec that zarr uses costs about 0.04 ms. A pass over a store of many small chunks is mostly
that overhead, so the grouped passes (:mod:`ppa_dask.ppa.drivers`) read runs of chunks here.

Only layouts this module knows are read directly: an array in a local folder
(``zarr.storage.LocalStore``, or the fsspec store of the local file system that
``dask.array.from_zarr`` opens a path with), a regular chunk grid, a numeric data type, and

* Zarr 3: the ``bytes`` codec, then at most one of ``zstd``, ``blosc`` or ``gzip``;
* Zarr 2: C order, no filters, no compressor or a numcodecs one.

For anything else (sharding, checksums, transposes, a cloud store, object data, a missing chunk
with no fill value) :func:`read_direct` returns None and the caller reads through zarr. A chunk
that is not on disk is the array's fill value, as zarr reads it (zarr does not write chunks
that hold only the fill value), except in an array opened through :func:`strict_store`.

Inputs
------
An input read as zeros because a chunk file went missing (a write that did not finish, a file
removed) would be fitted or transformed without a word, so ppa-dask opens its Zarr inputs on a
``StrictStore`` (:func:`strict_store`): reading a chunk whose file is absent raises
:class:`ChunkError` naming the file, here and through zarr alike, and a chunk whose file cannot
be decoded (truncated, damaged) raises it here. ppa-dask writes every chunk of what it writes
(``write_empty_chunks``), so its own results read back whole.

Examples
--------
>>> import os, tempfile, numpy as np, zarr
>>> path = os.path.join(tempfile.mkdtemp(), "x.zarr")
>>> z = zarr.create_array(store=path, shape=(10, 3), chunks=(4, 3), dtype="f8")
>>> z[:] = np.arange(30.0).reshape(10, 3)
>>> read_direct(z, (slice(3, 9), slice(0, 3)))[:, 0]
array([ 9., 12., 15., 18., 21., 24.])
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

import numpy as np

from ppa_dask.utils.files import NotARegularFile, file_kind, open_regular

#: Compressors of a Zarr 3 array read directly, by codec name: the numcodecs class zarr's own
#: codec of that name decodes with (each chunk's header says how it was compressed).
_V3_COMPRESSORS = {"zstd": "Zstd", "blosc": "Blosc", "gzip": "GZip"}


@dataclass(frozen=True)
class ChunkFiles:
    """Where a Zarr array's chunks are and how to decode one (see :func:`chunk_files`)."""

    folder: str
    shape: tuple
    chunks: tuple
    stored: np.dtype  # the dtype of a decoded chunk's bytes, with their byte order
    dtype: np.dtype  # the array's dtype in memory, as zarr returns it
    fill_value: object
    decoder: object  # a numcodecs codec, or None for raw bytes
    key: object  # chunk coordinates -> the chunk's path in ``folder``

    strict: bool = False  # a missing chunk is an error (ChunkError), not the fill value

    def read_chunk(self, coords):
        """One whole chunk (edge chunks included: Zarr stores them at full size), or None
        when its file is missing and there is no fill value; with ``strict``, a missing or
        undecodable chunk file raises :class:`ChunkError`."""
        path = os.path.join(self.folder, self.key(coords))
        try:
            with open_regular(path) as f:  # a FIFO would block, /dev/zero never end
                data = f.read()
        except NotARegularFile as exc:
            raise ChunkError.not_a_file(path, exc.kind) from None
        except FileNotFoundError:
            if self.strict:
                raise ChunkError.missing(path) from None
            if self.fill_value is None:
                return None
            return np.full(self.chunks, self.fill_value, dtype=self.dtype)
        try:
            if self.decoder is not None:
                data = self.decoder.decode(data)
            return np.frombuffer(data, dtype=self.stored).reshape(self.chunks)
        except Exception as exc:  # truncated or damaged: numcodecs' and numpy's errors vary
            if not self.strict:
                raise
            raise ChunkError.damaged(path, exc) from None


class ChunkError(ValueError):
    """A chunk of a Zarr input that is missing or cannot be decoded; the message names its
    file (an input is never read with zeros, or the fill value, in its place)."""

    @classmethod
    def missing(cls, path):
        return cls(
            f"Zarr chunk file {path!r} is missing; ppa-dask never reads a missing chunk of an "
            "input as the fill value: the store is incomplete (a write that did not finish, or "
            "a file removed). A store written by zarr with write_empty_chunks=False leaves out "
            "chunks holding only the fill value: rewrite it with write_empty_chunks=True"
        )

    @classmethod
    def not_a_file(cls, path, kind):
        return cls(f"Zarr chunk file {path!r} is {kind}, not a regular file; it is not read")

    @classmethod
    def damaged(cls, path, exc):
        why = " ".join(str(exc).split())[:160] or type(exc).__name__
        return cls(
            f"Zarr chunk file {path!r} cannot be decoded ({why}): the file is truncated or "
            "damaged; write the store again"
        )


#: Names of a Zarr store's metadata documents (every other key is a chunk's).
_METADATA = {"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}


def strict_store(store):
    """``store`` (a zarr store) wrapped so that reading a chunk whose file is absent raises
    :class:`ChunkError` instead of giving the fill value (a ``StrictStore``); returned as it
    is when it is not a local folder (a cloud store's missing chunk cannot be told from a
    chunk never written).

    Examples
    --------
    >>> import os, tempfile, numpy as np, zarr
    >>> path = os.path.join(tempfile.mkdtemp(), "s.zarr")
    >>> zarr.create_array(store=path, shape=(4,), chunks=(2,), dtype="f8")[:] = 1.0
    >>> os.remove(os.path.join(path, "c", "1"))
    >>> z = zarr.open_array(strict_store(zarr.storage.LocalStore(path)), mode="r")
    >>> z[:2]
    array([1., 1.])
    >>> z[2:]  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ppa_dask.store.zarr_chunks.ChunkError: Zarr chunk file '.../s.zarr/c/1' is missing; ...
    """
    if _is_strict(store) or _local_folder(store) is None:
        return store
    return _strict_class()(store)


_STRICT = None  # the StrictStore class, made on first use (zarr is imported only then)


def _strict_class():
    global _STRICT
    if _STRICT is None:
        _STRICT = _strict_store_class()
    return _STRICT


def _is_strict(store):
    return _STRICT is not None and isinstance(store, _STRICT)


def __getattr__(name):
    # ppa_dask.store.zarr_chunks.StrictStore, for pickle (an array sent to Dask workers)
    if name == "StrictStore":
        return _strict_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _strict_store_class():
    from zarr.storage import WrapperStore

    class StrictStore(WrapperStore):
        """A local zarr store whose absent chunk keys raise :class:`ChunkError` when read."""

        @property
        def wrapped(self):
            """The store it wraps."""
            return self._store

        async def get(self, key, prototype, byte_range=None):
            path = os.path.join(_local_folder(self._store), key)
            kind = file_kind(path)
            if kind not in (None, "a regular file"):  # a FIFO would block, /dev/zero never end
                raise ChunkError.not_a_file(path, kind)
            value = await self._store.get(key, prototype, byte_range)
            if value is None and key.rsplit("/", 1)[-1] not in _METADATA:
                raise ChunkError.missing(path)
            return value

        async def get_partial_values(self, prototype, key_ranges):
            key_ranges = list(key_ranges)
            values = await self._store.get_partial_values(prototype, key_ranges)
            for (key, _), value in zip(key_ranges, values):
                if value is None and key.rsplit("/", 1)[-1] not in _METADATA:
                    raise ChunkError.missing(os.path.join(_local_folder(self._store), key))
            return values

    StrictStore.__module__ = __name__
    StrictStore.__qualname__ = "StrictStore"
    return StrictStore


def chunk_files(array):
    """The :class:`ChunkFiles` of ``array`` (a ``zarr.Array``), or None when its layout is not
    one this module reads.

    Examples
    --------
    >>> import os, tempfile, zarr
    >>> z = zarr.create_array(store=os.path.join(tempfile.mkdtemp(), "a.zarr"), shape=(4,),
    ...                       chunks=(2,), dtype="i4")
    >>> chunk_files(z).chunks, chunk_files(z).key((1,))
    ((2,), 'c/1')
    >>> chunk_files(zarr.zeros((4,), chunks=(2,))) is None  # in memory, not in a folder
    True
    """
    try:
        import zarr
    except ImportError:  # pragma: no cover - zarr is a dependency
        return None
    if not isinstance(array, zarr.Array):
        return None
    root = _local_folder(array.store)
    if root is None:
        return None
    strict = _is_strict(array.store)
    meta = array.metadata
    dtype = np.dtype(array.dtype)
    if dtype.kind not in "biuf" or not isinstance(array.chunks, tuple):
        return None
    if meta.zarr_format == 3:
        grid = getattr(meta, "chunk_grid", None)
        if type(grid).__name__ != "RegularChunkGrid":
            return None
        codecs = [c.to_dict() for c in meta.codecs]
        if not codecs or codecs[0].get("name") != "bytes" or len(codecs) > 2:
            return None
        endian = (codecs[0].get("configuration") or {}).get("endian", "little")
        stored = dtype.newbyteorder("<" if endian == "little" else ">")
        decoder = None
        if len(codecs) == 2:
            name = _V3_COMPRESSORS.get(codecs[1].get("name"))
            if name is None:
                return None
            import numcodecs

            decoder = getattr(numcodecs, name)()
    elif meta.zarr_format == 2:
        if meta.filters or meta.order != "C":
            return None
        stored = np.dtype(meta.to_dict()["dtype"])
        if stored.kind not in "biuf":
            return None
        decoder = meta.compressor
    else:  # pragma: no cover - a future format
        return None
    folder = os.path.join(root, *[p for p in array.path.split("/") if p])
    fill = meta.fill_value
    return ChunkFiles(
        folder=folder,
        shape=tuple(array.shape),
        chunks=tuple(array.chunks),
        stored=stored,
        dtype=dtype,
        fill_value=None if fill is None else np.asarray(fill).astype(dtype),
        decoder=decoder,
        key=meta.encode_chunk_key,
        strict=strict,
    )


def _local_folder(store):
    """The folder of a store on this machine's file system (``LocalStore``, or an fsspec store
    of the local file system, which ``dask.array.from_zarr`` opens a path with), else None."""
    from zarr.storage import FsspecStore, LocalStore

    if _is_strict(store):
        store = store.wrapped
    if isinstance(store, LocalStore):
        return str(store.root)
    if isinstance(store, FsspecStore):
        protocol = store.fs.protocol
        protocols = {protocol} if isinstance(protocol, str) else set(protocol)
        if protocols & {"file", "local"} and os.path.isabs(store.path):
            return store.path
    return None


def read_direct(array, index):
    """``array[index]`` read from the chunk files (:class:`ChunkFiles`), or None when this
    module does not read ``array`` or ``index`` (then read it through zarr).

    ``index`` is a tuple of one slice per dimension, each with integer bounds inside the
    array and step 1 (what ``dask.array.core.getter`` receives for a block).

    Examples
    --------
    >>> import os, tempfile, numpy as np, zarr
    >>> z = zarr.create_array(store=os.path.join(tempfile.mkdtemp(), "b.zarr"), shape=(5, 2),
    ...                       chunks=(2, 2), dtype="f4")
    >>> z[:2] = 1.0  # the other chunks are never written: the fill value, 0
    >>> read_direct(z, (slice(1, 4), slice(0, 2)))
    array([[1., 1.],
           [0., 0.],
           [0., 0.]], dtype=float32)
    >>> read_direct(z, (slice(0, 4, 2), slice(0, 2))) is None  # a step: zarr's read
    True
    """
    files = chunk_files(array)
    if files is None or not isinstance(index, tuple) or len(index) != len(files.shape):
        return None
    bounds = []
    for s, size in zip(index, files.shape):
        if not isinstance(s, slice) or s.step not in (None, 1):
            return None
        if not (isinstance(s.start, int) and isinstance(s.stop, int)):
            return None
        if not 0 <= s.start <= s.stop <= size:
            return None
        bounds.append((s.start, s.stop))
    out = np.empty([b - a for a, b in bounds], dtype=files.dtype)
    if out.size == 0:
        return out
    ranges = [range(a // c, (b - 1) // c + 1) for (a, b), c in zip(bounds, files.chunks)]
    for coords in itertools.product(*ranges):
        chunk = files.read_chunk(coords)
        if chunk is None:
            return None
        source, target = [], []
        for (a, b), c, k in zip(bounds, files.chunks, coords):
            lo, hi = max(a, k * c), min(b, (k + 1) * c)
            source.append(slice(lo - k * c, hi - k * c))
            target.append(slice(lo - a, hi - a))
        out[tuple(target)] = chunk[tuple(source)]
    return out
