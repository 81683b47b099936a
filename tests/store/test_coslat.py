"""Latitude weighting (``coslat``): a fit on a (time, latitude, longitude) field with each cell
weighted by sqrt(cos(latitude)) is the fit of the hand-weighted array; the model applies the
weights on the way in and divides them out of everything in feature space on the way out, and
model files keep them."""

import numpy as np
import pytest
import xarray as xr

from ppa_dask import PPA
from ppa_dask.datasets import make_enso_field
from ppa_dask.ensemble import FeatureBaggingPPA
from ppa_dask.geometry import frenet_serret
from ppa_dask.store import load_model, save_model
from ppa_dask.store.stacker import Stacker

FEATURES = ("latitude", "longitude")


def _field(**kwargs):
    # more dates than ocean cells: the covariance path's fits are of full rank
    kwargs = {"n_times": 120, "n_lat": 8, "n_lon": 18, **kwargs}
    return make_enso_field(**kwargs)


def _weighted_rows(field):
    """The valid cells of ``field`` times sqrt(cos(latitude)), by hand, and those weights."""
    ocean = field.isel(time=0).notnull().values
    w = np.sqrt(np.cos(np.deg2rad(field["latitude"].values)))[:, None]
    w = np.broadcast_to(w, ocean.shape)[ocean]
    return field.values[:, ocean] * w, w, ocean


@pytest.mark.parametrize("solver", ["covariance", "gram", "krylov"])
def test_coslat_is_the_fit_of_the_hand_weighted_array(solver):
    field = _field()
    params = dict(n_components=2, degree=2, solver=solver, random_state=0)
    model = PPA(**params).fit(field, feature_dim=FEATURES, coslat=True)
    X, w, ocean = _weighted_rows(field)
    by_hand = PPA(**params).fit(X)
    assert model.solver_ == by_hand.solver_ == solver
    assert np.allclose(model.leading_vectors_, by_hand.leading_vectors_, atol=1e-10)
    assert np.allclose(model.mean_, by_hand.mean_, atol=1e-10)
    R = model.transform(field)
    assert np.allclose(R.transpose("time", "component").values, by_hand.transform(X), atol=1e-10)
    # reconstructions come back in kelvin: the weighted reconstruction divided by the weights
    one = model.inverse_transform(R.isel(component=slice(0, 1)))
    expected = by_hand.inverse_transform(by_hand.transform(X)[:, :1]) / w
    assert np.allclose(one.values[:, ocean], expected, atol=1e-10)
    assert bool(one.isnull().equals(field.isnull()))
    # and the weighting changes the model (a fit that ignored it would fail above)
    plain = PPA(**params).fit(field, feature_dim=FEATURES)
    assert not np.allclose(np.abs(plain.leading_vectors_[0]), np.abs(model.leading_vectors_[0]))
    assert "feature_weights" not in plain.xarray_layout_  # off by default


def test_round_trip_in_the_input_units():
    # a full model is invertible: inverse_transform(transform(x)) is x, in kelvin, whatever
    # the weights (dividing them out twice or not at all would be off by a factor per row)
    field = _field(n_times=120, n_lat=4, n_lon=6, land=False)
    model = PPA(degree=2, random_state=0).fit(field, feature_dim=FEATURES, coslat=True)
    back = model.inverse_transform(model.transform(field))
    assert back.dims == field.dims
    assert np.allclose(back.values, field.values, atol=1e-9)
    # a Dask-backed field is transformed and inverted the same, lazily
    lazy = field.chunk({"time": 50})
    R = model.transform(lazy)
    assert R.chunks is not None
    assert np.allclose(model.inverse_transform(R).values, field.values, atol=1e-9)


def test_a_dask_backed_fit_weights_the_same():
    field = _field()
    params = dict(n_components=2, degree=2, random_state=0)
    eager = PPA(**params).fit(field, feature_dim=FEATURES, coslat=True)
    lazy = PPA(**params).fit(field.chunk({"time": 30}), feature_dim=FEATURES, coslat=True)
    assert np.allclose(eager.leading_vectors_, lazy.leading_vectors_, atol=1e-10)


def test_model_files_keep_the_weights(tmp_path):
    field = _field()
    model = PPA(n_components=2, degree=2, random_state=0)
    model.fit(field, feature_dim=FEATURES, coslat=True)
    save_model(model, tmp_path / "model.zarr")
    loaded = load_model(tmp_path / "model.zarr")
    assert loaded.xarray_layout_["coslat"] == "latitude"
    assert np.array_equal(
        loaded.xarray_layout_["feature_weights"], model.xarray_layout_["feature_weights"]
    )
    R = loaded.transform(field)
    assert np.allclose(R.values, model.transform(field).values, atol=1e-12)
    assert np.allclose(
        loaded.inverse_transform(R).values,
        model.inverse_transform(R).values,
        atol=1e-12,
        equal_nan=True,
    )


