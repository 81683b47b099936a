"""One band per file: a glob or a list of single-band rasters on one grid is one cube.

The files are written here as Landsat and Sentinel-2 distribute them (one uint16 GeoTIFF per
band, ``..._B2.TIF``; one NetCDF file per band), read back with rasterio / h5netcdf on their
own, and stacked here by hand: the fit of the cube equals the in-memory fit of the valid pixels
of the hand-made stack (1e-10), the bands are named from what differs between the file names,
and files on different grids are refused naming both.
"""

from __future__ import annotations

import warnings

import dask
import numpy as np
import pytest
import xarray as xr

from ppa_dask import PPA, store
from ppa_dask.app.cli import main
from ppa_dask.app.pipeline import run_pipeline, validate_pipeline
from ppa_dask.store.sources import band_names
from ppa_dask.utils.warnings import NoDataWarning

TOL = 1e-10
NY, NX = 40, 48
SCENE = "LC08_L1TP_227065_20200608_20200824_02_T1"
THREADS = ["--scheduler", "threads"]


@pytest.fixture(autouse=True)
def _threads_scheduler():
    with dask.config.set(scheduler="threads"):
        yield


def _bands(n=3, seed=0):
    t = np.random.default_rng(seed).uniform(0.1, 1.0, size=(NY, NX))
    curves = [t, t**2, np.sin(2 * t), np.sqrt(t)][:n]
    out = np.round(np.stack(curves) * 12000 + 7000).astype(np.uint16)
    out[:, :6, :] = 0  # the fill outside the scene, in every band
    return out


def _write_band(path, band, nodata=None, origin=(500000, 4000000), shape=None):
    import rasterio
    from rasterio.transform import from_origin

    ny, nx = band.shape if shape is None else shape
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=nx,
        height=ny,
        count=1,
        dtype=band.dtype,
        crs="EPSG:32621",
        transform=from_origin(*origin, 30, 30),
        nodata=nodata,
        tiled=True,
        blockxsize=16,
        blockysize=16,
    ) as dst:
        dst.write(band[:ny, :nx][None])
    return str(path)


def _read(path):
    import rasterio

    with rasterio.open(path) as src:
        return src.read(1)


def _by_hand(stack, missing=0):
    rows = stack.reshape(stack.shape[0], -1).T.astype(np.float64)
    valid = ~(rows == missing).any(axis=1)
    return rows[valid], valid


def _assert_same_model(model, rows):
    ref = PPA(degree=2, random_state=0).fit(rows)
    np.testing.assert_allclose(model.explained_variance_, ref.explained_variance_, rtol=TOL)
    assert list(model.degrees_) == list(ref.degrees_)
    probe = xr.DataArray(rows[:40].T[:, None, :], dims=("band", "y", "x"))
    got = model.transform(probe).values[:, 0, :].T
    np.testing.assert_allclose(got, ref.transform(rows[:40]), rtol=TOL, atol=TOL)


@pytest.fixture
def landsat(tmp_path):
    bands = _bands()
    paths = [
        _write_band(tmp_path / f"{SCENE}_{b}.TIF", band)
        for b, band in zip(("B2", "B3", "B4"), bands)
    ]
    return str(tmp_path / f"{SCENE}_B*.TIF"), paths


def test_band_names_are_what_differs_between_the_file_names():
    assert band_names([f"{SCENE}_B{i}.TIF" for i in (2, 3, 4)]) == ["B2", "B3", "B4"]
    assert band_names(["S2_20200608_blue.nc", "S2_20200608_nir.nc"]) == ["blue", "nir"]
    assert band_names(["red.tif", "green.tif"]) == ["red", "green"]
    assert band_names(["band-1.tif", "band-12.tif"]) == ["1", "12"]
    assert band_names(["a/x.tif", "b/x.tif"]) == ["1", "2"]  # nothing differs: numbered


