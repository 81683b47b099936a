"""Zarr storage: model files (arrays + JSON, checked before anything is built), result arrays
that never look complete when interrupted, and inputs read with the store's chunks."""

import functools
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


def _forge_array(name, change):
    """Replace the fitted array ``name`` by ``change(array)``, rewriting its entry in the array
    table and the record's checksum: a forged file every checksum agrees with."""

    def damage(path):
        group = zarr.open_group(path, mode="r+")
        value = np.asarray(change(group[name][...]))
        del group[name]
        # one chunk of the whole array, as save_model writes it (any other grid is refused)
        chunks = tuple(max(n, 1) for n in value.shape)
        z = group.create_array(name, shape=value.shape, dtype=value.dtype, chunks=chunks)
        z[...] = value

        def edit(record):
            record["arrays"][name] = encoding.array_table({name: value})[name]

        _forge(path, edit)

    return damage


def _forge_json(name, value):
    def damage(path):
        def edit(record):
            record["estimator"]["fitted"][name] = value

        _forge(path, edit)

    return damage


def _with(index, value):
    def change(a):
        a = a.copy()
        a[index] = value
        return a

    return change


# a PPA(degree=(1, 2, 3)) of 3 features: 2 steps, degrees_ [g1, g2] among 1..3
@pytest.mark.parametrize(
    "forge, message",
    [
        (_forge_json("n_components_", 99), r"n_components_ must be 3 \(n_components=None, 3 "),
        (
            _forge_json("n_features_in_", 4),
            r"n_components_ must be 4 \(n_components=None, 4 features\), got 3",
        ),
        (_forge_json("n_samples_", 0), r"n_samples_ must be an int >= 1, got 0"),
        (_forge_json("fold_seed_", None), r"fold_seed_ must be an int >= 0, got None"),
        (_forge_array("mean_", lambda a: a[:2]), r"mean_ must be an array of shape \(3,\)"),
        (_forge_array("mean_", _with(1, np.nan)), r"mean_ must be finite, got NaN or inf"),
        (
            _forge_array("mean_", lambda a: a.astype(np.float32)),
            r"mean_ must be an array of float64",
        ),
        (
            _forge_array("leading_vectors_", lambda a: a[:1]),
            r"leading_vectors_ must be an array of shape \(2, 3\)",
        ),
        (
            _forge_array("leading_vectors_", lambda a: 2 * a),
            r"leading_vectors_ must be orthonormal rows",
        ),
        (_forge_array("degrees_", _with(0, 7)), r"degrees_ must be degrees among the candidates"),
        (
            _forge_array("degrees_", _with(1, 0)),
            r"degrees_ must be degrees among the candidates \[1, 2, 3\] .*got \[0\]",
        ),
        (
            _forge_array("degrees_", lambda a: a.astype(float)),
            r"degrees_ must be an array of an integer dtype, got dtype float64",
        ),
        (
            _forge_array("coefficients_", lambda a: np.concatenate([a, a], axis=2)),
            r"coefficients_ must be an array of shape \(2, 3, ",
        ),
        (
            _forge_array("basis_intervals_", _with((0, 1), -1.0)),
            r"basis_intervals_ must be \(offset, scale\) pairs with scale > 0",
        ),
        (
            _forge_array("alpha_ranges_", lambda a: a[:, ::-1]),
            r"alpha_ranges_ must be \(low, high\) pairs with low <= high",
        ),
        (
            _forge_array("residual_basis_", lambda a: np.hstack([a, a])),
            r"residual_basis_ must be an array of shape \(3, 1\)",
        ),
        (
            _forge_array("explained_variance_", _with(2, -1.0)),
            r"explained_variance_ must be non-negative",
        ),
        (
            _forge_array("residual_variance_", lambda a: a[:2]),
            r"residual_variance_ must be an array of shape \(3,\)",
        ),
        (
            _forge_array("cv_scores_", lambda a: a[:, :2]),
            r"cv_scores_ must be an array of shape \(2, 3\)",
        ),
    ],
)
def test_forged_fitted_attributes_are_refused_naming_them(tmp_path, forge, message):
    model = PPA(degree=(1, 2, 3), random_state=0).fit(noisy_helix(500))
    path = model.save(tmp_path / "m.zarr")
    PPA.load(path).check_fitted_state()  # the file as written is consistent
    forge(path)
    with pytest.raises(
        ModelFileError, match=r"model \(PPA\) is inconsistent: fitted attribute " + message
    ) as info:
        load_model(path)
    assert info.value.reason == "invalid"


