"""Each vocabulary of the front-ends is declared once: checks that read the package's source.

The estimator's parameter choices (``PARAMETER_CONSTRAINTS`` in ``ppa_dask.ppa.estimator``, the
residual caches of the drivers), the xarray NaN policies of the stacker and the words of the
degree syntax are written in one module each; the CLI's ``choices=`` and the pipeline file's
allowed values read them. A second literal copy (a tuple, a list, or the arguments of a call
such as ``Options("linear", "polynomial")``) would drift from the first unnoticed, so these
tests count them, as tests/test_architecture.py does for private names.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import ppa_dask
from ppa_dask.ppa.drivers import RESIDUAL_CACHES
from ppa_dask.ppa.estimator import PARAMETER_CONSTRAINTS
from ppa_dask.store.stacker import NAN_POLICIES
from ppa_dask.utils.params import Options

PACKAGE = pathlib.Path(ppa_dask.__file__).parent
MODULES = sorted(PACKAGE.rglob("*.py"))

# every choice list of the estimator's constraints (two or more strings), and the stacker's
VOCABULARIES = {
    **{
        name: c.values
        for name, c in PARAMETER_CONSTRAINTS.items()
        if isinstance(c, Options) and len(c.values) > 1
    },
    "residual_cache": RESIDUAL_CACHES,
    "nan_policy": NAN_POLICIES,
}


def _docstrings(tree):
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _string_lists(tree):
    """``(line, strings)`` of every literal sequence of two or more strings: tuples, lists and
    sets of string constants, and the positional arguments of a call when they all are."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Call):
            items = node.args
        else:
            continue
        if len(items) > 1 and all(
            isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items
        ):
            yield node.lineno, frozenset(i.value for i in items)


def _name(path, root=PACKAGE):
    return str(path.relative_to(root if path.is_relative_to(root) else path.parent))


def _literal_copies(vocabulary, modules=MODULES):
    """Where ``vocabulary`` (its set of words) is written out literally: ``module:line``."""
    words = frozenset(vocabulary)
    return [
        f"{_name(path)}:{line}"
        for path in modules
        for line, strings in _string_lists(ast.parse(path.read_text()))
        if strings == words
    ]


def _phrase_places(phrase, modules=MODULES):
    """Modules whose code (not their docstrings) holds ``phrase`` in a string."""
    places = []
    for path in modules:
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        if any(
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and id(n) not in docs
            and phrase in n.value
            for n in ast.walk(tree)
        ):
            places.append(_name(path))
    return places


@pytest.mark.parametrize("name", sorted(VOCABULARIES))
@pytest.mark.slow
def test_each_choice_list_is_written_once(name):
    copies = _literal_copies(VOCABULARIES[name])
    assert len(copies) == 1, f"{name} {VOCABULARIES[name]} written at {copies}"


@pytest.mark.slow
def test_the_degree_syntax_is_worded_once():
    # the CLI's --degree refusal is parse_degree_text's own
    assert _phrase_places("a range such as 1-5") == ["utils/params.py"]


def test_the_unknown_key_refusal_is_worded_once():
    # "unknown key (did you mean 'x'?)": utils.params.did_you_mean / unknown_key, which the
    # pipeline file's schema and the cluster files' read
    assert _phrase_places("did you mean") == ["utils/params.py"]


def test_the_scanner_finds_copies(tmp_path):
    # the checks above would pass vacuously if the scanner matched nothing: feed it copies in
    # the three shapes (a tuple of choices, a call's arguments, a list), and a docstring
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""a range such as 1-5 (a docstring: not counted)"""\n'
        'A = ("raise", "drop_samples")\n'
        'B = Options("drop_samples", "raise")\n'
        'C = f(["raise", "drop_samples"], "x")\n'
        'D = ("raise", "drop_samples", "other")\n'
        'E = "expected a range such as 1-5"\n'
        'F = f" (did you mean {close!r}?)"\n'
    )
    assert _literal_copies(NAN_POLICIES, [bad]) == ["bad.py:2", "bad.py:3", "bad.py:4"]
    assert _phrase_places("a range such as 1-5", [bad]) == ["bad.py"]
    assert _phrase_places("did you mean", [bad]) == ["bad.py"]


def test_the_bundled_tables_are_every_table_loader():
    # datasets.TABLE_LOADERS is what a pipeline's 'dataset' source may name: every loader of a
    # bundled table (load_<name>(return_X_y=True) -> (X, y)), none forgotten when one is added
    import inspect

    from ppa_dask import datasets

    loaders = {
        name.removeprefix("load_"): getattr(datasets, name)
        for name in dir(datasets)
        if name.startswith("load_")
        and name != "load_paper_dataset"
        and "return_X_y" in inspect.signature(getattr(datasets, name)).parameters
    }
    assert loaders == datasets.TABLE_LOADERS
