"""One rule for missing values, whether a file stores them as its no-data value or as NaN.

A feature missing in every sample (a month stored entirely as the declared fill) is dropped
as the same month stored as NaN is, instead of making every sample missing; and a sample
missing on some dates only (NaN there) is the fit's ``nan_policy``: refused under ``"raise"``,
left out with a warning under ``"drop_samples"``, never dropped silently.
"""

from __future__ import annotations

import warnings

import dask
import numpy as np
import pytest
import xarray as xr
from rasters import write_tif

from ppa_dask import PPA, store
from ppa_dask.app.cli import main

TOL = 1e-10
FILL = np.float32(-999.0)
NY, NX = 20, 30
LAND = 3  # the first rows: fill in every month


@pytest.fixture(autouse=True)
def _threads_scheduler():
    with dask.config.set(scheduler="threads"):
        yield


def _months():
    t = np.random.default_rng(0).uniform(0.1, 1.0, size=(NY, NX))
    months = np.stack([t, t**2, np.sin(3 * t), t**3, np.cos(t)]).astype(np.float32)
    months[:, :LAND, :] = FILL
    return months


def _write(path, values):
    cube = xr.DataArray(values, dims=("time", "y", "x"), name="pr", attrs={"_FillValue": FILL})
    cube.to_netcdf(path, engine="scipy")  # netCDF-3, the tag a CF _FillValue
    return str(path)


def _fit(cube, **options):
    return PPA(degree=2, random_state=0).fit(cube, feature_dim="time", **options)


def test_a_month_entirely_fill_is_dropped_as_a_month_entirely_nan(tmp_path):
    as_fill, as_nan = _months(), _months()
    as_fill[2] = FILL
    as_nan[2] = np.nan
    by_fill = _fit(store.open_cube(_write(tmp_path / "fill.nc", as_fill), feature_dim="time"))
    by_nan = _fit(store.open_cube(_write(tmp_path / "nan.nc", as_nan), feature_dim="time"))
    for model in (by_fill, by_nan):
        assert model.xarray_layout_["kept"].tolist() == [True, True, False, True, True]
        summary = model.xarray_layout_["nan_summary"]
        assert summary["n_masked"] == LAND * NX and summary["dropped_features"] == [2]
    # the fit of the sea pixels' other four months, stacked by hand
    rows = np.delete(_months(), 2, axis=0).reshape(4, -1).T.astype(np.float64)
    rows = rows[LAND * NX :]
    ref = PPA(degree=2, random_state=0).fit(rows)
    total = ref.explained_variance_.sum()
    for model in (by_fill, by_nan):
        np.testing.assert_allclose(
            model.explained_variance_, ref.explained_variance_, rtol=TOL, atol=TOL * total
        )
    # transform: the same month left out of the rule, the land NaN, the sea transformed
    comps = by_fill.transform(store.open_cube(tmp_path / "fill.nc", feature_dim="time")).values
    assert np.isnan(comps[:, :LAND]).all() and np.isfinite(comps[:, LAND:]).all()
    np.testing.assert_allclose(
        comps[:, LAND:].reshape(comps.shape[0], -1).T, ref.transform(rows), rtol=0, atol=1e-8
    )


def test_a_fill_in_some_months_of_a_pixel_still_makes_it_missing_as_a_whole(tmp_path):
    months = _months()
    months[1, 10, :5] = FILL  # five sea pixels missing in one month: the no-data rule
    model = _fit(store.open_cube(_write(tmp_path / "m.nc", months), feature_dim="time"))
    summary = model.xarray_layout_["nan_summary"]
    assert summary["n_masked"] == LAND * NX + 5 and summary["dropped_features"] == []


@pytest.fixture
def dated_series(tmp_path):
    """Two dated float32 GeoTIFFs of 3 bands; 40 pixels NaN in every band of the second date
    (a cloud masked as NaN), none missing on the first."""
    t = np.random.default_rng(1).uniform(0.1, 1.0, size=(NY, NX))
    first = np.stack([t, t**2, np.sin(2 * t)]).astype(np.float32)
    u = np.random.default_rng(2).uniform(0.1, 1.0, size=(NY, NX))
    second = np.stack([u, np.cos(2 * u), u**3]).astype(np.float32)
    second[:, 5, :] = np.nan
    second[:, 6, :10] = np.nan
    write_tif(tmp_path / "S_20200510.tif", first)
    write_tif(tmp_path / "S_20200609.tif", second)
    return str(tmp_path / "S_*.tif"), first, second


def test_pixels_missing_on_some_dates_are_the_nan_policys(dated_series):
    pattern, first, second = dated_series
    src = store.open_source(pattern, feature_dim="time,band")
    with pytest.raises(
        ValueError, match=r"in 40 sample\(s\) .*time=2020-06-09.*nan_policy='drop_samples'"
    ):
        PPA(degree=2, random_state=0).fit(src.data, feature_dim=src.feature_dim)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PPA(degree=2, random_state=0).fit(
            src.data, feature_dim=src.feature_dim, nan_policy="drop_samples"
        )
    assert any("left out of the fit" in str(w.message) for w in caught)
    summary = model.xarray_layout_["nan_summary"]
    assert summary["n_isolated_samples"] == 40 and summary["n_fitted"] == NY * NX - 40
    rows = np.concatenate([first.reshape(3, -1).T, second.reshape(3, -1).T], axis=1)
    rows = rows[np.isfinite(rows).all(axis=1)].astype(np.float64)
    ref = PPA(degree=2, random_state=0).fit(rows)
    total = ref.explained_variance_.sum()
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=TOL, atol=TOL * total
    )


def test_the_command_line_refuses_them_or_says_so_in_one_line(dated_series, tmp_path, capsys):
    pattern, _, _ = dated_series
    fit = ["fit", pattern, str(tmp_path / "m.zarr"), "--feature-dim", "time,band"]
    threads = ["--degree", "2", "--scheduler", "threads"]
    assert main(fit + threads) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ppa-dask: error: 120 isolated NaN value(s) in 40")
    assert "--nan-policy drop_samples" in err[0]
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(fit + threads + ["--nan-policy", "drop_samples"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("ppa-dask: warning: 120 isolated NaN value(s) in 40 sample(s)")
    assert err[0].endswith("left out of the fit (nan_policy='drop_samples').")
