"""No-data from every place users declare it, and the fills nobody declares.

An int16 scene bordered with -9999 (a third of its pixels, in every band, no tag) is warned
about as 0 and 65535 were; a -9999 inside the data's range is data and is not; a DataArray's
own ``_FillValue`` (rioxarray's attribute when it does not mask) or ``nodatavals`` is applied
as a file's tag is: the fit equals the in-memory fit of the valid pixels stacked by hand.
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
from ppa_dask.utils.warnings import NoDataWarning

TOL = 1e-10
NY, NX = 48, 48
BORDER = 16  # columns of -9999 on the left: a third of the pixels


@pytest.fixture(autouse=True)
def _threads_scheduler():
    with dask.config.set(scheduler="threads"):
        yield


def _int16_bands(seed=0, low=100.0, high=3000.0):
    """Three int16 bands on a curve, values in [low, high]."""
    t = np.random.default_rng(seed).uniform(0.1, 1.0, size=(NY, NX))
    bands = np.stack([t, t**2, np.sin(2 * t)])
    return np.round(low + (high - low) * bands).astype(np.int16)


def _bordered(bands, value=-9999):
    out = bands.copy()
    out[:, :, :BORDER] = value
    return out


def _fit(cube):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PPA(degree=2, random_state=0).fit(cube, feature_dim="band")
    return model, [str(w.message) for w in caught if issubclass(w.category, NoDataWarning)]


def _valid_rows(bands, value):
    rows = bands.reshape(bands.shape[0], -1).T.astype(np.float64)
    return rows[~(rows == value).any(axis=1)]


def _assert_fit_of(model, rows):
    ref = PPA(degree=2, random_state=0).fit(rows)
    total = ref.explained_variance_.sum()
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=TOL, atol=TOL * total
    )


def test_an_int16_scene_bordered_with_9999_warns_and_nodata_fixes_it(tmp_path, capsys):
    bands = _bordered(_int16_bands())
    path = write_tif(tmp_path / "scene.tif", bands)
    model, caught = _fit(store.open_cube(path))
    assert len(caught) == 1, caught
    assert caught[0].startswith("-9999 fills 33.3% of the samples in every band")
    assert "--nodata -9999" in caught[0]
    fitted_as_data = model.explained_variance_[0]
    model, caught = _fit(store.open_cube(path, nodata=-9999))
    assert caught == []
    _assert_fit_of(model, _valid_rows(bands, -9999))
    assert model.explained_variance_[0] < fitted_as_data / 20  # the fill dominated (56x)
    # the command line says it in one line
    code = main(["fit", path, str(tmp_path / "m.zarr"), "--degree", "2", "--scheduler", "threads"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 0
    assert [line for line in err if "warning" in line] == [
        "ppa-dask: warning: " + " ".join(caught_line.split())
        for caught_line in _fit(store.open_cube(path))[1]
    ]


def test_a_common_sentinel_inside_the_datas_range_is_data(tmp_path):
    # -9999 in a third of the pixels of every band, but the bands reach -20000: not a fill
    bands = _bordered(_int16_bands(low=-20000.0, high=20000.0))
    assert bands.min() < -9999 < bands.max()
    path = write_tif(tmp_path / "anomalies.tif", bands)
    _, caught = _fit(store.open_cube(path))
    assert caught == []


def test_a_float32_netcdf_with_undeclared_1e20_warns(tmp_path):
    bands = _int16_bands().astype(np.float32)
    bands[:, :4, :] = np.float32(1e20)  # CMIP's missing value, 8.3 % of the pixels
    path = str(tmp_path / "cmip.nc")
    cube = xr.DataArray(bands, dims=("band", "y", "x"), name="tas")
    cube.to_netcdf(path, engine="scipy", encoding={"tas": {"_FillValue": None}})
    _, caught = _fit(store.open_cube(path, feature_dim="band"))
    assert len(caught) == 1 and caught[0].startswith("1e+20 fills 8.3% of the samples")


@pytest.mark.parametrize("attr", ["_FillValue", "missing_value", "nodatavals"])
def test_a_dataarrays_own_fill_attribute_is_applied(attr):
    bands = _bordered(_int16_bands())
    value = (-9999,) * 3 if attr == "nodatavals" else np.int16(-9999)
    cube = xr.DataArray(bands, dims=("band", "y", "x"), attrs={attr: value, "units": "DN"})
    model, caught = _fit(cube)
    assert caught == []
    _assert_fit_of(model, _valid_rows(bands, -9999))
    assert model.xarray_layout_["nodata"] == -9999.0
    comps = model.transform(cube).values
    assert np.isnan(comps[:, :, :BORDER]).all()
    assert np.isfinite(comps[:, :, BORDER:]).all()
    assert cube.attrs[attr] is value  # the caller's array is left as it was


def test_rioxarrays_fillvalue_is_the_no_data_of_a_fit(tmp_path):
    import rioxarray

    bands = _bordered(_int16_bands())
    path = write_tif(tmp_path / "tagged.tif", bands, nodata=-9999)
    cube = rioxarray.open_rasterio(path)  # not masked: the tag rides along as _FillValue
    assert cube.attrs["_FillValue"] == -9999
    model, caught = _fit(cube)
    assert caught == []
    _assert_fit_of(model, _valid_rows(bands, -9999))


def test_nodatavals_that_differ_between_bands_are_refused():
    cube = xr.DataArray(
        _int16_bands(), dims=("band", "y", "x"), name="refl", attrs={"nodatavals": (0, -9999, 0)}
    )
    with pytest.raises(ValueError, match=r"'refl' declares no-data values .* \(-9999, 0\)"):
        PPA(degree=2).fit(cube, feature_dim="band")
