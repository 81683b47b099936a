"""Where the CLI computes without --cluster / --scheduler / --workers: a small input in this
process, a large one (by its metadata) on a local cluster, the first line saying which and why,
and each way to force the other (ppa_dask.app.placement)."""

import contextlib
import os
import re

import numpy as np
import pandas as pd
import pytest
import yaml
import zarr
from dask.utils import format_bytes

from ppa_dask import store
from ppa_dask.app import placement
from ppa_dask.app.cli import main
from ppa_dask.cluster import client as cluster
from ppa_dask.datasets import make_curved_manifold

GIB = 2**30
IN_PROCESS = "computing in this process"
TO_CLUSTER = "--workers N or --cluster local for a local cluster"
TO_PROCESS = "--scheduler threads to compute in this process"


class _ClusterAsked(Exception):
    pass


@pytest.fixture
def clusters(monkeypatch):
    """Record every local cluster the command asks for, and stop the command there (a large
    input is never computed; which cluster was asked for is what the tests check)."""
    asked = []

    @contextlib.contextmanager
    def fake_local_client(**options):
        asked.append(options)
        raise _ClusterAsked(f"local cluster asked for: {options.get('n_workers')} workers")
        yield  # pragma: no cover

    monkeypatch.setattr(cluster, "local_client", fake_local_client)
    return asked


def _lines(out):
    """The command's output lines without their ``[   0.0 s] `` time stamps."""
    return [re.sub(r"^\[\s*[\d.]+ s\] ", "", line) for line in out.splitlines()]


def _limit_text():
    limit = placement.in_process_limit()
    extra = "" if limit == placement.IN_PROCESS_MAX_BYTES else ", a tenth of this machine's memory"
    return format_bytes(limit) + extra


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    base = tmp_path_factory.mktemp("small")
    X = make_curved_manifold(4000, n_features=5, random_state=3)
    path = str(base / "data.zarr")
    z = zarr.create_array(store=path, shape=X.shape, chunks=(1000, 5), dtype="f8")
    z[...] = X
    return base, path, X


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """A Zarr array whose metadata says 16 GiB: only its metadata is written (no chunk)."""
    path = str(tmp_path_factory.mktemp("large") / "large.zarr")
    zarr.create_array(store=path, shape=(2**28, 8), chunks=(2**20, 8), dtype="f8")
    assert sum(len(files) for _, _, files in os.walk(path)) == 1  # zarr.json, no data
    return path


def test_the_limit_is_a_gib_or_a_tenth_of_the_memory():
    assert placement.IN_PROCESS_MAX_BYTES == GIB
    assert placement.in_process_limit(24 * GIB) == GIB
    assert placement.in_process_limit(8 * GIB) == int(0.8 * GIB)
    import psutil

    assert placement.in_process_limit() == min(GIB, int(psutil.virtual_memory().total / 10))


def test_sizes_come_from_metadata_before_any_data_is_read(small, large, tmp_path):
    _, path, X = small
    assert placement.input_nbytes(path) == X.nbytes
    assert placement.input_nbytes(large) == 2**28 * 8 * 8  # no chunk exists to be read
    # a GeoTIFF's header: bands x rows x columns x 4 bytes (float32)
    import rioxarray  # noqa: F401 - the .rio accessor
    import xarray as xr

    bands = np.random.default_rng(0).uniform(size=(3, 40, 50)).astype("float32")
    tif = str(tmp_path / "scene.tif")
    coords = {"y": 4e6 - 30.0 * np.arange(40), "x": 5e5 + 30.0 * np.arange(50)}
    xr.DataArray(bands, dims=("band", "y", "x"), coords=coords).rio.to_raster(tif)
    assert placement.input_nbytes(tif) == bands.nbytes
    # a table: its file size
    csv = str(tmp_path / "t.csv")
    pd.DataFrame(X, columns=list("abcde")).to_csv(csv, index=False)
    assert placement.input_nbytes(csv) == os.path.getsize(csv)
    # not openable: unknown (the command reports the error when it opens it)
    assert placement.input_nbytes(str(tmp_path / "missing.zarr")) is None


def test_a_small_input_is_fitted_in_this_process(small, clusters, capsys):
    base, path, X = small
    assert main(["fit", path, str(base / "in.zarr"), "--degree", "1-3"]) == 0
    lines = _lines(capsys.readouterr().out)
    assert lines[0] == (
        f"{IN_PROCESS} (input {format_bytes(X.nbytes)} < {_limit_text()}); {TO_CLUSTER}"
    )
    # said once: the first line is why, no second line says it again
    assert [line for line in lines if line.startswith(IN_PROCESS)] == lines[:1]
    assert clusters == []  # no cluster was started
    assert store.load_model(str(base / "in.zarr")).n_features_in_ == 5


def test_a_large_input_starts_a_local_cluster(large, clusters, capsys, tmp_path):
    with pytest.raises(_ClusterAsked):  # the fake cluster stops the command
        main(["fit", large, str(tmp_path / "m.zarr")])
    assert _lines(capsys.readouterr().out)[0] == (
        f"starting a local cluster of 2 workers (input {format_bytes(2**34)} >= "
        f"{_limit_text()}); {TO_PROCESS}"
    )
    assert [c["n_workers"] for c in clusters] == [2]


def _first(capsys):
    return _lines(capsys.readouterr().out)[0]


@pytest.mark.parametrize(
    "force, workers",
    [(["--workers", "3"], 3), (["--cluster", "local"], 2), (["--memory-limit", "1GiB"], 2)],
    ids=["workers", "cluster-local", "memory-limit"],
)
def test_a_small_input_goes_to_a_cluster_when_asked(small, clusters, capsys, force, workers):
    base, path, _ = small
    with pytest.raises(_ClusterAsked):
        main(["fit", path, str(base / "forced.zarr"), *force])
    assert _first(capsys).startswith("ppa-dask fit ")  # the options chose: no placement line
    assert [c["n_workers"] for c in clusters] == [workers]


