"""The helpers the scripts under ``pipelines/`` share (``ppa_dask.app.scripts``): the options
whose default depends on ``--quick``, and ``summary.json``.

The scripts themselves run end to end in test_paper_pipelines.py, test_stability_pipelines.py
and test_vsk_pipelines.py; here each helper is held to what a script relies on.
"""

import json
import math

import pytest

from ppa_dask.app.scripts.options import base_parser, quick_defaults
from ppa_dask.app.scripts.output import write_summary


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
