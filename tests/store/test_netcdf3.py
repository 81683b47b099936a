"""netCDF-3 files, the CF classic format most archives still serve, beside netCDF-4.

The files are written with xarray's scipy engine (classic and 64-bit offset), as the archives'
tools write them; each is opened, fitted through the library and the CLI, and compared with an
in-memory fit of the same values.
"""

from __future__ import annotations

import pathlib

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

from ppa_dask import PPA, store
from ppa_dask.app.cli import main
from ppa_dask.store.sources import netcdf_engine

THREADS = ["--scheduler", "threads"]
TOL = 1e-10
NETCDF3 = ["NETCDF3_CLASSIC", "NETCDF3_64BIT"]


@pytest.fixture(autouse=True)
def _threads_scheduler():
    with dask.config.set(scheduler="threads"):
        yield


def _refl(seed=0):
    t = np.random.default_rng(seed).uniform(0.1, 1.0, size=(30, 40))
    values = np.stack([t, t**2, np.sin(3 * t), t**3])
    return xr.DataArray(
        values,
        dims=("band", "y", "x"),
        coords={"band": [1, 2, 3, 4], "y": np.arange(30.0), "x": np.arange(40.0)},
        name="refl",
        attrs={"units": "1", "long_name": "reflectance"},
    )


def _write(path, fmt, seed=0):
    refl = _refl(seed)
    ds = xr.Dataset({"refl": refl, "mask": refl.isel(band=0) > 0.5}, attrs={"title": "classic"})
    ds["mask"] = ds["mask"].astype("int8")
    ds.to_netcdf(path, engine="scipy", format=fmt)
    return refl


@pytest.mark.parametrize("fmt", NETCDF3)
def test_netcdf3_opens_and_fits_as_in_memory(tmp_path, fmt):
    path = str(tmp_path / "classic.nc")
    refl = _write(path, fmt)
    magic = b"CDF\x01" if fmt == "NETCDF3_CLASSIC" else b"CDF\x02"
    assert pathlib.Path(path).read_bytes()[:4] == magic
    assert netcdf_engine(path) == "scipy"
    cube = store.open_cube(path, "refl", "band")
    assert isinstance(cube.data, da.Array)
    assert np.array_equal(cube.values, refl.values)
    assert cube.attrs["units"] == "1"
    src = store.open_source(path, variable="refl", feature_dim="band")
    assert src.kind == "cube" and src.feature_names == ["1", "2", "3", "4"]
    model = PPA(degree=2, random_state=0).fit(src.data, feature_dim="band")
    ref = PPA(degree=2, random_state=0).fit(refl, feature_dim="band")
    assert np.allclose(model.explained_variance_, ref.explained_variance_, rtol=TOL)
    assert np.allclose(model.transform(cube).values, ref.transform(refl).values, rtol=0, atol=TOL)


@pytest.mark.parametrize("fmt", NETCDF3)
def test_cli_fits_and_transforms_netcdf3(tmp_path, capsys, fmt):
    path = str(tmp_path / "classic.nc")
    refl = _write(path, fmt)
    model = str(tmp_path / "m.zarr")
    argv = ["fit", path, model, "--feature-dim", "band", "--variable", "refl", "--degree", "2"]
    code = main(argv + THREADS)
    assert code == 0, capsys.readouterr().err
    ref = PPA(degree=2, random_state=0).fit(refl, feature_dim="band")
    fitted = store.load_model(model)
    assert np.allclose(fitted.explained_variance_, ref.explained_variance_, rtol=TOL)
    comps = str(tmp_path / "c.nc")  # written as netCDF-4, the input's global attributes kept
    code = main(["transform", model, path, comps, "--variable", "refl", *THREADS])
    assert code == 0, capsys.readouterr().err
    back = xr.open_dataset(comps, engine="h5netcdf")
    assert back.attrs["title"] == "classic"
    assert np.allclose(back["components"].values, ref.transform(refl).values, atol=TOL)


def test_a_netcdf3_series_is_one_cube(tmp_path):
    refls = [_refl(seed) for seed in range(3)]
    for i, refl in enumerate(refls):
        refl.expand_dims(time=[i]).to_netcdf(tmp_path / f"day{i}.nc", engine="scipy")
    cube = store.open_cube(str(tmp_path / "day*.nc"), feature_dim="band")
    assert cube.sizes["time"] == 3
    assert np.array_equal(cube.values, xr.concat(refls, dim="time").values)


def test_netcdf_engine_is_chosen_by_the_first_bytes(tmp_path):
    refl = _refl()
    nc4 = str(tmp_path / "four.nc")
    refl.to_netcdf(nc4, engine="h5netcdf")
    assert netcdf_engine(nc4) == "h5netcdf"
    cdf5 = tmp_path / "cdf5.nc"
    cdf5.write_bytes(b"CDF\x05" + bytes(60))
    with pytest.raises(ValueError, match="CDF-5.*netCDF4"):
        store.open_cube(str(cdf5))
    text = tmp_path / "text.nc"
    text.write_text("not netcdf at all")
    with pytest.raises(ValueError, match=r"cannot open .*text.nc' as NetCDF: its first bytes"):
        store.open_cube(str(text))
    classic = str(tmp_path / "classic.nc")
    refl.to_netcdf(classic, engine="scipy")
    with pytest.raises(ValueError, match=r"mix NetCDF formats \(netCDF-4: .*; netCDF-3: "):
        store.open_cube([nc4, classic], feature_dim="band")


def test_transform_reads_the_variable_the_model_was_fitted_on(tmp_path, capsys):
    path = str(tmp_path / "classic.nc")  # refl beside mask: a variable must be chosen
    refl = _write(path, "NETCDF3_CLASSIC")
    model = str(tmp_path / "m.zarr")
    argv = ["fit", path, model, "--feature-dim", "band", "--variable", "refl", "--degree", "2"]
    assert main(argv + THREADS) == 0, capsys.readouterr().err
    comps = str(tmp_path / "c.nc")
    code = main(["transform", model, path, comps, *THREADS])  # no --variable: the model's
    assert code == 0, capsys.readouterr().err
    ref = PPA(degree=2, random_state=0).fit(refl, feature_dim="band")
    back = xr.open_dataset(comps, engine="h5netcdf")
    assert np.allclose(back["components"].values, ref.transform(refl).values, atol=TOL)
    # another variable named on the command line still wins (and is refused here by shape)
    code = main(["transform", model, path, str(tmp_path / "m.nc"), "--variable", "mask", *THREADS])
    err = capsys.readouterr().err
    assert code == 2 and "feature_dim 'band' is not a dimension of 'mask'" in err, err


def test_an_inverse_of_stacked_variables_writes_those_variables(tmp_path, capsys):
    refl = _refl()
    names = ["blue", "green", "red", "nir"]
    path = str(tmp_path / "bands.nc")
    xr.Dataset({n: refl.isel(band=i, drop=True) for i, n in enumerate(names)}).to_netcdf(
        path, engine="scipy"
    )
    model, comps, rec = (str(tmp_path / n) for n in ("m.zarr", "c.nc", "r.nc"))
    for argv in (
        ["fit", path, model, "--variable", "all", "--degree", "2"],
        ["transform", model, path, comps],
        ["inverse", model, comps, rec],
    ):
        assert main(argv + THREADS) == 0, capsys.readouterr().err
    back = xr.open_dataset(rec, engine="h5netcdf")
    assert [n for n in names if n in back.data_vars] == names  # not one 'variables'
    for i, name in enumerate(names):  # all components kept: the input again
        assert np.allclose(back[name].values, refl.isel(band=i).values, rtol=0, atol=1e-8)
