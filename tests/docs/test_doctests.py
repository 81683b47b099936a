"""The examples in the public docstrings run, and print what they say (doctest).

Every module of the package is searched; each docstring holding an example is one test, so a
failing example names its function. ``NORMALIZE_WHITESPACE`` and ``ELLIPSIS`` are on, as in the
docs build; examples that draw figures use the non-interactive Agg backend.
"""

import doctest
import importlib
import pkgutil

import matplotlib
import pytest

import ppa_dask

matplotlib.use("Agg")

OPTIONS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


def _modules():
    for info in pkgutil.walk_packages(ppa_dask.__path__, prefix="ppa_dask."):
        if not info.name.endswith("__main__"):  # running it would run the CLI
            yield info.name


def _examples():
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = []
    for name in sorted(_modules()):
        module = importlib.import_module(name)
        for test in finder.find(module, name):
            # a re-exported object is found again in each module that imports it: keep its home
            if test.examples and test.name.startswith(module.__name__ + "."):
                found.append(test)
    return sorted(found, key=lambda t: t.name)


EXAMPLES = _examples()


def test_public_docstrings_carry_examples():
    # the estimators and the main functions of each concept show how they are called
    names = {t.name.rsplit(".", 1)[-1] for t in EXAMPLES}
    for expected in ("PPA", "FeatureBaggingPPA", "feature_instability", "save_model", "Stacker"):
        assert expected in names, expected


@pytest.mark.parametrize("test", EXAMPLES, ids=lambda t: t.name)
def test_docstring_example_runs(test, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    test.globs = dict(test.globs)
    failures = []
    runner.run(test, out=failures.append)
    assert runner.failures == 0, "".join(failures)