def test_the_latitude_found_by_name_or_standard_name_or_given():
    field = _field(n_times=20, n_lat=6, n_lon=12)
    expected = np.sqrt(np.cos(np.deg2rad(np.repeat(field["latitude"].values, 12))))
    short = field.rename(latitude="lat", longitude="lon")
    odd = field.rename(latitude="phi")  # keeps standard_name "latitude"
    unnamed = odd.copy()
    unnamed["phi"].attrs = {}
    for X, dims, coslat in [
        (field, FEATURES, True),
        (short, ("lat", "lon"), True),
        (odd, ("phi", "longitude"), True),
        (unnamed, ("phi", "longitude"), "phi"),
    ]:
        stacker = Stacker(feature_dim=dims, coslat=coslat)
        rows = stacker.fit_stack(X)
        weights = stacker.layout["feature_weights"]
        assert np.allclose(weights, expected)
        kept = stacker.layout["kept"]
        assert np.allclose(rows, X.values.reshape(20, -1)[:, kept] * weights[kept])
    with pytest.raises(ValueError, match="found no latitude coordinate"):
        Stacker(feature_dim=("phi", "longitude"), coslat=True).fit_stack(unnamed)


def test_a_latitude_along_a_single_feature_dimension():
    # a field already stacked into cells: the latitude is a coordinate along "cell"
    field = _field(n_times=100, n_lat=6, n_lon=12, land=False)
    cells = field.stack(cell=FEATURES).reset_index("cell")
    model = PPA(n_components=2, degree=2, random_state=0).fit(
        cells, feature_dim="cell", coslat=True
    )
    grid = PPA(n_components=2, degree=2, random_state=0).fit(
        field, feature_dim=FEATURES, coslat=True
    )
    assert np.allclose(model.leading_vectors_, grid.leading_vectors_, atol=1e-10)


def test_what_coslat_refuses():
    field = _field(n_times=20, n_lat=6, n_lon=12)
    with pytest.raises(ValueError, match="apply to xarray input only"):
        PPA(n_components=1).fit(np.ones((5, 3)), coslat=True)
    with pytest.raises(ValueError, match=r"runs along \('latitude',\), not along the feature"):
        PPA(n_components=1).fit(field.fillna(0), feature_dim="time", coslat=True)
    with pytest.raises(ValueError, match="features of a Dataset are its variables"):
        ds = xr.Dataset({"a": field.fillna(0), "b": field.fillna(1)})
        PPA(n_components=1).fit(ds, coslat=True)
    with pytest.raises(ValueError, match="is not a coordinate of X"):
        PPA(n_components=1).fit(field, feature_dim=FEATURES, coslat="lat")
    radians = field.assign_coords(latitude=field["latitude"] * 3)
    with pytest.raises(ValueError, match=r"latitudes in degrees within \[-90, 90\]"):
        PPA(n_components=1).fit(radians, feature_dim=FEATURES, coslat=True)
    with pytest.raises(TypeError, match="coslat must be a bool or a coordinate name"):
        PPA(n_components=1).fit(field, feature_dim=FEATURES, coslat=1)
    # a layout whose weights do not fit its features is refused when rebuilt
    stacker = Stacker(feature_dim=FEATURES, coslat=True)
    stacker.fit_stack(field)
    layout = stacker.layout
    layout["feature_weights"] = layout["feature_weights"][:-1]
    with pytest.raises(ValueError, match="feature_weights must be"):
        Stacker.from_layout(layout)


def test_jacobian_and_metric_in_the_input_units():
    # the model saw w * x: d R / dx = (d R / d(w x)) w, and the metric pulls back as W M W
    field = _field(n_times=120, n_lat=3, n_lon=4, land=False)
    model = PPA(degree=2, random_state=0).fit(field, feature_dim=FEATURES, coslat=True)
    X, w, _ = _weighted_rows(field)
    by_hand = PPA(degree=2, random_state=0).fit(X)
    J = model.jacobian(field.isel(time=slice(0, 5)))
    # (per-sample matrices keep the merged feature dimension "latitude|longitude")
    J = J.transpose("time", "component", "latitude|longitude").values
    assert np.allclose(J, by_hand.jacobian(X[:5]) * w, atol=1e-10)
    M = model.metric(field.isel(time=slice(0, 5)))
    M = M.transpose("time", "latitude|longitude", "latitude|longitude_2")
    assert np.allclose(M.values, by_hand.metric(X[:5]) * w[:, None] * w, atol=1e-8)
    with pytest.raises(ValueError, match="frenet_serret of a model fitted with coslat"):
        frenet_serret(model, field.isel(time=slice(0, 2)))


def test_a_bagged_ppa_reconstructs_in_the_input_units():
    # the option comes with the seam, so every estimator fitted on xarray has it
    field = _field(n_times=150, n_lat=6, n_lon=12, land=False)
    params = dict(n_estimators=4, n_components=2, random_state=0)
    model = FeatureBaggingPPA(**params).fit(field, feature_dim=FEATURES, coslat=True)
    X, w, _ = _weighted_rows(field)
    by_hand = FeatureBaggingPPA(**params).fit(X)
    rec = model.reconstruct(field)
    assert rec.dims == field.dims
    assert np.allclose(rec.values.reshape(150, -1), by_hand.reconstruct(X) / w, atol=1e-10)
