"""Ensemble member files: the model files' encoder and allow-list, small, atomic, and a file
that cannot be used (damaged, foreign, old layout) is refitted with a warning naming it."""

import json
import os
import sys
import zipfile

import dask.array as da
import numpy as np
import pytest
import sklearn.linear_model
import sklearn.svm
from conftest import noisy_helix
from sklearn.base import clone
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from ppa_dask import PPA
from ppa_dask.ensemble import FeatureBaggingPPA, FeatureBaggingRegressor
from ppa_dask.store import ModelFileError, encoding, load_model, save_model
from ppa_dask.store.members import MemberFileWarning, MemberStore, read_member_file


def linear_data(n=200, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)


def regressor(store, **kw):
    params = dict(
        estimator=LinearRegression(),
        n_estimators=4,
        max_features=0.5,
        max_samples=0.8,
        random_state=7,
    )
    return FeatureBaggingRegressor(store=store, **{**params, **kw})


def member_files(store):
    return sorted(f for f in os.listdir(store) if f.endswith(".npz"))


def rewrite_member_record(path, change):
    """Edit a member file's record and recompute its checksum, as a forger would."""
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    record = json.loads(entries["record.json"])
    change(record)
    entries["record.json"] = json.dumps(encoding.seal(record)).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)


def rewrite_model_record(path, change):
    meta_path = os.path.join(path, "zarr.json")
    with open(meta_path) as f:
        meta = json.load(f)
    record = meta["attributes"]["ppa_dask"]
    change(record)
    meta["attributes"]["ppa_dask"] = encoding.seal(record)
    with open(meta_path, "w") as f:
        json.dump(meta, f)


# -------------------------------------------------------------------------------------------
# the allow-list: nothing a file names is imported, nothing outside it is built
# -------------------------------------------------------------------------------------------


@pytest.fixture
def svm_not_imported(monkeypatch):
    """sklearn.svm and its submodules taken out of sys.modules (restored afterwards); returns
    the record of SVR constructor calls."""
    built = []
    monkeypatch.setattr(sklearn.svm.SVR, "__init__", lambda self, **kw: built.append(kw))
    for name in [m for m in sys.modules if m == "sklearn.svm" or m.startswith("sklearn.svm.")]:
        monkeypatch.delitem(sys.modules, name)
    return built


def _write_member(tmp_path):
    X, y = linear_data()
    store = MemberStore(tmp_path / "members", {"fit": "test"})
    assert store.save(0, LinearRegression().fit(X, y), check={"features": [0, 1]})
    return store.member_path(0), lambda p: read_member_file(p, 0, {"features": [0, 1]})


def _write_model(tmp_path):
    X, y = linear_data()
    return save_model(LinearRegression().fit(X, y), tmp_path / "model.zarr"), load_model


@pytest.mark.parametrize("kind", ["member", "model"])
@pytest.mark.parametrize(
    "name",
    [
        "sklearn.svm._classes.SVR",  # a real estimator, but its module is not imported
        "sklearn.svm.SVR",
        "builtins.eval",
        "os.system",
        "ppa_dask.ppa.estimator.PPA",  # module paths are not names of the allow-list
        "sklearn.base.clone",  # a function
        "sklearn.utils._bunch.Bunch",  # a class, not an estimator
        "sklearn.linear_model.LinearRegression",  # a re-export: only the defining module
    ],
)
def test_a_file_naming_a_class_outside_the_allow_list_is_refused_before_anything_is_built(
    tmp_path, monkeypatch, svm_not_imported, kind, name
):
    path, load = (_write_member if kind == "member" else _write_model)(tmp_path)
    rewrite = rewrite_member_record if kind == "member" else rewrite_model_record
    rewrite(path, lambda record: record["estimator"].update({"__estimator__": name}))
    built = svm_not_imported
    monkeypatch.setattr(LinearRegression, "__init__", lambda self, **kw: built.append(kw))
    with pytest.raises(ModelFileError, match="not in the allow-list") as info:
        load(path)
    assert info.value.reason == "unknown-class" and repr(name) in str(info.value)
    assert built == []
    assert not any(m == "sklearn.svm" or m.startswith("sklearn.svm.") for m in sys.modules)


def test_a_member_file_is_read_only_as_the_member_it_was_written_for(tmp_path):
    path, load = _write_member(tmp_path)
    for index, check in [(0, {"features": [0, 2]}), (1, {"features": [0, 1]}), (0, None)]:
        with pytest.raises(ModelFileError, match="holds another member") as info:
            read_member_file(path, index, check)
        assert info.value.reason == "mismatch"
    X, y = linear_data()
    assert np.array_equal(load(path).predict(X), LinearRegression().fit(X, y).predict(X))


