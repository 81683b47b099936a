"""The ``ppa-dask`` subcommands: fit / transform / inverse / info on Zarr tables and xarray
cubes, ``run`` of a pipeline, ``demo --cube`` (the demo's cube part alone), and the one-line
errors with exit status 2.

Everything runs with ``--scheduler threads`` (Dask in this process); the same commands on real
clusters are exercised in test_clusters.py.
"""

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from ppa_dask import PPA, store
from ppa_dask.app.cli import main
from ppa_dask.datasets import make_cube, make_curved_manifold

THREADS = ["--scheduler", "threads"]


def _ok(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def _fails(capsys, *argv):
    """The command exits with 2 and one line 'ppa-dask: error: ...'; returns that line."""
    code = main(list(argv))
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2, (captured.out, err)
    assert err.startswith("ppa-dask: error: ") and len(err.splitlines()) == 1, err
    return err


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    base = tmp_path_factory.mktemp("table")
    X = make_curved_manifold(6000, n_features=5, random_state=1)
    path = str(base / "data.zarr")
    z = zarr.create_array(store=path, shape=X.shape, chunks=(1500, 5), dtype="f8")
    z[...] = X
    return base, path, X


@pytest.fixture(scope="module")
def cube(tmp_path_factory):
    base = tmp_path_factory.mktemp("cube")
    path = str(base / "cube.zarr")
    ds = make_cube(n_bands=6, ny=24, nx=20, random_state=2, chunks=8, path=path)
    return base, path, ds.compute()


# ---------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_fit_transform_inverse_info_on_a_zarr_table(table, capsys):
    base, data, X = table
    model_path, comps, comps2, rec, rec2 = (
        str(base / n) for n in ("m.zarr", "c.zarr", "c2.zarr", "r.zarr", "r2.zarr")
    )
    out = _ok(capsys, "fit", data, model_path, "--degree", "1-3", "--seed", "4", *THREADS)
    assert "step 4 of 4" in out  # one progress line per PPA step

    # the model fitted blockwise from Zarr is the in-memory fit of the same numbers
    saved = store.load_model(model_path)
    direct = PPA(degree=[1, 2, 3], random_state=4).fit(X)
    assert saved.degrees_.tolist() == direct.degrees_.tolist()
    np.testing.assert_allclose(saved.transform(X), direct.transform(X), atol=1e-8)

    _ok(capsys, "transform", model_path, data, comps, *THREADS)
    _ok(capsys, "transform", model_path, data, comps2, "--components", "2", *THREADS)
    R = store.open_array(comps)
    assert R.chunks[0] == (1500,) * 4  # chunked like the input
    R = R.compute()
    np.testing.assert_allclose(R, saved.transform(X), atol=1e-12)
    np.testing.assert_array_equal(store.open_array(comps2).compute(), R[:, :2])

    # the closed-form inverse of all components gives the input back
    _ok(capsys, "inverse", model_path, comps, rec, *THREADS)
    np.testing.assert_allclose(store.open_array(rec).compute(), X, atol=1e-9)
    # with 2 components: the squared error is the residual left after 2 steps (paper eq. 7)
    _ok(capsys, "inverse", model_path, comps2, rec2, *THREADS)
    err = np.mean(np.sum((store.open_array(rec2).compute() - X) ** 2, axis=1))
    assert err == pytest.approx(saved.residual_variance_[2], rel=1e-9)

    text = _ok(capsys, "info", model_path)
    assert "estimator:        PPA" in text
    assert " ".join(map(str, saved.degrees_)) in text
    assert f"degree={list(saved.degree)}" in text  # candidate degrees shown as a list
    info = json.loads(_ok(capsys, "info", model_path, "--json"))
    assert info["estimator"] == "PPA" and info["fitted"]["n_features_in_"] == 5
    assert info["params"]["degree"] == list(saved.degree)


def test_existing_outputs_are_not_replaced_without_overwrite(table, capsys):
    base, data, _ = table
    model_path = str(base / "keep.zarr")
    _ok(capsys, "fit", data, model_path, "--degree", "2", *THREADS)
    before = store.model_info(model_path)["arrays"]
    err = _fails(capsys, "fit", data, model_path, "--degree", "3", *THREADS)
    assert "already exists; pass --overwrite" in err
    assert store.model_info(model_path)["arrays"] == before
    _ok(capsys, "fit", data, model_path, "--degree", "3", "--overwrite", *THREADS)
    assert store.load_model(model_path).degrees_.tolist() == [3] * 4


def test_tampered_model_is_refused_before_anything_runs(table, capsys):
    base, data, _ = table
    model_path = str(base / "tampered.zarr")
    _ok(capsys, "fit", data, model_path, "--degree", "2", *THREADS)
    meta_file = os.path.join(model_path, "zarr.json")
    with open(meta_file) as f:
        meta = json.load(f)
    text = json.dumps(meta).replace('"whiten": false', '"whiten": true')
    assert text != json.dumps(meta)
    with open(meta_file, "w") as f:
        f.write(text)
    for argv in (
        ["info", model_path],
        ["transform", model_path, data, str(base / "never.zarr"), *THREADS],
    ):
        assert "tampered" in _fails(capsys, *argv)
    assert not os.path.exists(base / "never.zarr")


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["fit", "{base}/absent.zarr", "{base}/new.zarr", *THREADS], "no Zarr store"),
        (
            ["fit", "{data}", "{base}/new.zarr", "--degree", "0", *THREADS],
            "argument --degree: expected a degree >= 1",
        ),
        (["fit", "{data}", "{base}/new.zarr", "--variable", "x", *THREADS], "Zarr array"),
        (["info", "{data}"], "not a ppa-dask model file"),
        (["info", "{base}/none.zarr"], "no model file"),
        (
            ["fit", "{data}", "{base}/new.zarr", "--cluster", "c.yaml", "--scheduler", "threads"],
            "either --cluster or --scheduler",
        ),
        (
            ["fit", "{data}", "{base}/new.zarr", "--cluster", "{base}/absent.yaml"],
            "absent.yaml' does not exist",
        ),
        (
            [
                "fit",
                "{data}",
                "{base}/new.zarr",
                "--performance-report",
                "{base}/r.html",
                *THREADS,
            ],
            "--performance-report needs a distributed scheduler",
        ),
        (
            ["fit", "{data}", "{base}/new.zarr", "--performance-report", "{base}/no/r.html"],
            "folder",
        ),
        (["run", "{base}/absent.yaml"], "absent.yaml' does not exist"),
        (["transform"], "the following arguments are required"),
    ],
)
def test_bad_input_exits_2_with_one_line(table, capsys, argv, expected):
    base, data, _ = table
    argv = [a.format(base=base, data=data) for a in argv]
    before = sorted(os.listdir(base))
    assert expected in _fails(capsys, *argv)
    assert sorted(os.listdir(base)) == before  # nothing written


