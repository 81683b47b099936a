"""The paper's experiments as pipelines: each writes CSV, markdown and PNG, and its numbers show
the paper's qualitative claims on a tiny grid."""

import csv
import importlib.util
import json
import os

import numpy as np
import paths
import pytest
from processes import kill_when_printed

from ppa_dask.app import reproductions as rep

# the stability pipelines end to end, a killed process resumed
pytestmark = pytest.mark.slow


PIPELINES = str(paths.PIPELINES)


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(PIPELINES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def number(value):
    return float(value) if value not in ("", None) else np.nan


def assert_outputs(folder, pngs):
    for name in ["results.csv", "report.md", *pngs]:
        path = os.path.join(folder, name)
        assert os.path.getsize(path) > 0, name
    for name in pngs:
        with open(os.path.join(folder, name), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_linear_model_closed_form_equals_refit_and_bagging_flattens_the_peak(tmp_path):
    out = str(tmp_path / "linear")
    args = [
        "--small",
        "--n-samples",
        "12",
        "--replicates",
        "1",
        "--refit-max-B",
        "1",
        "--workers",
        "0",
        "--quiet",
        "--output",
        out,
    ]
    checks = load("stability_linear").main(args)
    assert_outputs(out, ["double_descent.png", "bagging.png", "rounds.png", "closed_vs_refit.png"])
    assert checks["n_compared"] > 15 and checks["max_rel_diff_closed_vs_refit"] < 1e-8
    # B = 1: the peak sits at a grid neighbour of the interpolation threshold q = p / gamma
    assert checks["peak_q_II_p1.0"] in (0.4, 0.6) and checks["peak_q_FI_p1.0"] in (0.4, 0.6)
    # bagging flattens it
    assert checks["peak_FI_B25"] < checks["peak_FI_B1"]
    assert checks["peak_II_B25"] < checks["peak_II_B1"]
    # away from the threshold, FI falls with B
    by_B = checks["FI_by_B_q0.25"]
    assert by_B[32] < by_B[4] < by_B[1]
    rows = read(os.path.join(out, "summary.csv"))
    assert {r["sweep"] for r in rows} == {"double_descent", "bagging", "rounds"}


def test_random_forward_selection_bagging_beats_greedy_on_a_cluster(tmp_path):
    out = str(tmp_path / "rfs")
    result = load("stability_forward_selection").main(
        [
            "--small",
            "--n-samples",
            "80",
            "--n-features",
            "12",
            "--max-steps",
            "3",
            "--rounds",
            "20",
            "--workers",
            "2",
            "--quiet",
            "--output",
            out,
        ]
    )
    assert_outputs(out, ["forward_selection.png"])
    rows = read(os.path.join(out, "results.csv"))
    greedy = {int(r["T"]): number(r["FI"]) for r in rows if number(r["q"]) == 1.0}
    # one greedy step: removing the chosen feature swaps it for another, ||w - w^-j||^2 = 2
    assert greedy[1] == pytest.approx(2 / 12)
    assert result["below_baseline"] == result["n_bagged"]


GAP_ARGS = [
    "--small",
    "--datasets",
    "marsadd",
    "--estimators",
    "dt",
    "--n-train",
    "120",
    "--n-test",
    "100",
    "--ii-instances",
    "4",
    "--max-depth",
    "4",
    "--workers",
    "0",
    "--quiet",
]


def test_generalization_gap_study_reports_r2_and_information(tmp_path):
    out = str(tmp_path / "gap")
    result = load("stability_generalization").main([*GAP_ARGS, "--output", out])
    assert_outputs(out, ["gap_vs_instability.png", "fi_increment.png"])
    rows = read(os.path.join(out, "results.csv"))
    assert len(rows) == 2 * 3  # max_features {0.3, 1.0} x depths {1, 2, 4}
    for r in rows:
        assert number(r["FI"]) >= 0 and number(r["II"]) >= 0
        assert number(r["gap"]) == pytest.approx(number(r["mse_test"]) - number(r["mse_train"]))
    (summary,) = read(os.path.join(out, "summary.csv"))
    r2 = [number(summary[k]) for k in ("R2_II", "R2_FI", "R2_FI_II")]
    assert all(0 <= v <= 1 + 1e-12 for v in r2)
    # least squares with more regressors never explains less
    assert r2[2] >= max(r2[0], r2[1]) - 1e-12
    assert number(summary["dR2_FI_given_II"]) == pytest.approx(r2[2] - r2[0])
    assert result["summary"][0]["n_settings"] == 6
    # the paper's value stands beside ours (Table S.3, nu = 1, decision trees) and the
    # bootstrap of a third of the grid gives rates
    assert number(summary["paper_dR2"]) == pytest.approx(0.095)
    for k in ("boot_dR2_positive_rate", "boot_dR2_beats_noise_rate"):
        assert 0 <= number(summary[k]) <= 1
    noise = (number(summary["dR2_noise_given_II"]) + number(summary["dR2_perm_given_II"])) / 2
    assert number(summary["dR2_minus_noise"]) == pytest.approx(r2[2] - r2[0] - noise)
    with open(os.path.join(out, "report.md")) as f:
        assert "paper dR2" in f.read()


def counting(module):
    """Wrap the module's ``run_setting`` to count its calls."""
    original, calls = module.run_setting, []

    def wrapped(setting, data):
        calls.append(setting)
        return original(setting, data)

    module.run_setting = wrapped
    return calls


def without_seconds(path):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in read(path)]


#: A child process running the study whose ``run_setting`` stops (sleeps) at the call after the
#: first ``KEEP``, saying so: the parent then kills it with SIGKILL, so exactly ``KEEP`` parts
#: are on disk and the process dies without any clean-up code running.
CHILD = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("gap", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
keep, original, calls = int(sys.argv[2]), module.run_setting, []
def run_setting(setting, data):
    if len(calls) == keep:
        print("WAITING", flush=True)
        time.sleep(600)
    calls.append(setting)
    return original(setting, data)
module.run_setting = run_setting
module.main(sys.argv[3:])
"""


def test_generalization_gap_study_resumes_a_killed_process_without_recomputing(tmp_path):
    whole, broken = str(tmp_path / "whole"), str(tmp_path / "broken")
    load("stability_generalization").main([*GAP_ARGS, "--output", whole])
    keep = 3
    script = os.path.join(PIPELINES, "stability_generalization.py")
    kill_when_printed(CHILD, [script, str(keep), *GAP_ARGS, "--output", broken], "WAITING")
    parts = os.path.join(broken, "parts")
    kept = sorted(f for f in os.listdir(parts) if f.endswith(".json"))
    assert len(kept) == keep and not os.path.exists(os.path.join(broken, "results.csv"))

    # a sentinel planted in a kept part: read back (never recomputed) it reaches the results
    with open(os.path.join(parts, kept[0])) as f:
        original = f.read()
    (row,) = json.loads(original)
    with open(os.path.join(parts, kept[0]), "w") as f:
        json.dump([dict(row, II=1.0e6)], f)
    module = load("stability_generalization")
    calls = counting(module)
    module.main([*GAP_ARGS, "--output", broken])
    assert len(calls) == 6 - keep  # only the settings without a part
    resumed = read(os.path.join(broken, "results.csv"))
    assert [number(r["II"]) == 1.0e6 for r in resumed].count(True) == 1
    assert sorted(f for f in os.listdir(parts) if f.endswith(".json")) == sorted(
        f for f in os.listdir(os.path.join(whole, "parts")) if f.endswith(".json")
    )

    # the part restored, a rerun computes nothing and its outputs are the uninterrupted run's
    with open(os.path.join(parts, kept[0]), "w") as f:
        f.write(original)
    module = load("stability_generalization")
    calls = counting(module)
    module.main([*GAP_ARGS, "--output", broken])
    assert calls == []
    assert without_seconds(os.path.join(broken, "results.csv")) == without_seconds(
        os.path.join(whole, "results.csv")
    )
    with open(os.path.join(broken, "summary.csv")) as a:
        with open(os.path.join(whole, "summary.csv")) as b:
            assert a.read() == b.read()


def gap_run(tmp_path, folder, seeds, record, *extra):
    """The small gap study of ``seeds`` into a fresh ``--output`` (no parts from before),
    writing ``record``; returns the settings it computed."""
    module = load("stability_generalization")
    calls = counting(module)
    output = str(tmp_path / folder)
    module.main([*GAP_ARGS, *extra, "--seeds", seeds, "--output", output, "--record", record])
    return calls


def seconds_cells(record):
    return {
        (c["nu"], c["setting"], c["seed"]): c["value"]
        for c in rep.record_cells(record)
        if c["measure"] == "seconds"
    }


def test_gap_study_extends_its_record_by_a_seed_computing_only_that_seed(tmp_path):
    record = str(tmp_path / "gap.json")
    assert len(gap_run(tmp_path, "first", "0,1", record)) == 2 * 6
    old = rep.read_record(record)
    # the parts of the first run are gone (another folder): the record is the resume source
    calls = gap_run(tmp_path, "second", "0,1,2", record)
    assert sorted(c["seed"] for c in calls) == [2] * 6
    assert len(os.listdir(tmp_path / "second" / "parts")) == 6
    new = rep.read_record(record)
    assert new["seeds"] == [0, 1, 2]
    # every cell of the old record, the summaries recomputed from read-back settings too, is
    # in the new one with its value (the times are volatile: compared on their own below)
    assert rep.compare_cells(new, old) == []
    times = seconds_cells(new)
    assert {k: v for k, v in times.items() if k[2] < 2} == seconds_cells(old)
    assert len(times) == 3 * 6
    assert new["run_seconds"] == pytest.approx(sum(times.values()), abs=0.1)
    # and the extended record is that of one uninterrupted run of the three seeds
    fresh = str(tmp_path / "fresh.json")
    assert len(gap_run(tmp_path, "fresh", "0,1,2", fresh)) == 3 * 6
    fresh = rep.read_record(fresh)
    assert rep.compare_cells(fresh, new) == [] and rep.compare_cells(new, fresh) == []
    assert len(new["cells"]["rows"]) == len(fresh["cells"]["rows"])


def test_gap_study_shares_an_old_records_run_time_among_the_settings_it_reads_back(tmp_path):
    record = str(tmp_path / "gap.json")
    gap_run(tmp_path, "first", "0", record)
    # a record as made before the settings' times were kept: no seconds cells
    old = rep.read_record(record)
    columns = old["cells"]["columns"]
    old["cells"]["rows"] = [r for r in old["cells"]["rows"] if r[columns.index("measure")]
                            != "seconds"]  # fmt: skip
    old["run_seconds"], old["volatile"] = 60.0, []
    rep.write_record(record, old)
    calls = gap_run(tmp_path, "second", "0,1", record)
    assert sorted(c["seed"] for c in calls) == [1] * 6
    rows = read(tmp_path / "second" / "results.csv")
    assert [number(r["seconds"]) for r in rows if r["seed"] == "0"] == [10.0] * 6
    assert [r["mse_test"] for r in rows if r["seed"] == "0"] == [""] * 6  # not in a record
    new = rep.read_record(record)
    times = seconds_cells(new)
    assert sorted({k[2] for k in times}) == [1] and len(times) == 6
    assert new["run_seconds"] == pytest.approx(60.0 + sum(times.values()), abs=0.1)
    assert "6 settings (seeds [0])" in new["notes"] and "10.0 s each" in new["notes"]
    # extended once more, the shares stay shares: still no seconds cells for seed 0
    gap_run(tmp_path, "third", "0,1,2", record)
    newer = rep.read_record(record)
    assert sorted({k[2] for k in seconds_cells(newer)}) == [1, 2]
    assert "6 settings (seeds [0])" in newer["notes"] and "10.0 s each" in newer["notes"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (
            ["--seeds", "0,1", "--n-train", "100"],
            "made with --n-train 120, this run has --n-train 100",
        ),
        (["--seeds", "0,1", "--residualizers", "dt"], "--residualizers ['rf'], this run has"),
        (["--seeds", "1"], "it holds --seeds [0] that this run leaves out"),
        (["--seeds", "0", "--nu", "0.5"], "it holds --nu [1.0] that this run leaves out"),
    ],
)
def test_gap_study_refuses_a_record_of_other_options_before_any_work(tmp_path, extra, said):
    record = str(tmp_path / "gap.json")
    gap_run(tmp_path, "first", "0", record)
    with open(record) as f:
        before = f.read()
    module = load("stability_generalization")
    calls = counting(module)
    with pytest.raises(SystemExit) as refused:
        module.main([*GAP_ARGS, "--output", str(tmp_path / "second"), "--record", record, *extra])
    message = str(refused.value)
    assert said in message and record in message and "\n" not in message
    assert calls == [] and not os.path.exists(tmp_path / "second")
    with open(record) as f:
        assert f.read() == before


def test_gap_study_refuses_another_scripts_record(tmp_path):
    record = tmp_path / "other.json"
    record.write_text((paths.ROOT / "results" / "vsk_toy.json").read_text())
    module = load("stability_generalization")
    with pytest.raises(SystemExit, match="is a record of pipelines/vsk_toy.py, not of"):
        module.main([*GAP_ARGS, "--output", str(tmp_path / "out"), "--record", str(record)])


def test_every_setting_of_a_grid_has_a_label_of_its_own():
    # a record's cells and the resume from a record find a setting by its label: AdaBoost's
    # grid varies n_estimators, which the labels once left out (three settings, one label)
    gap = load("stability_generalization")
    for estimator in ("rf", "dt", "ada", "gbrt"):
        for small in (False, True):
            settings = gap.grid(estimator, small, n_trees=256, max_depth=7)
            labels = [gap.setting_label(p, estimator) for p in settings]
            assert len(set(labels)) == len(settings), (estimator, small)
    # and a forest's size stays out of its label: it is the run's --n-trees
    forest = gap.grid("rf", False, n_trees=256, max_depth=7)[0]
    assert "n_estimators" not in gap.setting_label(forest, "rf")


def test_ppa_ensemble_fi_falls_with_more_members(tmp_path):
    out = str(tmp_path / "ppa")
    load("stability_ppa").main(
        [
            "--datasets",
            "diabetes",
            "--n-samples",
            "150",
            "--ratios",
            "0.5",
            "0.75",
            "--members",
            "1",
            "12",
            "--workers",
            "0",
            "--quiet",
            "--output",
            out,
        ]
    )
    assert_outputs(out, ["ppa_fi.png"])
    rows = read(os.path.join(out, "results.csv"))
    for q in ("0.5", "0.75"):
        fi = {int(r["B"]): number(r["FI_refit"]) for r in rows if r["q"] == q}
        assert fi[12] < fi[1]
    # only the members that held j are refitted: B * s refits in all
    for r in rows:
        assert int(r["FI_refit_n_refits"]) == int(r["B"]) * int(r["s"])
