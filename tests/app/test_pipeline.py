"""YAML pipelines: validation before anything runs, correct stage outputs, and resuming.

The claims checked:

* a bad configuration is refused before anything is written, with an error naming the key and
  what was expected;
* the stages compute what they say (scaling and masking against numpy, components against the
  saved model, PCA errors against scikit-learn; PPA never worse than PCA on its training data);
* a rerun skips complete stages, reruns a stage whose configuration, input or outputs changed
  (and everything after it), and a run killed mid-stage resumes and produces output identical
  to an uninterrupted run;
* nothing the library did not write is removed or overwritten: a folder without the run record
  is refused, a stage folder the record does not list is never removed (not even by --force), a
  Zarr store at ``data.path`` that the generator did not write is not replaced; one run at a
  time uses a run folder (a lock naming its pid and host; a dead run's lock is taken over).
"""

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time

import dask
import dask.array as da
import numpy as np
import paths
import pytest
import yaml
import zarr

from ppa_dask import datasets, store
from ppa_dask.app.baseline import pca_reconstruction_errors
from ppa_dask.app.cli import main
from ppa_dask.app.pipeline import (
    MARKER,
    RUN_LOCK,
    RUN_RECORD,
    STAGE_DIRS,
    PipelineError,
    load_pipeline,
    run_pipeline,
    validate_pipeline,
)
from ppa_dask.app.pipeline.stages import held_out_rows

ROOT = str(paths.ROOT)
PIPELINES = os.path.join(ROOT, "pipelines")


@pytest.fixture(autouse=True)
def _threads_scheduler():
    # in-process Dask scheduler: the pipeline code is the same on a cluster (test_clusters.py)
    with dask.config.set(scheduler="threads"):
        yield


def _run(config, out, **kwargs):
    log = io.StringIO()
    run_pipeline(validate_pipeline(config), output=str(out), stream=log, **kwargs)
    return log.getvalue()


def _base(name="t", **data):
    return {
        "name": name,
        "data": data or {"source": "dataset", "name": "vehicles"},
        "model": {"degree": [1, 2, 3], "cv": 2},
        "plots": {"components": 2, "dpi": 30},
    }


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------

GOOD = {"name": "ok", "data": {"source": "dataset", "name": "vehicles"}}


def _with(path, value):
    """GOOD with one key (dotted path) set (or removed, value=KeyError)."""
    config = json.loads(json.dumps(GOOD))
    node = config
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    if value is KeyError:
        node.pop(last, None)
    else:
        node[last] = value
    return config


@pytest.mark.parametrize(
    "path, value, expected",
    [
        ("model.degree", 0, "model.degree: expected an integer >= 1 or a non-empty list"),
        ("model.degree", [1, "two"], "model.degree: expected an integer >= 1 or a non-empty"),
        ("model.degrees", 3, "model.degrees: unknown key (did you mean 'degree'?)"),
        ("model.cv", 1, "model.cv: expected an integer >= 2, got 1"),
        (
            "model.residual_cache",
            "disk",
            "model.residual_cache: expected one of 'auto', 'persist', 'checkpoint', 'recompute', "
            "got 'disk'",
        ),
        ("models", {}, "models: unknown key (did you mean 'model'?)"),
        ("data", KeyError, "data: required; expected a mapping with a 'source' key"),
        ("data.source", "hdf4", "data.source: expected one of 'zarr', 'xarray', 'dataset'"),
        ("data.name", "magic", "data.name: expected a bundled data set"),
        ("data.name", "vehicle", "(did you mean 'vehicles'?)"),
        ("data.path", "x.zarr", "data.path: unknown key"),
        ("preprocess.scale", "zscore", "preprocess.scale: expected one of 'minmax', 'none'"),
        (
            "preprocess.mask.valid_range",
            [1, 0],
            "preprocess.mask.valid_range: expected null or a list [low, high] of two numbers with "
            "low < high, got [1, 0]",
        ),
        ("preprocess.mask.nonfinite", "keep", "preprocess.mask.nonfinite: expected one of"),
        ("preprocess.test_fraction", 1.5, "preprocess.test_fraction: expected a number in [0, 1)"),
        ("transform.components", 0, "transform.components: expected an integer >= 1 or null"),
        ("plots.components", "all", "plots.components: expected an integer >= 0, got 'all'"),
        ("name", "my run!", "name: expected a name of letters, digits, '.', '_' or '-'"),
        ("name", KeyError, "name: required"),
        ("pipeline", 2, "pipeline: expected 1 (the pipeline format version), got 2"),
        ("seed", -1, "seed: expected an integer >= 0, got -1"),
    ],
)
def test_validation_names_the_bad_key_and_what_was_expected(path, value, expected):
    with pytest.raises(PipelineError) as info:
        validate_pipeline(_with(path, value), where="p.yaml")
    message = str(info.value)
    assert message.startswith("p.yaml: ")
    assert expected in message


