"""The skip policy of tests/system_programs.py, run on small suites in a child pytest: a skip
for a missing system program passes (unless that program is required), any other skip fails."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# runs pytest in child processes
pytestmark = pytest.mark.slow


TESTS = Path(__file__).resolve().parent

SUITE = """
import pytest
from system_programs import skip_missing

def test_runs():
    assert True

def test_needs_a_program():
    skip_missing("frobnicator", "not on PATH (Debian: apt-get install frobnicator)")

@pytest.mark.xfail(reason="an expected failure, stated", strict=True)
def test_expected_failure():
    assert False
"""


def _run(tmp_path, suite, required="", ci=False):
    (tmp_path / "test_suite.py").write_text(textwrap.dedent(suite))
    env = {**os.environ, "PYTHONPATH": str(TESTS), "PPA_DASK_REQUIRED_PROGRAMS": required}
    # this run's own CI=true must not leak into the child's verdict
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "system_programs", "-p", "no:cacheprovider",
         "-rs", str(tmp_path / "test_suite.py")],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip


def test_a_skip_for_a_missing_system_program_passes(tmp_path):
    run = _run(tmp_path, SUITE)
    assert run.returncode == 0, run.stdout
    assert "needs the system program frobnicator" in run.stdout
    assert "1 passed, 1 skipped, 1 xfailed" in run.stdout


def test_a_skip_for_a_required_program_fails(tmp_path):
    run = _run(tmp_path, SUITE, required="slurm frobnicator")
    assert run.returncode == 1, run.stdout
    assert "frobnicator is required here (PPA_DASK_REQUIRED_PROGRAMS)" in run.stdout
    # another program required does not refuse this skip
    assert _run(tmp_path, SUITE, required="slurm").returncode == 0


def test_under_ci_a_skip_for_any_missing_program_fails(tmp_path):
    # README's command on a machine without the program passes (above); CI's fails
    run = _run(tmp_path, SUITE, ci=True)
    assert run.returncode == 1, run.stdout
    assert "frobnicator is required under CI (CI=true)" in run.stdout
    assert "1 passed, 1 skipped, 1 xfailed" in run.stdout


def test_any_other_skip_fails(tmp_path):
    for skip in (
        'pytest.skip("the data folder is not there")',
        'pytest.importorskip("a_package_that_is_not_installed")',
    ):
        run = _run(tmp_path, SUITE + f"\ndef test_other():\n    {skip}\n")
        assert run.returncode == 1, run.stdout
        assert "a test may skip only for a missing system program" in run.stdout, skip
