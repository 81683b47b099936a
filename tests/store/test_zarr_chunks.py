"""Zarr chunks read from their files: the same values, dtype and fill as zarr's own read, for
every layout read directly, and zarr's read (None) for every layout that is not."""

import itertools
import os
import re

import dask.array as da
import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ZstdCodec

from ppa_dask.store.zarr_chunks import chunk_files, read_direct

SHAPE, CHUNKS = (23, 7, 3), (5, 3, 2)  # edge chunks in every dimension

V3_LAYOUTS = {
    "v3 raw": dict(serializer=BytesCodec(), compressors=None),
    "v3 zstd": dict(compressors=ZstdCodec(level=3)),
    "v3 zstd big-endian": dict(serializer=BytesCodec(endian="big"), compressors=ZstdCodec()),
    "v3 blosc": dict(compressors=BloscCodec(cname="lz4", shuffle="bitshuffle")),
    "v3 gzip": dict(compressors=GzipCodec(level=1)),
}
V2_LAYOUTS = {
    "v2 raw": dict(compressors=None),
    "v2 zstd": dict(compressors=numcodecs.Zstd(level=1)),
    "v2 blosc": dict(compressors=numcodecs.Blosc(cname="zstd")),
}


def selections(shape, count, rng):
    """Random selections of one slice per dimension, empty ones and whole ones among them."""
    out = [tuple(slice(0, n) for n in shape), tuple(slice(1, 1) for _ in shape)]
    for _ in range(count):
        index = []
        for n in shape:
            a, b = sorted(rng.integers(0, n + 1, size=2))
            index.append(slice(int(a), int(b)))
        out.append(tuple(index))
    return out


def assert_same(direct, expected):
    assert direct is not None
    assert direct.dtype == expected.dtype and direct.shape == expected.shape
    np.testing.assert_array_equal(direct, expected)  # NaN equals NaN here


def make(tmp_path, name, layout, dtype, fill_value, zarr_format, shape=SHAPE, chunks=CHUNKS):
    z = zarr.create_array(
        store=str(tmp_path / f"{name}.zarr"),
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        fill_value=fill_value,
        zarr_format=zarr_format,
        **layout,
    )
    rng = np.random.default_rng(0)
    values = (rng.normal(size=shape) * 100).astype(dtype)
    z[:] = values
    # two chunks never written (zarr reads them as the fill value) and one of the fill value
    # only (which zarr does not write either)
    z[0:5, 0:3, 0:2] = fill_value
    return z


@pytest.mark.parametrize(
    "name, layout, zarr_format",
    [(n, lay, 3) for n, lay in V3_LAYOUTS.items()]
    + [(n, lay, 2) for n, lay in V2_LAYOUTS.items()],
)
@pytest.mark.parametrize("dtype, fill", [("f8", 0.0), ("f4", np.nan), ("i2", 7), ("u1", 0)])
def test_every_selection_reads_as_zarr_reads_it(tmp_path, name, layout, zarr_format, dtype, fill):
    z = make(tmp_path, name.replace(" ", "-"), layout, dtype, fill, zarr_format)
    files = chunk_files(z)
    assert files is not None, name
    # a chunk file removed after writing: read as the fill value, as zarr reads it
    os.remove(os.path.join(files.folder, files.key((4, 2, 1))))
    reopened = zarr.open_array(files.folder, mode="r")
    rng = np.random.default_rng(1)
    for index in selections(SHAPE, 40, rng):
        assert_same(read_direct(reopened, index), reopened[index])


def test_an_array_in_a_group_and_one_opened_by_dask_from_a_path(tmp_path):
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    inner = group.create_array("inputs/x", shape=(40, 4), chunks=(6, 4), dtype="f8")
    inner[:] = np.arange(160.0).reshape(40, 4)
    assert_same(read_direct(inner, (slice(5, 33), slice(0, 4))), inner[5:33])
    # dask.array.from_zarr opens a path with an fsspec store of the local file system
    data = da.from_zarr(str(tmp_path / "g.zarr"), component="inputs/x")
    handle = next(
        v for layer in data.dask.layers.values() for v in dict(layer).values()
        if isinstance(v, zarr.Array)
    )  # fmt: skip
    assert type(handle.store).__name__ == "FsspecStore"
    assert_same(read_direct(handle, (slice(0, 40), slice(1, 3))), inner[:, 1:3])


