"""The one reason a test may skip: a system program it needs (not a Python package) is missing.

A test skips with :func:`skip_missing`, which words the reason so that the skip policy (the
pytest hooks below, registered by ``conftest.py``) can read which program it was; the reason
says how to get the program. Every other skip fails the run. A skip for a missing program fails
the run only under CI (``CI=true``: CI provides every program) or for a program named in the
environment variable ``PPA_DASK_REQUIRED_PROGRAMS`` (space-separated), which ``.ci/run`` sets to
the programs it has installed: on a machine where a program could be had, a test must not skip
for it. README's ``python -m pytest -q`` elsewhere passes with such skips. Expected failures
(xfail, with their reasons) are not skips.
"""

from __future__ import annotations

import os
import re

import pytest

# "needs the system program chromium: no Chromium or Chrome binary on PATH (...)"
REASON = re.compile(r"needs the system program (\S+):")


def skip_missing(program: str, hint: str):
    """Skip the calling test because the system program ``program`` is not there."""
    pytest.skip(f"needs the system program {program}: {hint}")


def required_programs() -> set[str]:
    """The programs whose absence must fail the run rather than skip (``.ci/run`` sets them)."""
    return set(os.environ.get("PPA_DASK_REQUIRED_PROGRAMS", "").split())


def under_ci() -> bool:
    """Whether this run is CI's (``CI=true``, as CI services set it), where no program may be missing."""
    return os.environ.get("CI", "").lower() == "true"


def refused(reason: str) -> str | None:
    """Why a skip with ``reason`` breaks the policy, or None if it is allowed."""
    match = REASON.search(reason)
    if match is None:
        return "a test may skip only for a missing system program (tests/system_programs.py)"
    if under_ci():
        return f"{match.group(1)} is required under CI (CI=true)"
    if match.group(1) in required_programs():
        return f"{match.group(1)} is required here (PPA_DASK_REQUIRED_PROGRAMS)"
    return None


# skips that break the policy: (test id, reason, why refused)
_REFUSED = []


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail") and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        why = refused(reason)
        if why:
            _REFUSED.append((report.nodeid, reason, why))


def pytest_sessionfinish(session, exitstatus):
    if _REFUSED and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _REFUSED:
        terminalreporter.section("skips that fail the run", sep="=", red=True)
        for nodeid, reason, why in _REFUSED:
            terminalreporter.line(f"{nodeid}: {reason} -- {why}")