def test_validation_of_source_specific_keys(tmp_path):
    missing = str(tmp_path / "absent.zarr")
    cases = [
        ({"source": "zarr", "path": missing}, f"data.path: no such file or folder {missing!r}"),
        ({"source": "zarr"}, "data.path: required; expected a Zarr path or URL"),
        (
            {"source": "xarray", "path": str(tmp_path)},
            "data.feature_dim: required; expected the name of the feature dimension",
        ),
        (
            {"source": "make_cube", "params": {"n_band": 8}},
            "data.params.n_band: unknown parameter of make_cube (did you mean 'n_bands'?)",
        ),
        (
            {
                "source": "generated",
                "n_samples": 10,
                "n_features": 4,
                "params": {"random_state": 3},
            },
            "data.params.random_state: not allowed here; set seed instead",
        ),
        (
            {"source": "generated", "n_samples": 0, "n_features": 4},
            "data.n_samples: expected an integer >= 1, got 0",
        ),
    ]
    for data, expected in cases:
        with pytest.raises(PipelineError) as info:
            validate_pipeline({"name": "x", "data": data})
        assert expected in str(info.value), data
    with pytest.raises(PipelineError, match="preprocess.test_fraction: expected 0 for a cube"):
        validate_pipeline(
            {"name": "x", "data": {"source": "make_cube"}, "preprocess": {"test_fraction": 0.5}}
        )


def test_every_error_is_reported_at_once():
    bad = {
        "name": "x",
        "data": {"source": "dataset", "name": "vehicles"},
        "model": {"cv": 0, "degree": -1},
        "plots": {"dpi": 1},
    }
    message = str(pytest.raises(PipelineError, validate_pipeline, bad).value)
    assert "and 2 more" in message
    for key in ("model.cv", "model.degree", "plots.dpi"):
        assert key in message