# ---------------------------------------------------------------------------------------------
# cubes
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cube_round_trip_through_the_cli(cube, capsys):
    base, path, ds = cube
    model_path, comps, rec = (str(base / n) for n in ("m.zarr", "c.zarr", "r.zarr"))
    _ok(
        capsys,
        "fit",
        path,
        model_path,
        "--variable",
        "reflectance",
        "--feature-dim",
        "band",
        "--degree",
        "1-2",
        *THREADS,
    )
    assert "features along band" in _ok(capsys, "info", model_path)
    _ok(capsys, "transform", model_path, path, comps, "--variable", "reflectance", *THREADS)
    out = store.open_dataset(comps)["components"]
    assert out.dims == ("component", "y", "x")
    np.testing.assert_array_equal(out["y"], ds["y"])
    np.testing.assert_array_equal(out["x"], ds["x"])
    cloud = ds["cloud"].values
    assert cloud.any() and not cloud.all()
    np.testing.assert_array_equal(np.isnan(out.values).all(axis=0), cloud)
    assert np.isfinite(out.values[:, ~cloud]).all()

    _ok(capsys, "inverse", model_path, comps, rec, *THREADS)
    back = store.open_dataset(rec)
    back = back[list(back.data_vars)[0]]
    assert back.dims == ds["reflectance"].dims
    refl = ds["reflectance"].values.astype(np.float64)
    np.testing.assert_allclose(back.values[:, ~cloud], refl[:, ~cloud], atol=1e-9)
    assert np.isnan(back.values[:, cloud]).all()


