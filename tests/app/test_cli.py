"""The ``ppa-dask`` command line: the demo end to end (small: table and cube part), and
argument errors."""

import contextlib
import csv
import io
import json
import os
import re

import pytest
from test_cli_commands import check_cube_demo_outputs

from ppa_dask.app.cli import main

N_FEATURES = 10
#: Size of the cube part in the small demo run.
CUBE_BANDS = 6
CUBE_PIXELS = 24
CUBE_ARGS = ["--bands", str(CUBE_BANDS), "--pixels", str(CUBE_PIXELS)]
#: What the demo writes inside its output folder, and inside the cube part's run folder.
TABLE_OUTPUTS = [
    "data.zarr",
    "reconstruction_error.csv",
    "reconstruction_error.md",
    "summary.json",
    "table",
]
CUBE_RUN_FOLDER = [
    # the run record that marks the folder as a ppa-dask run folder (the lock is gone at the end)
    ".ppa-dask-run.json",
    "01-load",
    "02-preprocess",
    "03-fit",
    "04-transform",
    "05-evaluate",
    "06-plots",
    "pipeline.log",
    "pipeline.yaml",
    "summary.json",
]


def _listing(path):
    return sorted(os.listdir(path))


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """Run the demo once (small, both parts) from an empty working directory; shared by the
    checks."""
    base = tmp_path_factory.mktemp("cli")
    out = base / "demo"
    cwd = base / "cwd"
    cwd.mkdir()
    before = _listing(base)
    old = os.getcwd()
    os.chdir(cwd)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            code = main(
                [
                    "demo",
                    "--output",
                    str(out),
                    "--n-samples",
                    "20000",
                    "--n-features",
                    str(N_FEATURES),
                    "--workers",
                    "1",
                    "--chunk-rows",
                    "5000",
                    "--seed",
                    "0",
                    *CUBE_ARGS,
                ]
            )
    finally:
        os.chdir(old)
    return {
        "code": code,
        "out": out,
        "cwd": cwd,
        "base": base,
        "before": before,
        "printed": printed.getvalue(),
    }


