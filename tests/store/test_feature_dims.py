"""Several feature dimensions: ``feature_dim=("time", "band")`` stacks the dates' bands of a
series into the features, named ``time=...|band=...``, and transform / inverse restore them."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from rasters import write_tif

from ppa_dask import PPA, store
from ppa_dask.app.cli import main

TOL = 1e-10


def _series():
    rng = np.random.default_rng(0)
    t = rng.uniform(0.1, 1.0, size=(12, 15))
    days = np.array(["2020-05-10", "2020-06-08"], dtype="datetime64[ns]")
    data = np.stack(
        [
            np.stack([t, t**2, np.sin(2 * t)]) * (1 + k) + 0.01 * rng.normal(size=(3, 12, 15))
            for k in range(2)
        ]
    )
    return xr.DataArray(
        data,
        dims=("time", "band", "y", "x"),
        coords={
            "time": days,
            "band": ["B2", "B3", "B4"],
            "y": np.arange(12.0),
            "x": np.arange(15.0),
        },
    )


def test_two_feature_dims_fit_as_stacked_by_hand_and_round_trip(tmp_path):
    cube = _series()
    rows = cube.transpose("y", "x", "time", "band").values.reshape(12 * 15, 6)
    model = PPA(degree=2, random_state=0).fit(cube, feature_dim=("time", "band"))
    ref = PPA(degree=2, random_state=0).fit(rows)
    np.testing.assert_allclose(model.explained_variance_, ref.explained_variance_, rtol=TOL)
    assert model.xarray_layout_["feature_coords"]["time|band"][:2].tolist() == [
        "time=2020-05-10|band=B2",
        "time=2020-05-10|band=B3",
    ]
    comps = model.transform(cube)
    assert comps.dims == ("component", "y", "x")
    np.testing.assert_allclose(
        comps.transpose("y", "x", "component").values.reshape(180, -1),
        ref.transform(rows),
        rtol=TOL,
        atol=TOL,
    )
    back = model.inverse_transform(comps)
    assert back.dims == cube.dims
    assert back["time"].values.tolist() == cube["time"].values.tolist()
    assert back["band"].values.tolist() == ["B2", "B3", "B4"]
    np.testing.assert_allclose(back.values, cube.values, rtol=1e-8, atol=1e-8)  # all components
    store.save_model(model, str(tmp_path / "m.zarr"))
    loaded = store.load_model(str(tmp_path / "m.zarr"))
    np.testing.assert_allclose(
        loaded.inverse_transform(loaded.transform(cube)).values, cube.values, atol=1e-8
    )


def test_a_missing_feature_dim_is_named():
    with pytest.raises(ValueError, match="'season' is not a dimension"):
        PPA(degree=2).fit(_series(), feature_dim=("season", "band"))


# --- the CLI and pipelines: --feature-dim time,band and feature_dim: [time, band] ------------

NY, NX = 24, 32
DATES = ["20200710", "20200510", "20200608"]  # not in date order: the series sorts them


@pytest.fixture
def dated_files(tmp_path):
    """Three dated 4-band uint16 GeoTIFFs on one grid, no no-data tag, the date 2020-06-08
    filled with 0 in its first three rows; and the rows stacked by hand: one per pixel, the
    features every date's bands in date order, the pixels with a fill value left out."""
    stacks = {}
    for i, date in enumerate(DATES):
        t = np.random.default_rng(i).uniform(0.1, 1.0, size=(NY, NX))
        bands = np.stack([t, t**2, np.sin(2 * t), np.sqrt(t)]) * (9000 - 1000 * i) + 1000
        bands = np.round(bands).astype(np.uint16)
        if date == "20200608":
            bands[:, :3, :] = 0
        stacks[date] = bands
        write_tif(tmp_path / f"LC08_L1TP_227065_{date}_20200824_02_T1.TIF", bands)
    ordered = [stacks[d] for d in sorted(DATES)]
    rows = np.concatenate([b.reshape(4, -1).T for b in ordered], axis=1).astype(np.float64)
    valid = ~(rows == 0).any(axis=1)
    return str(tmp_path / "LC08_*.TIF"), ordered, rows, valid


def _same_model(model, rows):
    ref = PPA(degree=2, random_state=0).fit(rows)
    total = ref.explained_variance_.sum()
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=TOL, atol=TOL * total
    )
    assert list(model.degrees_) == list(ref.degrees_)
    assert model.n_features_in_ == 12