def test_a_foreign_member_file_in_a_store_is_refitted_without_being_built(
    tmp_path, monkeypatch, svm_not_imported
):
    X, y = linear_data()
    store = tmp_path / "members"
    first = regressor(store).fit(X, y)
    victim = store / "member_00002.npz"
    rewrite_member_record(
        victim, lambda record: record["estimator"].update({"__estimator__": "sklearn.svm.SVR"})
    )
    with pytest.warns(MemberFileWarning, match=r"member_00002\.npz.*\(unknown-class\)"):
        again = regressor(store).fit(X, y)
    assert svm_not_imported == [] and "sklearn.svm" not in sys.modules
    assert again.n_members_loaded_ == 3
    assert np.array_equal(again.predict(X), first.predict(X))
    with zipfile.ZipFile(victim) as archive:  # rewritten by the refit
        record = json.loads(archive.read("record.json"))
    assert record["estimator"]["__estimator__"] == "sklearn.linear_model._base.LinearRegression"
    assert regressor(store).fit(X, y).n_members_loaded_ == 4


def test_scikit_learn_estimators_save_to_model_files_by_their_module(tmp_path):
    X, y = linear_data()
    model = sklearn.linear_model.Ridge(alpha=0.3).fit(X, y)
    path = save_model(model, tmp_path / "ridge.zarr")
    with open(os.path.join(path, "zarr.json")) as f:
        tree = json.load(f)["attributes"]["ppa_dask"]["estimator"]
    assert tree["__estimator__"] == "sklearn.linear_model._ridge.Ridge"
    loaded = load_model(path)
    assert type(loaded) is type(model) and loaded.get_params() == model.get_params()
    assert np.array_equal(loaded.predict(X), model.predict(X))


def test_state_a_file_could_not_restore_is_never_written(tmp_path):
    # a member holding code (a function parameter): neither file kind may hold it, since
    # loading it would mean running code from the file
    X, y = linear_data()
    with_code = make_pipeline(FunctionTransformer(np.tanh), LinearRegression())
    with pytest.raises(TypeError, match="a function cannot be stored in a model file"):
        save_model(clone(with_code).fit(X, y), tmp_path / "code.zarr")
    store = tmp_path / "members"
    model = regressor(store, estimator=with_code).fit(X, y)
    assert os.listdir(store) == ["manifest.json"]
    again = regressor(store, estimator=with_code).fit(X, y)
    assert again.n_members_loaded_ == 0
    assert np.array_equal(again.predict(X), model.predict(X))


# -------------------------------------------------------------------------------------------
# small files: the member's sample indices are not stored
# -------------------------------------------------------------------------------------------


def test_a_linear_member_on_a_hundred_thousand_rows_is_a_small_file(tmp_path):
    X, y = linear_data(n=100_000, d=5)
    store = tmp_path / "members"
    model = FeatureBaggingRegressor(
        LinearRegression(), n_estimators=2, max_samples=0.8, random_state=0, store=store
    ).fit(X, y)
    assert model.member_specs_[0].samples.size == 80_000  # what the old header held as text
    for name in member_files(store):
        size = os.path.getsize(store / name)
        assert size < 10_000, f"{name} is {size} bytes"
        with zipfile.ZipFile(store / name) as archive:
            assert archive.getinfo("record.json").file_size < 4_000


# -------------------------------------------------------------------------------------------
# files that cannot be used are refitted, with a warning naming them
# -------------------------------------------------------------------------------------------


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _empty(path):
    path.write_bytes(b"")


def _bad_json(path):
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    entries["record.json"] = b'{"format": "ppa-dask-member", '
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)


def _changed_coefficients(path):
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    data = bytearray(entries["coef_.npy"])
    data[-1] ^= 0x01  # one bit of the last coefficient
    entries["coef_.npy"] = bytes(data)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)


def _another_member(path):
    path.write_bytes((path.parent / "member_00000.npz").read_bytes())


@pytest.mark.parametrize(
    "damage, reason",
    [
        (_truncate, "truncated"),
        (_empty, "truncated"),
        (_bad_json, "truncated"),
        (_changed_coefficients, "tampered"),
        (_another_member, "mismatch"),
    ],
)
def test_a_damaged_member_file_is_refitted_with_a_warning_naming_it(tmp_path, damage, reason):
    X, y = linear_data()
    store = tmp_path / "members"
    regressor(store).fit(X, y)
    victim = store / "member_00003.npz"
    damage(victim)
    with pytest.warns(MemberFileWarning, match=rf"member_00003\.npz.*\({reason}\)") as caught:
        resumed = regressor(store).fit(X, y)
    assert len(caught) == 1
    assert resumed.n_members_loaded_ == 3
    undisturbed = regressor(None).fit(X, y)
    assert np.array_equal(resumed.predict(X), undisturbed.predict(X))
    # the refit rewrote the file: the next fit loads every member, silently
    again = regressor(store).fit(X, y)
    assert again.n_members_loaded_ == 4
    assert np.array_equal(again.predict(X), undisturbed.predict(X))


