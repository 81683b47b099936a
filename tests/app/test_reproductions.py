"""The saved results under results/ and the page built from them (issue 26).

* Every record's command exists and parses: the script is in pipelines/, its options are
  accepted by the script's own parser, and it writes the record to the file it is in.
* Every record is reproduced by its command on a reduced grid (the record's ``reduced``
  options: fewer splits, data sets or sizes, the same seeds and code path): each cell of the
  rerun equals the saved cell of the same keys.
* docs/reproductions.md shows the records' numbers: every reproduction block is the rendering
  of its record (a variant record, e.g. other estimators, may show only the tables that differ
  from the main one), every record appears on the page, and every figure the page shows is
  drawn from a record.
* The record module itself: the aggregation against numpy, the rendering of missing values,
  the comparison catching a changed number, and records that cannot be read refused by name.
"""

import json
import math
import os
import pathlib
import re

import numpy as np
import paths
import pytest

from ppa_dask.app import reproductions as rep

# the saved records reproduced by their commands
pytestmark = pytest.mark.slow


ROOT = paths.ROOT
RESULTS = ROOT / "results"
PAGE = ROOT / "docs" / "reproductions.md"
RECORDS = sorted(RESULTS.glob("*.json"))


def _ids(path):
    return path.stem


def test_there_are_saved_results():
    assert len(RECORDS) >= 4


