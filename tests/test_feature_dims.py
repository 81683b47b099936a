"""Several feature dimensions: ``feature_dim=("time", "band")`` stacks the dates' bands of a
series into the features, named ``time=...|band=...``, and transform / inverse restore them."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from ppa_dask import PPA, store

TOL = 1e-10


def _series():
    rng = np.random.default_rng(0)
    t = rng.uniform(0.1, 1.0, size=(12, 15))
    days = np.array(["2020-05-10", "2020-06-08"], dtype="datetime64[ns]")
    data = np.stack(
        [
            np.stack([t, t**2, np.sin(2 * t)]) * (1 + k) + 0.01 * rng.normal(size=(3, 12, 15))
            for k in range(2)
        ]
    )
    return xr.DataArray(
        data,
        dims=("time", "band", "y", "x"),
        coords={
            "time": days,
            "band": ["B2", "B3", "B4"],
            "y": np.arange(12.0),
            "x": np.arange(15.0),
        },
    )


def test_two_feature_dims_fit_as_stacked_by_hand_and_round_trip(tmp_path):
    cube = _series()
    rows = cube.transpose("y", "x", "time", "band").values.reshape(12 * 15, 6)
    model = PPA(degree=2, random_state=0).fit(cube, feature_dim=("time", "band"))
    ref = PPA(degree=2, random_state=0).fit(rows)
    np.testing.assert_allclose(model.explained_variance_, ref.explained_variance_, rtol=TOL)
    assert model.xarray_layout_["feature_coords"]["time|band"][:2].tolist() == [
        "time=2020-05-10|band=B2",
        "time=2020-05-10|band=B3",
    ]
    comps = model.transform(cube)
    assert comps.dims == ("component", "y", "x")
    np.testing.assert_allclose(
        comps.transpose("y", "x", "component").values.reshape(180, -1),
        ref.transform(rows),
        rtol=TOL,
        atol=TOL,
    )
    back = model.inverse_transform(comps)
    assert back.dims == cube.dims
    assert back["time"].values.tolist() == cube["time"].values.tolist()
    assert back["band"].values.tolist() == ["B2", "B3", "B4"]
    np.testing.assert_allclose(back.values, cube.values, rtol=1e-8, atol=1e-8)  # all components
    store.save_model(model, str(tmp_path / "m.zarr"))
    loaded = store.load_model(str(tmp_path / "m.zarr"))
    np.testing.assert_allclose(
        loaded.inverse_transform(loaded.transform(cube)).values, cube.values, atol=1e-8
    )


def test_a_missing_feature_dim_is_named():
    with pytest.raises(ValueError, match="'season' is not a dimension"):
        PPA(degree=2).fit(_series(), feature_dim=("season", "band"))
