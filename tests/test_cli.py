"""The ``ppa-dask`` command line: the demo end to end (small), and argument errors."""

import csv
import json
import os

import pytest

from ppa_dask.cli import main

N_FEATURES = 10


def _listing(path):
    return sorted(os.listdir(path))


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """Run the demo once (small) from an empty working directory; shared by the checks."""
    base = tmp_path_factory.mktemp("cli")
    out = base / "demo"
    cwd = base / "cwd"
    cwd.mkdir()
    before = _listing(base)
    old = os.getcwd()
    os.chdir(cwd)
    try:
        code = main([
            "demo", "--output", str(out), "--n-samples", "20000",
            "--n-features", str(N_FEATURES), "--workers", "1", "--chunk-rows", "5000",
            "--seed", "0",
        ])
    finally:
        os.chdir(old)
    return {"code": code, "out": out, "cwd": cwd, "base": base, "before": before}


def _table(out):
    with open(out / "reconstruction_error.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_demo_exit_code_and_files(demo_run):
    assert demo_run["code"] == 0
    out = demo_run["out"]
    for name in ("data.zarr", "reconstruction_error.csv", "reconstruction_error.md",
                 "summary.json"):
        assert (out / name).exists(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parameters"]["n_samples"] == 20000
    assert len(summary["model"]["degrees"]) == N_FEATURES - 1
    assert all(1 <= g <= 5 for g in summary["model"]["degrees"])
    assert summary["times_s"]["fit_s"] > 0
    md = (out / "reconstruction_error.md").read_text()
    table_lines = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(table_lines) == 1 + (N_FEATURES - 1)  # header, then one row per k


def test_demo_writes_nothing_outside_output(demo_run):
    assert demo_run["code"] == 0
    # the working directory it ran from is still empty
    assert _listing(demo_run["cwd"]) == []
    # next to the output directory nothing appeared (cwd and demo were there before the run:
    # demo is created by the run itself)
    after = [name for name in _listing(demo_run["base"]) if name != "demo"]
    assert after == [name for name in demo_run["before"] if name != "demo"]
    # inside it, only the documented outputs (no worker scratch space left behind)
    assert _listing(demo_run["out"]) == [
        "data.zarr", "reconstruction_error.csv", "reconstruction_error.md", "summary.json",
    ]


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


def test_demo_reuses_matching_data(demo_run, capsys):
    assert demo_run["code"] == 0
    out = demo_run["out"]
    zarr_json = out / "data.zarr" / "zarr.json"
    stamp = zarr_json.stat().st_mtime_ns
    code = main(["demo", "--output", str(out), "--n-samples", "20000",
                 "--n-features", str(N_FEATURES), "--workers", "1", "--chunk-rows", "5000"])
    assert code == 0
    assert "reusing" in capsys.readouterr().out
    assert zarr_json.stat().st_mtime_ns == stamp
    summary = json.loads((out / "summary.json").read_text())
    assert summary["data"]["reused"] is True


@pytest.mark.parametrize(
    "args",
    [
        ["demo", "--n-samples", "0"],
        ["demo", "--n-samples", "-5"],
        ["demo", "--n-samples", "many"],
        ["demo", "--workers", "0"],
        ["demo", "--chunk-rows", "-1"],
        ["demo", "--seed", "-1"],
        ["demo", "--no-such-option"],
        ["no-such-command"],
        [],
    ],
)
def test_bad_arguments(args, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(args + (["--output", str(tmp_path / "out")] if args[:1] == ["demo"] else []))
    assert code == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("ppa-dask: error: ")
    assert len(err.splitlines()) == 1
    assert captured.out == ""
    assert _listing(tmp_path) == []  # nothing written


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
    assert "sample" in err


def test_output_is_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["demo", "--output", str(target), "--n-samples", "100"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ppa-dask: error: ") and len(err.strip().splitlines()) == 1
    assert target.read_text() == "x"


def test_help_exits_zero(capsys):
    assert main(["demo", "--help"]) == 0
    assert "--n-samples" in capsys.readouterr().out