def test_cube_errors(cube, capsys):
    base, path, _ = cube
    err = _fails(
        capsys,
        "fit",
        path,
        str(base / "x.zarr"),
        "--variable",
        "reflectance",
        "--feature-dim",
        "wavelength",
        *THREADS,
    )
    assert "--feature-dim 'wavelength' is not a dimension" in err
    err = _fails(capsys, "fit", path, str(base / "x.zarr"), "--feature-dim", "band", *THREADS)
    assert "choose one with --variable" in err


# ---------------------------------------------------------------------------------------------
# run and demo --cube
# ---------------------------------------------------------------------------------------------


def test_run_check_and_invalid_pipeline(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text("name: g\ndata: {source: dataset, name: vehicles}\n")
    out = _ok(capsys, "run", str(good), "--check")
    assert out.strip().endswith("good.yaml: valid") and "degree:" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        f"name: b\noutput: {tmp_path / 'run'}\n"
        "data: {source: dataset, name: vehicles}\nmodel: {degre: 3}\n"
    )
    err = _fails(capsys, "run", str(bad), *THREADS)
    assert "model.degre: unknown key (did you mean 'degree'?)" in err
    assert not (tmp_path / "run").exists()


def check_cube_demo_outputs(run_dir, bands, pixels, seed):
    """Check the run folder of the demo's cube part (``demo --cube``'s output, or
    ``<output>/cube`` of the plain demo): component images masked where the cube is cloudy,
    a PPA-vs-PCA table with PPA never worse, and a PNG of the first components side by side.
    Shared with test_cli.py, which runs the whole demo."""
    import matplotlib.image

    png_path = run_dir / "06-plots" / "components.png"
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png = matplotlib.image.imread(png_path)
    assert png.ndim == 3 and png.shape[1] > 2 * png.shape[0]  # three images side by side
    with open(run_dir / "05-evaluate" / "reconstruction_error.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["k"]) for r in rows] == list(range(1, bands))
    for r in rows:
        # PPA never reconstructs worse than PCA on its training data
        assert 0 < float(r["ppa_mse"]) <= float(r["pca_mse"]) * (1 + 1e-9), r
    comps = store.open_dataset(str(run_dir / "04-transform" / "components.zarr"))["components"]
    assert comps.dims == ("component", "y", "x")
    assert comps.shape == (bands, pixels, pixels)
    # the cloudy pixels of the generated cube (same seed) come back as NaN, the others finite
    cloud = make_cube(n_bands=bands, ny=pixels, nx=pixels, random_state=seed)["cloud"].values
    assert cloud.any() and not cloud.all()
    values = comps.values
    np.testing.assert_array_equal(np.isnan(values).all(axis=0), cloud)
    assert np.isfinite(values[:, ~cloud]).all()


@pytest.mark.slow
def test_demo_cube_end_to_end(tmp_path, capsys):
    out_dir = tmp_path / "demo"
    argv = [
        "demo",
        "--cube",
        "--bands",
        "6",
        "--pixels",
        "24",
        "--seed",
        "1",
        "--output",
        str(out_dir),
        *THREADS,
    ]
    out = _ok(capsys, *argv)
    assert "stage plots: done" in out
    # --cube is the cube part alone: its run folder is --output itself, no table part
    assert not (out_dir / "data.zarr").exists() and not (out_dir / "cube").exists()
    check_cube_demo_outputs(out_dir, bands=6, pixels=24, seed=1)
    assert (
        out.rstrip()
        .splitlines()[-1]
        .endswith(os.path.join(str(out_dir), "04-transform", "components.zarr"))
    )
    # a second run resumes everything (nothing recomputed)
    assert "6 of 6 stages already complete" in _ok(capsys, *argv)
    assert not (out_dir / ".dask-scratch").exists()


def test_pipeline_cluster_file_is_validated_before_anything_runs(tmp_path, capsys):
    bad_cluster = tmp_path / "c.yaml"
    bad_cluster.write_text("type: local\noptions: {n_workerz: 2}\n")
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        f"name: p\noutput: {tmp_path / 'run'}\ncluster: {bad_cluster}\n"
        "data: {source: dataset, name: vehicles}\n"
    )
    err = _fails(capsys, "run", str(pipeline))
    assert "options.n_workerz: unknown key (did you mean 'n_workers'?)" in err
    assert not (tmp_path / "run").exists()
    # the command line wins over the file's cluster
    assert "valid" in _ok(capsys, "run", str(pipeline), "--check", *THREADS)


