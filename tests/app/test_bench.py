"""``ppa-dask bench``: every row is measured beside its baseline and written to bench.json and
bench.md; anchors that are not installed are reported as such. Timings are never asserted (the
machine is shared). What is: the harness's order and per-call times on a clock the test
controls, the verdicts at their bounds, a section's ratios and verdicts from times the test
gives it (computed here by hand from the documented targets), and bench.md read back as a
table equal to bench.json."""

from __future__ import annotations

import json
import math
import sys

import pytest

from ppa_dask.app import bench
from ppa_dask.app.bench.harness import make_row
from ppa_dask.app.bench.sections import in_memory
from ppa_dask.app.cli import main

# the figures of the paper's Table 2 (minutes): PPA / PCA per data set, as printed there
PAPER_RATIOS = {"magic_gamma": 9.2, "segmentation": 32.5, "vehicles": 9.5}
COLUMNS = ["figure", "PPA (s)", "baseline", "baseline (s)", "ratio", "target", "met", "passes"]


def _run(tmp_path, *options):
    out = tmp_path / "bench"
    code = main(["bench", "--quick", "--size", "tiny", "--output", str(out), *options])
    assert code == 0
    return out, json.loads((out / "bench.json").read_text())


@pytest.fixture(scope="module")
def full_tiny(tmp_path_factory):
    """One run of every section at the test size (a minute at most on a loaded machine)."""
    return _run(tmp_path_factory.mktemp("bench"))


@pytest.mark.cluster
def test_every_row_is_present_with_its_baseline(full_tiny):
    out, result = full_tiny
    rows = {r["id"]: r for r in result["rows"]}
    assert [r["id"] for r in result["rows"]] == list(bench.ROW_IDS)
    for row_id, r in rows.items():
        for key in ("figure", "baseline", "baseline_s", "ppa_s", "ratio", "target", "met"):
            assert key in r, (row_id, key)
        if row_id == "speculation" and r["status"].startswith("not available"):
            continue
        assert r["status"] == "measured", (row_id, r["status"])
        assert r["ppa_s"] > 0, row_id
        assert r["baseline"], row_id
        if r["target"] is not None:
            assert isinstance(r["met"], bool), row_id
    # the rows timed against a baseline in the same run carry its median time
    for row_id in ("fit_memory_pca", "fit_memory_port", "transform_dask", "cube_full_ppa"):
        assert rows[row_id]["baseline_s"] > 0, row_id
    assert result["sizes"] == json.loads(json.dumps(bench.SIZES["tiny"]))
    assert (out / "cost_growth.png").stat().st_size > 0
    assert (out / "ratios.png").stat().st_size > 0
    for name, paper in PAPER_RATIOS.items():
        assert rows[f"table2_{name}"]["target"] == f"<= {paper:g}"