def test_a_glob_of_band_files_is_one_cube_and_fits_as_stacked_by_hand(landsat):
    pattern, paths = landsat
    with pytest.warns(NoDataWarning, match="0 fills 15.0%"):
        PPA(degree=2, random_state=0).fit(store.open_cube(pattern), feature_dim="band")
    cube = store.open_cube(pattern, nodata=0)
    assert cube.dims == ("band", "y", "x")
    assert cube["band"].values.tolist() == ["B2", "B3", "B4"]
    assert str(cube.rio.crs) == "EPSG:32621"
    stack = np.stack([_read(p) for p in paths])
    rows, valid = _by_hand(stack)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoDataWarning)
        model = PPA(degree=2, random_state=0).fit(cube, feature_dim="band")
    _assert_same_model(model, rows)
    comps = model.transform(cube).values
    assert np.isnan(comps[:, ~valid.reshape(NY, NX)]).all()
    # a list in another order is that order
    listed = store.open_cube([paths[2], paths[0], paths[1]], nodata=0)
    assert listed["band"].values.tolist() == ["B4", "B2", "B3"]


def test_ten_bands_sort_in_their_natural_order(tmp_path):
    band = _bands(1)[0]
    for i in (1, 2, 10, 11):
        _write_band(tmp_path / f"S_B{i}.TIF", band + i)
    cube = store.open_cube(str(tmp_path / "S_B*.TIF"))
    assert cube["band"].values.tolist() == ["B1", "B2", "B10", "B11"]


def test_files_on_different_grids_are_refused_by_name(tmp_path):
    b = _bands()
    a = _write_band(tmp_path / "x_B2.TIF", b[0])
    moved = _write_band(tmp_path / "x_B3.TIF", b[1], origin=(500030, 4000000))
    with pytest.raises(ValueError, match="not on one grid") as info:
        store.open_cube([a, moved])
    assert repr(a) in str(info.value) and repr(moved) in str(info.value)
    small = _write_band(tmp_path / "y_B3.TIF", b[1], shape=(NY, NX - 16))
    with pytest.raises(ValueError, match="not on one grid") as info:
        store.open_cube([a, small])
    assert repr(small) in str(info.value) and "40 x 32" in str(info.value)


def test_a_multiband_file_among_band_files_is_refused(tmp_path):
    import rasterio
    from rasterio.transform import from_origin

    b = _bands()
    one = _write_band(tmp_path / "x_B2.TIF", b[0])
    many = str(tmp_path / "x_B3.TIF")
    with rasterio.open(
        many,
        "w",
        driver="GTiff",
        width=NX,
        height=NY,
        count=2,
        dtype=b.dtype,
        crs="EPSG:32621",
        transform=from_origin(500000, 4000000, 30, 30),
    ) as dst:
        dst.write(b[:2])
    with pytest.raises(ValueError, match=r"x_B3.TIF' holds 2 bands"):
        store.open_cube([one, many])


def test_netcdf_band_files_alike(tmp_path):
    import h5netcdf

    def write(path, band, x0=500000.0):
        with h5netcdf.File(path, "w") as f:
            f.dimensions = {"y": NY, "x": NX}
            f.create_variable("y", ("y",), float, data=4000000.0 - 30 * np.arange(NY))
            f.create_variable("x", ("x",), float, data=x0 + 30 * np.arange(NX))
            v = f.create_variable("refl", ("y", "x"), np.uint16, chunks=(20, 24))
            v[...] = band
            v.attrs["_FillValue"] = np.uint16(0)
        return path

    stack = _bands()
    paths = [
        write(str(tmp_path / f"S2_20200608_{name}.nc"), band)
        for name, band in zip(("blue", "green", "red"), stack)
    ]
    cube = store.open_cube(str(tmp_path / "S2_*.nc"), feature_dim="band")
    assert cube.dims == ("band", "y", "x")
    assert sorted(cube["band"].values.tolist()) == ["blue", "green", "red"]
    assert cube.encoding["ppa_dask_nodata"] == 0.0
    order = [cube["band"].values.tolist().index(n) for n in ("blue", "green", "red")]
    model = PPA(degree=2, random_state=0).fit(cube.isel(band=order), feature_dim="band")
    _assert_same_model(model, _by_hand(stack)[0])
    moved = write(str(tmp_path / "moved_nir.nc"), stack[1], x0=500001.0)
    with pytest.raises(ValueError, match="not on one grid") as info:
        store.open_cube([paths[0], moved], feature_dim="band")
    assert repr(moved) in str(info.value)