# ---------------------------------------------------------------------------------------------
# the error contract: refused before any work, one specific line (issue 11)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["fit", "{data}", "{data}", "--overwrite"], "MODEL '{data}' is INPUT '{data}'"),
        (["fit", "{data}", "/proc/m.zarr"], "MODEL '/proc/m.zarr' cannot be written"),
        (["fit", "{data}", ""], "MODEL is an empty path"),
        (["transform", "{model}", "{data}", "{data}", "--overwrite"], "OUTPUT '{data}' is INPUT"),
        (
            ["transform", "{model}", "{data}", "{model}", "--overwrite"],
            "OUTPUT '{model}' is MODEL",
        ),
        (["inverse", "{model}", "{data}", "/proc/r.zarr"], "OUTPUT '/proc/r.zarr' cannot be"),
        (["transform", "{model}", "{data}", ""], "OUTPUT is an empty path"),
        (["demo", "--output", "/proc/demo"], "--output '/proc/demo' cannot be written"),
        (
            ["fit", "{data}", "{base}/p.zarr", "--performance-report", "/proc/r.html"],
            "--performance-report '/proc/r.html' cannot be written",
        ),
    ],
)
def test_outputs_are_checked_before_any_work(table, tmp_path, capsys, monkeypatch, argv, expected):
    base, data, X = table
    model = str(tmp_path / "m.zarr")
    store.save_model(PPA(degree=1).fit(X[:200]), model)
    names = {"data": data, "model": model, "base": str(tmp_path)}
    # any work would fit, load or generate: make each of them fail loudly
    monkeypatch.setattr(PPA, "fit", lambda *a, **k: pytest.fail("fitted before refusing"))
    err = _fails(capsys, *[a.format(**names) for a in argv], *THREADS)
    assert expected.format(**names) in err
    assert not os.path.exists("/proc/m.zarr")


