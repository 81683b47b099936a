"""write_cube with like= a Dataset or a DataArray, and the dtype of written results.

Each written file is read back (GeoTIFF through rioxarray, NetCDF through xarray) and compared
with the input it was written like: CRS, transform, coordinates, attributes and dtype.
"""

from __future__ import annotations

import numpy as np
import pytest
import rioxarray  # noqa: F401  (the .rio accessor)
import xarray as xr

from ppa_dask.store import write_cube


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


@pytest.mark.parametrize("kind", ["Dataset", "DataArray"])
@pytest.mark.parametrize("suffix", [".tif", ".nc"])
def test_written_like_the_input_with_its_georeferencing_and_dtype(tmp_path, kind, suffix):
    ds = scene()
    like = ds if kind == "Dataset" else ds["refl"]
    out = components(ds)
    path = write_cube(out, tmp_path / f"c{suffix}", like=like)
    if suffix == ".tif":
        back = rioxarray.open_rasterio(path).load()
        assert back.rio.crs == ds.rio.crs
        assert back.rio.transform() == ds["refl"].rio.transform()
    else:
        back = xr.open_dataset(path, engine="h5netcdf")["components"].load()
        if kind == "Dataset":
            got = xr.open_dataset(path, engine="h5netcdf").attrs
            assert got["title"] == "a test scene" and got["source"] == "tests"
        else:
            assert back.attrs["units"] == "DN"
    for name in ("y", "x"):
        np.testing.assert_array_equal(back[name].values, ds[name].values)
    # uint16 input: float32 by default, and the values are the results in float32
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back.values, out.values.astype(np.float32))
    wide = write_cube(out, tmp_path / f"w{suffix}", like=like, dtype="float64")
    if suffix == ".tif":
        assert rioxarray.open_rasterio(wide).dtype == np.float64
    else:
        assert xr.open_dataset(wide, engine="h5netcdf")["components"].dtype == np.float64


def test_float64_input_is_written_float64_and_other_dtypes_are_refused(tmp_path):
    ds = scene()
    like = ds["refl"].astype(np.float64)
    path = write_cube(components(ds), tmp_path / "c.nc", like=like)
    assert xr.open_dataset(path, engine="h5netcdf")["components"].dtype == np.float64
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        write_cube(components(ds), tmp_path / "d.nc", like=like, dtype="int16")


def test_cli_transform_writes_float32_for_integer_input_unless_told(tmp_path, capsys):
    from ppa_dask.app.cli import main

    ds = scene()
    source = str(tmp_path / "scene.tif")
    ds["refl"].rio.to_raster(source, tiled=True, blockxsize=16, blockysize=16)
    model = str(tmp_path / "m.zarr")
    threads = ["--scheduler", "threads"]
    assert main(["fit", source, model, "--degree", "2", *threads]) == 0
    for extra, expected in (([], np.float32), (["--dtype", "float64"], np.float64)):
        out = str(tmp_path / f"c{len(extra)}.tif")
        assert main(["transform", model, source, out, *extra, *threads]) == 0
        back = rioxarray.open_rasterio(out)
        assert back.dtype == expected and back.rio.crs == ds.rio.crs
    capsys.readouterr()
