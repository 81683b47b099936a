"""scikit-learn's array-API check of every estimator the suite checks, run where it can run.

``check_array_api_input`` needs SCIPY_ARRAY_API set before SciPy is imported; this test runs
those checks (and only those, see tests/sklearn_checks.py) in a child pytest with it set, and
asserts that each ran and passed: one per estimator, none skipped.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import paths
import pytest
import sklearn_checks

TESTS = paths.TESTS
MODULES = {"test_sklearn_compat": "ppa", "test_nlpca": "nlpca", "test_vsk": "vsk"}


@pytest.mark.slow
def test_every_estimator_passes_the_array_api_check():
    for name, folder in MODULES.items():  # the suite's estimator lists, as collected in this run
        if name not in sys.modules:  # run on its own: load the module as pytest would
            spec = importlib.util.spec_from_file_location(name, TESTS / folder / f"{name}.py")
            sys.modules[name] = module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    expected = len(sklearn_checks.CHECKED)
    assert expected >= 12
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    files = [str(TESTS / folder / f"{name}.py") for name, folder in MODULES.items()]
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
