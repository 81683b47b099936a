"""``ppa-dask bench``: every row is measured beside its baseline and written to bench.json and
bench.md; anchors that are not installed are reported as such. Timings are never asserted (the
machine is shared); the structure, the arithmetic of the ratios and the verdicts are."""

from __future__ import annotations

import json
import statistics
import sys

import pytest

from ppa_dask.app import bench
from ppa_dask.app.cli import main

# the figures of the paper's Table 2 (minutes): PPA / PCA per data set, as printed there
PAPER_RATIOS = {"magic_gamma": 9.2, "segmentation": 32.5, "vehicles": 9.5}


def _run(tmp_path, *options):
    out = tmp_path / "bench"
    code = main(["bench", "--quick", "--size", "tiny", "--output", str(out), *options])
    assert code == 0
    return out, json.loads((out / "bench.json").read_text())


@pytest.fixture(scope="module")
def full_tiny(tmp_path_factory):
    """One run of every section at the test size (a minute at most on a loaded machine)."""
    return _run(tmp_path_factory.mktemp("bench"))


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


def test_ratios_are_the_medians_of_the_interleaved_repeats(full_tiny):
    _, result = full_tiny
    rows = {r["id"]: r for r in result["rows"]}
    fit = rows["fit_memory_pca"]
    t_ppa = statistics.median(fit["times"]["ppa"])
    t_pca = statistics.median(fit["times"]["pca"])
    assert fit["ppa_s"] == pytest.approx(t_ppa)
    assert fit["ratio"] == pytest.approx(t_ppa / ((bench.N_FEATURES - 1) * t_pca))
    assert fit["met"] == (fit["ratio"] <= 1.0)
    port = rows["fit_memory_port"]
    assert port["ratio"] == pytest.approx(statistics.median(port["times"]["port"]) / t_ppa)
    scaling = rows["scaling"]
    assert scaling["met"] == (scaling["ratio"] >= 1.7)
    assert scaling["times"]["one"] and scaling["times"]["two"]
    # the same passes with no work, timed on each cluster beside the fit
    for name in ("one", "two"):
        assert len(scaling["floor_times"][name]) == len(scaling["times"][name])
        assert scaling["floor_s"][name] == pytest.approx(
            statistics.median(scaling["floor_times"][name])
        )
    t1, floor = scaling["baseline_s"], scaling["floor_s"]
    assert scaling["ideal_ratio"] == pytest.approx(t1 / (floor["two"] + (t1 - floor["one"]) / 2))
    spec = rows["speculation"]
    assert spec["target"] == "<= 0.5"
    assert spec["met"] == (spec["ratio"] <= 0.5 and spec["passes"] <= spec["pass_bound"])
    # a full fit of d features takes d - 1 steps, at most one data pass each plus the moments
    assert 1 <= fit["passes"] <= bench.N_FEATURES
    for name, paper in PAPER_RATIOS.items():
        assert rows[f"table2_{name}"]["target"] == f"<= {paper:g}"


def test_bench_md_is_the_table_of_bench_json(full_tiny):
    out, result = full_tiny
    text = (out / "bench.md").read_text()
    assert text == bench.bench_markdown(result)
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(bench.ROW_IDS)  # header + one line per row
    verdicts = [line.rsplit("|", 3)[1].strip() for line in table[1:]]
    assert verdicts.count("met") + verdicts.count("not met") == sum(
        r["met"] is not None for r in result["rows"]
    )


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


def test_without_the_direct_port_its_row_says_not_available(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "PORT_FILE", tmp_path / "absent" / "direct_ppa.py")
    _, result = _run(tmp_path, "--only", "memory")
    rows = {r["id"]: r for r in result["rows"]}
    assert rows["fit_memory_port"]["status"].startswith("not available")
    assert rows["fit_memory_port"]["baseline_s"] is None
    assert rows["fit_memory_pca"]["status"] == "measured"


def test_an_unknown_section_is_refused_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "--only", "memory,nope", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown section(s) nope" in err and "memory, table2" in err
    assert not out.exists()


def test_interleaved_runs_rounds_in_turn():
    calls = []
    times, results = bench.interleaved(
        {"a": lambda: calls.append("a") or 1, "b": lambda: calls.append("b") or 2},
        3,
        counts={"b": 2},
    )
    assert calls == ["a", "b", "a", "b", "a"]
    assert [len(times["a"]), len(times["b"])] == [3, 2] and results == {"a": 1, "b": 2}


def test_log_log_slope_is_the_exponent_of_a_power_law():
    xs = [10.0, 100.0, 1000.0, 10000.0]
    assert bench.log_log_slope(xs, [3e-6 * x**1.5 for x in xs]) == pytest.approx(1.5)