def test_file_errors(tmp_path):
    with pytest.raises(PipelineError, match="does not exist"):
        load_pipeline(tmp_path / "none.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(PipelineError, match="not valid YAML"):
        load_pipeline(broken)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(PipelineError, match="expected a mapping of pipeline settings"):
        load_pipeline(listing)


def test_a_key_given_twice_names_the_file_the_key_and_the_lines(tmp_path, capsys):
    # PyYAML alone keeps the last value without a word: the run would use degree 3
    path = tmp_path / "twice.yaml"
    path.write_text(
        "name: twice\ndata: {source: dataset, name: vehicles}\nmodel:\n  degree: 2\n"
        "  cv: 2\n  degree: 3\n"
    )
    expected = (
        f"{path}: duplicate key 'degree' on line 6 (first on line 4); a key may appear only "
        "once in a mapping"
    )
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    assert str(info.value) == expected
    assert main(["run", str(path), "--check"]) == 2
    assert capsys.readouterr().err == f"ppa-dask: error: {expected}\n"


def test_generator_parameters_are_checked_before_the_run(tmp_path, capsys):
    data = {"source": "generated", "n_samples": 100, "n_features": 4}
    with pytest.raises(PipelineError) as info:
        validate_pipeline({"name": "x", "data": {**data, "params": {"bogus": 3}}}, where="p.yaml")
    assert str(info.value) == (
        "p.yaml: data.params.bogus: unknown parameter of the 'curved' generator "
        "(make_curved_manifold); expected one of noise"
    )
    helix = {**data, "kind": "helix", "params": {"turns": 2}}
    message = str(
        pytest.raises(PipelineError, validate_pipeline, {"name": "x", "data": helix}).value
    )
    assert (
        "data.params.turns: unknown parameter of the 'helix' generator (make_helix) (did you "
        in (message)
    )
    assert "expected one of a, b, n_turns, noise" in message
    # a value the generator refuses (the curved manifold needs 4 features) is found up front too
    few = {**data, "n_features": 3}
    with pytest.raises(
        PipelineError, match="refuses n_features=3: n_features must be an int >= 4"
    ):
        validate_pipeline({"name": "x", "data": few})
    # the command line: exit 2, one line, nothing written
    path = tmp_path / "bogus.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "data": {**data, "params": {"bogus": 3}}}))
    out = tmp_path / "out"
    assert main(["run", str(path), "-o", str(out), "--scheduler", "threads"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "data.params.bogus: unknown parameter" in err
    assert not out.exists()


def test_bad_configuration_writes_nothing(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(PipelineError):
        run_pipeline(_with("model.cv", 1) | {"output": str(out)})
    assert not out.exists()


def test_bundled_pipelines_are_valid():
    names = sorted(f for f in os.listdir(PIPELINES) if f.endswith(".yaml"))
    assert {"demo.yaml", "magic_gamma.yaml"} <= set(names)
    for name in names:
        config = load_pipeline(os.path.join(PIPELINES, name))
        assert config["name"]


def test_demo_pipeline_is_the_cli_cube_demo():
    from ppa_dask.app.demo import cube_demo_config

    assert load_pipeline(os.path.join(PIPELINES, "demo.yaml")) == cube_demo_config(seed=0) | {
        "output": "runs/demo-cube"
    }


# ---------------------------------------------------------------------------------------------
# what the stages compute
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gappy_store(tmp_path_factory):
    """A Zarr table with NaN rows and -9999 fill values (masked), odd chunks."""
    rng = np.random.default_rng(5)
    n = 3000
    t = rng.uniform(-1, 1, n)
    X = np.column_stack([t, t**2, np.sin(2 * t), 0.3 * t**3]) + 0.02 * rng.normal(size=(n, 4))
    X *= np.array([1.0, 10.0, 0.1, 100.0])  # very different scales
    X[rng.choice(n, 40, replace=False), 1] = np.nan
    X[rng.choice(n, 30, replace=False), 3] = -9999.0
    path = str(tmp_path_factory.mktemp("gappy") / "gappy.zarr")
    z = zarr.create_array(store=path, shape=X.shape, chunks=(700, 4), dtype="f8")
    z[...] = X
    return path, X


@pytest.mark.slow
def test_stage_outputs_match_independent_computations(gappy_store, tmp_path):
    from sklearn.decomposition import PCA

    path, X = gappy_store
    config = _base(source="zarr", path=path, chunk_rows=500)
    config["preprocess"] = {"mask": {"valid_range": [-1000, 1000]}}
    _run(config, tmp_path / "run")
    run = tmp_path / "run"

    # preprocess: the rows without NaN or fill values, each feature scaled to [0, 1] over them
    valid = np.isfinite(X).all(axis=1) & (X >= -1000).all(axis=1)
    expected = X[valid]
    expected = (expected - expected.min(axis=0)) / (expected.max(axis=0) - expected.min(axis=0))
    samples = store.open_array(str(run / STAGE_DIRS["preprocess"] / "samples.zarr")).compute()
    np.testing.assert_allclose(samples, expected, rtol=0, atol=1e-12)
    meta = json.loads((run / STAGE_DIRS["preprocess"] / "preprocess.json").read_text())
    assert (
        meta["n_masked"]
        == int((~valid).sum())
        == 70 - int((np.isnan(X[:, 1]) & (X[:, 3] == -9999)).sum())
    )

    # transform: the components are the saved model applied to the samples
    model = store.load_model(str(run / STAGE_DIRS["fit"] / "model.zarr"))
    components = store.open_array(str(run / STAGE_DIRS["transform"] / "components.zarr"))
    np.testing.assert_allclose(components.compute(), model.transform(samples), atol=1e-12)

    # evaluate: PCA beside scikit-learn's, PPA never worse on its training data
    table = json.loads((run / STAGE_DIRS["evaluate"] / "reconstruction_error.json").read_text())
    train = table["train"]
    pca = PCA().fit(samples)
    tails = [
        pca.explained_variance_[k:].sum() * (len(samples) - 1) / len(samples) for k in train["k"]
    ]
    np.testing.assert_allclose(train["pca_mse"], tails, rtol=1e-9)
    assert all(p <= c * (1 + 1e-9) for p, c in zip(train["ppa_mse"], train["pca_mse"]))
    assert (run / STAGE_DIRS["plots"] / "components.png").stat().st_size > 1000


def test_nonfinite_error_policy_names_the_rows(gappy_store, tmp_path):
    path, X = gappy_store
    config = _base(source="zarr", path=path)
    config["preprocess"] = {"mask": {"nonfinite": "error"}}
    with pytest.raises(PipelineError) as info:
        _run(config, tmp_path / "run")
    first = np.flatnonzero(~np.isfinite(X).all(axis=1))[:5].tolist()
    assert f"40 of {len(X)} samples" in str(info.value)
    assert str(first) in str(info.value)
    # the failed stage left no completion marker
    assert not (tmp_path / "run" / STAGE_DIRS["preprocess"] / MARKER).exists()
    assert (tmp_path / "run" / STAGE_DIRS["load"] / MARKER).exists()


def test_held_out_split_is_seeded_and_independent_of_chunks():
    n = 10_000
    one = da.arange(n, chunks=n).map_blocks(held_out_rows, 7, 0.3, dtype=bool).compute()
    many = da.arange(n, chunks=777).map_blocks(held_out_rows, 7, 0.3, dtype=bool).compute()
    other = da.arange(n, chunks=n).map_blocks(held_out_rows, 8, 0.3, dtype=bool).compute()
    assert np.array_equal(one, many)
    assert abs(one.mean() - 0.3) < 0.02
    assert not np.array_equal(one, other)


def test_test_errors_out_of_core_agree_with_scikit_learn():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(4000, 5)) @ rng.normal(size=(5, 5))
    T = rng.normal(size=(3000, 5)) @ rng.normal(size=(5, 5)) + 0.5
    in_memory, _, _ = pca_reconstruction_errors(X, X_eval=T)
    dask_way, _, method = pca_reconstruction_errors(
        da.from_array(X, chunks=1000), in_memory_bytes=0, X_eval=da.from_array(T, chunks=700)
    )
    assert "covariance computed with Dask" in method
    np.testing.assert_allclose(dask_way, in_memory, rtol=1e-9)


def test_pca_baseline_equals_scikit_learn_pca_with_k_components():
    """Every copy of the PCA baseline (in memory, the Dask covariance, the experiments') gives
    the error of scikit-learn's own PCA(n_components=k) reconstruction."""
    from sklearn.decomposition import PCA

    from ppa_dask.app.experiments import reconstruction_mse

    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 4)) @ rng.normal(size=(4, 4)) + 2.0
    expected = [np.mean(np.sum((X - X.mean(axis=0)) ** 2, axis=1))]
    for k in range(1, 4):
        pca = PCA(n_components=k).fit(X)
        expected.append(
            np.mean(np.sum((X - pca.inverse_transform(pca.transform(X))) ** 2, axis=1))
        )
    in_memory, tails, _ = pca_reconstruction_errors(X)
    dask_way, _, _ = pca_reconstruction_errors(da.from_array(X, chunks=700), in_memory_bytes=0)
    experiments = reconstruction_mse(PCA(n_components=4).fit(X), X)
    for errors in (in_memory, tails, dask_way, experiments):
        np.testing.assert_allclose(errors, expected, rtol=1e-9)


@pytest.mark.slow
def test_generated_source_with_a_path_writes_and_reuses_the_data_set(tmp_path):
    """``data.path``: the generated samples go to that Zarr array (the same values as in the
    run folder), a rerun after a changed fit reuses them, another size rewrites them."""
    import zarr

    path = tmp_path / "gen.zarr"
    config = _base(source="generated", n_samples=3000, n_features=4, kind="curved")
    config["data"]["path"] = str(path)
    config["data"]["chunk_rows"] = 1000
    _run(config, tmp_path / "run")
    X = datasets.make_curved_manifold(3000, n_features=4, random_state=0)
    z = zarr.open_array(str(path), mode="r")
    np.testing.assert_array_equal(z[...], X)
    assert z.chunks[0] == 1000
    stamp = (path / "zarr.json").stat().st_mtime_ns
    assert "reusing" in _run(config, tmp_path / "run", force=True)
    assert (path / "zarr.json").stat().st_mtime_ns == stamp
    config["data"]["n_samples"] = 2000
    assert "n_samples is 3000, not 2000; rewriting" in _run(config, tmp_path / "run")
    assert zarr.open_array(str(path), mode="r").shape == (2000, 4)


def test_generated_source_path_must_be_local():
    config = _base(source="generated", n_samples=30, n_features=4, kind="curved")
    config["data"]["path"] = "s3://bucket/x.zarr"
    with pytest.raises(PipelineError, match="data.path: expected a local folder"):
        validate_pipeline(config)


@pytest.mark.slow
def test_held_out_evaluation(tmp_path):
    config = _base(source="generated", n_samples=4000, n_features=5, kind="curved")
    config["preprocess"] = {"test_fraction": 0.4}
    _run(config, tmp_path / "run")
    table = json.loads(
        (tmp_path / "run" / STAGE_DIRS["evaluate"] / "reconstruction_error.json").read_text()
    )
    assert table["train"]["n_samples"] + table["test"]["n_samples"] == 4000
    assert abs(table["test"]["n_samples"] / 4000 - 0.4) < 0.03
    # the curved manifold: PPA's first curved component also reconstructs unseen samples
    # better than PCA's first axis (on training samples it can never do worse)
    assert table["test"]["ppa_mse"][0] < 0.95 * table["test"]["pca_mse"][0]
    assert (tmp_path / "run" / STAGE_DIRS["evaluate"] / "reconstruction_error_test.md").exists()


# ---------------------------------------------------------------------------------------------
# the run folder: nothing the library did not write is removed; one run at a time
# ---------------------------------------------------------------------------------------------


def _tree(path):
    """Every file under ``path`` with its bytes."""
    out = {}
    for folder, _, files in os.walk(path):
        for name in files:
            full = os.path.join(folder, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = f.read()
    return out


SMALL = {
    "name": "small",
    "data": {"source": "generated", "kind": "curved", "n_samples": 400, "n_features": 4},
    "model": {"degree": 2, "cv": 2},
    "plots": {"components": 0, "dpi": 20},
}


@pytest.mark.slow
def test_a_folder_that_is_not_a_run_folder_is_refused_and_left_alone(tmp_path, capsys):
    out = tmp_path / "mine"
    (out / "01-load").mkdir(parents=True)
    (out / "01-load" / "notes.txt").write_text("my notes")
    (out / "summary.json").write_text('{"mine": true}')
    before = _tree(out)
    expected = (
        f"output {str(out)!r} is a folder that is not empty and not a ppa-dask run folder (it "
        f"has no {RUN_RECORD}); nothing was written: name a new or empty folder"
    )
    with pytest.raises(PipelineError) as info:
        _run(SMALL, out)
    assert str(info.value) == expected
    # also with --force, and through the command line (exit 2, one line)
    with pytest.raises(PipelineError):
        _run(SMALL, out, force=True)
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    argv = ["run", str(path), "-o", str(out), "--force", "--scheduler", "threads"]
    assert main(argv) == 2
    assert capsys.readouterr().err.endswith(f"ppa-dask: error: {expected}\n")
    assert _tree(out) == before and sorted(os.listdir(out)) == ["01-load", "summary.json"]
    # an empty folder becomes a run folder
    empty = tmp_path / "empty"
    empty.mkdir()
    _run(SMALL, empty)
    record = json.loads((empty / RUN_RECORD).read_text())
    assert record["format"] == "ppa-dask-run" and record["stages"] == list(STAGE_DIRS.values())
    assert not (empty / RUN_LOCK).exists()


@pytest.mark.slow
def test_force_removes_only_the_stage_folders_the_run_record_lists(tmp_path):
    out = tmp_path / "run"
    bad = json.loads(json.dumps(SMALL))
    bad["preprocess"] = {"mask": {"valid_range": [100, 200]}}  # every value masked
    # a run that stops in preprocess: only 01-load and 02-preprocess are the library's
    with pytest.raises(PipelineError, match="only 0 feature"):
        _run(bad, out)
    assert json.loads((out / RUN_RECORD).read_text())["stages"] == ["01-load", "02-preprocess"]
    assert not (out / RUN_LOCK).exists()  # released on failure too
    (out / STAGE_DIRS["plots"]).mkdir()
    (out / STAGE_DIRS["plots"] / "figure.png").write_bytes(b"mine")
    with pytest.raises(PipelineError) as info:
        _run(SMALL, out, force=True)
    assert str(info.value) == (
        f"output {str(out)!r}: 06-plots was not written by ppa-dask (the folder's {RUN_RECORD} "
        "does not list it); nothing was removed: move it away"
    )
    assert (out / STAGE_DIRS["plots"] / "figure.png").read_bytes() == b"mine"
    assert json.loads((out / STAGE_DIRS["load"] / MARKER).read_text())["stage"] == "load"
    # moved away, the forced run redoes every stage
    os.rename(out / STAGE_DIRS["plots"], tmp_path / "kept")
    assert _started(_run(SMALL, out, force=True)) == list(STAGE_DIRS)


@pytest.mark.slow
def test_a_rerun_removes_only_the_files_the_run_recorded_writing(tmp_path):
    # issue 46: a rerun (with or without --force) removed whole stage folders, a user's notes
    # and figures in them too
    out = tmp_path / "run"
    config = json.loads(json.dumps(SMALL))
    _run(config, out)
    notes = out / STAGE_DIRS["fit"] / "NOTES.txt"
    figure = out / STAGE_DIRS["plots"] / "annotated.png"
    notes.write_text("degree 2 looked too smooth")
    figure.write_bytes(b"\x89PNG mine")
    config["model"]["degree"] = [1, 2]  # the fit and every stage after it run again
    log = _run(config, out)
    assert _started(log) == ["fit", "transform", "evaluate", "plots"]
    assert notes.read_text() == "degree 2 looked too smooth"
    assert figure.read_bytes() == b"\x89PNG mine"
    assert _started(_run(config, out, force=True)) == list(STAGE_DIRS)
    assert notes.read_text() == "degree 2 looked too smooth"
    assert figure.read_bytes() == b"\x89PNG mine"
    # a stage interrupted before its marker: what it wrote was recorded first, so the rerun
    # removes it (and writes it again) and still leaves the user's file
    (out / STAGE_DIRS["fit"] / MARKER).unlink()
    record = json.loads((out / RUN_RECORD).read_text())
    assert record["outputs"][STAGE_DIRS["fit"]] == ["model.zarr"]
    assert _started(_run(config, out)) == ["fit"]
    assert sorted(os.listdir(out / STAGE_DIRS["fit"])) == ["NOTES.txt", MARKER, "model.zarr"]


@pytest.mark.slow
def test_the_run_log_is_never_appended_through_a_link(tmp_path):
    # issue 46: a pipeline.log symlink planted in the run folder had the log appended to its
    # target outside it
    out = tmp_path / "run"
    _run(SMALL, out)
    outside = tmp_path / "outside.txt"
    outside.write_text("someone else's file\n")
    (out / "pipeline.log").unlink()
    (out / "pipeline.log").symlink_to(outside)
    with pytest.raises(PipelineError) as info:
        _run(SMALL, out, force=True)
    assert str(info.value) == (
        f"output {str(out)!r}: pipeline.log is a symbolic link, not a regular file; ppa-dask "
        "reads and writes only regular files of its own there: remove it"
    )
    assert outside.read_text() == "someone else's file\n"
    assert not (out / RUN_LOCK).exists()
    # the writer itself never follows a link either (a link planted after the check)
    from ppa_dask.utils.progress import Reporter

    with pytest.raises(OSError):
        Reporter(io.StringIO(), str(out / "pipeline.log")).say("through the link")
    assert outside.read_text() == "someone else's file\n"


def test_a_zarr_store_the_generator_did_not_write_is_not_replaced(tmp_path):
    path = tmp_path / "mine.zarr"
    z = zarr.create_array(store=str(path), shape=(10, 4), dtype="f8")
    z[...] = 7.0
    config = json.loads(json.dumps(SMALL))
    config["data"]["path"] = str(path)
    with pytest.raises(PipelineError) as info:
        _run(config, tmp_path / "run")
    assert str(info.value) == (
        f"data.path: {str(path)!r} exists and holds no data set written by ppa-dask's generator "
        "(not written by ppa_dask.datasets.write_zarr); it is not replaced: name a new path"
    )
    assert np.array_equal(zarr.open_array(str(path), mode="r")[...], np.full((10, 4), 7.0))


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.slow
def test_a_lock_left_by_a_dead_run_is_taken_over_and_a_live_one_is_not(tmp_path):
    out = tmp_path / "run"
    _run(SMALL, out)
    lock = out / RUN_LOCK
    pid = _dead_pid()
    lock.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": "then"}))
    log = _run(SMALL, out)
    assert f"took over the lock {lock} of process {pid} on {socket.gethostname()}" in log
    assert _skipped(log) == list(STAGE_DIRS) and not lock.exists()
    # a live process holds it: refused, naming the lock file, the pid and the host
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = {"pid": holder.pid, "host": socket.gethostname(), "started": "now"}
        lock.write_text(json.dumps(owner))
        with pytest.raises(PipelineError) as info:
            _run(SMALL, out)
        assert str(info.value) == (
            f"the run folder is in use by another ppa-dask run: lock file {lock} is held by pid "
            f"{holder.pid} on host {socket.gethostname()} (started now); wait for it to finish, "
            "or remove the lock file if that run is gone"
        )
        assert json.loads(lock.read_text()) == owner  # another run's lock is never removed
        # on another host a pid cannot be checked: refused too
        lock.write_text(json.dumps({"pid": pid, "host": "elsewhere", "started": "now"}))
        with pytest.raises(PipelineError, match=f"held by pid {pid} on host elsewhere"):
            _run(SMALL, out)
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------------------------------------
# resuming
# ---------------------------------------------------------------------------------------------


def _started(log):
    return [s for s in STAGE_DIRS if f"stage {s}: started" in log]


def _skipped(log):
    return [s for s in STAGE_DIRS if f"stage {s}: skipped" in log]


@pytest.mark.slow
def test_rerun_skips_complete_stages_and_reruns_what_changed(gappy_store, tmp_path):
    path, _ = gappy_store
    out = tmp_path / "run"
    config = _base(source="zarr", path=path)
    config["plots"]["components"] = 0
    assert _started(_run(config, out)) == list(STAGE_DIRS)
    stamp = (out / STAGE_DIRS["fit"] / MARKER).stat().st_mtime_ns

    log = _run(config, out)
    assert _skipped(log) == list(STAGE_DIRS) and not _started(log)
    assert (out / STAGE_DIRS["fit"] / MARKER).stat().st_mtime_ns == stamp

    # a model parameter: load and preprocess are reused, the fit and everything after rerun
    changed = json.loads(json.dumps(config))
    changed["model"]["degree"] = 2
    log = _run(changed, out)
    assert _skipped(log) == ["load", "preprocess"]
    assert _started(log) == ["fit", "transform", "evaluate", "plots"]
    model = store.load_model(str(out / STAGE_DIRS["fit"] / "model.zarr"))
    assert set(model.degrees_.tolist()) == {2}

    # an output removed behind the pipeline's back: only that stage reruns
    store_path = out / STAGE_DIRS["transform"] / "components.zarr"
    for name in os.listdir(store_path):
        if name == "zarr.json":
            os.remove(store_path / name)
    log = _run(changed, out)
    assert _started(log) == ["transform"]

    # the input store rewritten: everything reruns
    z = zarr.open_array(path, mode="r+")
    z[0, 0] = z[0, 0]
    time.sleep(0.01)
    os.utime(os.path.join(path, "zarr.json"))
    log = _run(changed, out)
    assert _started(log) == list(STAGE_DIRS)

    # force: everything again
    assert _started(_run(changed, out, force=True)) == list(STAGE_DIRS)


def _pipeline_file(tmp_path, name, out):
    config = {
        "name": name,
        "output": str(out),
        "seed": 3,
        # large enough that the fit's passes take a while: the kill lands in the middle of it
        "data": {
            "source": "generated",
            "kind": "curved",
            "n_samples": 100_000,
            "n_features": 10,
            "chunk_rows": 20_000,
        },
        "model": {"degree": [1, 2, 3], "cv": 2},
        "transform": {"components": 4},
        "plots": {"components": 2, "dpi": 30},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
def test_killed_run_resumes_with_identical_output(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    killed_out, clean_out = tmp_path / "killed", tmp_path / "clean"
    killed_file = _pipeline_file(tmp_path, "killed", killed_out)
    clean_file = _pipeline_file(tmp_path, "clean", clean_out)

    # a batch job killed without warning (SIGKILL: no clean-up code runs) during the fit
    command = [sys.executable, "-m", "ppa_dask", "run", str(killed_file), "--scheduler", "threads"]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path
    )
    seen, refused = [], None
    try:
        for line in proc.stdout:
            seen.append(line)
            if "step 1 of" in line:
                # frozen mid-fit at once (an idle machine finishes the fit while the refusal
                # below is checked); a stopped process is alive and still holds the lock
                proc.send_signal(signal.SIGSTOP)
                # a second run on the same folder while the first is fitting: refused
                with pytest.raises(PipelineError) as refused:
                    run_pipeline(str(killed_file), stream=io.StringIO())
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(timeout=60)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, "".join(seen)
    lock = killed_out / RUN_LOCK
    assert refused is not None and (
        f"lock file {lock} is held by pid {proc.pid} on host {socket.gethostname()}"
        in str(refused.value)
    )
    # SIGKILL runs no clean-up: the lock stays, naming the dead process
    assert json.loads(lock.read_text())["pid"] == proc.pid
    done = {s for s in STAGE_DIRS if (killed_out / STAGE_DIRS[s] / MARKER).exists()}
    assert done == {"load", "preprocess"}  # the fit was interrupted: no marker, no model
    assert not (killed_out / STAGE_DIRS["fit"] / "model.zarr").exists()

    # the same command again resumes (run here in-process: the code path is the same)
    log = io.StringIO()
    run_pipeline(str(killed_file), stream=log)
    assert f"took over the lock {lock} of process {proc.pid}" in log.getvalue()
    assert not lock.exists()
    assert _skipped(log.getvalue()) == ["load", "preprocess"]
    assert _started(log.getvalue()) == ["fit", "transform", "evaluate", "plots"]
    run_pipeline(str(clean_file), stream=io.StringIO())

    # identical outputs: samples, model arrays, components, error tables
    for stage, name in [("preprocess", "samples.zarr"), ("transform", "components.zarr")]:
        a = store.open_array(str(killed_out / STAGE_DIRS[stage] / name)).compute()
        b = store.open_array(str(clean_out / STAGE_DIRS[stage] / name)).compute()
        assert np.array_equal(a, b), name
    info_a = store.model_info(str(killed_out / STAGE_DIRS["fit"] / "model.zarr"))
    info_b = store.model_info(str(clean_out / STAGE_DIRS["fit"] / "model.zarr"))
    assert {k: v["sha256"] for k, v in info_a["arrays"].items()} == {
        k: v["sha256"] for k, v in info_b["arrays"].items()
    }
    for name in ("reconstruction_error.csv", "reconstruction_error.json"):
        assert (killed_out / STAGE_DIRS["evaluate"] / name).read_bytes() == (
            clean_out / STAGE_DIRS["evaluate"] / name
        ).read_bytes()
