"""scikit-learn's array-API check of every estimator the suite checks, run where it can run.

``check_array_api_input`` needs SCIPY_ARRAY_API set before SciPy is imported; this test runs
those checks (and only those, see tests/sklearn_checks.py) in a child pytest with it set, and
asserts that each ran and passed: one per estimator, none skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import sklearn_checks

TESTS = Path(__file__).resolve().parent
MODULES = ("test_sklearn_compat", "test_nlpca", "test_vsk")


def test_every_estimator_passes_the_array_api_check():
    for name in MODULES:  # the suite's estimator lists, as collected in this run
        __import__(name)
    expected = len(sklearn_checks.CHECKED)
    assert expected >= 12
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    files = [str(TESTS / f"{name}.py") for name in MODULES]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "check_array_api_input",
            *files,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=TESTS.parent,
    )
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    # exactly one check per estimator ran, and passed; nothing skipped, nothing else selected
    assert re.fullmatch(rf"{expected} passed, \d+ deselected(, \d+ warnings?)? in .*", summary), (
        summary
    )