def _read_table(text):
    """The pipe table of bench.md as a list of dicts, read by splitting cells (not by the
    writer's code)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip().strip("|").split("|")]
    assert set(lines[1].replace("|", "")) == {"-"}
    return [
        dict(zip(header, [c.strip() for c in line.strip()[1:-1].split(" | ")], strict=True))
        for line in lines[2:]
    ]


def _number_is(text, value):
    if value is None:
        return text == "-"
    number = float(text.replace(",", ""))
    # three significant digits, or a whole number with thousands separators from 1,000 on
    return number == pytest.approx(value, rel=5e-3, abs=0.5 if abs(value) >= 1000 else 1e-12)


def _assert_table_is_the_rows(text, rows):
    table = _read_table(text)
    assert len(table) == len(rows)
    if table:
        assert list(table[0]) == COLUMNS
    for line, r in zip(table, rows):
        assert line["figure"] == r["figure"] and line["baseline"] == r["baseline"], r["id"]
        assert _number_is(line["PPA (s)"], r["ppa_s"]), (r["id"], line["PPA (s)"])
        assert _number_is(line["baseline (s)"], r["baseline_s"]), (r["id"], line)
        if r["ratio"] is None:
            assert line["ratio"] == "-", r["id"]
        else:
            label, value = line["ratio"].rsplit(" = ", 1)
            assert label == r["ratio_label"] and _number_is(value, r["ratio"]), r["id"]
        assert line["target"] == (r["target"] or "-"), r["id"]
        expected = {True: "met", False: "not met", None: "(reported)"}[r["met"]]
        assert line["met"] == (expected if r["status"] == "measured" else r["status"]), r["id"]
        assert line["passes"] == ("-" if r["passes"] is None else str(r["passes"])), r["id"]


@pytest.mark.cluster
def test_bench_md_read_back_is_the_table_of_bench_json(full_tiny):
    out, result = full_tiny
    _assert_table_is_the_rows((out / "bench.md").read_text(), result["rows"])


def test_the_table_carries_every_kind_of_row():
    rows = [
        make_row("a", "met at the bound", "PCA", 0.012345, 0.5, 1.0, "PPA / PCA", ("<=", 1.0)),
        make_row("b", "not met", "scan", 12345.6, 2.5, 2.02, "step / scan", ("<=", 2.0)),
        make_row("c", "reported", "PCA", 3.0, 1.5, 2.0, "PPA / PCA", passes=7),
        make_row("d", "absent anchor", "xeofs", 0.25, status="not installed (xeofs; pip)"),
        make_row("e", "faster", "1 worker", 2.0, 3.2, 1.6, "1 / 2", (">=", 1.55), passes=12),
    ]
    result = dict(command="ppa-dask bench", machine="m", date="d", size="tiny", elapsed_s=3.0)
    text = bench.bench_markdown({**result, "rows": rows, "load_average": [1.0]})
    _assert_table_is_the_rows(text, rows)
    assert [line["met"] for line in _read_table(text)] == [
        "met",
        "not met",
        "(reported)",
        "not installed (xeofs; pip)",
        "met",
    ]


def test_verdicts_at_and_beside_their_bounds():
    def met(ratio, target, status="measured"):
        return make_row("r", "f", "b", 1.0, 1.0, ratio, "x", target, status=status)["met"]

    assert met(1.0, ("<=", 1.0)) is True and met(1.0 + 1e-12, ("<=", 1.0)) is False
    assert met(0.6, ("<", 0.6)) is False and met(0.599, ("<", 0.6)) is True
    assert met(1.55, (">=", 1.55)) is True and met(1.549, (">=", 1.55)) is False
    assert met(0.0, ("<=", 0)) is True and met(1.0, ("<=", 0)) is False
    # no verdict without a finite ratio, a target, or a measurement
    assert met(math.nan, ("<=", 1.0)) is None and met(math.inf, (">=", 1.0)) is None
    assert met(None, ("<=", 1.0)) is None and met(0.5, None) is None
    assert met(0.5, ("<=", 1.0), status="not installed (xeofs)") is None
    row = make_row("r", "f", "b", 1.0, 1.0, 0.5, "x", ("<=", 0.3))
    assert row["target"] == "<= 0.3"


def test_interleaved_times_each_call_in_turn_on_its_clock():
    now, order = [0.0], []
    # each callable advances the clock by its own cost, a different one at each call
    costs = {"a": iter([1.0, 2.0, 3.0]), "b": iter([0.25, 0.5, 0.75]), "c": iter([4.0])}

    def work(name):
        def call():
            order.append(name)
            now[0] += next(costs[name])
            return name.upper()

        return call

    times, results = bench.interleaved(
        {name: work(name) for name in "abc"}, 3, counts={"c": 1}, clock=lambda: now[0]
    )
    assert order == ["a", "b", "c", "a", "b", "a", "b"]
    assert times == {"a": [1.0, 2.0, 3.0], "b": [0.25, 0.5, 0.75], "c": [4.0]}
    assert results == {"a": "A", "b": "B", "c": "C"}


def test_the_memory_section_judges_the_times_it_is_given(monkeypatch):
    # times with a median apart from their mean: the rows must use the median
    given = {"ppa": [2.0, 9.0, 3.0], "pca": [1.0, 0.5, 7.0], "port": [10.0, 30.0, 30.0, 90.0]}

    def fake_interleaved(funcs, repeats, counts=None, clock=None):
        return {k: list(given[k]) for k in funcs}, {k: fn() for k, fn in funcs.items()}

    monkeypatch.setattr(in_memory, "interleaved", fake_interleaved)
    s = bench.SIZES["tiny"]
    rows = {r["id"]: r for r in in_memory.section_memory(s, lambda *a: None)}
    assert list(rows) == list(bench.SECTIONS["memory"])
    # PPA <= (d - 1) PCA fits, d = 10: 3 / (9 x 1); the port >= 10x slower: 30 / 3, at the bound
    fit, port = rows["fit_memory_pca"], rows["fit_memory_port"]
    assert (fit["ppa_s"], fit["baseline_s"]) == (3.0, 1.0)
    assert fit["ratio"] == pytest.approx(1 / 3) and fit["met"] is True
    assert port["baseline_s"] == 30.0 and port["ratio"] == 10.0 and port["met"] is True
    # transform and inverse <= 2 g x PCA, g = 5: 3 / 1
    for row_id in ("transform_memory", "inverse_memory"):
        assert rows[row_id]["ratio"] == 3.0 and rows[row_id]["met"] is True
        assert rows[row_id]["rows_per_s"] == pytest.approx(s["fit_n"] / 3.0)

    given.update(pca=[0.1, 0.1, 0.2], port=[29.0, 29.0])
    rows = {r["id"]: r for r in in_memory.section_memory(s, lambda *a: None)}
    assert rows["fit_memory_pca"]["ratio"] == pytest.approx(3 / 0.9)
    assert rows["fit_memory_pca"]["met"] is False
    assert rows["fit_memory_port"]["ratio"] == pytest.approx(29 / 3)
    assert rows["fit_memory_port"]["met"] is False
    assert rows["transform_memory"]["ratio"] == pytest.approx(30.0)
    assert rows["transform_memory"]["met"] is False


@pytest.mark.cluster
def test_anchors_that_are_not_installed_say_so(tmp_path, monkeypatch):
    # a None entry in sys.modules makes the import fail as if the package were absent
    monkeypatch.setitem(sys.modules, "xeofs", None)
    monkeypatch.setitem(sys.modules, "dask_ml", None)
    _, result = _run(tmp_path, "--only", "cube")
    rows = {r["id"]: r for r in result["rows"]}
    assert list(rows) == list(bench.SECTIONS["cube"])
    for row_id, anchor in (
        ("cube_ppa3_transform", "xeofs"),
        ("cube_full_ppa", "xeofs"),
        ("cube_dask_ml", "dask-ml"),
    ):
        r = rows[row_id]
        assert r["status"].startswith(f"not installed ({anchor}"), r["status"]
        assert r["baseline_s"] is None and r["ratio"] is None and r["met"] is None
        assert r["ppa_s"] > 0  # PPA itself is still measured
    assert rows["cube_scan"]["status"] == "measured"
    assert "not installed (xeofs" in (tmp_path / "bench" / "bench.md").read_text()


def test_an_unknown_section_is_refused_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "--only", "memory,nope", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown section(s) nope" in err and "memory, table2" in err
    assert not out.exists()


def test_log_log_slope_is_the_exponent_of_a_power_law():
    xs = [10.0, 100.0, 1000.0, 10000.0]
    assert bench.log_log_slope(xs, [3e-6 * x**1.5 for x in xs]) == pytest.approx(1.5)