def test_a_large_input_is_computed_in_this_process_when_asked(
    small, clusters, capsys, monkeypatch
):
    base, path, X = small
    # the same small table is "large" under a lowered limit
    monkeypatch.setattr(placement, "IN_PROCESS_MAX_BYTES", X.nbytes // 2)
    with pytest.raises(_ClusterAsked):
        main(["fit", path, str(base / "big.zarr")])
    assert _first(capsys) == (
        f"starting a local cluster of 2 workers (input {format_bytes(X.nbytes)} >= "
        f"{format_bytes(X.nbytes // 2)}); {TO_PROCESS}"
    )
    assert main(["fit", path, str(base / "big.zarr"), "--scheduler", "threads"]) == 0
    lines = _lines(capsys.readouterr().out)
    assert lines[0].startswith("ppa-dask fit ")
    assert f"{IN_PROCESS} (dask scheduler 'threads'); no dashboard" in lines
    assert len(clusters) == 1  # only the first command asked for one


def test_transform_and_inverse_choose_by_their_input(small, large, clusters, capsys):
    base, path, X = small
    model = str(base / "model-ti.zarr")
    assert main(["fit", path, model, "--degree", "2", "--scheduler", "threads"]) == 0
    capsys.readouterr()
    assert main(["transform", model, path, str(base / "c.zarr")]) == 0
    assert _first(capsys).startswith(f"{IN_PROCESS} (input {format_bytes(X.nbytes)} < ")
    assert main(["inverse", model, str(base / "c.zarr"), str(base / "r.zarr")]) == 0
    # the components: 4000 x 5 float64 read from the Zarr metadata
    assert _first(capsys).startswith(f"{IN_PROCESS} (input {format_bytes(X.nbytes)} < ")
    np.testing.assert_allclose(store.open_array(str(base / "r.zarr")), X, atol=1e-8)
    with pytest.raises(_ClusterAsked):
        main(["transform", model, large, str(base / "big-c.zarr")])
    assert _first(capsys).startswith("starting a local cluster of 2 workers (input 16.00 GiB")
    assert clusters and not os.path.exists(str(base / "big-c.zarr"))


def _pipeline(tmp_path, data, **top):
    path = tmp_path / "p.yaml"
    config = {
        "name": "placement",
        "data": data,
        "model": {"degree": [1, 2], "cv": 2},
        "evaluate": {"pca": False},
        "plots": {"components": 0},
        **top,
    }
    path.write_text(yaml.safe_dump(config))
    return str(path)


@pytest.mark.slow
def test_pipelines_choose_by_their_data_section(tmp_path, large, clusters, capsys):
    small_data = {"source": "generated", "n_samples": 3000, "n_features": 4}
    path = _pipeline(tmp_path, small_data)
    assert main(["run", path, "-o", str(tmp_path / "small-run")]) == 0
    assert _first(capsys) == (
        f"{IN_PROCESS} (data (generated) {format_bytes(3000 * 4 * 8)} < {_limit_text()}); "
        f"{TO_CLUSTER}"
    )
    assert clusters == []
    # a make_cube section: bands x pixels x 4 bytes, from its parameters and make_cube's
    # defaults (float32), before anything is generated
    cube = {"source": "make_cube", "params": {"n_bands": 8, "ny": 16, "nx": 16}}
    assert placement.pipeline_data_nbytes(cube)[0] == 8 * 16 * 16 * 4
    # a Zarr array of 16 GiB by its metadata: a local cluster
    path = _pipeline(tmp_path, {"source": "zarr", "path": large})
    with pytest.raises(_ClusterAsked):
        main(["run", path, "-o", str(tmp_path / "large-run")])
    assert _first(capsys).startswith(
        "starting a local cluster of 2 workers (data (zarr) 16.00 GiB >= "
    )
    # forced: --scheduler threads on the large one is validated and computes in this process;
    # --workers on the small one asks for a cluster
    with pytest.raises(_ClusterAsked):
        main(["run", _pipeline(tmp_path, small_data), "-o", str(tmp_path / "w"), "-w", "1"])
    assert _first(capsys) == "ppa-dask run " + str(tmp_path / "p.yaml")
    assert [c["n_workers"] for c in clusters] == [2, 1]


@pytest.mark.cluster
def test_the_in_process_fit_is_the_cluster_fit(small, capsys):
    """A real local cluster (worker processes) and this process fit the same model."""
    base, path, X = small
    here, there = str(base / "here.zarr"), str(base / "there.zarr")
    assert main(["fit", path, here, "--degree", "1-3", "--seed", "2"]) == 0
    assert _first(capsys).startswith(IN_PROCESS)
    assert main(["fit", path, there, "--degree", "1-3", "--seed", "2", "--workers", "2"]) == 0
    assert any("2 worker(s)" in line for line in _lines(capsys.readouterr().out))
    a, b = store.load_model(here), store.load_model(there)
    assert a.degrees_.tolist() == b.degrees_.tolist()
    fitted = sorted(n for n, v in vars(a).items() if n.endswith("_") and hasattr(v, "shape"))
    assert "explained_variance_" in fitted and "residual_variance_" in fitted
    for name in fitted:
        np.testing.assert_allclose(
            getattr(a, name), getattr(b, name), rtol=1e-12, atol=1e-12, err_msg=name
        )
    np.testing.assert_allclose(a.transform(X), b.transform(X), rtol=1e-12, atol=1e-12)
