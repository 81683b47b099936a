"""No-data: a declared value, a file's own tag, ``none``, and the warning when nothing is declared.

Every scene is a file the test writes as users receive them (a uint16 GeoTIFF with or without a
no-data tag, fill in every band; a packed int16 NetCDF with a ``_FillValue``), read back with
rasterio / h5netcdf independently of the package. A fit through the readers equals the
in-memory fit of the valid pixels stacked here by hand (1e-10); missing pixels are NaN in every
output band; the warning appears exactly when a fill-like value fills at least 1 % of the
samples in every band and nothing declares a no-data value.
"""

from __future__ import annotations

import io
import warnings

import dask
import numpy as np
import pytest
import xarray as xr
from rasters import write_tif

from ppa_dask import PPA, store
from ppa_dask.app.cli import main
from ppa_dask.app.pipeline import PipelineError, run_pipeline, validate_pipeline
from ppa_dask.utils.warnings import NoDataWarning

TOL = 1e-10
NY, NX = 48, 48
THREADS = ["--scheduler", "threads"]


@pytest.fixture(autouse=True)
def _threads_scheduler():
    with dask.config.set(scheduler="threads"):
        yield


def _bands(seed=0):
    """Three uint16 bands on a curve (digital numbers 7000-20000), none of them 0."""
    t = np.random.default_rng(seed).uniform(0.1, 1.0, size=(NY, NX))
    bands = np.stack([t, t**2, np.sin(2 * t)]) * 12000 + 7000
    return np.round(bands).astype(np.uint16)


def _fill(bands, n_pixels, value=0, which=(0, 1, 2)):
    """``value`` in the first ``n_pixels`` pixels (row-major) of the bands ``which``."""
    out = bands.copy()
    flat = out.reshape(out.shape[0], -1)
    for b in which:
        flat[b, :n_pixels] = value
    return out


def _read_tif(path):
    import rasterio

    with rasterio.open(path) as src:
        return src.read(), src.nodata


def _by_hand(bands, missing_value):
    """The valid pixels (no band equal to ``missing_value``) as rows, float64, row-major."""
    rows = bands.reshape(bands.shape[0], -1).T.astype(np.float64)
    if missing_value is None:
        return rows, np.ones(rows.shape[0], bool)
    valid = ~(rows == missing_value).any(axis=1)
    return rows[valid], valid


def _model():
    return PPA(degree=2, random_state=0)


def _assert_same_model(model, rows):
    # the variances to TOL of the total: the smallest step's is a small part of it, and the
    # chunked and in-memory sums round differently by a few ulps of the total (1.2e-10 of the
    # smallest here on an AMD EPYC)
    ref = _model().fit(rows)
    total = ref.explained_variance_.sum()
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=TOL, atol=TOL * total
    )
    assert list(model.degrees_) == list(ref.degrees_)
    stacked = model.xarray_layout_ is not None
    assert stacked
    probe = rows[:50]
    cube = xr.DataArray(probe.T[:, None, :], dims=("band", "y", "x"))
    got = model.transform(cube).values[:, 0, :].T
    np.testing.assert_allclose(got, ref.transform(probe), rtol=TOL, atol=TOL)


def _fit_quietly(cube):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = _model().fit(cube, feature_dim="band")
    return model, [w for w in caught if issubclass(w.category, NoDataWarning)]


# -------------------------------------------------------------------------------------------
# the readers
# -------------------------------------------------------------------------------------------


