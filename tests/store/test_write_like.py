"""write_cube with like= a Dataset or a DataArray, and the dtype of written results.

Each written file is read back (GeoTIFF through rioxarray, NetCDF through xarray) and compared
with the input it was written like: CRS, transform, coordinates, attributes and dtype.
"""

from __future__ import annotations

import numpy as np
import pytest
import rioxarray  # noqa: F401  (the .rio accessor)
import xarray as xr

from ppa_dask.store import write_cube, write_result


def scene():
    """A uint16 3-band image with a CRS, a transform, coordinates and attributes."""
    rng = np.random.default_rng(0)
    t = rng.uniform(size=(40, 48))
    values = np.stack([t, t**2, np.sin(3 * t)]) * 1000 + 2000
    image = xr.DataArray(
        values.astype(np.uint16),
        dims=("band", "y", "x"),
        coords={
            "band": [1, 2, 3],
            "y": 5e6 - 30.0 * np.arange(40),
            "x": 3e5 + 30.0 * np.arange(48),
        },
        name="refl",
        attrs={"units": "DN", "long_name": "counts"},
    )
    image = image.rio.write_crs("EPSG:32621")
    return image.to_dataset().assign_attrs(title="a test scene", source="tests")


def components(like):
    """Results of the input, float64 and without its CRS (as a model's transform gives)."""
    out = like["refl"].astype(np.float64).rename({"band": "component"}) / 7.0
    return out.drop_vars("spatial_ref").rename("components")


def _read_back(path, suffix):
    """(the written variable, the file's global attributes), georeferencing decoded."""
    if suffix == ".tif":
        back = rioxarray.open_rasterio(path).load()
        return back, back.attrs
    if suffix == ".nc":
        ds = xr.open_dataset(path, engine="h5netcdf", decode_coords="all")
    else:
        ds = xr.open_zarr(path, decode_coords="all", consolidated=False)
    return ds["components"].load(), ds.attrs


@pytest.mark.parametrize("dtype", [None, "float32", "float64"])
@pytest.mark.parametrize("kind", ["Dataset", "DataArray"])
@pytest.mark.parametrize("suffix", [".tif", ".nc", ".zarr"])
def test_written_like_the_input_with_its_georeferencing_and_dtype(tmp_path, kind, suffix, dtype):
    """Every format a cube result is written in (write_result: GeoTIFF, NetCDF, a Zarr
    group): the CRS and transform, y / x coordinates, units and global attributes of ``like``
    (the result has none of them), and the dtype asked for, float32 by default for uint16."""
    ds = scene()
    like = ds if kind == "Dataset" else ds["refl"]
    out = components(ds)
    out.attrs = {}
    path = write_result(out, str(tmp_path / f"c{suffix}"), like=like, dtype=dtype)
    back, global_attrs = _read_back(path, suffix)
    assert back.rio.crs == ds.rio.crs
    assert back.rio.transform() == ds["refl"].rio.transform()
    for name in ("y", "x"):
        np.testing.assert_array_equal(back[name].values, ds[name].values)
    assert back.attrs["units"] == "DN"
    if kind == "Dataset":
        assert global_attrs["title"] == "a test scene" and global_attrs["source"] == "tests"
    expected = np.dtype(dtype or np.float32)  # uint16 input: float32 unless told
    assert back.dtype == expected
    np.testing.assert_array_equal(back.values, out.values.astype(expected))


def test_float64_input_is_written_float64_and_other_dtypes_are_refused(tmp_path):
    ds = scene()
    like = ds["refl"].astype(np.float64)
    path = write_cube(components(ds), tmp_path / "c.nc", like=like)
    assert xr.open_dataset(path, engine="h5netcdf")["components"].dtype == np.float64
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        write_cube(components(ds), tmp_path / "d.nc", like=like, dtype="int16")


@pytest.mark.parametrize("suffix", [".tif", ".nc", ".zarr"])
@pytest.mark.slow
def test_cli_dtype_and_georeferencing_for_every_output_format(tmp_path, capsys, suffix):
    """transform and inverse, each output format: float32 by default for a uint16 scene,
    float64 with --dtype float64, the scene's CRS, transform and coordinates; the inverse of
    float64 components is the scene (all components kept)."""
    from ppa_dask.app.cli import main

    ds = scene()
    source = str(tmp_path / "scene.tif")
    ds["refl"].rio.to_raster(source, tiled=True, blockxsize=16, blockysize=16)
    model = str(tmp_path / "m.zarr")
    threads = ["--scheduler", "threads"]
    assert main(["fit", source, model, "--degree", "2", *threads]) == 0
    comps = {}
    for dtype in (None, "float64"):
        extra = [] if dtype is None else ["--dtype", dtype]
        out = str(tmp_path / f"c_{dtype}{suffix}")
        assert main(["transform", model, source, out, *extra, *threads]) == 0
        back = _components_file(out, suffix)
        assert back.dtype == np.dtype(dtype or np.float32)
        assert back.rio.crs == ds.rio.crs
        assert back.rio.transform() == ds["refl"].rio.transform()
        np.testing.assert_array_equal(back["x"].values, ds["x"].values)
        comps[dtype] = out
    recon = str(tmp_path / f"r{suffix}")
    wide = comps["float64"]
    assert main(["inverse", model, wide, recon, "--dtype", "float64", *threads]) == 0
    back = _components_file(recon, suffix)
    assert back.dtype == np.float64 and back.rio.crs == ds.rio.crs
    np.testing.assert_allclose(back.values, ds["refl"].values.astype(float), rtol=1e-9)
    narrow = str(tmp_path / f"r32{suffix}")
    assert main(["inverse", model, wide, narrow, *threads]) == 0
    assert _components_file(narrow, suffix).dtype == np.float64  # its input is float64
    capsys.readouterr()


def _components_file(path, suffix):
    """The one data variable of a file the CLI wrote, georeferencing decoded."""
    if suffix == ".tif":
        return rioxarray.open_rasterio(path).load()
    if suffix == ".nc":
        ds = xr.open_dataset(path, engine="h5netcdf", decode_coords="all")
    else:
        ds = xr.open_zarr(path, decode_coords="all", consolidated=False)
    (name,) = ds.data_vars
    return ds[name].load()