@pytest.mark.parametrize("path", RECORDS, ids=_ids)
def test_record_command_exists_and_parses(path):
    record = rep.read_record(path)
    assert record["experiment"] == path.stem
    module, args = rep.parse_recorded_command(record, ROOT)
    # the command writes this very file
    assert os.path.normpath(args.record) == os.path.join("results", path.name)
    # and the reduced grid parses too
    rep.parse_recorded_command(record, ROOT, record["reduced"])
    # every seed is recorded; only a run without random draws has none, and says so
    assert record["seeds"] or (record["notes"] or "").startswith("deterministic")
    assert record["run_seconds"] > 0
    assert {"python", "numpy", "scikit-learn", "ppa-dask"} <= set(record["versions"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["date"])
    # small files: at most a few MB (the gap studies, a cell per setting and measure, are the
    # largest: 3.1 MB for the 6,552 settings of the real data sets)
    assert path.stat().st_size < 4_000_000


@pytest.mark.parametrize("path", RECORDS, ids=_ids)
def test_record_is_reproduced_by_its_command_on_a_reduced_grid(path, tmp_path):
    saved = rep.read_record(path)
    rerun_path = tmp_path / path.name
    extra = [*saved["reduced"], "--workers", "0", "--output", str(tmp_path / "out")]
    module, _ = rep.parse_recorded_command(saved, ROOT)
    module.main([*saved["command"][2:], *extra, "--record", str(rerun_path)])
    rerun = rep.read_record(rerun_path)
    assert rerun["experiment"] == saved["experiment"]
    n_new, n_saved = len(rerun["cells"]["rows"]), len(saved["cells"]["rows"])
    assert 0 < n_new < n_saved  # a smaller grid, not the same one
    assert rep.compare_cells(saved, rerun) == []


def test_the_page_shows_the_records_numbers():
    text = PAGE.read_text()
    assert rep.stale_blocks(text, RESULTS) == []
    shown = {name for name, _, _ in rep.page_blocks(text)}
    assert shown == {p.stem for p in RECORDS}  # every record is on the page


def test_the_page_figures_are_drawn_from_the_records(tmp_path):
    text = PAGE.read_text()
    shown = set(re.findall(r"generated/reproductions/([\w.-]+\.png)", text))
    names = {n for p in RECORDS for n in rep.figure_names(rep.read_record(p))}
    assert shown and shown <= names
    paths = rep.draw_all_figures(RESULTS, tmp_path)
    assert {os.path.basename(p) for p in paths} == names
    for p in paths:
        assert pathlib.Path(p).read_bytes().startswith(b"\x89PNG") and os.path.getsize(p) > 5000


def test_the_page_is_in_the_site_toctree():
    index = (ROOT / "docs" / "index.md").read_text()
    toctree = index[index.index("```{toctree}") :]
    assert "\nreproductions\n" in toctree


def test_the_page_numbers_in_a_block_change_when_the_file_does(tmp_path):
    # break-check of the page test: one saved number changed -> its block is stale
    path = RESULTS / "ppa_table3.json"
    record = json.loads(path.read_text())
    table = record["tables"][0]
    columns = record["cells"]["columns"]
    value = columns.index(table["value"])
    for row in record["cells"]["rows"]:
        if all(row[columns.index(k)] == v for k, v in table["where"].items()):
            row[value] += 0.5
            break
    (tmp_path / path.name).write_text(json.dumps(record))
    for other in RECORDS:
        if other != path:
            (tmp_path / other.name).write_text(other.read_text())
    stale = rep.stale_blocks(PAGE.read_text(), tmp_path)
    assert (record["experiment"], table["name"]) in stale


# --------------------------------------------------------------------------------------------
# the module
# --------------------------------------------------------------------------------------------


def _toy(values=None, tables=None, **kw):
    rng = np.random.default_rng(0)
    values = rng.normal(size=(5, 2)) if values is None else values
    cells = [
        dict(group=g, seed=s, method=m, value=values[s, j])
        for g in ("a", "b")
        for s in range(values.shape[0])
        for j, m in enumerate(("x", "y"))
    ]
    table = dict(name="t", title="T", value="value", rows=["group"], column="method",
                 over="seed", paper={"a": {"x": 0.5}}, tolerance=0.2, digits=3)  # fmt: skip
    return rep.make_record(
        "toy", "toy", "nowhere", ["python", "pipelines/paper_metric_knn.py"],
        seeds=range(values.shape[0]), keys=["group", "seed", "method"], cells=cells,
        tables=tables or [table], run_seconds=1.0, **kw,
    )  # fmt: skip


def test_table_rows_aggregate_over_the_seeds_like_numpy():
    values = np.random.default_rng(1).normal(size=(6, 2))
    values[2, 1] = np.nan  # a missing value is left out of its group
    record = _toy(values)
    rows = {(r["label"], r["column"]): r for r in rep.table_rows(record, "t")}
    for j, m in enumerate(("x", "y")):
        v = values[:, j][np.isfinite(values[:, j])]
        r = rows["a", m]
        assert r["n"] == v.size
        assert math.isclose(r["mean"], v.mean(), rel_tol=1e-9)
        assert math.isclose(r["std"], v.std(ddof=1), rel_tol=1e-8)
        assert (r["min"], r["max"]) == pytest.approx((v.min(), v.max()), rel=1e-9)
    assert rows["a", "x"]["difference"] == pytest.approx(values[:, 0].mean() - 0.5, rel=1e-9)
    assert rows["a", "x"]["agrees"] == (abs(values[:, 0].mean() - 0.5) <= 0.2)
    assert rows["a", "y"]["paper"] is None and rows["a", "y"]["agrees"] is None


def test_a_group_of_only_missing_values_is_a_dash():
    values = np.ones((3, 2))
    values[:, 1] = np.nan  # e.g. a relative error where PCA's error is exactly 0
    text = rep.render_table(_toy(values), "t")
    line = next(line for line in text.splitlines() if line.startswith("| a |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == "1.000 ± 0.000" and cells[4] == "-"
    assert "nan" not in text.lower()


def test_a_table_mixing_another_key_is_refused():
    table = dict(name="t", title="T", value="value", rows=[], column="method", over="seed")
    with pytest.raises(rep.ReproductionRecordError, match="mixes values of \\['group'\\]"):
        rep.table_rows(_toy(tables=[table]), "t")


def test_compare_cells_finds_a_changed_number_and_skips_volatile_fields():
    saved = _toy()
    changed = json.loads(json.dumps(saved))
    changed["cells"]["rows"][3][3] *= 1.001
    problems = rep.compare_cells(saved, changed)
    assert len(problems) == 1 and "value" in problems[0]
    saved["volatile"] = ["value"]
    assert rep.compare_cells(saved, changed) == []
    saved["volatile"] = ["method=y"]
    assert rep.compare_cells(saved, changed) == ([] if changed["cells"]["rows"][3][2] == "y"
                                                 else problems)  # fmt: skip
    extra = json.loads(json.dumps(saved))
    extra["cells"]["rows"].append(["c", 0, "x", 1.0])
    assert "not in the saved record" in rep.compare_cells(saved, extra)[0]
    # a cell the rerun calls volatile (a time its script keeps, a record saved before did not)
    saved["volatile"], extra["volatile"] = [], ["group=c"]
    assert rep.compare_cells(saved, extra) == []
    extra["cells"]["rows"][-1][0] = "d"
    assert "not in the saved record" in rep.compare_cells(saved, extra)[0]


def test_a_records_declared_tolerance_is_what_a_rerun_is_held_to():
    # experiments whose numbers follow the CPU's rounding (NLPCA's optimiser, nearly singular
    # solves) declare how closely another CPU reproduces them, and say what was measured
    saved = _toy()
    rerun = json.loads(json.dumps(saved))
    rerun["cells"]["rows"][3][3] *= 1.02
    assert len(rep.compare_cells(saved, rerun)) == 1  # the default: rounding only
    saved["tolerance"] = dict(rtol=0.03, atol=0.0, why="measured on two CPUs")
    assert rep.compare_cells(saved, rerun) == []
    saved["tolerance"]["rtol"] = 0.01
    assert len(rep.compare_cells(saved, rerun)) == 1
    saved["tolerance"] = dict(rtol=0.0, atol=0.5, why="measured on two CPUs")
    assert rep.compare_cells(saved, rerun) == []


def test_cells_a_record_calls_unstable_are_not_compared_but_some_must_be():
    saved = _toy()
    rerun = json.loads(json.dumps(saved))
    row = rerun["cells"]["rows"][3]
    row[3] = 50.0  # a cell whose value is rounding (a numerically singular solve, say)
    threshold = 25.0  # the cell is above it in the rerun only (the others are N(0, 1)): skipped
    saved["tolerance"] = dict(
        rtol=1e-6, atol=0.0, why="x", unstable=dict(field="value", above=threshold)
    )
    assert rep.compare_cells(saved, rerun) == []
    saved["tolerance"]["unstable"]["above"] = 100.0  # below it: compared, and differs
    assert len(rep.compare_cells(saved, rerun)) == 1
    saved["tolerance"]["unstable"]["above"] = -1e9  # every cell unstable: nothing compared
    assert rep.compare_cells(saved, rerun) == [
        "no cell of the rerun was compared (all volatile or unstable)"
    ]


def test_a_tolerance_without_its_measurement_or_out_of_range_is_refused(tmp_path):
    path = tmp_path / "r.json"
    for tolerance, match in [
        (dict(rtol=0.01, atol=0.0), "must be"),
        (dict(rtol=-1, atol=0.0, why="x"), "must be numbers >= 0"),
        (dict(rtol=0.01, atol=0.0, why=" "), "why must say what was measured"),
        (dict(rtol=0.01, atol=0.0, why="x", cells="all"), "unknown fields \\['cells'\\]"),
        (dict(rtol=0.01, atol=0.0, why="x", unstable=dict(field="nope", above=1)), "unstable"),
    ]:
        path.write_text(json.dumps(dict(_toy(), tolerance=tolerance)))
        with pytest.raises(rep.ReproductionRecordError, match=match) as info:
            rep.read_record(path)
        assert str(path) in str(info.value) and "tolerance" in str(info.value)


def test_only_records_of_rounding_sensitive_experiments_declare_a_tolerance():
    # every other record is held to the saved digits: a tolerance is an exception, each one
    # explained by a measurement
    declared = {p.stem: rep.read_record(p).get("tolerance") for p in RECORDS}
    loose = {name for name, tolerance in declared.items() if tolerance is not None}
    assert loose == {
        "ppa_fig8_nlpca",
        "ppa_fig8_nlpca_large",
        "ppa_segmentation_subsets",
        "vsk_covid_icu",
    }
    assert all("CPU" in declared[name]["why"] for name in loose)


def test_records_that_cannot_be_used_are_refused_by_name(tmp_path):
    good = _toy()
    path = tmp_path / "r.json"
    rep.write_record(path, good)
    assert rep.read_record(path)["cells"] == good["cells"]
    for broken, match in [
        (dict(good, format="other"), "format is 'other'"),
        ({k: v for k, v in good.items() if k != "seeds"}, "missing fields \\['seeds'\\]"),
        (dict(good, command=["sh", "x"]), "command must be"),
        (dict(good, cells=dict(columns=["a"], rows=[[1, 2]])), "cells row 0"),
    ]:
        path.write_text(json.dumps(broken))
        with pytest.raises(rep.ReproductionRecordError, match=match) as info:
            rep.read_record(path)
        assert str(path) in str(info.value)
    path.write_text("{not json")
    with pytest.raises(rep.ReproductionRecordError, match="not valid JSON"):
        rep.read_record(path)
    path.write_text(" " * (rep.RECORD_MAX_BYTES + 1))
    with pytest.raises(rep.ReproductionRecordError, match="larger than"):
        rep.read_record(path)


def test_a_command_that_does_not_parse_is_refused(tmp_path):
    record = _toy()
    record["command"] = ["python", "pipelines/paper_metric_knn.py", "--no-such-option"]
    with pytest.raises(rep.ReproductionRecordError, match="does not parse"):
        rep.parse_recorded_command(record, ROOT)
    record["command"] = ["python", "pipelines/missing.py"]
    with pytest.raises(rep.ReproductionRecordError, match="does not exist"):
        rep.parse_recorded_command(record, ROOT)


def test_floats_are_saved_at_the_records_digits(tmp_path):
    record = _toy(np.full((2, 2), 1 / 3), digits=4)
    assert record["cells"]["rows"][0][3] == 0.3333
    path = tmp_path / "r.json"
    rep.write_record(path, record)
    # one cell row per line
    assert sum(line.startswith("[") for line in path.read_text().splitlines()) == 8


def test_a_single_value_table_shows_the_value_alone_and_says_which():
    # a run without random draws (the VSK ICU series) or one fixed split: no spread to show
    values = np.array([[0.25, 0.5]])
    table = dict(name="t", title="T", value="value", rows=["group"], column="method",
                 over="seed", single="one run, no random draws", digits=2)  # fmt: skip
    record = _toy(values, tables=[table])
    text = rep.render_table(record, "t")
    assert "| a | 0.25 | 0.50 | 1 |" in text.splitlines() and "±" not in text
    assert "one run, no random draws" in rep._block_text(record, "t")
    record["seeds"] = []
    assert "no random draws, in `results/toy.json`" in rep._command_text(record)


def test_cells_a_record_names_cpu_dependent_are_not_compared(tmp_path):
    saved = _toy()
    columns = saved["cells"]["columns"]
    rerun = json.loads(json.dumps(saved))
    row = rerun["cells"]["rows"][3]
    row[3] += 1.0  # a cell another CPU's rounding moves
    named = {columns[0]: row[0], columns[1]: [row[1], "elsewhere"]}
    saved["tolerance"] = dict(rtol=1e-6, atol=0.0, why="x", cpu_dependent=[named])
    assert rep.compare_cells(saved, rerun) == []
    saved["tolerance"]["cpu_dependent"] = [{columns[0]: "another"}]  # names other cells
    assert len(rep.compare_cells(saved, rerun)) == 1
    path = tmp_path / "r.json"
    path.write_text(
        json.dumps(dict(saved, tolerance=dict(saved["tolerance"], cpu_dependent=[{"x": 1}])))
    )
    with pytest.raises(rep.ReproductionRecordError, match="cpu_dependent must be"):
        rep.read_record(path)