def test_forged_members_of_an_ensemble_are_refused(tmp_path):
    from ppa_dask import FeatureBaggingPPA

    model = FeatureBaggingPPA(PPA(degree=2), n_estimators=2, random_state=0).fit(noisy_helix(300))
    path = save_model(model, tmp_path / "bag.zarr")
    members = [k for k in zarr.open_group(path).array_keys() if k.endswith("mean_")]
    assert members, "the members' arrays are in the file"
    _forge_array(members[0], lambda a: a[:1])(path)
    with pytest.raises(
        ModelFileError, match=r"\(PPA\) is inconsistent: fitted attribute mean_"
    ) as info:
        load_model(path)
    assert info.value.reason == "invalid"


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


@pytest.mark.slow
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


# -------------------------------------------------------------------------------------------
# model files of every estimator of the public API (ensembles, NLPCA, the VSK estimators)
# -------------------------------------------------------------------------------------------


def _public_estimator_classes():
    """Every estimator class named in the __all__ of the package and of its API subpackages."""
    import importlib

    import ppa_dask

    found = {}
    for module in (
        "ppa_dask",
        "ppa_dask.ensemble",
        "ppa_dask.nlpca",
        "ppa_dask.vsk",
        "ppa_dask.geometry",
        "ppa_dask.stability",
        "ppa_dask.information",
    ):
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if isinstance(obj, type) and issubclass(obj, BaseEstimator):
                found[obj.__name__] = obj
    assert "PPA" in found and ppa_dask.PPA is found["PPA"]
    return found


@functools.cache
def _saved_estimators():
    """name -> (fitted estimator, the methods whose outputs a loaded copy must reproduce, X)."""
    from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge

    from ppa_dask import (
        NLPCA,
        FeatureBaggingClassifier,
        FeatureBaggingPPA,
        FeatureBaggingRegressor,
    )
    from ppa_dask.vsk import (
        ModelScaling,
        NaiveBayesScaling,
        PPAScaling,
        SVMExtraction,
        VariablyScaled,
    )

    X = random_nonlinear(300, 5)
    y = X @ np.arange(1.0, 6.0)
    labels = np.where(X[:, 0] + X[:, 1] > 0, "up", "down")
    return {
        "PPA": (PPA(degree=(1, 2), random_state=0).fit(X), ("transform", "jacobian"), X),
        "NLPCA": (
            NLPCA(n_components=1, max_iter=20, n_restarts=1, random_state=0).fit(X[:, :3]),
            ("transform", "inverse_transform_of_transform"),
            X[:, :3],
        ),
        "FeatureBaggingRegressor": (
            FeatureBaggingRegressor(Ridge(), n_estimators=4, max_samples=0.7, random_state=0).fit(
                X, y
            ),
            ("predict",),
            X,
        ),
        "FeatureBaggingClassifier": (
            FeatureBaggingClassifier(LogisticRegression(), n_estimators=4, random_state=1).fit(
                X, labels
            ),
            ("predict_proba", "predict"),
            X,
        ),
        "FeatureBaggingPPA": (
            FeatureBaggingPPA(
                PPA(degree=2), n_estimators=4, max_features=0.8, max_samples=0.8, random_state=2
            ).fit(X),
            ("reconstruct", "reconstruction_error"),
            X,
        ),
        "NaiveBayesScaling": (NaiveBayesScaling().fit(X, labels), ("transform",), X),
        "ModelScaling": (ModelScaling(LinearRegression()).fit(X, y), ("transform",), X),
        "PPAScaling": (PPAScaling(n_components=2, random_state=0).fit(X), ("transform",), X),
        "VariablyScaled": (
            VariablyScaled(PPAScaling(random_state=0), rescale="minmax").fit(X),
            ("transform",),
            X,
        ),
        # its SVC keeps the support vectors' coefficients in private attributes (_dual_coef_)
        "SVMExtraction": (
            SVMExtraction(n_keep=2, random_state=0).fit(X, labels),
            ("decision_function", "predict", "extract"),
            X,
        ),
    }