def _table(out):
    with open(out / "reconstruction_error.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_demo_exit_code_and_files(demo_run):
    assert demo_run["code"] == 0
    out = demo_run["out"]
    for name in TABLE_OUTPUTS:
        assert (out / name).exists(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parameters"]["n_samples"] == 20000
    assert len(summary["model"]["degrees"]) == N_FEATURES - 1
    assert all(1 <= g <= 5 for g in summary["model"]["degrees"])
    times = summary["times_s"]
    assert times["fit_s"] > 0
    # both parts ran in one session: the total covers the table part and then the cube part
    assert times["cube_s"] > 0 and times["table_s"] > 0
    # the summary rounds each time to 1 ms, so the sum of two may exceed the total by 1 ms
    assert times["total_s"] >= times["table_s"] + times["cube_s"] - 0.0015
    # the summary points at the cube part's outputs, and they exist
    cube = summary["cube"]
    assert cube["complete"] is True and cube["path"] == str(out / "cube")
    assert (cube["bands"], cube["pixels"], cube["seed"]) == (CUBE_BANDS, CUBE_PIXELS, 0)
    for name in (
        "components_zarr",
        "components_png",
        "reconstruction_error_md",
        "reconstruction_error_csv",
        "pipeline_summary",
    ):
        assert cube[name].startswith(str(out / "cube") + os.sep) and os.path.exists(cube[name])
    md = (out / "reconstruction_error.md").read_text()
    table_lines = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(table_lines) == 1 + (N_FEATURES - 1)  # header, then one row per k


@pytest.mark.slow
def test_demo_writes_nothing_outside_output(demo_run):
    assert demo_run["code"] == 0
    # the working directory it ran from is still empty
    assert _listing(demo_run["cwd"]) == []
    # next to the output directory nothing appeared (cwd and demo were there before the run:
    # demo is created by the run itself)
    after = [name for name in _listing(demo_run["base"]) if name != "demo"]
    assert after == [name for name in demo_run["before"] if name != "demo"]
    # inside it, only the documented outputs (no worker scratch space or temporary summary
    # left behind); the cube part's run folder is cube/
    assert _listing(demo_run["out"]) == sorted(["cube", *TABLE_OUTPUTS])
    assert _listing(demo_run["out"] / "cube") == CUBE_RUN_FOLDER


@pytest.mark.slow
def test_demo_cube_part(demo_run):
    assert demo_run["code"] == 0
    check_cube_demo_outputs(demo_run["out"] / "cube", bands=CUBE_BANDS, pixels=CUBE_PIXELS, seed=0)
    # the table part came first, and the last lines say where the cube outputs are
    printed = demo_run["printed"]
    assert printed.index("wrote " + str(demo_run["out"] / "summary.json")) < printed.index(
        "pipeline 'demo-cube'"
    )
    tail = "\n".join(printed.rstrip().splitlines()[-4:])
    for relative in (
        "05-evaluate/reconstruction_error.md",
        "06-plots/components.png",
        "04-transform/components.zarr",
    ):
        assert str(demo_run["out"] / "cube" / relative) in tail, relative


@pytest.mark.slow
def test_demo_prints_its_table_once_with_the_header_it_always_had(demo_run):
    # the table part is a pipeline now: its evaluate stage prints the training table, under the
    # demo's header, and the demo does not print it a second time
    printed = demo_run["printed"]
    header = re.search(
        r"Reconstruction error with k components \(n=20,000, d=(\d+); total variance ([\d.]+)\):",
        printed,
    )
    assert header is not None and int(header.group(1)) == N_FEATURES
    summary = json.loads((demo_run["out"] / "summary.json").read_text())
    total = summary["reconstruction_error"]["total_variance"]
    assert float(header.group(2)) == pytest.approx(total, rel=1e-5)
    assert printed.count("Reconstruction error with k components (n=20,000,") == 1


@pytest.mark.slow
def test_demo_table_ppa_beats_pca(demo_run):
    assert demo_run["code"] == 0
    rows = _table(demo_run["out"])
    assert [int(r["k"]) for r in rows] == list(range(1, N_FEATURES))
    for r in rows:
        pca, ppa = float(r["pca_mse"]), float(r["ppa_mse"])
        assert pca > 0 and ppa > 0
        # PPA never does worse than PCA with the same number of components (paper's claim;
        # it holds exactly on the training data)
        assert ppa <= pca * (1 + 1e-9), r
        assert float(r["ppa_over_pca_percent"]) == pytest.approx(100 * ppa / pca)
    first = rows[0]
    # on the curved data one polynomial component explains clearly more than a line
    assert float(first["ppa_mse"]) < 0.8 * float(first["pca_mse"])


@pytest.mark.slow
def test_demo_table_matches_an_independent_fit(demo_run):
    """The table part's numbers: the data regenerated in memory, PPA fitted on it here (same
    seed and chunks) and PCA fitted with k components by scikit-learn, errors measured here."""
    import dask
    import dask.array as da
    import numpy as np
    import zarr
    from sklearn.decomposition import PCA

    from ppa_dask import PPA
    from ppa_dask.datasets import make_curved_manifold

    assert demo_run["code"] == 0
    X = make_curved_manifold(20000, n_features=N_FEATURES, noise=0.05, random_state=0)
    np.testing.assert_array_equal(zarr.open_array(str(demo_run["out"] / "data.zarr"))[...], X)
    with dask.config.set(scheduler="threads"):
        model = PPA(degree=range(1, 6), cv=2, random_state=0).fit(da.from_array(X, chunks=5000))
    Z = model.transform(X)
    rows = _table(demo_run["out"])
    for r in rows:
        k = int(r["k"])
        ppa = np.mean(np.sum((X - model.inverse_transform(Z[:, :k])) ** 2, axis=1))
        pca = PCA(n_components=k).fit(X)
        pca_mse = np.mean(np.sum((X - pca.inverse_transform(pca.transform(X))) ** 2, axis=1))
        assert float(r["ppa_mse"]) == pytest.approx(ppa, rel=1e-8), k
        assert float(r["pca_mse"]) == pytest.approx(pca_mse, rel=1e-8), k
    summary = json.loads((demo_run["out"] / "summary.json").read_text())
    assert summary["model"]["degrees"] == [int(g) for g in model.degrees_]


@pytest.mark.slow
def test_demo_reuses_matching_data(demo_run, capsys):
    assert demo_run["code"] == 0
    out = demo_run["out"]
    zarr_json = out / "data.zarr" / "zarr.json"
    stamp = zarr_json.stat().st_mtime_ns
    code = main(
        [
            "demo",
            "--output",
            str(out),
            "--n-samples",
            "20000",
            "--n-features",
            str(N_FEATURES),
            "--workers",
            "1",
            "--chunk-rows",
            "5000",
            *CUBE_ARGS,
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "reusing" in printed
    # every stage of the table pipeline was complete: the table comes from its files
    assert (
        "pipeline 'demo-table'" in printed
        and "Reconstruction error with k components (n=20,000" in printed
    )
    assert zarr_json.stat().st_mtime_ns == stamp
    summary = json.loads((out / "summary.json").read_text())
    assert summary["data"]["reused"] is True
    # the cube part resumes too: every stage of its pipeline was complete
    assert "6 of 6 stages already complete" in printed
    assert summary["cube"]["complete"] is True


@pytest.mark.slow
def test_demo_no_cube_skips_the_cube_part(tmp_path, capsys):
    out = tmp_path / "demo"
    code = main(
        [
            "demo",
            "--no-cube",
            "--output",
            str(out),
            "--n-samples",
            "2000",
            "--n-features",
            "5",
            "--scheduler",
            "threads",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert _listing(out) == TABLE_OUTPUTS
    assert json.loads((out / "summary.json").read_text())["cube"] is None
    assert "pipeline 'demo-cube'" not in printed


@pytest.mark.parametrize(
    "args,named",
    [
        (
            ["demo", "--n-samples", "0"],
            "argument --n-samples/-n: must be a positive integer, got '0'",
        ),
        (
            ["demo", "--n-samples", "-5"],
            "argument --n-samples/-n: must be a positive integer, got '-5'",
        ),
        (
            ["demo", "--n-samples", "many"],
            "argument --n-samples/-n: expected a positive integer, got 'many'",
        ),
        (["demo", "--workers", "0"], "argument --workers/-w: must be a positive integer, got '0'"),
        (
            ["demo", "--chunk-rows", "-1"],
            "argument --chunk-rows: must be a positive integer, got '-1'",
        ),
        (["demo", "--seed", "-1"], "argument --seed: must be a non-negative integer, got '-1'"),
        (["demo", "--no-such-option"], "unrecognized arguments: --no-such-option"),
        (["demo", "--cube", "--no-cube"], "argument --no-cube: not allowed with argument --cube"),
        (["demo", "--bands", "3"], "--bands must be >= 4, got 3"),
        (["demo", "--pixels", "7"], "--pixels must be >= 8"),
        (
            ["demo", "--cube", "--pixels", "0"],
            "argument --pixels: must be a positive integer, got '0'",
        ),
        (["demo", "--cube", "--bands", "2"], "--bands must be >= 4, got 2"),
        (["no-such-command"], "argument COMMAND: invalid choice: 'no-such-command'"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_bad_arguments(args, named, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(args + (["--output", str(tmp_path / "out")] if args[:1] == ["demo"] else []))
    assert code == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    # the one line names the argument and what was wrong with it
    assert err.startswith("ppa-dask: error: " + named), err
    assert len(err.splitlines()) == 1
    assert captured.out == ""
    assert _listing(tmp_path) == []  # nothing written


@pytest.mark.slow
def test_bad_input_from_library_is_reported(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # too few features for the curved generator
    assert main(["demo", "--output", str(tmp_path / "a"), "--n-features", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ppa-dask: error: ") and "n-features" in err
    assert len(err.splitlines()) == 1
    # too few samples for 2-fold cross-validation of degrees up to 5: a ValueError of PPA.fit
    out = tmp_path / "b"
    assert main(["demo", "--output", str(out), "--n-samples", "8", "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ppa-dask: error: ")
    assert len(err.splitlines()) == 1
    assert "8 sample" in err and "degree" in err, err


def test_output_is_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["demo", "--output", str(target), "--n-samples", "100"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ppa-dask: error: ") and len(err.strip().splitlines()) == 1
    assert target.read_text() == "x"


def test_help_exits_zero(capsys):
    assert main(["demo", "--help"]) == 0
    text = capsys.readouterr().out
    for option in ("--n-samples", "--cube", "--no-cube", "--bands", "--pixels"):
        assert option in text


# ---------------------------------------------------------------------------------------------
# the main job's output is clean: nothing from distributed (dask/dask#9888's run_spec warning)
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _distributed_records():
    """Every log record of distributed's loggers in this process (scheduler, nanny, client) and
    every warning, while the block runs."""
    import logging
    import warnings

    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(f"{record.name} {record.levelname}: {record.getMessage()[:300]}")

    handler = Keep(level=logging.WARNING)
    logger = logging.getLogger("distributed")
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield records
        records.extend(f"warning: {w.category.__name__}: {w.message}" for w in caught)
    finally:
        logger.removeHandler(handler)


@pytest.mark.slow
def test_demo_prints_nothing_from_distributed(tmp_path, capfd):
    """The demo (both parts, small) on its local cluster: no log record of distributed, no
    warning, here or in the worker processes (their stderr is this process's)."""
    with _distributed_records() as records:
        code = main(
            [
                "demo",
                "--output",
                str(tmp_path / "demo"),
                "--n-samples",
                "20000",
                "--chunk-rows",
                "5000",
                "--bands",
                "8",
                "--pixels",
                "128",
            ]
        )
    captured = capfd.readouterr()
    assert code == 0
    assert records == []
    assert "distributed." not in captured.err and "Warning" not in captured.err, captured.err
    assert "distributed." not in captured.out and "run_spec" not in captured.out
    # the fits page's link is printed beside the dashboard's
    dashboard = re.search(r"dashboard: (http://\S+)/status", captured.out)
    assert dashboard is not None and f"PPA fits: {dashboard.group(1)}/ppa" in captured.out
