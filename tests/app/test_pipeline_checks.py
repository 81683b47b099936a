"""Sizes and counts checked before work (issue 27 part 4).

The claims checked, each at ``ppa-dask run --check`` (exit 2 and one line, nothing created),
with the data's shape known from the configuration or the input's metadata alone:

* a ``generated`` data set larger than this process could hold while generating it is refused
  (it used to fail with a traceback after the run folder was created), and the refusal says how
  to have it written blockwise instead (``data.path``);
* a chunking under which a pass is mostly scheduling is warned about, with a chunking that is
  not; the bundled pipelines get no warning;
* degrees, folds and components the data cannot take are refused in the fit's own words before
  the load stage (the fit used to refuse them after load and preprocess), and
  ``transform.components`` beyond the model's components in the CLI's words (the run used to
  write all of them without a word): the same sentences, from one function each
  (:meth:`ppa_dask.PPA.check_shape`, :func:`ppa_dask.app.pipeline.too_many_components`).
"""

import os
import tracemalloc

import dask
import numpy as np
import paths
import pytest
import yaml

from ppa_dask import PPA, datasets
from ppa_dask.app.cli import main
from ppa_dask.app.pipeline import (
    MANY_CHUNKS,
    SMALL_CHUNK_BYTES,
    check_pipeline_data,
    load_pipeline,
    validate_pipeline,
)
from ppa_dask.ppa.kernels import fold_labels
from ppa_dask.utils.seeds import estimator_seed

ROOT = str(paths.ROOT)


@pytest.fixture(autouse=True)
def _threads_scheduler():
    with dask.config.set(scheduler="threads"):
        yield


def _check(tmp_path, capsys, config):
    """``ppa-dask run FILE --check`` on ``config``: (exit code, stdout, stderr); nothing may
    be created beside the file."""
    path = tmp_path / "p.yaml"
    out = tmp_path / "out"
    path.write_text(yaml.safe_dump({"name": "p", "output": str(out), **config}))
    before = set(os.listdir(tmp_path))
    code = main(["run", str(path), "--check"])
    captured = capsys.readouterr()
    assert set(os.listdir(tmp_path)) == before
    return code, captured.out, captured.err, str(path)


def _refused(tmp_path, capsys, config):
    code, _, err, path = _check(tmp_path, capsys, config)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"ppa-dask: error: {path}: "), err
    return err[len(f"ppa-dask: error: {path}: ") :].rstrip("\n")


