"""A fit of a tiled multi-band GeoTIFF is quiet and the component images readable.

Stacking a raster of many tiles into rows merges each row of tiles (task-based rechunk): left to
the reshape, dask chose a P2P shuffle on a cluster, and distributed logged two warnings per
shuffle (``distributed.shuffle ... deactivated``). The rows of the valid pixels are selected in
each task from the data, not by a mask copied into the graph (which the client then sent as a
"large graph"). The component plots use 2-98 percentile colour limits, one helper for the
pipelines and the gallery.
"""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys

import numpy as np
import paths
import pytest
from conftest import loopback_cluster

from ppa_dask.plotting import robust_limits
from ppa_dask.store import open_cube
from ppa_dask.store.stacker import Stacker

# the command on a cluster in a child process, a tiled raster stacked
pytestmark = pytest.mark.slow


ROOT = str(paths.ROOT)
SIZE, TILE = 1024, 128  # 64 tiles: enough for dask to pick P2P for the reshape's rechunk


def write_scene(path, nodata=0):
    """A curved 3-band uint16 scene, 128 x 128 tiles, a fill strip of ``nodata`` (tagged)."""
    import rasterio
    from rasterio.transform import from_origin

    rng = np.random.default_rng(0)
    yy, xx = np.meshgrid(np.linspace(0, 1, SIZE), np.linspace(0, 1, SIZE), indexing="ij")
    a = np.sin(6 * xx) * np.cos(4 * yy)
    bands = [a, a**2 + 0.3 * yy, np.cos(3 * a) + 0.2 * xx]
    data = np.stack([np.round(3000 + 2000 * b + 20 * rng.normal(size=b.shape)) for b in bands])
    data = data.astype(np.uint16)
    data[:, :100, :] = nodata
    profile = dict(
        driver="GTiff", height=SIZE, width=SIZE, count=3, dtype="uint16", crs="EPSG:32621",
        transform=from_origin(300000, 5000000, 30, 30), tiled=True, blockxsize=TILE,
        blockysize=TILE, nodata=nodata,
    )  # fmt: skip
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
    return data


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("scene") / "scene.tif")
    return path, write_scene(path)


def test_cli_fit_on_a_local_cluster_prints_no_distributed_warning(scene, tmp_path):
    path, _ = scene
    model = tmp_path / "model.zarr"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-m", "ppa_dask", "fit", path, str(model), "--workers", "2"],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert model.exists()
    assert not [line for line in output.splitlines() if "distributed." in line], output
    assert "large graph" not in output.lower(), output


def test_a_missing_chunk_on_a_local_cluster_is_one_line(tmp_path):
    # issue 46: the worker that read it logged its "Compute Failed" record and its cancelled
    # tasks on the command's stderr before the command's own line
    import zarr

    path = tmp_path / "x.zarr"
    z = zarr.create_array(str(path), shape=(4000, 5), chunks=(500, 5), dtype="f8")
    z[...] = np.random.default_rng(0).normal(size=(4000, 5))
    (path / "c" / "3" / "0").unlink()
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-m", "ppa_dask", "fit", str(path), "m.zarr", "--degree", "2",
         "--workers", "2"],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(err) == 1, done.stderr
    assert f"Zarr chunk file '{path / 'c' / '3' / '0'}' is missing" in err[0]
    assert not (tmp_path / "m.zarr").exists()


def test_stacking_a_tiled_raster_merges_tiles_without_a_shuffle_or_embedded_mask(scene):
    from distributed import Client

    path, data = scene
    valid = (data != 0).all(axis=0).ravel()
    expected = data.reshape(3, -1).T[valid].astype(np.float64)  # the valid pixels, by hand
    with loopback_cluster(1) as cluster, Client(cluster):
        cube = open_cube(path)
        assert len(cube.chunks[1]) * len(cube.chunks[2]) == (SIZE // TILE) ** 2
        rows = Stacker(feature_dim="band").fit_stack(cube)
        layers = list(rows.dask.layers)
        assert not [name for name in layers if "p2p" in name], layers
        # the graph holds no copy of the mask of valid pixels (1 byte per pixel)
        graph = pickle.dumps(dict(rows.__dask_graph__()))
        assert len(graph) < valid.size / 10, len(graph)
        np.testing.assert_array_equal(rows.compute(), expected)
    assert sum(rows.chunks[0]) == valid.sum() and 0 not in rows.chunks[0]


def test_robust_limits_ignore_a_few_extreme_pixels():
    rng = np.random.default_rng(1)
    image = rng.normal(size=(200, 200))
    image[5, :20] = 1e4  # a few extreme pixels (0.05 %)
    image[6, :10] = -1e4
    image[7, :30] = np.nan  # masked
    lo, hi = robust_limits(image)
    finite = image[np.isfinite(image)]
    assert (lo, hi) == tuple(np.percentile(finite, [2, 98]))
    # the bulk of the pixels spans the colour scale; with min-max limits it is one colour
    bulk = finite[np.abs(finite) < 100]
    assert np.ptp(np.clip((bulk - lo) / (hi - lo), 0, 1)) == 1.0
    spread = (bulk - finite.min()) / np.ptp(finite)
    assert np.ptp(spread) < 0.001
    assert robust_limits(np.full((3, 3), np.nan)) == (None, None)
    assert robust_limits(np.r_[np.zeros(99), 1.0]) == (0.0, 1.0)  # mostly one value


def test_the_pipeline_component_plots_use_the_robust_limits(tmp_path, monkeypatch):
    import matplotlib.axes

    from ppa_dask.app.pipeline import run_pipeline, validate_pipeline

    shown = []
    imshow = matplotlib.axes.Axes.imshow

    def recording(self, X, *args, **kwargs):
        shown.append((np.array(X, dtype=float), kwargs.get("vmin"), kwargs.get("vmax")))
        return imshow(self, X, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "imshow", recording)
    config = {
        "name": "plots",
        "data": {"source": "make_cube", "params": {"n_bands": 5, "ny": 24, "nx": 24}},
        "model": {"degree": [1, 2], "cv": 2},
        "plots": {"components": 2, "dpi": 30},
    }
    run_pipeline(validate_pipeline(config), output=str(tmp_path / "run"), stream=io.StringIO())
    assert len(shown) == 2
    for image, vmin, vmax in shown:
        finite = image[np.isfinite(image)]
        assert (vmin, vmax) == tuple(np.percentile(finite, [2, 98]))
        assert finite.min() < vmin < vmax < finite.max()
