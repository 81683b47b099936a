"""The helpers the scripts under ``pipelines/`` share (``ppa_dask.app.scripts``): the options
whose default depends on ``--quick``, ``summary.json``, the stability scripts' resumable grid
and their ``report.md``, the VSK scripts' SVM search options and grids.

The scripts themselves run end to end in test_paper_pipelines.py, test_stability_pipelines.py
and test_vsk_pipelines.py; here each helper is held to what a script relies on.
"""

import argparse
import json
import math

import pytest

from ppa_dask.app.scripts.options import (
    add_svm_search_options,
    base_parser,
    check_svm_search_options,
    quick_defaults,
)
from ppa_dask.app.scripts.output import write_grid_report, write_summary
from ppa_dask.app.scripts.selection import search_grids
from ppa_dask.app.scripts.tasks import run_settings, setting_key


def _parse(*argv):
    parser = base_parser("demo", "out")
    parser.add_argument("--sizes", default=None)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "repeats", "sizes"),
    [
        (["--quick"], 1, [10, 50]),
        ([], 10, [10, 20, 50]),
        (["--quick", "--repeats", "3"], 3, [10, 50]),  # an explicit value is kept
        (["--repeats", "3", "--sizes", "7"], 3, "7"),
    ],
)
def test_quick_defaults_fill_only_what_was_not_given(argv, repeats, sizes):
    args = quick_defaults(_parse(*argv), repeats=(1, 10), sizes=([10, 50], [10, 20, 50]))
    assert (args.repeats, args.sizes) == (repeats, sizes)


def test_quick_defaults_refuse_an_option_the_parser_does_not_have():
    with pytest.raises(AttributeError):
        quick_defaults(_parse(), repeat=(1, 10))


def test_the_summary_holds_the_settings_the_findings_in_order_and_the_time(tmp_path):
    args = _parse("--quick", "--seed", "4")
    write_summary(tmp_path, args, 2.5, summary={"ppa": math.nan}, degrees={"low": 2})
    with open(tmp_path / "summary.json") as f:
        saved = json.load(f)
    assert list(saved) == ["settings", "summary", "degrees", "elapsed_seconds"]
    assert saved["settings"] == {**vars(args), "seed": 4, "quick": True}
    assert saved["summary"] == {"ppa": None}  # JSON has no NaN
    assert saved["degrees"] == {"low": 2} and saved["elapsed_seconds"] == 2.5


# --------------------------------------------------------------------------------------------
# the stability scripts: their grid on the cluster of their options, their report
# --------------------------------------------------------------------------------------------


def _square(setting, calls):
    calls.append(setting["x"])
    return {"x": setting["x"], "y": setting["x"] ** 2}


def test_run_settings_runs_the_grid_into_the_output_folder_and_resumes(tmp_path):
    args = argparse.Namespace(workers=0, scheduler=None, output=str(tmp_path), quiet=True)
    settings = [{"x": 3}, {"x": 1}, {"x": 2}]
    calls = []
    rows = run_settings(args, _square, settings, (calls,), "squares", context={"n": 5})
    assert [(r["x"], r["y"]) for r in rows] == [(3, 9), (1, 1), (2, 4)]  # the settings' order
    assert sorted(calls) == [1, 2, 3] and len(list((tmp_path / "parts").iterdir())) == 3
    again = run_settings(args, _square, settings[:2], (calls,), "squares", context={"n": 5})
    assert again == rows[:2] and len(calls) == 3  # read back from parts/, not recomputed
    run_settings(args, _square, settings[:1], (calls,), "squares", context={"n": 6})
    assert len(calls) == 4  # another context is another run


def test_run_settings_takes_known_rows_where_no_part_is_and_does_not_write_them(tmp_path):
    args = argparse.Namespace(workers=0, scheduler=None, output=str(tmp_path), quiet=True)
    settings = [{"x": 3}, {"x": 1}, {"x": 2}]
    calls = []
    run_settings(args, _square, settings[:1], (calls,), "squares", context={"n": 5})
    # rows finished elsewhere (a saved record), keyed like parts: a part still wins
    known = {setting_key(s, {"n": 5}): [{"x": s["x"], "y": -1}] for s in settings[:2]}
    rows = run_settings(args, _square, settings, (calls,), "squares", {"n": 5}, known)
    assert [(r["x"], r["y"]) for r in rows] == [(3, 9), (1, -1), (2, 4)]
    assert calls == [3, 2]  # only the setting neither a part nor known
    assert len(list((tmp_path / "parts").iterdir())) == 2
    # known rows of another context are not this run's
    other = str(tmp_path / "other")
    rows = run_settings(argparse.Namespace(**{**vars(args), "output": other}), _square,
                        settings[1:2], (calls,), "squares", {"n": 6}, known)  # fmt: skip
    assert rows[0]["y"] == 1 and calls == [3, 2, 1]


def test_the_grid_report_has_the_heading_the_command_and_the_text(tmp_path, capsys):
    write_grid_report(
        str(tmp_path), "FI of trees", "python pipelines/stability_ppa.py --small", ["a", "", "b"]
    )
    text = (tmp_path / "report.md").read_text()
    assert (
        text == "# FI of trees\n\nCommand: `python pipelines/stability_ppa.py --small`  \na\n\nb"
    )
    assert capsys.readouterr().out == f"wrote {tmp_path}/report.md\n"


# --------------------------------------------------------------------------------------------
# the VSK scripts' SVM grid search
# --------------------------------------------------------------------------------------------


def _svm_parser():
    parser = argparse.ArgumentParser(prog="vsk")
    add_svm_search_options(parser)
    return parser


def test_the_svm_options_default_to_both_kernels_five_folds_and_the_full_grids():
    parser = _svm_parser()
    args = parser.parse_args([])
    check_svm_search_options(args, parser.error)
    assert (args.kernels, args.cv, args.coarse_grid) == (("linear", "rbf"), 5, False)
    args = parser.parse_args(["--kernels", "rbf"])
    check_svm_search_options(args, parser.error)
    assert args.kernels == ("rbf",)


@pytest.mark.parametrize("kernels", ["poly", "linear,sigmoid", "linear,"])
def test_an_unknown_kernel_is_one_usage_error(kernels, capsys):
    parser = _svm_parser()
    args = parser.parse_args(["--kernels", kernels])
    with pytest.raises(SystemExit) as exit_:
        check_svm_search_options(args, parser.error)
    assert exit_.value.code == 2
    assert f"--kernels: expected linear and/or rbf, got {kernels}" in capsys.readouterr().err


def test_the_coarse_grids_are_every_other_value_of_the_papers():
    # the paper's section 6.1: C = 2^-6 .. 2^5, gamma = 10^-6 .. 10^1
    C, gamma = search_grids()
    assert C == (2.0**-6, 2.0**-5, 2.0**-4, 2.0**-3, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
    assert gamma == (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0)
    C, gamma = search_grids(coarse=True)
    assert C == (2.0**-6, 2.0**-4, 2.0**-2, 1.0, 4.0, 16.0)
    assert gamma == (1e-6, 1e-4, 1e-2, 1.0)
