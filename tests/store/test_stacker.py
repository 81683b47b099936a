"""The xarray Stacker on its own, without any estimator: stacking drops exactly the NaN samples
and dead features, unstacking restores every coordinate and NaN position, a layout read back
from JSON works like the fitted one, and bad input is named."""

import json

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

from ppa_dask.store.stacker import COMPONENT_DIM, Stacker


def _no_compute(*args, **kwargs):
    raise AssertionError("something was computed")


def _cube(chunks=None):
    """(y, band, x) with the features in the middle, non-dimension and scalar coordinates,
    two fully masked pixels and one dead band."""
    rng = np.random.default_rng(0)
    ny, nb, nx = 4, 5, 6
    values = rng.normal(size=(ny, nb, nx))
    values[1, :, 2] = np.nan  # masked pixels
    values[3, :, 0] = np.nan
    values[:, 4, :] = np.nan  # a dead band
    data = values if chunks is None else da.from_array(values, chunks=chunks)
    return xr.DataArray(
        data,
        dims=("y", "band", "x"),
        coords={
            "y": [10.0, 20.0, 30.0, 40.0],
            "band": [1, 2, 3, 4, 5],
            "x": np.arange(nx) * 30.0,
            "wavelength": ("band", [450.0, 550.0, 650.0, 750.0, 850.0]),
            "lat": (("y", "x"), rng.normal(size=(ny, nx))),
            "sensor": "S2",
        },
        name="reflectance",
    )


def _rows(a):
    """Independent stacking: pixels in C order of (y, x), bands as columns."""
    v = a.transpose("y", "x", "band").values
    return v.reshape(-1, v.shape[-1])


def _json_round_trip(layout):
    return json.loads(json.dumps(layout, default=lambda a: a.tolist()))


# -------------------------------------------------------------------------------------------
# stacking and unstacking
# -------------------------------------------------------------------------------------------


def test_fit_stack_keeps_the_valid_samples_and_live_features_in_c_order():
    cube = _cube()
    stacker = Stacker(feature_dim="band")
    rows = stacker.fit_stack(cube)
    X = _rows(cube)[:, :4]
    valid = ~np.isnan(X).any(axis=1)
    np.testing.assert_array_equal(rows, X[valid])
    layout = stacker.layout
    assert layout["kept"].tolist() == [True, True, True, True, False]
    assert layout["nan_summary"] == {
        "n_samples": 24,
        "n_masked": 2,
        "n_isolated_samples": 0,
        "n_isolated_values": 0,
        "dropped_features": [4],
        "n_fitted": 22,
    }
    assert layout["name"] == "reflectance" and layout["variables"] is None
    assert stacker.n_kept == 4


def test_round_trip_restores_coordinates_and_nan_positions_exactly():
    cube = _cube()
    stacker = Stacker(feature_dim="band")
    stacker.fit_stack(cube)
    rows, samples = stacker.stack(cube)
    assert rows.shape == (24, 4) and samples.dims == ("y", "x") and samples.position == 1
    back = stacker.unstack_features(rows, samples)
    assert back.identical(cube)  # dims in the input's order, every coordinate, name, NaNs

    comps = stacker.unstack_components(rows[:, :3], samples)
    assert comps.dims == ("y", COMPONENT_DIM, "x") and comps.name == "components"
    assert comps[COMPONENT_DIM].values.tolist() == [1, 2, 3]
    for c in ("y", "x", "lat", "sensor"):
        assert comps[c].identical(cube[c]), c
    assert "wavelength" not in comps.coords
    masked = cube.isnull().all("band").values
    assert np.isnan(comps.transpose("y", "x", COMPONENT_DIM).values[masked]).all()

    # coefficients back to features: the component dimension's place becomes the band's
    R, r_samples = stacker.stack_components(comps.transpose(COMPONENT_DIM, "x", "y"))
    assert r_samples.dims == ("x", "y") and r_samples.position == 0
    padded = np.concatenate([R, np.zeros((R.shape[0], 1))], axis=1)
    inv = stacker.unstack_features(padded, r_samples)
    assert inv.dims == ("band", "x", "y") and inv["wavelength"].identical(cube["wavelength"])
    assert bool(inv.isel(band=4).isnull().all())


