"""patterns(model): a model's leading vectors as maps on the fitted layout, checked against
the vectors placed on the grid by hand (NaN over land, divided by the coslat weights)."""

import numpy as np
import pytest

from ppa_dask import PPA
from ppa_dask.datasets import make_cube, make_enso_field
from ppa_dask.store import load_model, patterns, save_model

FEATURES = ("latitude", "longitude")


def _by_hand(model, field, weights=None):
    """The leading vectors on the (latitude, longitude) grid: NaN off the ocean."""
    ocean = field.isel(time=0).notnull().values
    out = np.full((len(model.leading_vectors_),) + ocean.shape, np.nan)
    out[:, ocean] = model.leading_vectors_
    if weights is not None:
        out /= weights[:, None]
    return out


@pytest.mark.parametrize("solver", ["covariance", "gram", "krylov"])
def test_patterns_are_the_leading_vectors_on_the_grid(solver):
    field = make_enso_field(n_times=150, n_lat=8, n_lon=18)
    model = PPA(n_components=3, degree=2, solver=solver, random_state=0)
    model.fit(field, feature_dim=FEATURES)
    maps = patterns(model)
    assert maps.name == "patterns" and maps.dims == ("component",) + FEATURES
    assert maps["component"].values.tolist() == [1, 2, 3]
    assert np.array_equal(maps["latitude"].values, field["latitude"].values)
    assert np.array_equal(maps["longitude"].values, field["longitude"].values)
    assert np.array_equal(maps.values, _by_hand(model, field), equal_nan=True)
    assert "weights" not in maps.attrs and "sst_anomaly" in maps.attrs["long_name"]


def test_patterns_of_a_weighted_fit_are_in_the_input_units(tmp_path):
    field = make_enso_field(n_times=150, n_lat=8, n_lon=18)
    model = PPA(n_components=2, degree=2, random_state=0)
    model.fit(field, feature_dim=FEATURES, coslat=True)
    weights = np.sqrt(np.cos(np.deg2rad(field["latitude"].values)))
    maps = patterns(model)
    assert np.allclose(maps.values, _by_hand(model, field, weights), equal_nan=True, atol=1e-15)
    assert maps.attrs["weights"] == "sqrt(cos(latitude)) divided out"
    # the same maps from a model file
    save_model(model, tmp_path / "model.zarr")
    assert patterns(load_model(tmp_path / "model.zarr")).identical(maps)
    # a linear model's one-component reconstruction is mean + alpha * pattern, in kelvin
    linear = PPA(n_components=1, degree=1).fit(field, feature_dim=FEATURES, coslat=True)
    R = linear.transform(field).isel(time=slice(0, 3))
    rec = linear.inverse_transform(R) - linear.inverse_transform(R * 0)
    assert np.allclose(rec, R.values[:, :, None] * patterns(linear).values, equal_nan=True)


def test_patterns_along_one_feature_dimension_and_what_they_refuse():
    cube = make_cube(n_bands=6, ny=10, nx=10, random_state=0)["reflectance"]
    model = PPA(n_components=2, degree=2, random_state=0).fit(cube, feature_dim="band")
    maps = patterns(model)
    assert maps.dims == ("component", "band")
    assert np.allclose(maps["wavelength"].values, cube["wavelength"].values)
    assert np.array_equal(maps.values, model.leading_vectors_)
    assert np.array_equal(patterns(model, model.leading_vectors_[:1]).values[0], maps.values[0])
    with pytest.raises(ValueError, match="one column per feature kept at fit"):
        patterns(model, np.ones((1, 5)))
    plain = PPA(n_components=1, degree=1).fit(np.random.default_rng(0).normal(size=(50, 3)))
    with pytest.raises(ValueError, match="fitted on a plain array; .* to draw its patterns"):
        patterns(plain)