def test_a_generated_data_set_too_large_to_generate_here_is_refused(tmp_path, capsys):
    data = {"source": "generated", "n_samples": 100_000_000_000, "n_features": 6}
    message = _refused(tmp_path, capsys, {"data": data})
    assert message.startswith(
        "data.n_samples: 100,000,000,000 x 6 generated samples are 4.37 TiB (float64)"
    ), message
    assert "available memory: set data.path to write them blockwise" in message, message
    # and the run itself refuses before its folder exists (it used to create it, then fail)
    path = tmp_path / "p.yaml"
    out = tmp_path / "out"
    assert main(["run", str(path), "-o", str(out), "--scheduler", "threads"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not out.exists()
    # with data.path the samples are written blockwise on the cluster: not refused
    config = validate_pipeline({"name": "p", "data": {**data, "path": str(tmp_path / "d")}})
    check_pipeline_data(config)


@pytest.mark.slow
def test_a_chunking_that_is_mostly_scheduling_is_warned_about_with_a_better_one(tmp_path, capsys):
    data = {"source": "generated", "n_samples": 60_000, "n_features": 6, "chunk_rows": 1}
    code, out, err, path = _check(tmp_path, capsys, {"data": data})
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[-1] == f"{path}: valid"
    assert lines[-2] == (
        f"{path}: warning: data.chunk_rows 1: 60,000 x 6 samples in 60,000 chunks of 48 B; a "
        "pass over them is mostly scheduling. chunk_rows: 60000 gives 1 chunk of 2.75 MiB"
    )
    # the suggestion is one the check accepts; so are the default chunking, a few small chunks
    # of a small data set, and the bundled pipelines
    for config in (
        {**data, "chunk_rows": 60_000},
        {**data, "chunk_rows": 65_536},
        {**data, "n_samples": 2_000, "chunk_rows": 100},
    ):
        assert check_pipeline_data(validate_pipeline({"name": "p", "data": config})) == []
    for name in ("demo.yaml", "magic_gamma.yaml"):
        assert check_pipeline_data(load_pipeline(os.path.join(ROOT, "pipelines", name))) == []
    # too many chunks warns whatever their size; the suggestion has a tenth as many at most
    n, d, rows = 2 * MANY_CHUNKS * 8192, 20, 8192
    assert rows * d * 8 > SMALL_CHUNK_BYTES
    config = validate_pipeline(
        {
            "name": "p",
            "data": {
                "source": "generated",
                "n_samples": n,
                "n_features": d,
                "chunk_rows": rows,
                "path": str(tmp_path / "d"),
            },
        }
    )
    (warning,) = check_pipeline_data(config)
    assert warning == (
        "data.chunk_rows 8192: 1,638,400,000 x 20 samples in 200,000 chunks of 1.25 MiB; a pass "
        "over them is mostly scheduling. chunk_rows: 163840 gives 10,000 chunks of 25.00 MiB"
    )


@pytest.fixture(scope="module")
def six_features(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("data") / "d6.zarr")
    return datasets.write_zarr(path, 2000, n_features=6, chunk_rows=500)


def _cli_error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ppa-dask: error: "), err
    return err[len("ppa-dask: error: ") :].rstrip("\n")


def test_degrees_the_data_cannot_take_are_refused_before_the_load_in_the_fits_words(
    tmp_path, capsys, six_features
):
    data = {"source": "zarr", "path": six_features}
    message = _refused(tmp_path, capsys, {"data": data, "model": {"degree": [1, 2, 3_000_000]}})
    cli = _cli_error(
        capsys,
        ["fit", six_features, str(tmp_path / "m.zarr"), "--degree", "1,2,3000000"],
    )
    assert not (tmp_path / "m.zarr").exists()
    assert cli.startswith("X has 2000 sample(s); in 2-fold cross-validation of degrees up to ")
    assert message == f"model: {cli} (the data: at most 2,000 samples x 6 features)"
    # a fixed degree, and folds: the same
    for model, argv in (
        ({"degree": 2500}, ["--degree", "2500"]),
        ({"degree": [1, 1400], "cv": 3}, ["--degree", "1,1400", "--cv", "3"]),
    ):
        message = _refused(tmp_path, capsys, {"data": data, "model": model})
        cli = _cli_error(capsys, ["fit", six_features, str(tmp_path / "m.zarr"), *argv])
        assert message == f"model: {cli} (the data: at most 2,000 samples x 6 features)"
    # and the degrees the data can take pass
    code, *_ = _check(tmp_path, capsys, {"data": data, "model": {"degree": [1, 2, 600]}})
    assert code == 0


def test_components_beyond_the_data_are_refused_in_the_clis_words(tmp_path, capsys, six_features):
    data = {"source": "zarr", "path": six_features}
    message = _refused(tmp_path, capsys, {"data": data, "transform": {"components": 99}})
    assert message == (
        "transform.components 99: the model (6 features, model.n_components: null) has 6 "
        "components"
    )
    model = tmp_path / "m.zarr"
    assert main(["fit", six_features, str(model), "--degree", "1", "--scheduler", "threads"]) == 0
    capsys.readouterr()
    cli = _cli_error(
        capsys,
        ["transform", str(model), six_features, str(tmp_path / "o.zarr"), "--components", "99"],
    )
    assert cli == f"--components 99: MODEL '{model}' has 6 components"
    # the sentence is one: only the key and the model's name differ
    assert message.split(":", 1)[0].split()[-1] == cli.split(":", 1)[0].split()[-1] == "99"
    assert message.endswith(" has 6 components") and cli.endswith(" has 6 components")
    # model.n_components: the fit's words, as the CLI's --n-components
    message = _refused(tmp_path, capsys, {"data": data, "model": {"n_components": 6}})
    cli = _cli_error(
        capsys, ["fit", six_features, str(tmp_path / "m2.zarr"), "--n-components", "6"]
    )
    assert message == f"model: {cli} (the data: at most 2,000 samples x 6 features)"
    message = _refused(
        tmp_path,
        capsys,
        {"data": data, "model": {"n_components": 3}, "transform": {"components": 4}},
    )
    assert message == (
        "transform.components 4: the model (6 features, model.n_components: 3) has 3 components"
    )
    # a cube: the samples are the pixels, the features the bands
    cube = {"source": "make_cube", "params": {"n_bands": 8, "ny": 16, "nx": 16}}
    message = _refused(tmp_path, capsys, {"data": cube, "transform": {"components": 9}})
    assert message == (
        "transform.components 9: the model (8 features, model.n_components: null) has 8 components"
    )


def test_check_shape_refuses_exactly_what_the_fit_refuses():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    X[:, 3] = X[:, 0] ** 2 + 0.1 * X[:, 3]
    cases = [
        {"degree": 3},
        {"degree": 39},
        {"degree": 40},
        {"degree": [1, 2, 15]},
        {"degree": [1, 2, 25]},
        {"degree": [1, 2], "cv": 13},
        {"degree": [1, 12], "cv": 3},
        {"n_components": 3},
        {"n_components": 4},
    ]
    refused = 0
    for params in cases:
        model = PPA(random_state=0, **params)
        try:
            model.fit(X)
        except ValueError as exc:
            refused += 1
            with pytest.raises(ValueError) as info:
                PPA(random_state=0, **params).check_shape(*X.shape)
            assert str(info.value) == str(exc), params
        else:
            assert PPA(random_state=0, **params).check_shape(*X.shape) == model.n_components_
    assert 0 < refused < len(cases)


@pytest.mark.slow
def test_a_huge_candidate_degree_is_refused_in_bounded_memory():
    # the fewest rows whose folds leave degree + 1 training rows used to be found from labels
    # and running counts of 4 x folds x (degree + 1) rows at once: 37 s and gigabytes for a
    # degree of 3,000,000; now in blocks, from the bound n - n / folds the answer cannot beat
    degree, folds, seed = 1_500_000, 2, estimator_seed(0)
    tracemalloc.start()
    with pytest.raises(ValueError) as info:
        PPA(degree=[1, degree], cv=folds, random_state=0).check_shape(2000, 6)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 2**20, peak
    needed = int(str(info.value).split("which the folds reach from ")[1].split()[0])
    # brute force, all at once: the first row count whose every training fold is large enough
    labels = fold_labels(0, 2 * needed, seed, folds)
    counts = np.cumsum(labels[:, None] == np.arange(folds), axis=0)
    enough = np.arange(1, 2 * needed + 1) - counts.max(axis=1) >= degree + 1
    assert int(np.argmax(enough)) + 1 == needed