@pytest.mark.parametrize(
    "argv, report, expected",
    [
        (["fit", "{csv}", "{base}/m.zarr"], "{csv}", "'{csv}' is INPUT '{csv}'"),
        (["fit", "{data}", "{base}/m.zarr"], "{data}", "'{data}' is INPUT"),
        (["fit", "{data}", "{base}/m.zarr"], "{base}/m.zarr", "'{base}/m.zarr' is MODEL"),
        (["run", "{pipeline}"], "{pipeline}", "'{pipeline}' is PIPELINE.yaml"),
        (
            ["transform", "{model}", "{data}", "{base}/o.zarr"],
            "{base}/o.zarr",
            "'{base}/o.zarr' is OUTPUT",
        ),
        (
            ["fit", "{data}", "{base}/m.zarr"],
            "{html}",
            "'{html}' already exists; pass --overwrite",
        ),
        (
            ["fit", "{data}", "{base}/m.zarr", "--overwrite"],
            "{html}",
            "'{html}' exists and was not written by ppa-dask",
        ),
        (
            ["run", "{pipeline}", "--overwrite"],
            "{html}",
            "'{html}' exists and was not written by ppa-dask",
        ),
        (["fit", "{data}", "{base}/m.zarr"], "{folder}", "'{folder}' is a folder"),
    ],
)
def test_a_performance_report_never_replaces_what_ppa_dask_did_not_write(
    table, tmp_path, capsys, monkeypatch, argv, report, expected
):
    # issue 46: the report overwrote an input CSV, a pipeline file, a user's report.html and
    # took MODEL's path, exit 0; each is refused before any work, nothing written or changed
    base, data, X = table
    model = str(tmp_path / "model.zarr")
    store.save_model(PPA(degree=1).fit(X[:200]), model)
    (tmp_path / "in.csv").write_text("a,b\n1,2\n3,4\n")
    (tmp_path / "p.yaml").write_text(
        "pipeline: 1\nname: p\ndata: {source: generated, n_samples: 500, n_features: 4}\n"
    )
    (tmp_path / "report.html").write_text("<html>the user's own</html>")
    (tmp_path / "folder").mkdir()
    names = {
        "data": data,
        "model": model,
        "base": str(tmp_path),
        "csv": str(tmp_path / "in.csv"),
        "pipeline": str(tmp_path / "p.yaml"),
        "html": str(tmp_path / "report.html"),
        "folder": str(tmp_path / "folder"),
    }
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    monkeypatch.chdir(tmp_path)  # the pipeline's run folder would be runs/p here
    monkeypatch.setattr(PPA, "fit", lambda *a, **k: pytest.fail("fitted before refusing"))
    argv = [a.format(**names) for a in argv]
    report = report.format(**names)
    err = _fails(capsys, *argv, "--performance-report", report, "--workers", "1")
    assert f"--performance-report {expected.format(**names)}" in err
    # nothing written, nothing changed
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("damage", ["missing", "truncated"])
@pytest.mark.parametrize("command", ["fit", "transform"])
def test_a_missing_or_damaged_chunk_is_one_line_never_zeros(
    table, tmp_path, capsys, damage, command
):
    # issue 46: deleted chunk files were read as zeros (exit 0), a truncated one ended in a
    # Zstd traceback
    base, data, X = table
    path = str(tmp_path / "x.zarr")
    z = zarr.create_array(store=path, shape=X.shape, chunks=(500, 5), dtype="f8")
    z[...] = X
    chunk = os.path.join(path, "c", "5", "0")
    if damage == "missing":
        os.remove(chunk)
    else:
        with open(chunk, "r+b") as f:
            f.truncate(100)
    model = str(tmp_path / "m.zarr")
    out = str(tmp_path / "out.zarr")
    if command == "fit":
        argv = ["fit", path, out, "--degree", "2"]
    else:
        store.save_model(PPA(degree=2).fit(X[:500]), model)
        argv = ["transform", model, path, out]
    err = _fails(capsys, *argv, *THREADS)
    if damage == "missing":
        assert f"Zarr chunk file {chunk!r} is missing" in err
    elif command == "fit":  # ppa-dask's own chunk reader names the chunk
        assert f"Zarr chunk file {chunk!r} cannot be decoded" in err
    else:  # through zarr: the codec's words
        assert "Zstd decompression error" in err and "truncated or damaged" in err
    assert not os.path.exists(out)


def test_a_truncated_geotiff_is_one_line(tmp_path, capsys):
    from rasters import write_tif

    rng = np.random.default_rng(0)
    whole = write_tif(str(tmp_path / "whole.tif"), rng.integers(0, 999, (4, 256, 256), "uint16"))
    cut = tmp_path / "cut.tif"
    cut.write_bytes(Path(whole).read_bytes()[:300_000])
    argv = ["fit", str(cut), str(tmp_path / "m.zarr"), "--feature-dim", "band", *THREADS]
    err = _fails(capsys, *argv, "--degree", "2")
    assert "cut.tif, band" in err and "truncated or damaged" in err
    assert not os.path.exists(tmp_path / "m.zarr")


def test_a_string_array_is_named_with_its_dtype(tmp_path, capsys):
    path = str(tmp_path / "words.zarr")
    z = zarr.create_array(store=path, shape=(20, 3), chunks=(10, 3), dtype=str)
    z[...] = np.full((20, 3), "w")
    err = _fails(capsys, "fit", path, str(tmp_path / "m.zarr"), *THREADS)
    assert f"INPUT '{path}' holds dtype" in err and "needs numbers" in err


def test_feature_dim_on_a_plain_array_says_it_needs_a_dataset(table, tmp_path, capsys):
    base, data, X = table
    err = _fails(capsys, "fit", data, str(tmp_path / "m.zarr"), "--feature-dim", "band", *THREADS)
    assert "--feature-dim 'band' needs an xarray dataset" in err
    assert f"'{data}' is a plain Zarr array" in err


@pytest.mark.parametrize("option", ["--connect-timeout", "--worker-timeout"])
def test_timeout_options_need_positive_seconds(table, tmp_path, capsys, option):
    base, data, X = table
    err = _fails(capsys, "fit", data, str(tmp_path / "m.zarr"), option, "0")
    assert f"argument {option}: expected a positive number of seconds" in err
