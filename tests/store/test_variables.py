"""Bands as variables: NetCDF (and Zarr) data variables sharing their dimensions stacked as the
features, along ``variable``.

The file is written here as Sentinel-2 products come (one uint16 variable per band sharing
``(y, x)``, a scalar ``crs`` variable beside them, fill in every band, one band packed with a
scale factor) and read back with h5netcdf on its own; the fit equals the in-memory fit of the
valid pixels stacked here by hand (1e-10).
"""

from __future__ import annotations

import io

import dask
import numpy as np
import pytest
from rasters import assert_same_model, four_band_scene

from ppa_dask import PPA, store
from ppa_dask.app.cli import main
from ppa_dask.app.pipeline import run_pipeline, validate_pipeline

NY, NX = 32, 40
NAMES = ("blue", "green", "red", "nir")
THREADS = ["--scheduler", "threads"]


@pytest.fixture(autouse=True)
def _threads_scheduler():
    with dask.config.set(scheduler="threads"):
        yield


def _write(path, tag=True):
    import h5netcdf

    bands = four_band_scene(0, NY, NX)
    bands[:, :4, :] = 0  # outside the tile, in every band (12.5 %)
    bands[1, -1, -1] = 0  # and one pixel in green only: missing as a whole
    with h5netcdf.File(path, "w") as f:
        f.dimensions = {"y": NY, "x": NX}
        f.create_variable("y", ("y",), float, data=1000.0 - 10 * np.arange(NY))
        f.create_variable("x", ("x",), float, data=300000.0 + 10 * np.arange(NX))
        f.create_variable("crs", (), np.int32).attrs["spatial_ref"] = "EPSG:32633"
        for name, band in zip(NAMES, bands):
            v = f.create_variable(name, ("y", "x"), np.uint16, chunks=(16, 20))
            v[...] = band
            if tag:
                v.attrs["_FillValue"] = np.uint16(0)
        f["nir"].attrs["scale_factor"] = 0.5  # packed: the value is half the stored one
    with h5netcdf.File(path, "r") as f:
        raw = np.stack([f[n][...] for n in NAMES]).astype(np.float64)
    rows = raw.reshape(4, -1).T
    valid = ~(rows == 0).any(axis=1)
    rows = rows[valid] * np.array([1, 1, 1, 0.5])
    return str(path), rows, valid.reshape(NY, NX)


@pytest.mark.slow
def test_variables_stack_as_features_and_fit_as_stacked_by_hand(tmp_path):
    path, rows, valid = _write(tmp_path / "S2.nc")
    for choice in (list(NAMES), ",".join(NAMES), "all"):  # 'all' leaves the scalar crs out
        cube = store.open_cube(path, variables=choice)
        assert cube.dims == ("variable", "y", "x")
        assert cube["variable"].values.tolist() == list(NAMES)
    assert cube.encoding["ppa_dask_nodata"] == 0.0  # the variables' _FillValue
    assert np.isnan(cube.values[:, ~valid]).all() and not np.isnan(cube.values[:, valid]).any()
    model = PPA(degree=2, random_state=0).fit(cube, feature_dim="variable")
    assert_same_model(model, rows, "variable")
    comps = model.transform(cube).values
    assert np.isnan(comps[:, ~valid]).all() and np.isfinite(comps[:, valid]).all()
    two = store.open_cube(path, variables=["red", "blue"])
    assert two["variable"].values.tolist() == ["red", "blue"]


def test_untagged_variables_take_nodata_and_warn_without_it(tmp_path):
    from ppa_dask.utils.warnings import NoDataWarning

    path, rows, _ = _write(tmp_path / "S2.nc", tag=False)
    with pytest.warns(NoDataWarning, match="0 fills 12.5%"):
        PPA(degree=2, random_state=0).fit(
            store.open_cube(path, variables="all"), feature_dim="variable"
        )
    assert_same_model(
        PPA(degree=2, random_state=0).fit(
            store.open_cube(path, variables="all", nodata=0), feature_dim="variable"
        ),
        rows,
        "variable",
    )


def test_a_dataset_of_several_variables_names_both_options(tmp_path):
    path, _, _ = _write(tmp_path / "S2.nc")
    with pytest.raises(ValueError, match="holds the variables") as info:
        store.open_cube(path, feature_dim="band")
    text = str(info.value)
    for part in ("'blue'", "'nir'", "'crs'", "variable=", "variables=", "--variable all"):
        assert part in text
    with pytest.raises(ValueError, match="must share their dimensions") as info:
        store.open_cube(path, variables=["blue", "crs"])
    assert "blue: (y, x)" in str(info.value) and "crs: ()" in str(info.value)
    with pytest.raises(ValueError, match="has no variable 'swir'"):
        store.open_cube(path, variables=["blue", "swir"])
    with pytest.raises(ValueError, match="give one"):
        store.open_cube(path, "blue", variables="all")


@pytest.mark.slow
def test_cli_variable_all_and_transform_with_the_models_variables(tmp_path, capsys):
    path, rows, valid = _write(tmp_path / "S2.nc")
    model_path = str(tmp_path / "m.zarr")
    args = ["--variable", "all", "--degree", "2", *THREADS]
    assert main(["fit", path, model_path, *args]) == 0
    assert_same_model(store.load_model(model_path), rows, "variable")
    out = str(tmp_path / "c.nc")
    assert main(["transform", model_path, path, out, *THREADS]) == 0, capsys.readouterr().err
    comps = store.open_cube(out, "components", "component").values
    assert np.isnan(comps[:, ~valid]).all() and np.isfinite(comps[:, valid]).all()
    capsys.readouterr()
    assert main(["fit", path, str(tmp_path / "n.zarr"), "--feature-dim", "band", *THREADS]) == 2
    err = capsys.readouterr().err
    assert "--variable a,b,c or --variable all" in err and err.count("\n") == 1


@pytest.mark.slow
def test_pipeline_variables(tmp_path):
    path, rows, valid = _write(tmp_path / "S2.nc")
    config = validate_pipeline(
        {
            "name": "vars",
            "data": {"source": "netcdf", "path": path, "variables": "all"},
            "model": {"degree": 2},
            "preprocess": {"scale": "none"},
            "transform": {"format": "netcdf"},
            "evaluate": {"pca": False},
            "plots": {"components": 0},
        }
    )
    assert config["data"]["feature_dim"] == "variable"
    out = tmp_path / "run"
    run_pipeline(config, output=str(out), stream=io.StringIO())
    assert_same_model(store.load_model(str(out / "03-fit" / "model.zarr")), rows, "variable")
    comps = store.open_cube(str(out / "04-transform" / "components.nc"), "components", "component")
    assert np.isnan(comps.values[:, ~valid]).all()