# the one estimator whose state a file of arrays and JSON cannot hold, and why
_NOT_SAVABLE = {
    # its parameter func is a Python function: code, which files never hold
    "CurveFitRegressor": (
        r"parameter 'func' of CurveFitRegressor is the function test_store._line, and a "
        r"function cannot be stored in a model file: loading it would mean running code from "
        r"the file\. To keep this fit, save its fitted attributes yourself "
        r"\(n_features_in_, params_; e\.g\. numpy\.savez\(path, params_=model\.params_\)\)"
    ),
}


def _line(x, a, b):
    return a * x + b


def _outputs(model, method, X):
    if method == "inverse_transform_of_transform":
        return model.inverse_transform(model.transform(X))
    return getattr(model, method)(X)


_SAVED = [
    "PPA",
    "NLPCA",
    "FeatureBaggingRegressor",
    "FeatureBaggingClassifier",
    "FeatureBaggingPPA",
    "NaiveBayesScaling",
    "ModelScaling",
    "PPAScaling",
    "VariablyScaled",
    "SVMExtraction",
]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_every_public_estimator_class_is_covered_by_the_model_file_tests():
    assert set(_SAVED) == set(_saved_estimators())
    assert set(_public_estimator_classes()) == set(_SAVED) | set(_NOT_SAVABLE)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("name", _SAVED)
def test_every_public_estimator_saves_and_loads_with_identical_outputs(tmp_path, name):
    model, methods, X = _saved_estimators()[name]
    loaded = load_model(save_model(model, tmp_path / f"{name}.zarr"))
    assert type(loaded) is type(model)
    assert repr(loaded.get_params()) == repr(model.get_params())
    fitted, back = _fitted_attrs(model), _fitted_attrs(loaded)
    # member draws are records without ==: compared field by field
    specs, specs_back = fitted.pop("member_specs_", []), back.pop("member_specs_", [])
    assert [s.to_json() for s in specs] == [s.to_json() for s in specs_back]
    _assert_same(fitted, back, name)
    for method in methods:
        expected = _outputs(model, method, X)
        got = _outputs(loaded, method, X)
        assert got.dtype == expected.dtype and np.array_equal(got, expected), method


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_ensemble_members_and_their_draws_load_as_they_were(tmp_path):
    from ppa_dask import FeatureBaggingPPA
    from ppa_dask.ensemble import MemberSpec

    model, _, X = _saved_estimators()["FeatureBaggingPPA"]
    loaded = load_model(save_model(model, tmp_path / "bag.zarr"))
    assert isinstance(loaded, FeatureBaggingPPA)
    for a, b in zip(model.member_specs_, loaded.member_specs_):
        assert type(b) is MemberSpec and a.same_as(b) and a.index == b.index
        assert np.array_equal(a.row_mask(0, len(X)), b.row_mask(0, len(X)))
    for a, b in zip(model.estimators_, loaded.estimators_):
        assert type(b) is PPA and np.array_equal(a.coefficients_, b.coefficients_)
    info = model_info(tmp_path / "bag.zarr")
    assert info["estimator"] == "FeatureBaggingPPA"


@pytest.mark.parametrize("name", sorted(_NOT_SAVABLE))
def test_estimators_holding_code_are_refused_with_the_reason(tmp_path, name):
    from ppa_dask.vsk import CurveFitRegressor

    X = random_nonlinear(80, 4)
    model = CurveFitRegressor(_line, p0=(1.0, 0.0)).fit(X[:, :1], 2 * X[:, 0] + 1)
    with pytest.raises(TypeError, match=_NOT_SAVABLE[name]):
        save_model(model, tmp_path / "m.zarr")
    assert os.listdir(tmp_path) == []


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def _ensemble_file(tmp_path):
    model, _, X = _saved_estimators()["FeatureBaggingRegressor"]
    return save_model(model, tmp_path / "bag.zarr")


def _foreign_member(record):
    record["estimator"]["fitted"]["estimators_"][1]["__estimator__"] = "subprocess.Popen"


def _foreign_record(record):
    record["estimator"]["fitted"]["member_specs_"][0]["__record__"] = "builtins.eval"


def _record_with_other_fields(record):
    fields = record["estimator"]["fitted"]["member_specs_"][0]["fields"]
    fields["__class__"] = fields.pop("seed")