def test_dask_cube_stays_lazy_with_known_chunks():
    cube = _cube(chunks=(1, 5, 6))  # one y row per chunk: the masked pixels sit in two of them
    stacker = Stacker(feature_dim="band")
    with dask.config.set(scheduler="synchronous"):
        rows = stacker.fit_stack(cube)
    assert isinstance(rows, da.Array) and sum(rows.chunks[0]) == 22
    assert all(0 < c < np.inf for c in rows.chunks[0])  # known and non-empty, no NaN sizes
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_array_equal(rows.compute(), stacker.fit_stack(cube.compute()))
    with dask.config.set(scheduler=_no_compute):
        all_rows, samples = stacker.stack(cube)
        back = stacker.unstack_features(all_rows, samples)
        comps = stacker.unstack_components(all_rows[:, :2], samples)
    assert all_rows.chunks == ((6, 6, 6, 6), (4,))
    assert isinstance(back.data, da.Array) and isinstance(comps.data, da.Array)
    with dask.config.set(scheduler="synchronous"):
        assert back.compute().identical(cube.compute())


def test_dataset_round_trip_by_variable_name():
    cube = _cube().isel(band=slice(0, 3)).drop_vars("wavelength")
    ds = xr.Dataset({f"b{int(b)}": cube.sel(band=b, drop=True) for b in cube["band"].values})
    stacker = Stacker()
    rows = stacker.fit_stack(ds)
    X = _rows(cube)
    np.testing.assert_array_equal(rows, X[~np.isnan(X).any(axis=1)])
    assert stacker.layout["kind"] == "Dataset" and stacker.layout["variables"] == [
        "b1",
        "b2",
        "b3",
    ]
    shuffled = ds[["b3", "b1", "b2"]]
    all_rows, samples = stacker.stack(shuffled)
    np.testing.assert_array_equal(all_rows, X)
    back = stacker.unstack_features(all_rows, samples)
    assert isinstance(back, xr.Dataset) and list(back.data_vars) == ["b1", "b2", "b3"]
    for name in ds.data_vars:
        assert back[name].identical(ds[name]), name
    comps = stacker.unstack_components(all_rows[:, :2], samples)
    assert comps.dims == (COMPONENT_DIM, "y", "x")


def test_a_layout_rebuilt_from_json_checks_and_unstacks_the_same():
    cube = _cube()
    fitted = Stacker(feature_dim="band")
    fitted.fit_stack(cube)
    rebuilt = Stacker.from_layout(_json_round_trip(fitted.layout))
    assert rebuilt.feature_dim == "band" and rebuilt.n_kept == 4
    assert rebuilt.layout["kept"].dtype == bool
    np.testing.assert_array_equal(
        rebuilt.layout["feature_coords"]["wavelength"], cube["wavelength"].values
    )
    rows, samples = rebuilt.stack(cube)
    np.testing.assert_array_equal(rows, fitted.stack(cube)[0])
    assert rebuilt.unstack_features(rows, samples).identical(
        fitted.unstack_features(rows, samples)
    )
    assert rebuilt.unstack_components(rows, samples).identical(
        fitted.unstack_components(rows, samples)
    )
    with pytest.raises(ValueError, match="'band' coordinate of X differs"):
        rebuilt.stack(cube.assign_coords(band=cube["band"] + 1))

    ds = xr.Dataset({"a": cube.isel(band=0, drop=True), "b": cube.isel(band=1, drop=True)})
    ds_fitted = Stacker()
    ds_fitted.fit_stack(ds)
    ds_rebuilt = Stacker.from_layout(_json_round_trip(ds_fitted.layout))
    assert ds_rebuilt.feature_dim is None
    rows, samples = ds_rebuilt.stack(ds)
    assert ds_rebuilt.unstack_features(rows, samples).identical(ds)


# -------------------------------------------------------------------------------------------
# bad input
# -------------------------------------------------------------------------------------------