def _check_restored(path, variable, ordered, valid):
    """A reconstruction file: (time, band, y, x) with the input's dates, bands, grid and CRS;
    the input's values at the valid pixels (all components kept), NaN at the others in every
    date and band."""
    back = store.open_cube(path, variable)
    assert back.dims == ("time", "band", "y", "x")
    assert back["time"].values.astype("datetime64[D]").astype(str).tolist() == [
        "2020-05-10",
        "2020-06-08",
        "2020-07-10",
    ]
    source = store.open_cube(path.rsplit("/", 1)[0] + "/LC08_*.TIF")
    assert back["band"].values.tolist() == source["band"].values.tolist()
    np.testing.assert_array_equal(back["y"].values, source["y"].values)
    np.testing.assert_array_equal(back["x"].values, source["x"].values)
    assert back.rio.crs == source.rio.crs and back.rio.transform() == source.rio.transform()
    values = back.values.reshape(3, 4, -1)  # (time, band, pixel)
    mask = valid.reshape(NY, NX).ravel()
    assert np.isnan(values[:, :, ~mask]).all()
    expected = np.stack(ordered).reshape(3, 4, -1).astype(np.float64)
    np.testing.assert_allclose(values[:, :, mask], expected[:, :, mask], rtol=1e-6)


@pytest.mark.slow
def test_cli_fit_with_two_feature_dims_is_the_fit_of_the_rows_stacked_by_hand(
    dated_files, tmp_path, capsys
):
    pattern, ordered, rows, valid = dated_files
    model_path = str(tmp_path / "m.zarr")
    threads = ["--scheduler", "threads"]
    fit = ["fit", pattern, model_path, "--feature-dim", "time,band", "--nodata", "0"]
    assert main([*fit, "--degree", "2", *threads]) == 0
    model = store.load_model(model_path)
    _same_model(model, rows[valid])
    assert model.xarray_layout_["feature_dims"] == ["time", "band"]
    assert model.xarray_layout_["nodata"] == 0
    # transform and inverse take the dimensions the model recorded
    comps = str(tmp_path / "c.nc")
    recon = str(tmp_path / "r.nc")
    wide = ["--dtype", "float64"]
    assert main(["transform", model_path, pattern, comps, *wide, *threads]) == 0
    back = store.open_cube(comps, "components")
    assert back.dims == ("component", "y", "x")
    got = back.values.reshape(12, -1).T
    np.testing.assert_allclose(
        got[valid],
        PPA(degree=2, random_state=0).fit(rows[valid]).transform(rows[valid]),
        rtol=1e-8,
        atol=1e-8 * np.sqrt(rows[valid].var(axis=0).sum()),
    )
    assert np.isnan(got[~valid]).all()
    assert main(["inverse", model_path, comps, recon, *wide, *threads]) == 0
    _check_restored(recon, "reconstruction", ordered, valid)
    capsys.readouterr()


@pytest.mark.slow
def test_pipeline_feature_dim_list_fits_as_stacked_by_hand_and_restores_the_dims(
    dated_files, tmp_path, capsys
):
    pattern, ordered, rows, valid = dated_files
    path = tmp_path / "series.yaml"
    path.write_text(
        "pipeline: 1\nname: series\n"
        f"output: {tmp_path / 'run'}\n"
        f"data: {{source: geotiff, path: '{pattern}', nodata: 0, feature_dim: [time, band]}}\n"
        "preprocess: {scale: none}\nmodel: {degree: 2}\n"
        "transform: {format: netcdf}\nplots: {components: 2}\n"
    )
    threads = ["--scheduler", "threads"]
    assert main(["run", str(path), "--check"]) == 0
    assert "feature_dim:\n  - time\n  - band" in capsys.readouterr().out
    assert main(["run", str(path), *threads]) == 0
    model_path = str(tmp_path / "run" / "03-fit" / "model.zarr")
    model = store.load_model(model_path)
    _same_model(model, rows[valid])
    comps = str(tmp_path / "run" / "04-transform" / "components.nc")
    assert store.open_cube(comps, "components").dims == ("component", "y", "x")
    # the pipeline's model restores the dates and bands of its components
    recon = str(tmp_path / "r.nc")
    assert main(["inverse", model_path, comps, recon, "--dtype", "float64", *threads]) == 0
    _check_restored(recon, None, ordered, valid)  # one variable, named as the fitted cube
    capsys.readouterr()


@pytest.mark.parametrize(
    "given, told",
    [
        ("time,season", "--feature-dim time,season: 'season' is not a dimension of"),
        ("band,band", "argument --feature-dim: 'band,band' names 'band' twice"),
    ],
)
def test_cli_feature_dims_refused_by_name(dated_files, tmp_path, capsys, given, told):
    pattern = dated_files[0]
    out = str(tmp_path / "m.zarr")
    assert main(["fit", pattern, out, "--feature-dim", given, "--scheduler", "threads"]) == 2
    err = capsys.readouterr().err
    assert told in err and err.count("\n") == 1
    assert not (tmp_path / "m.zarr").exists()


@pytest.mark.parametrize(
    "dims, told",
    [
        ("[time, season]", "data.feature_dim: [time, season]: 'season' is not a dimension of"),
        ("[band, band]", "data.feature_dim: expected the name of the feature dimension"),
    ],
)
def test_pipeline_feature_dims_refused_at_check(dated_files, tmp_path, capsys, dims, told):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "pipeline: 1\nname: bad\n"
        f"data: {{source: geotiff, path: '{dated_files[0]}', feature_dim: {dims}}}\n"
    )
    assert main(["run", str(path), "--check"]) == 2
    assert told in capsys.readouterr().err