@pytest.mark.slow
def test_cli_and_pipeline_read_a_quoted_glob_of_band_files(landsat, tmp_path, capsys):
    pattern, paths = landsat
    rows, valid = _by_hand(np.stack([_read(p) for p in paths]))
    model_path = str(tmp_path / "m.zarr")
    assert main(["fit", pattern, model_path, "--nodata", "0", "--degree", "2", *THREADS]) == 0
    capsys.readouterr()
    _assert_same_model(store.load_model(model_path), rows)
    out = str(tmp_path / "c.tif")
    assert main(["transform", model_path, pattern, out, *THREADS]) == 0
    import rasterio

    with rasterio.open(out) as src:
        comps = src.read()
        assert str(src.crs) == "EPSG:32621"
    assert np.isnan(comps[:, ~valid.reshape(NY, NX)]).all()
    config = validate_pipeline(
        {
            "name": "bands",
            "data": {"source": "geotiff", "path": paths, "nodata": 0},
            "model": {"degree": 2},
            "preprocess": {"scale": "none"},
            "evaluate": {"pca": False},
            "plots": {"components": 0},
        }
    )
    import io

    run = tmp_path / "run"
    run_pipeline(config, output=str(run), stream=io.StringIO())
    _assert_same_model(store.load_model(str(run / "03-fit" / "model.zarr")), rows)


@pytest.mark.slow
def test_cli_takes_the_band_files_as_separate_arguments(landsat, tmp_path, capsys):
    """``fit A_B2.TIF A_B3.TIF A_B4.TIF MODEL``: the last argument is the model, the ones
    before it one cube in the order given; ``transform MODEL A B C OUTPUT`` alike."""
    pattern, paths = landsat
    rows, valid = _by_hand(np.stack([_read(p) for p in paths]))
    model_path = str(tmp_path / "m.zarr")
    assert main(["fit", *paths, model_path, "--nodata", "0", "--degree", "2", *THREADS]) == 0
    model = store.load_model(model_path)
    _assert_same_model(model, rows)
    assert model.xarray_layout_["feature_coords"]["band"].tolist() == ["B2", "B3", "B4"]
    # options may come before the files too; the order given is the bands' order
    swapped = str(tmp_path / "swapped.zarr")
    order = [paths[1], paths[0], paths[2]]
    assert main(["fit", "--nodata", "0", "--degree", "2", *THREADS, *order, swapped]) == 0
    by_hand = np.stack([_read(p) for p in order])
    _assert_same_model(store.load_model(swapped), _by_hand(by_hand)[0])
    assert store.load_model(swapped).xarray_layout_["feature_coords"]["band"].tolist() == [
        "B3",
        "B2",
        "B4",
    ]
    import rasterio

    outs = []
    for name, given in (("glob", [pattern]), ("files", paths)):
        out = str(tmp_path / f"c_{name}.tif")
        assert main(["transform", model_path, *given, out, *THREADS]) == 0
        with rasterio.open(out) as src:
            outs.append(src.read())
    np.testing.assert_array_equal(outs[0], outs[1])  # the same cube either way
    assert np.isnan(outs[1][:, ~valid.reshape(NY, NX)]).all()
    capsys.readouterr()


def test_several_arguments_refused_when_the_last_is_not_a_model_or_the_files_not_one_cube(
    landsat, tmp_path, capsys
):
    _, paths = landsat
    assert main(["fit", paths[0], paths[1], *THREADS]) == 2
    err = capsys.readouterr().err
    assert f"MODEL {paths[1]!r} is a GeoTIFF file; the last argument is where the model" in err
    zarr_path = str(tmp_path / "m.zarr")
    assert main(["fit", paths[0], zarr_path, str(tmp_path / "n.zarr"), *THREADS]) == 2
    err = capsys.readouterr().err
    assert "make one cube when they are all GeoTIFF (.tif) or all NetCDF (.nc) files" in err
    assert "the last argument, " in err and err.count("\n") == 1
    assert not any((tmp_path / n).exists() for n in ("m.zarr", "n.zarr"))