def test_layouts_it_does_not_know_are_left_to_zarr(tmp_path):
    values = np.arange(120.0).reshape(30, 4)

    def array(name, **kwargs):
        z = zarr.create_array(
            store=str(tmp_path / f"{name}.zarr"), shape=(30, 4), dtype="f8", **kwargs
        )
        z[:] = values
        return z

    whole = (slice(0, 30), slice(0, 4))
    unknown = {
        "sharded": array("sharded", chunks=(5, 4), shards=(10, 4)),
        "checksummed": array(
            "crc", chunks=(5, 4), serializer=BytesCodec(), compressors=[Crc32cCodec()]
        ),
        "two compressors": array("two", chunks=(5, 4), compressors=[ZstdCodec(), GzipCodec()]),
        "v2 with a filter": array(
            "filtered", chunks=(5, 4), zarr_format=2, filters=[numcodecs.Delta(dtype="f8")]
        ),
        "v2 in Fortran order": array("fortran", chunks=(5, 4), zarr_format=2, order="F"),
        "in memory": zarr.create_array(store={}, shape=(30, 4), chunks=(5, 4), dtype="f8"),
        "not a zarr array": values,
    }
    for name, z in unknown.items():
        assert read_direct(z, whole) is None, name
    known = array("plain", chunks=(5, 4))
    for index in [
        (slice(0, 30, 2), slice(0, 4)),  # a step
        (slice(0, 31), slice(0, 4)),  # past the end
        (slice(-5, 30), slice(0, 4)),  # negative
        (slice(0, 30),),  # not one slice per dimension
        (0, slice(0, 4)),  # an integer
        [slice(0, 30), slice(0, 4)],  # not a tuple
    ]:
        assert read_direct(known, index) is None, index
    # a missing chunk with no fill value: zarr decides what it reads as
    z = zarr.create_array(
        store=str(tmp_path / "nofill.zarr"), shape=(10, 2), chunks=(5, 2), dtype="f8",
        zarr_format=2, fill_value=None,
    )  # fmt: skip
    z[:5] = 1.0
    assert read_direct(z, (slice(0, 10), slice(0, 2))) is None
    assert_same(read_direct(z, (slice(0, 5), slice(0, 2))), z[:5])


def test_chunk_files_name_every_chunk_zarr_wrote(tmp_path):
    for zarr_format, separator in itertools.product((2, 3), (".", "/")):
        kwargs = dict(chunk_key_encoding={"name": "v2" if zarr_format == 2 else "default",
                                          "separator": separator})  # fmt: skip
        z = zarr.create_array(
            store=str(tmp_path / f"k{zarr_format}{separator == '/'}.zarr"), shape=(9, 4),
            chunks=(2, 3), dtype="f8", zarr_format=zarr_format, **kwargs,
        )  # fmt: skip
        z[:] = 1.0
        files = chunk_files(z)
        for coords in itertools.product(range(5), range(2)):
            assert os.path.exists(os.path.join(files.folder, files.key(coords))), coords


# ---------------------------------------------------------------------------------------------
# inputs: a missing or damaged chunk is an error naming it, never zeros (issue 46)
# ---------------------------------------------------------------------------------------------


def _user_store(path, X, **layout):
    """A store written by zarr itself (not ppa-dask), rows in chunks of 10."""
    z = zarr.create_array(store=str(path), shape=X.shape, chunks=(10, X.shape[1]), **layout)
    z[...] = X
    return str(path)


@pytest.mark.parametrize("layout", ["v3 zstd", "v2 raw"])
def test_an_input_with_a_missing_chunk_file_is_an_error_naming_it(tmp_path, layout):
    from ppa_dask import PPA
    from ppa_dask.store import open_input
    from ppa_dask.store.zarr_chunks import ChunkError

    X = np.random.default_rng(0).normal(size=(60, 4)) + 5.0
    layouts = {**V3_LAYOUTS, **V2_LAYOUTS}
    fmt = 2 if layout.startswith("v2") else 3
    path = _user_store(tmp_path / "x.zarr", X, zarr_format=fmt, dtype="f8", **layouts[layout])
    key = zarr.open_array(path, mode="r").metadata.encode_chunk_key((3, 0))
    os.remove(os.path.join(path, key))
    missing = re.escape(f"Zarr chunk file {os.path.join(path, key)!r} is missing")
    x = open_input(path)
    # zarr's read (a block through dask's getter) and ppa-dask's own chunk reader alike
    with pytest.raises(ChunkError, match=missing):
        x[25:35].compute(scheduler="synchronous")
    with pytest.raises(ChunkError, match=missing):
        read_direct(_array(x), (slice(20, 40), slice(0, 4)))
    with pytest.raises(ChunkError, match=missing):
        PPA(degree=2, random_state=0).fit(x)
    # the rows of the chunks still there read as written
    np.testing.assert_array_equal(x[:30].compute(scheduler="synchronous"), X[:30])
    # a chunk cut short
    key = zarr.open_array(path, mode="r").metadata.encode_chunk_key((1, 0))
    with open(os.path.join(path, key), "r+b") as f:
        f.truncate(17)
    with pytest.raises(ChunkError, match="cannot be decoded"):
        read_direct(_array(x), (slice(0, 20), slice(0, 4)))


def _array(x):
    """The zarr array a Dask array from ``open_input`` reads (its graph's one handle)."""
    import zarr as z

    found = [v for v in dict(x.__dask_graph__()).values() if isinstance(v, z.Array)]
    if not found:  # dask wraps the handle in a DataNode
        found = [
            getattr(v, "value", None)
            for v in dict(x.__dask_graph__()).values()
            if isinstance(getattr(v, "value", None), z.Array)
        ]
    return found[0]


def test_a_result_of_zeros_reads_back_whole(tmp_path):
    # zarr leaves out chunks of only the fill value unless told: ppa-dask writes every chunk,
    # so its own results are inputs with no chunk missing
    from ppa_dask.store import open_input, write_array

    X = np.zeros((40, 3))
    X[30:] = 1.0
    path = write_array(da.from_array(X, chunks=(10, 3)), tmp_path / "r.zarr")
    assert sorted(os.listdir(os.path.join(path, "c"))) == ["0", "1", "2", "3"]
    np.testing.assert_array_equal(open_input(path).compute(scheduler="synchronous"), X)
