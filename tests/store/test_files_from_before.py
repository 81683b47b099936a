"""Files written by ppa-dask 0.1.0 before the package was laid out by concept still serve.

``tests/data/ppa-0.1.0-model.zarr`` and ``tests/data/ppa-0.1.0-members/`` were written by the
library at commit ff9b0ea (flat modules, the member store's own serialiser), with:

    X = make_helix(2000, noise=0.05, random_state=3)
    PPA(degree=(1, 2, 3), cv=2, random_state=0).fit(X).save("ppa-0.1.0-model.zarr")
    rng = np.random.default_rng(5)
    Xr = rng.normal(size=(200, 6)); y = Xr @ np.arange(1, 7) + 0.1 * rng.normal(size=200)
    FeatureBaggingRegressor(LinearRegression(), n_estimators=4, max_features=0.5,
                            max_samples=0.8, random_state=0, store="ppa-0.1.0-members").fit(Xr, y)
"""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import paths
from sklearn.linear_model import LinearRegression

from ppa_dask import PPA, FeatureBaggingRegressor
from ppa_dask.datasets import make_helix
from ppa_dask.store import load_model, model_info

DATA = paths.DATA


def _regression_data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 6))
    return X, X @ np.arange(1, 7) + 0.1 * rng.normal(size=200)


def test_a_model_file_written_before_loads_and_equals_a_fit_made_now():
    X = make_helix(2000, noise=0.05, random_state=3)
    old = load_model(DATA / "ppa-0.1.0-model.zarr")
    assert isinstance(old, PPA) and model_info(DATA / "ppa-0.1.0-model.zarr")["estimator"] == "PPA"
    new = PPA(degree=(1, 2, 3), cv=2, random_state=0).fit(X)
    # the same seed gives the same model across the restructure, to rounding: the compiled
    # sweep's sums are reassociated to vectorise (fused.py), so their order, and the last bits,
    # follow the machine's vector instructions (on a machine with AVX-512 the coefficients
    # differed from the file's by up to 9e-16, 6e-14 relative)
    np.testing.assert_array_equal(old.degrees_, new.degrees_)
    np.testing.assert_allclose(old.coefficients_, new.coefficients_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(old.transform(X), new.transform(X), rtol=1e-12, atol=1e-13)
    R = new.transform(X[:50])
    np.testing.assert_allclose(
        old.inverse_transform(R[:, :1]), new.inverse_transform(R[:, :1]), rtol=1e-12, atol=1e-13
    )


def test_a_member_store_written_before_is_refitted_with_a_warning_to_the_same_ensemble(tmp_path):
    X, y = _regression_data()
    store = tmp_path / "members"
    shutil.copytree(DATA / "ppa-0.1.0-members", store)
    old_files = sorted(p.name for p in store.glob("member_*.npz"))
    assert len(old_files) == 4

    def ensemble(path):
        return FeatureBaggingRegressor(
            LinearRegression(),
            n_estimators=4,
            max_features=0.5,
            max_samples=0.8,
            random_state=0,
            store=path,
        )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = ensemble(store).fit(X, y)
    named = {name for name in old_files if any(name in str(w.message) for w in caught)}
    assert named == set(old_files)  # every old member file is named in a warning
    fresh = ensemble(None).fit(X, y)
    np.testing.assert_array_equal(resumed.predict(X), fresh.predict(X))
    # the refitted members were written in the current format: a second fit warns of nothing
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        ensemble(store).fit(X, y)
    assert not [w for w in again if "member_" in str(w.message)]