@pytest.mark.parametrize(
    "change, reason, message",
    [
        (
            _foreign_member,
            "unknown-class",
            "estimators_\\[1\\] names the estimator class 'subprocess",
        ),
        (_foreign_record, "unknown-class", "names the record class 'builtins.eval'"),
        (_record_with_other_fields, "invalid", "does not hold the fields"),
    ],
)
def test_tampered_ensemble_file_naming_a_foreign_class_is_refused(
    tmp_path, monkeypatch, change, reason, message
):
    from ppa_dask import FeatureBaggingRegressor
    from ppa_dask.ensemble import MemberSpec

    path = _ensemble_file(tmp_path)
    _forge(path, change)
    built = []
    for cls in (FeatureBaggingRegressor, MemberSpec):
        monkeypatch.setattr(cls, "__init__", lambda self, *a, **kw: built.append(kw))
    with pytest.raises(ModelFileError, match=message) as info:
        load_model(path)
    assert info.value.reason == reason
    assert built == []


# -------------------------------------------------------------------------------------------
# model files of scikit-learn's compiled state: decision trees, libsvm, k-NN trees
# -------------------------------------------------------------------------------------------


def _tree_models():
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    from ppa_dask import FeatureBaggingClassifier, FeatureBaggingRegressor

    X = random_nonlinear(300, 5)
    y = X @ np.arange(1.0, 6.0)
    three = np.digitize(X[:, 0] + X[:, 1], [-0.5, 0.5])  # three classes
    return X, {
        "DecisionTreeRegressor": (DecisionTreeRegressor(random_state=0).fit(X, y), ("predict",)),
        "DecisionTreeClassifier": (
            DecisionTreeClassifier(max_depth=6, random_state=0).fit(X, three),
            ("predict_proba", "predict", "apply", "decision_path"),
        ),
        # the ensembles' default members are decision trees
        "FeatureBaggingRegressor": (
            FeatureBaggingRegressor(n_estimators=3, random_state=0).fit(X, y),
            ("predict",),
        ),
        "FeatureBaggingClassifier": (
            FeatureBaggingClassifier(n_estimators=3, random_state=0).fit(X, three),
            ("predict_proba", "predict"),
        ),
    }


@pytest.mark.parametrize(
    "name",
    [
        "DecisionTreeRegressor",
        "DecisionTreeClassifier",
        "FeatureBaggingRegressor",
        "FeatureBaggingClassifier",
    ],
)
def test_decision_trees_save_and_load_with_identical_predictions(tmp_path, name):
    X, models = _tree_models()
    model, methods = models[name]
    loaded = load_model(save_model(model, tmp_path / "tree.zarr"))
    trees = [model] if hasattr(model, "tree_") else model.estimators_
    trees_back = [loaded] if hasattr(loaded, "tree_") else loaded.estimators_
    assert len(trees) == len(trees_back) > 0
    for a, b in zip(trees, trees_back):
        assert type(b.tree_) is type(a.tree_)
        state, back = a.tree_.__getstate__(), b.tree_.__getstate__()
        assert state["nodes"].tobytes() == back["nodes"].tobytes()
        assert np.array_equal(state["values"], back["values"])
        assert (b.tree_.n_features, b.tree_.n_outputs) == (a.tree_.n_features, a.tree_.n_outputs)
        assert np.array_equal(b.tree_.n_classes, a.tree_.n_classes)
    for method in methods:
        expected, got = getattr(model, method)(X), getattr(loaded, method)(X)
        if hasattr(expected, "toarray"):  # decision_path: a sparse matrix
            expected, got = expected.toarray(), got.toarray()
        assert got.dtype == expected.dtype and np.array_equal(got, expected), method


def _tree_file(tmp_path):
    from sklearn.tree import DecisionTreeRegressor

    X = random_nonlinear(200, 4)
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, X[:, 0] - X[:, 2])
    return save_model(model, tmp_path / "tree.zarr"), X


def _forge_tree(change):
    def damage(path):
        def edit(record):
            change(record["estimator"]["fitted"]["tree_"]["__sktree__"])

        _forge(path, edit)

    return damage


def _back_to_root(a):  # the first inner node's left child made the root: a cycle
    a = a.copy()
    a[0] = 0
    return a


def _leaf_with_one_child(a):
    a = a.copy()
    a[np.flatnonzero(a == -1)[0]] = 1
    return a


