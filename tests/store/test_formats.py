"""The formats users hold: NetCDF, GeoTIFF, NetCDF series, Parquet and CSV.

Each test writes its small files itself and checks the library, the CLI and the pipeline
against the same data given in memory (numpy / xarray): opened lazily with the file's own
chunks, fitted and transformed to the same values (1e-10), written back with the input's
coordinates, attributes and georeferencing, and refused with errors naming the problem.
"""

from __future__ import annotations

import io
import json
import os

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import rasterio
import rioxarray  # noqa: F401  (the .rio accessor)
import xarray as xr
from rasterio.transform import from_origin

from ppa_dask import PPA, store
from ppa_dask.app.cli import main
from ppa_dask.app.pipeline import PipelineError, run_pipeline, validate_pipeline
from ppa_dask.store import sinks as format_writers

THREADS = ["--scheduler", "threads"]
TOL = 1e-10
BANDS, NY, NX = 4, 40, 48


@pytest.fixture(autouse=True)
def _threads_scheduler():
    with dask.config.set(scheduler="threads"):
        yield


def _spectra(shape, seed=0):
    """A curved 1-D manifold in 4 features (last axis) plus small noise."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.1, 1.0, size=shape)
    out = np.stack([t, t**2, np.sin(3 * t), t**3], axis=-1)
    return out + 0.01 * rng.normal(size=out.shape)


def _model():
    return PPA(degree=2, random_state=0)


def _ok(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def _fails(capsys, *argv):
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("ppa-dask: error: ") and len(err.splitlines()) == 1, err
    return err


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tif(tmp_path_factory):
    """A tiled (16 x 16) 4-band GeoTIFF in UTM, and the same image in memory."""
    path = str(tmp_path_factory.mktemp("tif") / "scene.tif")
    data = np.moveaxis(_spectra((NY, NX)), -1, 0)
    transform = from_origin(500000.0, 4200000.0, 30.0, 30.0)
    with rasterio.open(
        path, "w", driver="GTiff", width=NX, height=NY, count=BANDS, dtype="float64",
        crs="EPSG:32633", transform=transform, tiled=True, blockxsize=16, blockysize=16,
    ) as dst:  # fmt: skip
        dst.write(data)
    memory = xr.DataArray(data, dims=("band", "y", "x"), coords={"band": np.arange(1, 5)})
    return path, memory, transform


@pytest.fixture(scope="module")
def nc(tmp_path_factory):
    """A (time, y, x, band) NetCDF cube with HDF5 chunks, CF attributes and a 2-D coordinate."""
    path = str(tmp_path_factory.mktemp("nc") / "cube.nc")
    ds = xr.Dataset(
        {"refl": (("time", "y", "x", "band"), _spectra((3, 10, 12), seed=1))},
        coords={
            "time": pd.date_range("2021-06-01", periods=3),
            "y": np.arange(10.0),
            "x": np.arange(12.0),
            "band": [490, 560, 665, 842],
            "lat": (("y", "x"), np.linspace(40, 41, 120).reshape(10, 12)),
        },
        attrs={"title": "test scene", "institution": "here"},
    )
    ds["refl"].attrs = {"long_name": "surface reflectance", "units": "1"}
    ds.to_netcdf(path, engine="h5netcdf", encoding={"refl": {"chunksizes": (1, 5, 6, 4)}})
    return path, ds


@pytest.fixture(scope="module")
def series(tmp_path_factory, nc):
    """The NetCDF cube split into one file per time step."""
    base = tmp_path_factory.mktemp("series")
    _, ds = nc
    paths = []
    for i in range(ds.sizes["time"]):
        p = str(base / f"day{i}.nc")
        ds.isel(time=[i]).to_netcdf(
            p, engine="h5netcdf", encoding={"refl": {"chunksizes": (1, 5, 6, 4)}}
        )
        paths.append(p)
    return str(base / "day*.nc"), paths, ds


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """A Parquet file (3 row groups) and a CSV file of one table with a string id column."""
    base = tmp_path_factory.mktemp("tables")
    X = _spectra((300,), seed=2)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    frame.insert(0, "id", [f"s{i}" for i in range(len(frame))])
    pq = str(base / "t.parquet")
    frame.to_parquet(pq, row_group_size=100)
    csv = str(base / "t.csv")
    frame.to_csv(csv, index=False)
    return pq, csv, frame


# ---------------------------------------------------------------------------------------------
# GeoTIFF
# ---------------------------------------------------------------------------------------------


def test_geotiff_opens_lazily_with_its_tiles_and_georeferencing(tif):
    path, memory, transform = tif
    cube = store.open_cube(path)
    assert isinstance(cube.data, da.Array)
    assert cube.dims == ("band", "y", "x")
    assert cube.chunks == ((4,), (16, 16, 8), (16, 16, 16))  # the file's 16 x 16 tiles
    assert str(cube.rio.crs) == "EPSG:32633" and cube.rio.transform() == transform
    assert np.array_equal(cube.values, memory.values)


def test_geotiff_fit_transform_inverse_agree_with_memory_and_keep_georeferencing(tif, tmp_path):
    path, memory, transform = tif
    cube = store.open_cube(path)
    model = _model().fit(cube, feature_dim="band")
    ref = _model().fit(memory, feature_dim="band")
    comps = model.transform(cube)
    assert np.allclose(comps.values, ref.transform(memory).values, rtol=0, atol=TOL)
    out = store.write_cube(comps.isel(component=slice(0, 2)), str(tmp_path / "c.tif"), like=cube)
    back = store.open_cube(out, feature_dim="component")
    assert back.dims == ("component", "y", "x") and back.sizes["component"] == 2
    assert str(back.rio.crs) == "EPSG:32633" and back.rio.transform() == transform
    assert np.allclose(back.values, comps.values[:2], rtol=0, atol=TOL)
    assert np.array_equal(back["x"].values, cube["x"].values)
    with rasterio.open(out) as src:
        assert src.descriptions == ("component 1", "component 2")
        assert src.block_shapes[0] == (16, 16)
    rec = model.inverse_transform(back)
    rec_path = store.write_cube(rec, str(tmp_path / "r.tif"), like=cube)
    rec_back = store.open_cube(rec_path)
    expected = ref.inverse_transform(ref.transform(memory).isel(component=slice(0, 2)))
    assert np.allclose(rec_back.values, expected.values, rtol=0, atol=TOL)
    assert rec_back.rio.transform() == transform


def test_geotiff_nodata_pixels_are_left_out_and_come_back_nan(tmp_path, tif):
    _, memory, transform = tif
    data = memory.values.copy()
    data[:, :3, :5] = -9999.0
    path = str(tmp_path / "holes.tif")
    with rasterio.open(
        path, "w", driver="GTiff", width=NX, height=NY, count=BANDS, dtype="float64",
        crs="EPSG:32633", transform=transform, nodata=-9999.0,
    ) as dst:  # fmt: skip
        dst.write(data)
    cube = store.open_cube(path)
    comps = _model().fit(cube, feature_dim="band").transform(cube)
    assert bool(np.isnan(comps.values[:, :3, :5]).all())
    assert np.isfinite(comps.values[:, 3:, :]).all()


def test_geotiff_errors(tif, tmp_path, capsys):
    path, memory, transform = tif
    with pytest.raises(ValueError, match="its features are the bands, dimension 'band'"):
        store.open_cube(path, feature_dim="wavelength")
    with pytest.raises(ValueError, match="it has no variables"):
        store.open_cube(path, variable="refl")
    one = str(tmp_path / "one.tif")
    with rasterio.open(one, "w", driver="GTiff", width=8, height=8, count=1, dtype="float64",
                       crs="EPSG:4326", transform=transform) as dst:  # fmt: skip
        dst.write(np.ones((1, 8, 8)))
    with pytest.raises(ValueError, match="with 1 band; PPA needs at least 2 bands"):
        store.open_cube(one)
    fake = tmp_path / "fake.tif"
    fake.write_text("not a tiff")
    with pytest.raises(ValueError, match="cannot open .* as a GeoTIFF"):
        store.open_cube(str(fake))
    series = xr.DataArray(np.ones((3, 2, 4, 4)), dims=("time", "component", "y", "x"))
    with pytest.raises(ValueError, match="at most one band dimension"):
        store.write_cube(series, str(tmp_path / "s.tif"))
    assert not os.path.exists(tmp_path / "s.tif")
    err = _fails(capsys, "fit", path, str(tmp_path / "m.zarr"), "--feature-dim", "x", *THREADS)
    assert "its features are the bands" in err


# ---------------------------------------------------------------------------------------------
# NetCDF and series of NetCDF files
# ---------------------------------------------------------------------------------------------


def test_netcdf_opens_lazily_with_its_hdf5_chunks(nc):
    path, ds = nc
    cube = store.open_cube(path, feature_dim="band")
    assert isinstance(cube.data, da.Array)
    assert cube.chunks == ((1, 1, 1), (5, 5), (6, 6), (4,))
    assert cube.attrs["units"] == "1"
    assert np.array_equal(cube.values, ds["refl"].values)


@pytest.mark.slow
def test_netcdf_round_trip_keeps_values_coordinates_and_attributes(nc, tmp_path):
    path, ds = nc
    cube = store.open_cube(path, "refl", "band")
    model = _model().fit(cube, feature_dim="band")
    ref = _model().fit(ds["refl"], feature_dim="band")
    comps = model.transform(cube)
    expected = ref.transform(ds["refl"])
    assert np.allclose(comps.values, expected.values, rtol=0, atol=TOL)
    out = store.write_cube(comps, str(tmp_path / "c.nc"), like=cube)
    back = xr.open_dataset(out, engine="h5netcdf")
    assert back.attrs["title"] == "test scene" and back.attrs["institution"] == "here"
    assert back["components"].attrs["long_name"] == "PPA coefficients of surface reflectance"
    assert back["components"].attrs["units"] == "1"
    for name in ("time", "y", "x", "lat"):
        assert np.array_equal(back[name].values, ds[name].values), name
    assert np.allclose(back["components"].values, expected.values, rtol=0, atol=TOL)
    reopened = store.open_cube(out, "components", "component")
    # storage chunks = the written Dask chunks (their first size where Dask's are irregular)
    assert reopened.encoding["chunksizes"] == tuple(c[0] for c in comps.chunks)
    assert reopened.chunks[0] == (1, 1, 1)
    rec = model.inverse_transform(reopened)
    rec_path = store.write_cube(rec, str(tmp_path / "r.nc"), like=cube, name="refl")
    rec_back = xr.open_dataset(rec_path, engine="h5netcdf")["refl"]
    assert rec_back.attrs["long_name"] == "surface reflectance"
    assert np.array_equal(rec_back["band"].values, ds["band"].values)
    assert np.allclose(rec_back.values, ref.inverse_transform(expected).values, rtol=0, atol=TOL)


@pytest.mark.slow
def test_a_series_of_files_is_one_cube_with_a_chunk_per_file(series):
    pattern, paths, ds = series
    for spec in (pattern, paths):
        cube = store.open_cube(spec, feature_dim="band")
        assert isinstance(cube.data, da.Array)
        assert cube.chunks[0] == (1, 1, 1)  # at least one chunk per file along time
        assert np.array_equal(cube.values, ds["refl"].values)
        assert np.array_equal(cube["time"].values, ds["time"].values)
    comps = _model().fit(cube, feature_dim="band").transform(cube)
    ref = _model().fit(ds["refl"], feature_dim="band")
    assert np.allclose(comps.values, ref.transform(ds["refl"]).values, rtol=0, atol=TOL)


def test_netcdf_errors(nc, series, tmp_path):
    path, ds = nc
    with pytest.raises(FileNotFoundError, match="no such file"):
        store.open_cube(str(tmp_path / "absent.nc"))
    with pytest.raises(FileNotFoundError, match="no files match"):
        store.open_cube(str(tmp_path / "none*.nc"))
    with pytest.raises(ValueError, match=r"has no variable 'reflectance'; variables: \['refl'\]"):
        store.open_cube(path, variable="reflectance")
    with pytest.raises(ValueError, match="feature_dim 'wavelength' is not a dimension of 'refl'"):
        store.open_cube(path, feature_dim="wavelength")
    two = str(tmp_path / "two.nc")
    ds.assign(other=ds["refl"] * 2).to_netcdf(two, engine="h5netcdf")
    with pytest.raises(ValueError, match=r"holds the variables \['refl', 'other'\]"):
        store.open_cube(two)
    fake = tmp_path / "fake.nc"
    fake.write_text("not netcdf")
    with pytest.raises(ValueError, match="cannot open .* as NetCDF"):
        store.open_cube(str(fake))
    with pytest.raises(ValueError, match="reads NetCDF .* and GeoTIFF"):
        store.open_cube(str(tmp_path))


@pytest.mark.slow
def test_writes_are_atomic_and_never_replace_what_ppa_dask_did_not_write(nc, tmp_path):
    path, ds = nc
    cube = store.open_cube(path, feature_dim="band")
    target = str(tmp_path / "c.nc")
    store.write_cube(cube, target, like=cube)
    with pytest.raises(FileExistsError, match="already exists; pass overwrite=True"):
        store.write_cube(cube, target)
    store.write_cube(cube * 2, target, overwrite=True)
    assert np.allclose(xr.open_dataset(target, engine="h5netcdf")["refl"].values, 2 * cube.values)
    with pytest.raises(FileExistsError, match="is not a netcdf file written by ppa-dask"):
        store.write_cube(cube, path, overwrite=True)  # the user's input is never replaced
    assert xr.open_dataset(path, engine="h5netcdf").attrs["title"] == "test scene"
    # a failing write leaves no file and no temporary behind
    bad = cube.copy(data=cube.data.map_blocks(_boom, dtype=float))
    with pytest.raises(RuntimeError, match="boom"):
        store.write_cube(bad, str(tmp_path / "bad.nc"))
    assert sorted(os.listdir(tmp_path)) == ["c.nc"]
    assert format_writers.written_by_ppa_dask(target) and not format_writers.written_by_ppa_dask(
        path
    )


def _boom(block):
    raise RuntimeError("boom")


# ---------------------------------------------------------------------------------------------
# Parquet and CSV
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["parquet", "csv"])
def test_tables_select_columns_and_agree_with_numpy(tables, which):
    pq, csv, frame = tables
    path = pq if which == "parquet" else csv
    table = store.open_table(path, columns=["d", "b", "a"])
    assert isinstance(table, dd.DataFrame) and list(table.columns) == ["d", "b", "a"]
    X, names = store.table_array(table)
    assert isinstance(X, da.Array) and names == ["d", "b", "a"]
    if which == "parquet":
        # chunks of whole row groups (of 100 rows; Dask may fuse small ones)
        assert all(c % 100 == 0 for c in X.chunks[0]) and sum(X.chunks[0]) == 300
    expected = frame[["d", "b", "a"]].to_numpy()
    assert np.array_equal(X.compute(), expected)
    model = store.name_features(_model().fit(X), names)
    assert model.feature_names_in_.tolist() == ["d", "b", "a"]
    ref = _model().fit(expected)
    assert np.allclose(model.transform(X).compute(), ref.transform(expected), rtol=0, atol=TOL)
    assert np.array_equal(store.open_input(path, variable=["d", "b", "a"]).compute(), expected)


def test_table_errors(tables, tmp_path):
    pq, csv, _ = tables
    with pytest.raises(ValueError, match="column 'id' of .* has dtype .*, not numbers"):
        store.open_table(pq)
    with pytest.raises(ValueError, match="column 'id' of .* has dtype .*, not numbers"):
        store.open_table(csv, columns="a,id")
    with pytest.raises(
        ValueError, match="column 'zz' is not in .*; its columns are: id, a, b, c, d"
    ):
        store.open_table(pq, columns=["a", "zz"])
    with pytest.raises(FileNotFoundError, match="no such file"):
        store.open_table(str(tmp_path / "absent.parquet"))
    with pytest.raises(ValueError, match="names .* more than once"):
        store.open_table(pq, columns=["a", "a"])
    out = store.write_table(np.eye(3), str(tmp_path / "r.csv"), columns=["x", "y", "z"])
    assert list(store.open_table(out).columns) == ["x", "y", "z"]
    with pytest.raises(FileExistsError, match="never replaces one"):
        store.write_table(np.eye(3), out, overwrite=True)


# ---------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------


def test_cli_geotiff_fit_transform_inverse(tif, tmp_path, capsys):
    path, memory, transform = tif
    model = str(tmp_path / "m.zarr")
    _ok(capsys, "fit", path, model, "--degree", "2", *THREADS)  # band: the GeoTIFF's features
    comps = str(tmp_path / "c.tif")
    _ok(capsys, "transform", model, path, comps, "--components", "2", *THREADS)
    ref = _model().fit(memory, feature_dim="band")
    back = store.open_cube(comps, feature_dim="component")
    assert back.rio.transform() == transform and str(back.rio.crs) == "EPSG:32633"
    expected = ref.transform(memory).isel(component=slice(0, 2))
    assert np.allclose(back.values, expected.values, rtol=0, atol=TOL)
    rec = str(tmp_path / "r.tif")
    _ok(capsys, "inverse", model, comps, rec, *THREADS)
    rec_back = store.open_cube(rec)
    assert rec_back.sizes["band"] == 4 and rec_back.rio.transform() == transform
    assert np.allclose(rec_back.values, ref.inverse_transform(expected).values, rtol=0, atol=TOL)
    err = _fails(capsys, "transform", model, path, comps, *THREADS)
    assert "already exists" in err


@pytest.mark.slow
def test_cli_geotiff_to_zarr_with_irregular_chunks(tif, tmp_path, capsys):
    # the components' Dask chunks are written as regular Zarr chunks of their first size
    # (write_dataset evens irregular ones out lazily: test_store; the stacker now keeps whole
    # rows of the 16 x 16 tiles, so these are regular already)
    path, memory, _ = tif
    cube = store.open_cube(path)
    model = str(tmp_path / "m.zarr")
    _ok(capsys, "fit", path, model, "--degree", "2", *THREADS)
    irregular = store.load_model(model).transform(cube).chunks
    comps = str(tmp_path / "c.zarr")
    _ok(capsys, "transform", model, path, comps, *THREADS)
    ref = _model().fit(memory, feature_dim="band")
    expected = ref.transform(memory)
    back = store.open_dataset(comps)["components"]
    assert back.dims == ("component", "y", "x")
    assert np.allclose(back.values, expected.values, rtol=0, atol=TOL)
    for name in ("y", "x"):
        assert np.array_equal(back[name].values, cube[name].values), name
    # regular Zarr chunks of the first Dask chunk size along each dimension
    assert back.chunks == tuple(
        (c[0],) * (sum(c) // c[0]) + ((sum(c) % c[0],) if sum(c) % c[0] else ()) for c in irregular
    )
    rec = str(tmp_path / "r.zarr")
    _ok(capsys, "inverse", model, comps, rec, *THREADS)
    rec_back = next(iter(store.open_dataset(rec).data_vars.values()))
    assert rec_back.dims == ("band", "y", "x")
    assert np.array_equal(rec_back["x"].values, cube["x"].values)
    assert np.allclose(rec_back.values, ref.inverse_transform(expected).values, rtol=0, atol=TOL)


@pytest.mark.slow
def test_cli_netcdf_and_series(nc, series, tmp_path, capsys):
    path, ds = nc
    model = str(tmp_path / "m.zarr")
    _ok(capsys, "fit", path, model, "--feature-dim", "band", "--degree", "2", *THREADS)
    comps = str(tmp_path / "c.nc")
    _ok(capsys, "transform", model, path, comps, *THREADS)
    back = xr.open_dataset(comps, engine="h5netcdf")
    ref = _model().fit(ds["refl"], feature_dim="band")
    assert np.allclose(back["components"].values, ref.transform(ds["refl"]).values, atol=TOL)
    assert back.attrs["title"] == "test scene" and "lat" in back.coords
    rec = str(tmp_path / "r.nc")
    _ok(capsys, "inverse", model, comps, rec, *THREADS)
    assert xr.open_dataset(rec, engine="h5netcdf").sizes["band"] == 4
    pattern, _, _ = series
    _ok(capsys, "fit", pattern, str(tmp_path / "s.zarr"), "--feature-dim", "band",
        "--degree", "2", *THREADS)  # fmt: skip
    assert np.allclose(store.load_model(str(tmp_path / "s.zarr")).explained_variance_,
                       ref.explained_variance_, rtol=1e-10)  # fmt: skip
    err = _fails(capsys, "fit", path, str(tmp_path / "x.zarr"), *THREADS)
    assert "name the dimension holding its features with --feature-dim" in err
    err = _fails(capsys, "fit", path, str(tmp_path / "x.zarr"), "--feature-dim", "band",
                 "--variable", "nope", *THREADS)  # fmt: skip
    assert "has no variable 'nope'" in err
    err = _fails(capsys, "fit", str(tmp_path / "absent.nc"), str(tmp_path / "x.zarr"),
                 "--feature-dim", "band", *THREADS)  # fmt: skip
    assert "no such file" in err


def test_cli_tables_name_features_and_select_columns(tables, tmp_path, capsys):
    pq, csv, frame = tables
    model = str(tmp_path / "m.zarr")
    _ok(capsys, "fit", pq, model, "--columns", "a,b,c,d", "--degree", "2", *THREADS)
    fitted = store.load_model(model)
    assert fitted.feature_names_in_.tolist() == ["a", "b", "c", "d"]
    comps = str(tmp_path / "c.parquet")
    _ok(capsys, "transform", model, csv, comps, *THREADS)  # the model's columns, by name
    X = frame[["a", "b", "c", "d"]].to_numpy()
    ref = _model().fit(X)
    got = pd.read_parquet(comps)
    assert list(got.columns) == list(fitted.get_feature_names_out())
    assert np.allclose(got.to_numpy(), ref.transform(X), rtol=0, atol=TOL)
    rec = str(tmp_path / "r.csv")
    _ok(capsys, "inverse", model, comps, rec, *THREADS)
    back = pd.read_csv(rec)
    assert list(back.columns) == ["a", "b", "c", "d"]
    assert np.allclose(back.to_numpy(), ref.inverse_transform(ref.transform(X)), atol=TOL)
    err = _fails(capsys, "fit", pq, str(tmp_path / "x.zarr"), *THREADS)
    assert "column 'id'" in err and "not numbers" in err
    err = _fails(capsys, "fit", pq, str(tmp_path / "x.zarr"), "--columns", "a,zz", *THREADS)
    assert "column 'zz' is not in" in err and "id, a, b, c, d" in err


# ---------------------------------------------------------------------------------------------
# pipelines
# ---------------------------------------------------------------------------------------------


def _pipeline(tmp_path, **data):
    config = validate_pipeline(
        {
            "name": "f",
            "data": data,
            "model": {"degree": 2},
            "evaluate": {"pca": False},
            "plots": {"components": 0},
        }
    )
    out = tmp_path / "run"
    run_pipeline(config, output=str(out), stream=io.StringIO())
    return out


@pytest.mark.slow
def test_pipeline_sources_geotiff_and_parquet(tif, tables, tmp_path):
    path, memory, _ = tif
    out = _pipeline(tmp_path / "g", source="geotiff", path=path)
    comps = store.open_dataset(str(out / "04-transform" / "components.zarr"))["components"]
    assert comps.dims == ("component", "y", "x") and comps.sizes["y"] == NY
    pq, _, _ = tables
    out = _pipeline(tmp_path / "p", source="parquet", path=pq, columns=["c", "a"])
    loaded = store.open_array(str(out / "01-load" / "data.zarr"))
    assert np.array_equal(loaded.compute(), tables[2][["c", "a"]].to_numpy())
    meta = json.loads((out / "02-preprocess" / "preprocess.json").read_text())
    assert meta["feature_names"] == ["c", "a"]


def test_pipeline_file_sources_are_checked_before_the_run(tmp_path, nc):
    with pytest.raises(PipelineError, match="data.path: no such file"):
        validate_pipeline({"name": "x", "data": {"source": "geotiff", "path": "nope.tif"}})
    with pytest.raises(PipelineError, match="data.feature_dim: required"):
        validate_pipeline({"name": "x", "data": {"source": "netcdf", "path": nc[0]}})
    with pytest.raises(
        PipelineError, match=r"data.columns: expected null \(every column\) or a non-empty list"
    ):
        validate_pipeline({"name": "x", "data": {"source": "csv", "path": nc[0], "columns": 3}})


def _components_run(tmp_path, fmt, preprocess=None, **data):
    """A pipeline writing its components as ``fmt``; returns (run folder, configuration)."""
    config = validate_pipeline(
        {
            "name": "f",
            "data": data,
            "preprocess": preprocess or {},
            "model": {"degree": 2},
            "transform": {"format": fmt},
            "evaluate": {"pca": False},
            "plots": {"components": 2, "dpi": 30},
        }
    )
    out = tmp_path / "run"
    _rerun(config, out)
    return out, config


def _rerun(config, out):
    log = io.StringIO()
    run_pipeline(config, output=str(out), stream=log)
    return log.getvalue()


@pytest.mark.slow
def test_pipeline_writes_geotiff_components_with_the_inputs_georeferencing(tif, tmp_path):
    path, _, transform = tif
    zarr_run, _ = _components_run(tmp_path / "z", "zarr", source="geotiff", path=path)
    expected = store.open_dataset(str(zarr_run / "04-transform" / "components.zarr"))
    expected = expected["components"].values
    out, config = _components_run(tmp_path / "g", "same", source="geotiff", path=path)
    stage = out / "04-transform"
    assert sorted(os.listdir(stage)) == ["_complete.json", "components.tif"]
    tif_path = str(stage / "components.tif")
    with rasterio.open(tif_path) as src:
        assert src.crs.to_string() == "EPSG:32633" and src.transform == transform
        assert src.count == expected.shape[0]
        assert src.descriptions == tuple(f"component {i + 1}" for i in range(src.count))
        values = src.read()
    assert np.allclose(values, expected, rtol=0, atol=TOL, equal_nan=True)
    marker = json.loads((stage / "_complete.json").read_text())
    assert list(marker["outputs"]) == ["components.tif"]
    assert (out / "06-plots" / "components.png").exists()  # the plots read the GeoTIFF

    # a rerun skips the stage and leaves the file alone; a rewritten file reruns it
    stamp = os.stat(tif_path).st_mtime_ns
    assert "stage transform: skipped" in _rerun(config, out)
    assert os.stat(tif_path).st_mtime_ns == stamp
    os.utime(tif_path, ns=(stamp + 10**9, stamp + 10**9))
    assert "stage transform: started (outputs changed)" in _rerun(config, out)
    with rasterio.open(tif_path) as src:
        assert np.allclose(src.read(), expected, rtol=0, atol=TOL, equal_nan=True)


@pytest.mark.slow
def test_pipeline_writes_netcdf_components_with_the_inputs_coordinates_and_attributes(
    nc, tmp_path
):
    path, ds = nc
    source = {"source": "netcdf", "path": path, "variable": "refl", "feature_dim": "band"}
    zarr_run, _ = _components_run(tmp_path / "z", "zarr", **source)
    expected = store.open_dataset(str(zarr_run / "04-transform" / "components.zarr"))
    expected = expected["components"]
    out, _ = _components_run(tmp_path / "n", "netcdf", **source)
    stage = out / "04-transform"
    assert sorted(os.listdir(stage)) == ["_complete.json", "components.nc"]
    back = xr.open_dataset(str(stage / "components.nc"), engine="h5netcdf")
    comps = back["components"]
    assert comps.dims == expected.dims
    assert np.allclose(comps.values, expected.values, rtol=0, atol=TOL, equal_nan=True)
    for name in ("time", "y", "x", "lat"):
        assert np.array_equal(back[name].values, ds[name].values), name
    assert back.attrs["title"] == "test scene" and back.attrs["institution"] == "here"
    assert back.attrs["Conventions"] == "CF-1.8"
    assert comps.attrs["long_name"] == "PPA coefficients of surface reflectance"
    assert (out / "06-plots" / "components.png").exists()  # the plots read the NetCDF file
    # units: min-max scaled features are dimensionless, and so are their coefficients;
    # unscaled, the coefficients are lengths in the input's units (PPA preserves volume)
    radiance = ds.copy(deep=True)
    radiance["refl"].attrs = {"long_name": "radiance", "units": "W m-2 sr-1"}
    other = str(tmp_path / "radiance.nc")
    radiance.to_netcdf(other, engine="h5netcdf")
    for scale, units in (("minmax", "1"), ("none", "W m-2 sr-1")):
        run, _ = _components_run(
            tmp_path / scale, "same", {"scale": scale}, **{**source, "path": other}
        )
        back = xr.open_dataset(str(run / "04-transform" / "components.nc"), engine="h5netcdf")
        assert back["components"].attrs["units"] == units, scale


@pytest.mark.parametrize(
    "source, fmt, expected",
    [
        ("netcdf", "geotiff", "transform.format: 'geotiff' needs data.source 'geotiff'"),
        ("csv", "geotiff", "transform.format: 'geotiff' needs data.source 'geotiff'"),
        ("csv", "netcdf", "transform.format: 'netcdf' needs a cube"),
        ("parquet", "same", "transform.format: 'same' writes the components in the input's"),
    ],
)
def test_pipeline_component_format_must_fit_the_source(nc, tables, tmp_path, capsys, source,
                                                       fmt, expected):  # fmt: skip
    path = {"netcdf": nc[0], "csv": tables[1], "parquet": tables[0]}[source]
    data = {"source": source, "path": path}
    if source == "netcdf":
        data["feature_dim"] = "band"
    raw = {"name": "bad", "data": data, "transform": {"format": fmt}}
    with pytest.raises(PipelineError, match=expected):
        validate_pipeline(raw)
    out = tmp_path / "run"
    spec = tmp_path / "bad.yaml"
    spec.write_text(json.dumps({**raw, "output": str(out)}))  # JSON is YAML
    err = _fails(capsys, "run", str(spec), *THREADS)
    assert expected in err
    assert not out.exists()  # refused before anything was written