def test_a_files_nodata_tag_leaves_its_pixels_out_in_every_band(tmp_path):
    # fill 0 in every band of 20 % of the pixels, and one pixel 0 in band 2 only: missing as
    # a whole (a pixel any of whose bands equals the value)
    bands = _fill(_bands(), NY * NX // 5)
    bands[1, -1, -1] = 0
    path = write_tif(tmp_path / "tagged.tif", bands, nodata=0)
    raw, tag = _read_tif(path)
    assert tag == 0
    cube = store.open_cube(path)
    assert cube.encoding["ppa_dask_nodata"] == 0.0
    missing = np.isnan(cube.values)
    assert (missing.any(axis=0) == missing.all(axis=0)).all()  # whole pixels only
    rows, valid = _by_hand(raw, 0)
    assert int((~valid).sum()) == NY * NX // 5 + 1 == int(missing[0].sum())
    model, caught = _fit_quietly(cube)
    assert caught == []  # the tag declares it
    _assert_same_model(model, rows)
    assert model.xarray_layout_["nodata"] == 0.0
    comps = model.transform(cube).values
    assert np.isnan(comps[:, ~valid.reshape(NY, NX)]).all()
    assert np.isfinite(comps[:, valid.reshape(NY, NX)]).all()


def test_untagged_fill_in_every_band_warns_once_and_nodata_fixes_the_fit(tmp_path):
    n_fill = NY * NX // 6  # 16.7 %
    path = write_tif(tmp_path / "scene.tif", _fill(_bands(), n_fill))
    raw, tag = _read_tif(path)
    assert tag is None
    model, caught = _fit_quietly(store.open_cube(path))
    assert len(caught) == 1
    text = str(caught[0].message)
    assert text.startswith("0 fills 16.7% of the samples in every band") and "--nodata 0" in text
    assert model.xarray_layout_["nodata"] is None
    # declared: the model is the fit of the valid pixels, the fill NaN in every output band
    cube = store.open_cube(path, nodata=0)
    model, caught = _fit_quietly(cube)
    assert caught == []
    rows, valid = _by_hand(raw, 0)
    _assert_same_model(model, rows)
    out = model.inverse_transform(model.transform(cube)).values
    assert np.isnan(out[:, ~valid.reshape(NY, NX)]).all()
    np.testing.assert_allclose(
        out[:, valid.reshape(NY, NX)].T, raw.reshape(3, -1).T[valid], rtol=1e-6
    )


def test_none_overrides_the_tag_and_fits_every_pixel(tmp_path):
    bands = _fill(_bands(), NY * NX // 5)
    path = write_tif(tmp_path / "tagged.tif", bands, nodata=0)
    cube = store.open_cube(path, nodata="none")
    assert cube.encoding["ppa_dask_nodata"] is None and not np.isnan(cube.values).any()
    model, caught = _fit_quietly(cube)
    assert caught == []  # 'none' is a declaration: these are data
    _assert_same_model(model, _by_hand(_read_tif(path)[0], None)[0])


@pytest.mark.parametrize(
    "n_fill, which, value, warns",
    [
        (24, (0, 1, 2), 0, True),  # 24 / 2304 = 1.04 % in every band
        (23, (0, 1, 2), 0, False),  # 0.998 %: under the threshold
        (NY * NX // 3, (0,), 0, False),  # zeros are real data in one band only
        (NY * NX // 3, (0, 1), 0, False),  # ... or in two of three
        (NY * NX // 10, (0, 1, 2), 65535, True),  # the dtype's maximum
    ],
)
def test_the_warning_appears_exactly_when_it_should(tmp_path, n_fill, which, value, warns):
    path = write_tif(tmp_path / "s.tif", _fill(_bands(), n_fill, value, which))
    _, caught = _fit_quietly(store.open_cube(path))
    assert len(caught) == (1 if warns else 0)
    if warns:
        assert str(caught[0].message).startswith(f"{value} fills ")


def test_a_packed_netcdf_fill_value_is_the_tag_and_none_keeps_it(tmp_path):
    import h5netcdf

    stored = _bands().astype(np.int16) - 6000  # packed: value = stored * 0.5 + 100
    stored[:, :5, :] = -9999
    stored[2, -1, -1] = -9999  # one band only: the pixel is missing as a whole
    path = str(tmp_path / "packed.nc")
    with h5netcdf.File(path, "w") as f:
        f.dimensions = {"band": 3, "y": NY, "x": NX}
        v = f.create_variable("refl", ("band", "y", "x"), np.int16, chunks=(3, 16, 16))
        v[...] = stored
        v.attrs.update({"_FillValue": np.int16(-9999), "scale_factor": 0.5, "add_offset": 100.0})
    with h5netcdf.File(path, "r") as f:
        raw = f["refl"][...]
    cube = store.open_cube(path, feature_dim="band")
    assert cube.encoding["ppa_dask_nodata"] == -9999.0
    rows, valid = _by_hand(raw, -9999)
    np.testing.assert_array_equal(
        cube.values.reshape(3, -1).T[valid], rows * 0.5 + 100
    )  # unpacked
    assert np.isnan(cube.values.reshape(3, -1)[:, ~valid]).all()
    model, caught = _fit_quietly(cube)
    assert caught == []
    _assert_same_model(model, rows * 0.5 + 100)
    kept = store.open_cube(path, feature_dim="band", nodata="none")
    assert not np.isnan(kept.values).any() and kept.values.min() == -9999 * 0.5 + 100


def test_bad_nodata_values_are_refused_by_name(tmp_path):
    path = write_tif(tmp_path / "s.tif", _bands())
    for bad in ("zero", float("nan"), True, [0]):
        with pytest.raises(ValueError, match="nodata must be a finite number"):
            store.open_cube(path, nodata=bad)
    pd = pytest.importorskip("pandas")
    pd.DataFrame({"a": [1.0], "b": [2.0]}).to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match="nodata= applies to cubes"):
        store.open_source(str(tmp_path / "t.csv"), nodata=0)


# -------------------------------------------------------------------------------------------
# the CLI and the pipelines
# -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_warns_in_one_line_and_nodata_carries_to_transform(tmp_path, capsys):
    n_fill = NY * NX // 5
    path = write_tif(tmp_path / "scene.tif", _fill(_bands(), n_fill))
    raw, _ = _read_tif(path)
    rows, valid = _by_hand(raw, 0)
    base = ["--degree", "2", "--seed", "0", *THREADS]
    assert main(["fit", path, str(tmp_path / "m0.zarr"), *base]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "warning" in line.lower()]
    assert len(lines) == 1, err
    assert lines[0].startswith("ppa-dask: warning: 0 fills 20.0% of the samples in every band")
    assert "--nodata 0" in lines[0]

    assert main(["fit", path, str(tmp_path / "m.zarr"), "--nodata", "0", *base]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err.lower(), err
    model = store.load_model(str(tmp_path / "m.zarr"))
    assert model.xarray_layout_["nodata"] == 0.0
    _assert_same_model(model, rows)
    # transform without --nodata: the file has no tag, the model's value applies
    out = str(tmp_path / "c.tif")
    assert main(["transform", str(tmp_path / "m.zarr"), path, out, *THREADS]) == 0
    comps, tag = _read_tif(out)
    assert np.isnan(tag)  # the output's no-data is NaN
    assert np.isnan(comps[:, ~valid.reshape(NY, NX)]).all()
    assert np.isfinite(comps[:, valid.reshape(NY, NX)]).all()
    back = str(tmp_path / "r.tif")
    assert main(["inverse", str(tmp_path / "m.zarr"), out, back, *THREADS]) == 0
    recon, _ = _read_tif(back)
    assert np.isnan(recon[:, ~valid.reshape(NY, NX)]).all()

    assert main(["fit", path, str(tmp_path / "bad.zarr"), "--nodata", "zero", *THREADS]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--nodata" in err and "'zero'" in err


def _run(tmp_path, **data):
    config = validate_pipeline(
        {
            "name": "nd",
            "data": data,
            "model": {"degree": 2},
            "preprocess": {"scale": "none"},
            "evaluate": {"pca": False},
            "plots": {"components": 0},
        }
    )
    log = io.StringIO()
    out = tmp_path / "run"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_pipeline(config, output=str(out), stream=log)
    return out, log.getvalue(), [w for w in caught if issubclass(w.category, NoDataWarning)]


@pytest.mark.slow
def test_pipeline_data_nodata(tmp_path):
    path = write_tif(tmp_path / "scene.tif", _fill(_bands(), NY * NX // 5))
    raw, _ = _read_tif(path)
    rows, valid = _by_hand(raw, 0)
    out, log, caught = _run(tmp_path / "a", source="geotiff", path=path)
    assert len(caught) == 1 and "warning: 0 fills 20.0%" in log
    out, log, caught = _run(tmp_path / "b", source="geotiff", path=path, nodata=0)
    assert caught == [] and "warning" not in log
    model = store.load_model(str(out / "03-fit" / "model.zarr"))
    assert model.xarray_layout_["nodata"] == 0.0
    _assert_same_model(model, rows)
    comps = store.open_dataset(str(out / "04-transform" / "components.zarr"))["components"]
    assert np.isnan(comps.values[:, ~valid.reshape(NY, NX)]).all()
    with pytest.raises(PipelineError, match=r"data\.nodata: expected a number"):
        validate_pipeline(
            {"name": "x", "data": {"source": "geotiff", "path": path, "nodata": "x"}}
        )
