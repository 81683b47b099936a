"""Series of multi-band files: a glob of dated GeoTIFFs on one grid is one cube along ``time``.

The files are written here (4-band uint16 scenes, one per date, named as Landsat names them or
undated, some with a TIFFTAG_DATETIME), read back with rasterio on its own and stacked by hand
in date order: the fit with the bands as features and the dates' pixels as samples equals the
in-memory fit of the valid rows (1e-10); the dates are the time coordinate.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest
from rasters import assert_same_model, four_band_scene, write_tif

from ppa_dask import PPA, store
from ppa_dask.app.cli import main

NY, NX = 24, 32
THREADS = ["--scheduler", "threads"]


@pytest.fixture(autouse=True)
def _threads_scheduler():
    with dask.config.set(scheduler="threads"):
        yield


def _scene(seed):
    return four_band_scene(seed, NY, NX)


def _rows(stacks):
    """(time, band, y, x) -> valid rows in the stacker's order (time, y, x), as float64."""
    rows = np.concatenate([s.reshape(s.shape[0], -1).T for s in stacks]).astype(np.float64)
    return rows[~(rows == 0).any(axis=1)]


def test_dated_files_are_one_series_in_date_order(tmp_path):
    dates = ["20200710", "20200510", "20200608"]
    stacks = {d: _scene(i) for i, d in enumerate(dates)}
    stacks["20200608"][:, :3, :] = 0  # fill on one date only
    for d, bands in stacks.items():
        write_tif(tmp_path / f"LC08_L1TP_227065_{d}_20200824_02_T1.TIF", bands)
    cube = store.open_cube(str(tmp_path / "LC08_*.TIF"), nodata=0)
    assert cube.dims == ("time", "band", "y", "x")
    assert cube["time"].values.astype("datetime64[D]").astype(str).tolist() == [
        "2020-05-10",
        "2020-06-08",
        "2020-07-10",
    ]
    in_order = [stacks[d] for d in sorted(dates)]
    missing = np.isnan(cube.values)
    assert missing[1, :, :3, :].all() and not missing[[0, 2]].any()
    model = PPA(degree=2, random_state=0).fit(cube, feature_dim="band")
    assert_same_model(model, _rows(in_order), "band")
    comps = model.transform(cube)
    assert comps.dims == ("time", "component", "y", "x")  # component in place of band
    assert np.isnan(comps.values[1, :, :3, :]).all() and np.isfinite(comps.values[0]).all()


def test_undated_files_are_in_order_and_tags_give_dates(tmp_path):
    for name, seed in (("a", 0), ("b", 1)):
        write_tif(tmp_path / f"tile_{name}.tif", _scene(seed))
    cube = store.open_cube(str(tmp_path / "tile_*.tif"))
    assert cube["time"].values.tolist() == [0, 1]
    np.testing.assert_array_equal(cube.isel(time=1).values, _scene(1))
    write_tif(tmp_path / "x_1.tif", _scene(0), date="2021:03:04 10:00:00")
    write_tif(tmp_path / "x_2.tif", _scene(1), date="2021:01:02 10:00:00")
    cube = store.open_cube(str(tmp_path / "x_*.tif"))
    assert cube["time"].values.astype("datetime64[D]").astype(str).tolist() == [
        "2021-01-02",
        "2021-03-04",
    ]
    np.testing.assert_array_equal(cube.isel(time=0).values, _scene(1))


def test_a_series_on_different_grids_is_refused_by_name(tmp_path):
    a = write_tif(tmp_path / "s_20200101.tif", _scene(0))
    b = write_tif(tmp_path / "s_20200201.tif", _scene(1), origin=(500030, 4000000))
    with pytest.raises(ValueError, match="not on one grid") as info:
        store.open_cube([a, b])
    assert repr(a) in str(info.value) and repr(b) in str(info.value)
    c = write_tif(tmp_path / "t_20200201.tif", _scene(1)[:3])
    with pytest.raises(ValueError, match="4 bands; .* 3 bands"):
        store.open_cube([a, c])


def test_cli_fits_a_series_and_writes_its_components_with_the_dates(tmp_path, capsys):
    stacks = [_scene(i) for i in range(3)]
    for d, bands in zip(("20200510", "20200608", "20200710"), stacks):
        write_tif(tmp_path / f"S_{d}.TIF", bands)
    pattern = str(tmp_path / "S_*.TIF")
    model = str(tmp_path / "m.zarr")
    assert main(["fit", pattern, model, "--degree", "2", *THREADS]) == 0
    assert_same_model(store.load_model(model), _rows(stacks), "band")
    out = str(tmp_path / "c.nc")
    assert main(["transform", model, pattern, out, *THREADS]) == 0, capsys.readouterr().err
    comps = store.open_cube(out, "components", "component")
    assert comps.dims == ("time", "component", "y", "x") and comps.sizes["time"] == 3
    assert str(comps["time"].values[0])[:10] == "2020-05-10"