def _old_layout_member(path, estimator, spec):
    """A member file exactly as the serialiser before the shared encoder wrote it."""
    cls = type(estimator)
    params = json.loads(json.dumps(estimator.get_params(deep=False)))
    scalars, arrays = {}, {}
    for name, value in vars(estimator).items():
        if name in params:
            continue
        if isinstance(value, np.ndarray):
            arrays[name] = value
        else:
            scalars[name] = json.loads(json.dumps(value))
    header = dict(
        cls=f"{cls.__module__}.{cls.__qualname__}",
        params=params,
        scalars=scalars,
        extra=spec.to_json(),
    )
    np.savez(path, __header__=np.array(json.dumps(header)), **arrays)


@pytest.mark.parametrize("kind", ["regressor", "ppa"])
def test_an_old_layout_member_store_is_refitted_with_a_warning(tmp_path, kind):
    store = tmp_path / "members"
    if kind == "regressor":
        X, y = linear_data()

        def make(store):
            return regressor(store)

        def output(model):
            return model.predict(X)
    else:
        X, y = noisy_helix(400), None

        def make(store):
            return FeatureBaggingPPA(
                PPA(degree=(1, 2)), n_components=1, n_estimators=3, random_state=1, store=store
            )

        def output(model):
            return model.reconstruct(X)

    fresh = make(store).fit(X, y)
    for pos, name in enumerate(member_files(store)):  # the store as the old code left it
        os.remove(store / name)
        _old_layout_member(store / name, fresh.estimators_[pos], fresh.member_specs_[pos])
    with np.load(store / "member_00000.npz", allow_pickle=False) as data:
        assert "__header__" in data.files  # the old layout, readable by numpy
    with pytest.warns(MemberFileWarning) as caught:
        resumed = make(store).fit(X, y)
    named = sorted(os.path.basename(w.message.args[0].split("'")[1]) for w in caught)
    assert named == member_files(store)  # one warning per file, naming it
    assert all("(old-format)" in str(w.message) for w in caught)
    assert resumed.n_members_loaded_ == 0
    assert np.array_equal(output(resumed), output(fresh))
    assert make(store).fit(X, y).n_members_loaded_ == len(fresh.estimators_)  # rewritten


# -------------------------------------------------------------------------------------------
# resumed fits are the same fits
# -------------------------------------------------------------------------------------------


def _ppa_ensemble(store):
    return FeatureBaggingPPA(
        PPA(degree=(1, 2, 3)), n_components=1, n_estimators=3, random_state=2, store=store
    )


@pytest.mark.parametrize(
    "make, data, output",
    [
        (regressor, lambda: linear_data(), lambda m, X: m.predict(X)),
        (
            _ppa_ensemble,
            lambda: (noisy_helix(600), None),
            lambda m, X: np.asarray(m.reconstruct(X)),
        ),
        (
            _ppa_ensemble,
            lambda: (da.from_array(noisy_helix(600), chunks=250), None),
            lambda m, X: np.asarray(m.reconstruct(X)),
        ),
    ],
    ids=["linear", "ppa", "ppa-dask"],
)
def test_a_resumed_fit_is_the_same_fit(tmp_path, make, data, output):
    X, y = data()
    store = tmp_path / "members"
    first = make(store).fit(X, y)
    resumed = make(store).fit(X, y)
    assert first.n_members_loaded_ == 0 and resumed.n_members_loaded_ == len(first.estimators_)
    assert np.array_equal(np.asarray(output(resumed, X)), np.asarray(output(first, X)))
    for a, b in zip(first.estimators_, resumed.estimators_):
        assert type(a) is type(b) and a.get_params() == b.get_params()  # tuples stay tuples
        for key, value in vars(a).items():
            if isinstance(value, np.ndarray):
                assert value.dtype == vars(b)[key].dtype and np.array_equal(value, vars(b)[key])


def test_writes_are_atomic_and_leave_no_temporary(tmp_path, monkeypatch):
    X, y = linear_data()
    store = tmp_path / "members"
    regressor(store).fit(X, y)
    before = (store / "member_00001.npz").read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(np.lib.format, "write_array", full_disk)
    members = MemberStore(store, json.loads((store / "manifest.json").read_text()))
    with pytest.raises(OSError, match="No space"):
        members.save(1, LinearRegression().fit(X, y))
    assert (store / "member_00001.npz").read_bytes() == before
    assert sorted(os.listdir(store)) == ["manifest.json"] + member_files(store)


def test_an_ensemble_of_linear_members_loads_in_a_process_that_imported_only_the_store(tmp_path):
    # a fresh process: nothing but ppa_dask.store imported, as a user's script that loads a
    # saved ensemble; the library's own scikit-learn packages may be imported for it, a package
    # the file names outside them never is
    import subprocess

    from ppa_dask.ensemble import FeatureBaggingRegressor

    X, y = linear_data()
    model = FeatureBaggingRegressor(LinearRegression(), n_estimators=3, random_state=0).fit(X, y)
    path = save_model(model, tmp_path / "bagged.zarr")
    child = (
        "import sys\n"
        "from ppa_dask.store import load_model\n"
        f"model = load_model({str(path)!r})\n"
        "print(type(model).__name__, 'sklearn.tree' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["FeatureBaggingRegressor", "False"]