@pytest.mark.parametrize(
    "forge, message",
    [
        (
            _forge_array("tree_.nodes.left_child", _back_to_root),
            r"the left child of node\(s\) \[0\] is \[0\], not a later node",
        ),
        (
            _forge_array("tree_.nodes.right_child", lambda a: np.where(a > 0, a + 10**6, a)),
            r"the right child of node\(s\) \[0, .* not a later node in \[1, ",
        ),
        (_forge_array("tree_.nodes.left_child", _leaf_with_one_child), "have one child only"),
        (
            _forge_array("tree_.nodes.feature", lambda a: np.where(a >= 0, a + 4, a)),
            r"split on feature\(s\) \[\d+.*not in \[0, 4\)",
        ),
        (
            _forge_array("tree_.nodes.left_child", lambda a: a.astype(np.float64)),
            r"node field 'left_child' must be \d+ values of dtype <i8",
        ),
        (
            _forge_array("tree_.nodes.threshold", lambda a: a[:-1]),
            r"node field 'threshold' must be \d+ values",
        ),
        (
            _forge_tree(lambda t: t["fields"].reverse()),
            "are not those of this scikit-learn's Tree",
        ),
        (_forge_tree(lambda t: t.update(max_depth=1)), "max_depth is 1, its nodes are 4 deep"),
        (
            _forge_tree(lambda t: t.update(node_count=t["node_count"] + 1)),
            r"node field 'left_child' must be \d+ values",
        ),
        (_forge_tree(lambda t: t.update(n_features=9)), r"tree_ has n_features=9, but "),
        (
            _forge_json("n_features_in_", None),
            r"tree_ has n_features=4, but n_features_in_ is None",
        ),
        (_forge_tree(lambda t: t.update(max_depth=-1)), "max_depth must be an int >= 0, got -1"),
        (
            _forge_array("tree_.values", lambda a: a[:, :, :0]),
            "values must be float64 of shape",
        ),
    ],
)
def test_forged_decision_tree_nodes_are_refused_naming_the_problem(tmp_path, forge, message):
    path, X = _tree_file(tmp_path)
    load_model(path).predict(X)  # the file as written loads
    forge(path)
    with pytest.raises(ModelFileError, match=message) as info:
        load_model(path)
    assert info.value.reason == "invalid"


def _svm_and_knn_models():
    from ppa_dask import FeatureBaggingClassifier
    from ppa_dask.geometry import make_ppa_knn
    from ppa_dask.vsk import make_svm_vsk

    X = random_nonlinear(240, 4)
    labels = np.where(X[:, 0] * X[:, 1] > 0, "same", "other")
    return X, {
        "svm-vsk-rbf": (make_svm_vsk("rbf").fit(X, labels), ("decision_function", "predict")),
        "ppa-knn": (
            make_ppa_knn(n_neighbors=4, degree=2, random_state=0).fit(X, labels),
            ("predict_proba", "predict"),
        ),
        "ppa-knn-ball-tree": (
            make_ppa_knn(knn_params={"algorithm": "ball_tree"}, degree=2, random_state=0).fit(
                X, labels
            ),
            ("predict_proba",),
        ),
        "bagging-of-svm-vsk": (
            FeatureBaggingClassifier(make_svm_vsk("rbf"), n_estimators=3, random_state=0).fit(
                X, labels
            ),
            ("predict",),
        ),
    }


@pytest.mark.parametrize(
    "name", ["svm-vsk-rbf", "ppa-knn", "ppa-knn-ball-tree", "bagging-of-svm-vsk"]
)
def test_svm_and_nearest_neighbour_pipelines_load_with_identical_predictions(tmp_path, name):
    X, models = _svm_and_knn_models()
    model, methods = models[name]
    path = save_model(model, tmp_path / "m.zarr")
    loaded = load_model(path)
    assert repr(loaded.get_params()) == repr(model.get_params())
    for method in methods:
        expected, got = getattr(model, method)(X), getattr(loaded, method)(X)
        assert got.dtype == expected.dtype and np.array_equal(got, expected), method
    if name.startswith("ppa-knn"):
        # the neighbour tree is not in the file: it is built again from _fit_X, the same tree
        knn, knn_back = model[-1], loaded[-1]
        fitted, back = vars(knn)["_tree"], vars(knn_back)["_tree"]
        assert type(back) is type(fitted)
        for a, b in zip(fitted.get_arrays(), back.get_arrays()):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
        arrays = model_info(path)["arrays"]
        assert any(k.endswith("._fit_X") for k in arrays)
        assert not [k for k in arrays if "_tree" in k]


