"""The command's messages agree with each other and with what it does: an existing CSV OUTPUT
is refused before any work in one message with or without --overwrite (ppa-dask never replaces
a CSV), an output not written by ppa-dask is refused before any work even with --overwrite,
a missing positional is named as the usage line names it, the top-level help names the formats
the commands really read and write, and the run folder ``ppa-dask run`` writes by default is
ignored by git."""

from __future__ import annotations

import contextlib
import io
import os
import re

import numpy as np
import paths
import pytest

from ppa_dask import PPA, store
from ppa_dask.app.cli import build_parser, main
from ppa_dask.app.pipeline.schema import validate_pipeline
from ppa_dask.store.sources import FORMATS


def _run(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue().strip()


@pytest.fixture
def model_and_table(tmp_path):
    X = np.random.default_rng(0).normal(size=(200, 3))
    model = store.save_model(PPA(degree=2, random_state=0).fit(X), str(tmp_path / "m.zarr"))
    table = tmp_path / "x.csv"
    table.write_text("a,b,c\n" + "\n".join(",".join(map(str, row)) for row in X) + "\n")
    return model, str(table)


def _counting(monkeypatch, name):
    calls = []
    original = getattr(store, name)
    monkeypatch.setattr(store, name, lambda *a, **k: calls.append(a) or original(*a, **k))
    return calls


@pytest.mark.parametrize("command", ["transform", "inverse"])
def test_an_existing_csv_output_is_refused_before_any_work_with_or_without_overwrite(
    command, model_and_table, tmp_path, monkeypatch
):
    model, table = model_and_table
    out = tmp_path / "out.csv"
    out.write_text("mine\n")
    loads, opens = _counting(monkeypatch, "load_model"), _counting(monkeypatch, "open_source")
    lines = set()
    for extra in ([], ["--overwrite"]):
        code, err = _run([command, model, table, str(out), "--scheduler", "threads", *extra])
        assert code == 2, err
        lines.add(err)
    # one message either way, and it does not offer what it will not do
    assert len(lines) == 1, lines
    (line,) = lines
    assert line == (
        f"ppa-dask: error: OUTPUT {str(out)!r} already exists; a CSV file carries no record of "
        "who wrote it, so ppa-dask never replaces one, even with --overwrite: remove it or "
        "choose another name"
    )
    assert "pass --overwrite" not in line
    assert loads == [] and opens == [], "the command worked before refusing"
    assert out.read_text() == "mine\n"


@pytest.mark.parametrize("name, label", [("out.parquet", "Parquet file"), ("out", "Zarr result")])
def test_overwrite_of_an_output_ppa_dask_did_not_write_is_refused_before_any_work(
    name, label, model_and_table, tmp_path, monkeypatch
):
    model, table = model_and_table
    out = tmp_path / name
    out.mkdir()
    (out / "theirs.txt").write_text("not ours")
    loads = _counting(monkeypatch, "load_model")
    code, err = _run(["transform", model, table, str(out), "--overwrite"])
    assert code == 2
    assert err == (
        f"ppa-dask: error: OUTPUT {str(out)!r} exists and is not a {label} written by "
        "ppa-dask; refusing to replace it even with --overwrite"
    )
    assert loads == [] and os.listdir(out) == ["theirs.txt"]


@pytest.mark.parametrize("name", ["out.parquet", "out.zarr"])
def test_an_output_ppa_dask_wrote_is_replaced_with_overwrite(name, model_and_table, tmp_path):
    model, table = model_and_table
    out = str(tmp_path / name)
    args = ["transform", model, table, out, "--scheduler", "threads"]
    assert _run(args)[0] == 0
    code, err = _run(args)
    assert code == 2 and "pass --overwrite to replace it" in err
    assert _run([*args, "--overwrite"]) == (0, "")


@pytest.mark.parametrize(
    "argv, missing",
    [
        (["fit", "x.zarr"], "MODEL"),
        (["fit"], "INPUT, MODEL"),
        (["transform", "m.zarr", "x.zarr"], "OUTPUT"),
        (["transform", "m.zarr"], "INPUT, OUTPUT"),
        (["inverse", "m.zarr", "c.zarr"], "OUTPUT"),
    ],
)
def test_a_missing_positional_is_named_as_the_usage_line_names_it(argv, missing):
    code, err = _run(argv)
    assert code == 2
    assert err == f"ppa-dask: error: the following arguments are required: {missing}"


def test_the_top_level_help_names_the_formats_read_and_written():
    text = build_parser().format_help()
    # each command's help line, joined where argparse wrapped it
    lines = {}
    for match in re.finditer(r"^    (\w+)\s+(.*?)(?=^    \w|\n\n|^options)", text, re.M | re.S):
        lines[match.group(1)] = " ".join(match.group(2).split())
    labels = ["Zarr", *(f.label for f in FORMATS.values())]
    assert {"CSV", "Parquet", "GeoTIFF", "NetCDF"} <= set(labels)
    for command in ("fit", "transform", "inverse"):
        missing = [label for label in labels if label not in lines[command]]
        assert not missing, f"{command}: {lines[command]!r} does not name {missing}"
    assert "written to Zarr" not in text


def test_the_default_run_folder_is_ignored_by_git():
    data = {"source": "generated", "kind": "curved", "n_samples": 100, "n_features": 4}
    config = validate_pipeline({"name": "p", "data": data})
    top = config["output"].split(os.sep)[0]
    ignored = (paths.ROOT / ".gitignore").read_text().splitlines()
    assert f"{top}/" in ignored, f"{config['output']} (ppa-dask run's default) is not ignored"
