"""Zarr storage: model files (arrays + JSON, checked before anything is built), result arrays
that never look complete when interrupted, and inputs read with the store's chunks."""

import json
import os
import subprocess
import sys
import textwrap

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from conftest import noisy_helix, random_nonlinear
from sklearn.base import BaseEstimator

from ppa_dask import PPA, store
from ppa_dask.datasets import write_zarr
from ppa_dask.store import (
    ModelFileError,
    ModelFileNotFound,
    encoding,
    load_model,
    model_info,
    open_array,
    open_input,
    save_model,
    write_array,
)
from ppa_dask.utils.files import remove_path


def _fitted_attrs(model):
    return {k: v for k, v in vars(model).items() if k.endswith("_") and not k.startswith("_")}


def _assert_same(a, b, where="value"):
    """Exact structural equality of fitted values (arrays bit for bit, types kept)."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    elif hasattr(a, "get_params"):
        assert type(a) is type(b), where
        _assert_same(_fitted_attrs(a), _fitted_attrs(b), where)
    elif isinstance(a, float) and np.isnan(a):
        assert isinstance(b, float) and np.isnan(b), where
    else:
        assert a == b and type(a) is type(b), where


# -------------------------------------------------------------------------------------------
# model files: a saved model is the same model
# -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        dict(degree=3, random_state=0),
        dict(degree=range(1, 6), cv=3, random_state=1, whiten=True),
        dict(degree=(1, 2, 4), n_components=2, extrapolation="polynomial", random_state=2),
    ],
    ids=["fixed-degree", "cv-whiten", "truncated-polynomial"],
)
def test_saved_model_gives_identical_transforms(tmp_path, params):
    X = random_nonlinear(1500, 5)
    model = PPA(**params).fit(X)
    path = model.save(tmp_path / "model.zarr")
    loaded = PPA.load(path)
    assert loaded.get_params() == model.get_params()
    _assert_same(_fitted_attrs(model), _fitted_attrs(loaded), "model")
    R = model.transform(X)
    assert np.array_equal(loaded.transform(X), R)
    assert np.array_equal(loaded.inverse_transform(R[:, :2]), model.inverse_transform(R[:, :2]))
    assert np.array_equal(loaded.jacobian(X[:20]), model.jacobian(X[:20]))


def test_model_fitted_on_dask_saves_like_one_fitted_in_memory(tmp_path):
    X = noisy_helix(3000)
    model = PPA(degree=4, random_state=0).fit(da.from_array(X, chunks=700))
    loaded = load_model(save_model(model, tmp_path / "m.zarr"))
    assert loaded.residual_cache_ == model.residual_cache_
    assert np.array_equal(loaded.transform(X), model.transform(X))


def test_model_file_holds_plain_numeric_arrays_and_json_only(tmp_path):
    model = PPA(degree=(1, 2, 3), random_state=0).fit(noisy_helix(800))
    path = model.save(tmp_path / "m.zarr")
    allowed_types = {"float64", "float32", "int64", "int32", "bool", "uint8", "uint16"}
    n_arrays = 0
    for root, _, files in os.walk(path):
        if "zarr.json" in files:
            with open(os.path.join(root, "zarr.json")) as f:
                meta = json.load(f)  # plain JSON, nothing else
            if meta["node_type"] == "array":
                n_arrays += 1
                assert meta["data_type"] in allowed_types
                assert {c["name"] for c in meta["codecs"]} <= {"bytes", "zstd"}
    info = model_info(path)
    assert n_arrays == len(info["arrays"]) > 0
    assert info["estimator"] == "PPA" and info["format_version"] == store.FORMAT_VERSION
    assert info["fitted"]["mean_"] == {"shape": [3], "dtype": "<f8"}
    assert info["params"]["random_state"] == 0


@store.register_estimator
class _Bag(BaseEstimator):
    """An ensemble-like estimator: lists of arrays, nested dicts, members that are estimators."""

    def __init__(self, n_members=2, label="bag", weights=(0.5, 0.5)):
        self.n_members = n_members
        self.label = label
        self.weights = weights

    def fit(self, X):
        self.members_ = [
            PPA(degree=2, random_state=i).fit(X[:, i : i + 3]) for i in range(self.n_members)
        ]
        self.subsets_ = [np.arange(i, i + 3) for i in range(self.n_members)]
        self.summary_ = {
            "names": np.array(["a", "bb"]),
            "when": np.array(["2020-01-01", "2021-06-30"], dtype="datetime64[ns]"),
            "score": float("nan"),
            "best": None,
            "flags": np.array([True, False]),
            "pair": (1, "x"),
        }
        self.scalar_ = np.float32(1.5)
        return self


def test_any_registered_estimator_saves_the_same_way(tmp_path):
    X = random_nonlinear(600, 6)
    bag = _Bag(n_members=3, weights=(0.2, 0.3, 0.5)).fit(X)
    loaded = load_model(save_model(bag, tmp_path / "bag.zarr"))
    assert type(loaded) is _Bag and loaded.get_params() == bag.get_params()
    _assert_same(_fitted_attrs(bag), _fitted_attrs(loaded), "bag")
    for a, b, cols in zip(bag.members_, loaded.members_, bag.subsets_):
        assert np.array_equal(a.transform(X[:, cols]), b.transform(X[:, cols]))


def test_saving_refuses_what_it_could_not_load_back(tmp_path):
    class Unregistered(_Bag):
        pass

    with pytest.raises(TypeError, match="not a registered estimator"):
        save_model(Unregistered().fit(random_nonlinear(300, 6)), tmp_path / "u.zarr")
    model = PPA(degree=2, random_state=np.random.RandomState(0)).fit(noisy_helix(300))
    with pytest.raises(TypeError, match="random_state"):
        model.save(tmp_path / "r.zarr")
    with pytest.raises(Exception, match="not fitted"):
        PPA().save(tmp_path / "n.zarr")
    assert os.listdir(tmp_path) == []


# -------------------------------------------------------------------------------------------
# model files: damaged or foreign files raise, naming the problem, and build nothing
# -------------------------------------------------------------------------------------------


def _chunk_files(path, array):
    root = os.path.join(path, array, "c")
    return [os.path.join(r, f) for r, _, fs in os.walk(root) for f in fs]


def _edit_record(path, edit):
    meta_path = os.path.join(path, "zarr.json")
    with open(meta_path) as f:
        meta = json.load(f)
    edit(meta["attributes"]["ppa_dask"])
    with open(meta_path, "w") as f:
        json.dump(meta, f)


def _change_value(path):
    z = zarr.open_array(os.path.join(path, "leading_vectors_"), mode="r+")
    values = z[...]
    values[0, 0] += 1e-12
    z[...] = values


def _change_param(path):
    def edit(record):
        record["estimator"]["params"]["degree"] = 2

    _edit_record(path, edit)


def _change_shape_in_record(path):
    def edit(record):
        record["arrays"]["mean_"]["shape"] = [2]

    _edit_record(path, edit)


def _delete_chunk(path):
    for f in _chunk_files(path, "coefficients_"):
        os.remove(f)


def _truncate_chunk(path):
    (f,) = _chunk_files(path, "coefficients_")
    with open(f, "rb") as fh:
        data = fh.read()
    with open(f, "wb") as fh:
        fh.write(data[: len(data) // 2])


def _delete_array(path):
    remove_path(os.path.join(path, "mean_"))


def _extra_array(path):
    zarr.open_group(path, mode="r+").create_array("payload", shape=(3,), dtype="f8")


def _future_version(path):
    def edit(record):
        record["format_version"] = store.FORMAT_VERSION + 1
        record["sha256"] = encoding.seal(record)["sha256"]  # otherwise valid

    _edit_record(path, edit)


def _forge(path, change):
    """Edit the record and recompute its checksum, as a forger would."""

    def edit(record):
        change(record)
        record["sha256"] = encoding.seal(record)["sha256"]

    _edit_record(path, edit)


def _foreign_class(path):
    def change(record):
        record["estimator"]["__estimator__"] = "builtins.eval"

    _forge(path, change)


def _object_view(path):
    """Reinterpret stored integers as object pointers: refused, never dereferenced."""

    def change(record):
        record["estimator"]["fitted"]["degrees_"]["view"] = "O"

    _forge(path, change)


def _private_attribute(path):
    def change(record):
        record["estimator"]["fitted"]["__class__"] = "PPA"

    _forge(path, change)


@pytest.mark.parametrize(
    "damage, reason, message",
    [
        (_change_value, "tampered", "values of array 'leading_vectors_'"),
        (_change_param, "tampered", "attributes do not match"),
        (_change_shape_in_record, "tampered", "attributes do not match"),
        (_delete_chunk, "tampered", "values of array 'coefficients_'"),
        (_truncate_chunk, "truncated", "'coefficients_' cannot be read"),
        (_delete_array, "truncated", "array 'mean_' listed in its record is missing"),
        (_extra_array, "tampered", "'payload'"),
        (_future_version, "future-version", "version 2"),
        (_foreign_class, "unknown-class", "'builtins.eval'"),
        (_object_view, "invalid", "cannot be viewed as object"),
        (_private_attribute, "invalid", "'__class__' is not a fitted attribute"),
    ],
)
def test_damaged_model_file_raises_without_building_anything(
    tmp_path, monkeypatch, damage, reason, message
):
    model = PPA(degree=(1, 2, 3), random_state=0).fit(noisy_helix(500))
    path = model.save(tmp_path / "m.zarr")
    damage(path)
    built = []
    monkeypatch.setattr(PPA, "__init__", lambda self, **kw: built.append(kw))
    with pytest.raises(ModelFileError, match=message) as info:
        PPA.load(path)
    assert info.value.reason == reason
    assert built == []


def test_missing_or_foreign_paths_are_named(tmp_path):
    with pytest.raises(ModelFileNotFound, match="no model file") as info:
        PPA.load(tmp_path / "nothing.zarr")
    assert isinstance(info.value, FileNotFoundError)
    (tmp_path / "plain").mkdir()
    with pytest.raises(ModelFileError, match="not a ppa-dask model file") as info:
        PPA.load(tmp_path / "plain")
    assert info.value.reason == "not-a-model"
    path = write_zarr(tmp_path / "data.zarr", 100, random_state=0)  # a Zarr array, not a model
    with pytest.raises(ModelFileError, match="not a ppa-dask model file"):
        PPA.load(path)
    bag = save_model(_Bag().fit(random_nonlinear(300, 6)), tmp_path / "bag.zarr")
    with pytest.raises(ModelFileError, match="holds a _Bag, not a PPA"):
        PPA.load(bag)


def test_save_is_atomic_and_overwrites_only_model_files(tmp_path, monkeypatch):
    X = noisy_helix(400)
    path = str(tmp_path / "m.zarr")
    first = PPA(degree=2, random_state=0).fit(X)
    first.save(path)
    second = PPA(degree=3, random_state=0).fit(X)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        second.save(path)

    calls = []
    original = zarr.Group.create_array

    def failing(self, *args, **kwargs):  # the disk fills up while writing the third array
        calls.append(1)
        if len(calls) == 3:
            raise OSError("No space left on device")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(zarr.Group, "create_array", failing)
    with pytest.raises(OSError, match="No space"):
        second.save(path, overwrite=True)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["m.zarr"]  # no temporary left, the old file intact
    assert np.array_equal(PPA.load(path).transform(X), first.transform(X))

    second.save(path, overwrite=True)
    assert np.array_equal(PPA.load(path).transform(X), second.transform(X))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a ppa-dask model file"):
        second.save(tmp_path / "notes", overwrite=True)
    assert (tmp_path / "notes" / "keep.txt").read_text() == "mine"


# -------------------------------------------------------------------------------------------
# results: chunked like the input, never gathered, never half-looking
# -------------------------------------------------------------------------------------------


def test_result_array_keeps_the_input_chunks(tmp_path):
    X = da.random.default_rng(0).normal(size=(1000, 4), chunks=(300, 4))
    model = PPA(degree=2, random_state=0).fit(X)
    R = model.transform(X)
    path = write_array(R, tmp_path / "r.zarr", attrs={"model": "ppa"})
    z = zarr.open_array(path, mode="r")
    assert z.chunks == (300, 4) and z.attrs["model"] == "ppa"
    back = open_array(path)
    assert back.chunks == R.chunks
    assert np.array_equal(back.compute(), R.compute())


def test_irregular_chunks_are_made_regular_and_groups_hold_named_results(tmp_path):
    x = da.arange(200.0, chunks=((30, 20, 50, 100),)).reshape(100, 2)
    path = write_array(x, tmp_path / "results.zarr", name="components")
    assert path == os.path.join(tmp_path, "results.zarr", "components")
    back = open_array(path)
    assert all(c == back.chunks[0][0] for c in back.chunks[0][:-1])
    assert np.array_equal(back.compute(), x.compute())
    y = np.arange(12.0).reshape(4, 3)
    write_array(y, tmp_path / "results.zarr", name="numpy")
    assert sorted(zarr.open_group(tmp_path / "results.zarr").array_keys()) == [
        "components",
        "numpy",
    ]
    assert np.array_equal(open_array(tmp_path / "results.zarr" / "numpy").compute(), y)
    with pytest.raises(FileExistsError):
        write_array(y, tmp_path / "results.zarr", name="numpy")
    write_array(2 * y, tmp_path / "results.zarr", name="numpy", overwrite=True)
    assert np.array_equal(open_array(tmp_path / "results.zarr" / "numpy").compute(), 2 * y)


def _made_on_worker(block):
    from distributed import get_worker

    get_worker()  # raises ValueError outside a worker
    return block * 1.0


def test_result_is_written_by_the_workers_of_the_current_client(tmp_path):
    from distributed import Client, get_task_stream

    x = da.ones((400, 3), chunks=(100, 3)).map_blocks(_made_on_worker, dtype=float)
    with (
        Client(
            processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None
        ) as client,
        get_task_stream(client) as stream,
    ):
        path = write_array(x, tmp_path / "r.zarr")
    # one store task per chunk ran on the worker: the chunks went from there to the store
    names = [str(t["key"]) for t in stream.data]
    assert sum("store" in k for k in names) == 4
    assert np.array_equal(open_array(path).compute(), np.ones((400, 3)))


def _fails_on_third_chunk(block, block_info=None):
    if block_info[None]["chunk-location"][0] == 2:
        raise RuntimeError("worker lost")
    return block


def test_failed_write_leaves_nothing_that_looks_complete(tmp_path):
    x = da.ones((500, 2), chunks=(100, 2)).map_blocks(_fails_on_third_chunk, dtype=float)
    with pytest.raises(RuntimeError, match="worker lost"):
        write_array(x, tmp_path / "r.zarr")
    assert not os.path.exists(tmp_path / "r.zarr")
    # the temporary is removed; a chunk task still running at that moment may recreate a
    # piece of it, which is hidden and cannot be opened as a result
    for leftover in os.listdir(tmp_path):
        assert leftover.startswith(".r.zarr.tmp-")
        with pytest.raises(ValueError):
            open_array(tmp_path / leftover)
    # an object store cannot rename: the array is written in place, marked incomplete
    url = f"memory://{tmp_path.name}/r.zarr"
    with pytest.raises(RuntimeError, match="worker lost"):
        write_array(x, url)
    assert zarr.open_array(url, mode="r").attrs["ppa_dask"]["complete"] is False
    with pytest.raises(ValueError, match="incomplete write"):
        open_array(url)
    with pytest.raises(ValueError, match="incomplete write"):
        open_input(url)
    write_array(np.ones((500, 2)), url, overwrite=True)
    assert open_array(url).sum().compute() == 1000


def test_killed_write_never_looks_complete(tmp_path):
    """The writing process dies mid-write (no cleanup runs): nothing appears at the target."""
    script = textwrap.dedent(f"""
        import os, dask, dask.array as da
        from ppa_dask.store import write_array

        def die_on_fourth(block, block_info=None):
            if block_info[None]["chunk-location"][0] == 3:
                os._exit(9)          # like a SIGKILL: no exception handler, no finally
            return block

        x = da.ones((600, 2), chunks=(100, 2)).map_blocks(die_on_fourth, dtype=float)
        with dask.config.set(scheduler="synchronous"):
            write_array(x, {str(tmp_path / "r.zarr")!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == 9, proc.stderr.decode()
    assert not os.path.exists(tmp_path / "r.zarr")
    with pytest.raises(FileNotFoundError):
        open_array(tmp_path / "r.zarr")
    (leftover,) = os.listdir(tmp_path)  # the hidden temporary, partly written
    assert leftover.startswith(".r.zarr.tmp-")
    with pytest.raises(ValueError, match="incomplete write"):
        open_array(tmp_path / leftover)
    # the next write to the same target is not disturbed by it
    write_array(np.ones((600, 2)), tmp_path / "r.zarr")
    assert open_array(tmp_path / "r.zarr").sum().compute() == 1200


def test_open_array_refuses_arrays_it_did_not_write(tmp_path):
    path = str(tmp_path / "data.zarr")  # a plain Zarr array (write_zarr now uses write_array)
    zarr.create_array(store=path, shape=(100, 3), dtype="f8", zarr_format=3)[...] = 1.0
    with pytest.raises(ValueError, match="open_input"):
        open_array(path)
    with pytest.raises(ValueError, match="reserved key"):
        write_array(np.ones(3), tmp_path / "x.zarr", attrs={"ppa_dask": 1})


# -------------------------------------------------------------------------------------------
# inputs: fit straight from Zarr, with the store's chunks
# -------------------------------------------------------------------------------------------


@pytest.fixture
def data_store(tmp_path):
    return write_zarr(tmp_path / "data.zarr", 5000, n_features=6, chunk_rows=1200, random_state=3)


def test_open_input_aligns_dask_chunks_with_the_store(data_store):
    z = zarr.open_array(data_store, mode="r")
    for where in (data_store, "file://" + data_store):
        X = open_input(where)
        assert X.chunks[0] == (1200, 1200, 1200, 1200, 200) and X.chunksize == z.chunks
        assert np.array_equal(X.compute(), z[...])


def test_open_input_reads_a_variable_of_a_group(tmp_path):
    group = zarr.open_group(tmp_path / "g.zarr", mode="w")
    a = group.create_array("spectra", shape=(300, 4), chunks=(128, 4), dtype="f4")
    a[...] = np.arange(1200, dtype="f4").reshape(300, 4)
    group.create_array("mask", shape=(300,), chunks=(300,), dtype=bool)
    X = open_input(tmp_path / "g.zarr", variable="spectra")
    assert X.chunks == ((128, 128, 44), (4,)) and X.dtype == np.float32
    with pytest.raises(ValueError, match=r"arrays \['mask', 'spectra'\]; pass variable="):
        open_input(tmp_path / "g.zarr")
    with pytest.raises(ValueError, match="no variable 'bands'"):
        open_input(tmp_path / "g.zarr", variable="bands")
    with pytest.raises(FileNotFoundError):
        open_input(tmp_path / "none.zarr")


def test_fit_on_a_zarr_array_is_the_fit_on_its_values(data_store):
    z = zarr.open_array(data_store, mode="r")
    X = z[...]
    in_memory = PPA(degree=(1, 2, 3), random_state=0).fit(X)
    with dask.config.set(scheduler="synchronous"):
        on_store = PPA(degree=(1, 2, 3), random_state=0).fit(z)
        via_input = PPA(degree=(1, 2, 3), random_state=0).fit(open_input(data_store))
    for model in (on_store, via_input):
        assert np.array_equal(model.degrees_, in_memory.degrees_)
        assert np.allclose(model.transform(X), in_memory.transform(X), atol=1e-9)
    assert np.allclose(on_store.transform(z).compute(), in_memory.transform(X), atol=1e-9)
