"""The xarray seam (ppa_dask.store.seam) around an estimator that is not the package's.

An estimator written for arrays only, decorated, must behave on cubes as the stacker used by
hand does: fitted on the valid samples, results with the input's layout, NaN where a sample had
a NaN or a feature was dropped, lazy for Dask-backed cubes, and the layout kept or dropped as a
fit on arrays or cubes says.
"""

import dask
import numpy as np
import pytest
import xarray as xr
from sklearn.base import BaseEstimator

from ppa_dask.store.seam import labelled, labelled_fit
from ppa_dask.store.stacker import Stacker


def _per_sample_norm(rows):
    values = rows.map(())
    return rows.per_sample(values, (), {}, "norm")


class Standardise(BaseEstimator):
    """Arrays only: centre and scale each column; one norm per sample."""

    @labelled_fit
    def fit(self, X, y=None):
        X = np.asarray(X, dtype=np.float64)
        if not np.isfinite(X).all():
            raise ValueError("Standardise needs finite X")
        self.mean_, self.scale_ = X.mean(axis=0), X.std(axis=0)
        return self

    @labelled(lambda rows: rows.features(rows.map((rows.n_kept,)), keep_attrs=True))
    def transform(self, X):
        return (np.asarray(X) - self.mean_) / self.scale_

    @labelled(_per_sample_norm, use="measure xarray samples")
    def norm(self, X):
        return np.linalg.norm(self.transform(X), axis=1)


def _cube():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(4, 6, 5)) * [[[1.0]], [[2.0]], [[3.0]], [[4.0]]]
    values[:, 1, 2] = np.nan  # a masked pixel
    values[3] = np.nan  # a band empty everywhere: dropped
    return xr.DataArray(
        values,
        dims=("band", "y", "x"),
        coords={"band": [450, 550, 650, 750], "y": np.arange(6.0), "x": np.arange(5.0)},
        attrs={"units": "reflectance"},
    )


def test_a_decorated_estimator_on_a_cube_is_the_stacker_by_hand():
    cube = _cube()
    model = Standardise().fit(cube, feature_dim="band")
    stacker = Stacker(feature_dim="band")
    rows_fit = stacker.fit_stack(cube)
    by_hand = Standardise().fit(rows_fit)
    assert np.array_equal(model.mean_, by_hand.mean_)
    assert model.xarray_layout_["kept"].tolist() == [True, True, True, False]

    out = model.transform(cube)
    rows, samples = stacker.stack(cube)
    valid = ~np.isnan(rows).any(axis=1)
    expected = np.full(rows.shape, np.nan)
    expected[valid] = by_hand.transform(rows[valid])
    assert out.dims == cube.dims and out.attrs == cube.attrs
    assert out["band"].values.tolist() == [450, 550, 650, 750]
    got = out.transpose("y", "x", "band").values.reshape(-1, 4)
    assert np.array_equal(got[:, :3], expected, equal_nan=True)
    assert np.isnan(got[:, 3]).all() and np.isnan(got[7]).all()  # dropped band, masked pixel

    norm = model.norm(cube)
    assert norm.dims == ("y", "x") and norm.name == "norm" and norm.attrs == cube.attrs
    flat = norm.values.reshape(-1)
    assert np.allclose(flat[valid], np.linalg.norm(expected[valid], axis=1), rtol=1e-14)
    assert np.isnan(flat[~valid]).all()


def test_a_dask_backed_cube_stays_lazy_through_the_seam():
    cube = _cube()
    model = Standardise().fit(cube, feature_dim="band")
    lazy = cube.chunk({"y": 2})

    def refuse(*args, **kwargs):
        raise AssertionError("computed before .compute()")

    with dask.config.set(scheduler=refuse):
        out = model.transform(lazy)
        norm = model.norm(lazy)
    assert out.chunks is not None and norm.chunks is not None
    assert np.array_equal(out.values, model.transform(cube).values, equal_nan=True)
    assert np.array_equal(norm.values, model.norm(cube).values, equal_nan=True)


def test_the_layout_follows_the_last_fit_and_the_options_are_for_cubes():
    cube = _cube()
    model = Standardise().fit(cube, feature_dim="band")
    rows = Stacker(feature_dim="band").fit_stack(cube)
    with pytest.raises(ValueError, match="needs finite X"):
        model.fit(np.full((3, 3), np.nan))
    assert model.xarray_layout_ is not None  # a failing fit leaves the fitted model whole
    model.fit(rows)
    assert not hasattr(model, "xarray_layout_")
    with pytest.raises(ValueError, match="^this Standardise was fitted on a plain array; fit it "):
        model.norm(cube)
    with pytest.raises(ValueError, match="to measure xarray samples$"):
        model.norm(cube)
    with pytest.raises(ValueError, match="apply to xarray input only"):
        model.fit(rows, feature_dim="band")
    # the cube options reach the stacker
    with pytest.raises(ValueError, match="nan_policy must be one of"):
        Standardise().fit(cube, feature_dim="band", nan_policy="ignore")
    partial = cube.copy()
    partial[0, 0, 0] = np.nan  # NaN in some features of a sample
    with pytest.raises(ValueError, match=r"1 isolated NaN value\(s\) in 1 sample\(s\)"):
        Standardise().fit(partial, feature_dim="band")
    with pytest.warns(UserWarning, match="left out of the fit") as record:
        fitted = Standardise().fit(partial, feature_dim="band", nan_policy="drop_samples")
    assert record[0].filename == __file__  # the warning points at the user's call
    assert fitted.xarray_layout_["nan_summary"]["n_isolated_samples"] == 1