def test_missing_or_unknown_feature_dim_is_named():
    cube = _cube()
    with pytest.raises(ValueError, match="feature_dim is required for a DataArray"):
        Stacker().fit_stack(cube)
    with pytest.raises(ValueError, match="'wavelength' is not a dimension of X"):
        Stacker(feature_dim="wavelength").fit_stack(cube)
    with pytest.raises(ValueError, match="nan_policy must be one of"):
        Stacker(feature_dim="band", nan_policy="fill")
    with pytest.raises(TypeError, match="must be an xarray DataArray or Dataset"):
        Stacker(feature_dim="band").fit_stack(cube.values)
    with pytest.raises(ValueError, match="has a 'component' dimension"):
        Stacker(feature_dim="band").fit_stack(cube.rename(y=COMPONENT_DIM))


def test_new_input_is_checked_against_the_layout():
    cube = _cube()
    stacker = Stacker(feature_dim="band")
    with pytest.raises(ValueError, match="Stacker is not fitted"):
        stacker.stack(cube)
    stacker.fit_stack(cube)
    with pytest.raises(ValueError, match="'band' coordinate of X differs"):
        stacker.stack(cube.assign_coords(band=cube["band"] * 10))
    with pytest.raises(ValueError, match="has 4 entries along 'band'; the model was fitted on 5"):
        stacker.stack(cube.isel(band=slice(0, 4)))
    with pytest.raises(TypeError, match="fitted on a DataArray"):
        stacker.stack(cube.to_dataset(name="r"))
    rows, samples = stacker.stack(cube)
    comps = stacker.unstack_components(rows, samples)
    with pytest.raises(ValueError, match="leading components 1..2 in order"):
        stacker.stack_components(comps.isel(component=[0, 2]))
    with pytest.raises(ValueError, match="no 'component' dimension"):
        stacker.stack_components(cube)
    with pytest.raises(ValueError, match="one column per kept feature \\(4\\)"):
        stacker.unstack_features(rows[:, :3], samples)
    with pytest.raises(ValueError, match="expected a 2-D array of 24 rows"):
        stacker.unstack_components(rows[:10], samples)


def test_partial_nan_samples_raise_or_drop_with_the_report():
    cube = _cube().copy()
    cube[0, 1, 3] = np.nan  # y=10, x=90: an isolated NaN in band 2
    with pytest.raises(ValueError) as info:
        Stacker(feature_dim="band").fit_stack(cube)
    message = str(info.value)
    assert "1 isolated NaN value(s) in 1 sample(s)" in message
    assert "band 2 (1)" in message and "(y=10.0, x=90.0)" in message
    assert "nan_policy='drop_samples'" in message

    stacker = Stacker(feature_dim="band", nan_policy="drop_samples")
    with pytest.warns(UserWarning, match="1 isolated NaN value"):
        rows = stacker.fit_stack(cube)
    X = _rows(cube)[:, :4]
    np.testing.assert_array_equal(rows, X[~np.isnan(X).any(axis=1)])
    assert stacker.layout["nan_summary"]["n_isolated_samples"] == 1
    assert stacker.layout["nan_summary"]["n_fitted"] == 21


def test_a_malformed_layout_is_named():
    stacker = Stacker(feature_dim="band")
    stacker.fit_stack(_cube())
    layout = stacker.layout
    with pytest.raises(ValueError, match="lacks the key\\(s\\) \\['kept'\\]"):
        Stacker.from_layout({k: v for k, v in layout.items() if k != "kept"})
    with pytest.raises(ValueError, match="kept must be 5 booleans"):
        Stacker.from_layout({**layout, "kept": [True, False]})
    with pytest.raises(ValueError, match="kind must be one of"):
        Stacker.from_layout({**layout, "kind": "Series"})
    with pytest.raises(ValueError, match="feature coordinate 'wavelength' has shape \\(2,\\)"):
        Stacker.from_layout({**layout, "feature_coords": {"wavelength": [1.0, 2.0]}})
    with pytest.raises(ValueError, match="must name its 5 variables"):
        Stacker.from_layout({**layout, "kind": "Dataset"})
    with pytest.raises(TypeError, match="an xarray layout is a dict"):
        Stacker.from_layout([("kind", "DataArray")])