def _svc_file(tmp_path):
    from sklearn.svm import SVC

    X = random_nonlinear(120, 4)
    labels = np.digitize(X[:, 0], [-0.5, 0.5])
    return save_model(SVC().fit(X, labels), tmp_path / "svc.zarr")


def _forge_private(name, value):
    def damage(path):
        def edit(record):
            record["estimator"].setdefault("private", {})[name] = value

        _forge(path, edit)

    return damage


@pytest.mark.parametrize(
    "forge, message",
    [
        (_forge_array("_dual_coef_", lambda a: a[:, :-1]), r"_dual_coef_ of shape \(2, \d+\)"),
        (_forge_array("_n_support", _with(0, 10**6)), r"_n_support \[1000000, .*does not count"),
        (_forge_array("_intercept_", lambda a: a[:1]), r"_intercept_ of shape \(1,\), not \(3,\)"),
        (_forge_array("support_vectors_", lambda a: a[:, :2]), "support_vectors_ of shape"),
        (_forge_private("_sparse", True), r"_sparse=True \(files hold dense SVMs only\)"),
        (_forge_private("__class__", "x"), "'__class__' is not a private attribute name"),
        (_forge_private("_validate_for_predict", 1), "would hide an attribute of sklearn"),
    ],
)
def test_forged_svm_state_is_refused_before_libsvm_reads_it(tmp_path, forge, message):
    path = _svc_file(tmp_path)
    forge(path)
    with pytest.raises(ModelFileError, match=message) as info:
        load_model(path)
    assert info.value.reason == "invalid"


def test_private_state_of_the_librarys_own_classes_is_refused_in_files(tmp_path):
    path = PPA(degree=2, random_state=0).fit(noisy_helix(300)).save(tmp_path / "m.zarr")
    _forge_private("_exponent", 2)(path)
    with pytest.raises(ModelFileError, match="PPA keeps no private attributes in files"):
        load_model(path)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_private_state_that_is_not_plain_data_is_refused_naming_it(tmp_path):
    from sklearn.neighbors import KDTree, NearestNeighbors
    from sklearn.neural_network import MLPClassifier

    X = random_nonlinear(60, 4)
    mlp = MLPClassifier(hidden_layer_sizes=(3,), max_iter=3, random_state=0)
    mlp.fit(X, X[:, 0] > 0)
    with pytest.raises(
        TypeError,
        match=r"_optimizer: MLPClassifier holds the private attribute '_optimizer' of type "
        r"AdamOptimizer, which a model file cannot hold",
    ):
        save_model(mlp, tmp_path / "mlp.zarr")
    # a neighbour tree other than the one fit builds from _fit_X could not be rebuilt
    knn = NearestNeighbors(algorithm="kd_tree").fit(X)
    vars(knn)["_tree"] = KDTree(X, leaf_size=2)
    with pytest.raises(TypeError, match="_tree: NearestNeighbors's KDTree is not the tree fit"):
        save_model(knn, tmp_path / "knn.zarr")
    assert os.listdir(tmp_path) == []


def test_forged_pipeline_member_is_checked_like_a_model(tmp_path):
    X, models = _svm_and_knn_models()
    path = save_model(models["ppa-knn"][0], tmp_path / "knn.zarr")
    means = [k for k in zarr.open_group(path).array_keys() if k.endswith("mean_")]
    assert len(means) == 1
    _forge_array(means[0], lambda a: a[:1])(path)
    with pytest.raises(
        ModelFileError, match=r"model\.steps\[0\]\[1\] \(PPA\) is inconsistent: fitted attribute"
    ):
        load_model(path)


def test_a_path_store_parameter_is_saved_as_its_string(tmp_path):
    from sklearn.linear_model import Ridge

    from ppa_dask import FeatureBaggingRegressor

    X = random_nonlinear(120, 4)
    members = tmp_path / "members"
    model = FeatureBaggingRegressor(Ridge(), n_estimators=2, random_state=0, store=members)
    model.fit(X, X[:, 0])
    loaded = load_model(save_model(model, tmp_path / "bag.zarr"))
    assert loaded.store == str(members) and type(loaded.store) is str
    assert np.array_equal(loaded.predict(X), model.predict(X))
    assert model_info(tmp_path / "bag.zarr")["params"]["store"] == str(members)
