"""Rasters without georeferencing (a lab or airborne cube saved as GeoTIFF), the GeoTIFFs
ppa-dask writes, and the warnings a command prints.

rasterio's NotGeoreferencedWarning restated at every open that such a file has no CRS; the
readers and writers now keep it quiet, as the file is read and written on its pixel grid. The
written GeoTIFFs are compressed losslessly and say what they hold; ppa-dask's own warnings
(the rank one here) are one line on the command line.
"""

from __future__ import annotations

import warnings

import dask
import numpy as np
import pytest
import rasterio
from rasterio.errors import NotGeoreferencedWarning

from ppa_dask import PPA, store
from ppa_dask.app.cli import main

THREADS = ["--scheduler", "threads"]


@pytest.fixture(autouse=True)
def _threads_scheduler():
    with dask.config.set(scheduler="threads"):
        yield


def _write_plain(path, bands):
    """A tiled GeoTIFF with neither CRS nor transform."""
    count, height, width = bands.shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(
            path, "w", driver="GTiff", width=width, height=height, count=count,
            dtype=bands.dtype, tiled=True, blockxsize=16, blockysize=16,
        ) as dst:  # fmt: skip
            dst.write(bands)
    return str(path)


def _bands(rank_deficient=False):
    t = np.random.default_rng(0).uniform(0.1, 1.0, size=(32, 48))
    bands = np.stack([t, t**2, np.sin(3 * t), t**3]).astype(np.float32)
    if rank_deficient:
        bands[3] = bands[0]
    return bands


def _structure(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(path) as src:
            return src.tags(ns="IMAGE_STRUCTURE"), src.tags()


def test_a_raster_without_georeferencing_is_read_and_written_quietly(tmp_path):
    bands = _bands()
    path = _write_plain(tmp_path / "plain.tif", bands)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cube = store.open_cube(path)
        model = PPA(degree=2, random_state=0).fit(cube, feature_dim="band")
        out = store.write_cube(model.transform(cube), str(tmp_path / "c.tif"), like=cube)
        back = store.open_cube(out, feature_dim="component")
        values = back.values
    noisy = [str(w.message) for w in caught if issubclass(w.category, NotGeoreferencedWarning)]
    assert noisy == []
    ref = PPA(degree=2, random_state=0).fit(bands.reshape(4, -1).T.astype(np.float64))
    expected = ref.transform(bands.reshape(4, -1).T.astype(np.float64)).T.reshape(4, 32, 48)
    assert np.allclose(values, expected, rtol=0, atol=1e-5)  # float32 output


def test_written_geotiffs_are_compressed_and_say_what_they_hold(tmp_path, capsys):
    path = _write_plain(tmp_path / "plain.tif", _bands())
    model, comps, rec = (str(tmp_path / n) for n in ("m.zarr", "c.tif", "r.tif"))
    for argv in (
        ["fit", path, model, "--degree", "2"],
        ["transform", model, path, comps],
        ["inverse", model, comps, rec],
    ):
        assert main(argv + THREADS) == 0, capsys.readouterr().err
    for out, what in ((comps, '"what": "components"'), (rec, '"what": "reconstruction"')):
        structure, tags = _structure(out)
        assert structure["COMPRESSION"] == "DEFLATE" and structure["PREDICTOR"] == "3"
        assert what in tags["PPA_DASK"]


def test_the_rank_warning_is_one_line_on_the_command_line(tmp_path, capsys):
    path = _write_plain(tmp_path / "rank.tif", _bands(rank_deficient=True))
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        code = main(["fit", path, str(tmp_path / "m.zarr"), "--degree", "2", *THREADS])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("ppa-dask: warning: X has numerical rank 3 of 4 features")


def test_a_stripped_geotiff_is_read_in_chunks_of_whole_strips(tmp_path):
    bands = np.concatenate([_bands()] * 20, axis=1)  # 640 rows of 48 pixels
    path = str(tmp_path / "strips.tif")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(
            path, "w", driver="GTiff", width=48, height=640, count=4, dtype="float32",
            tiled=False, blockysize=3,
        ) as dst:  # fmt: skip
            dst.write(bands)
        with rasterio.open(path) as src:
            assert src.block_shapes[0] == (3, 48)  # 214 strips of 3 rows
    cube = store.open_cube(path)
    rows = cube.chunks[1]
    assert rows == (255, 255, 130)  # 85 strips each, whole strips in every chunk
    assert np.array_equal(cube.values, bands)
    with dask.config.set({"array.chunk-size": "100kB"}):  # 3 x 48 x 4 x 4 B = 2304 B a strip
        assert store.open_cube(path).chunks[1][0] == 3 * (100_000 // 2304)
