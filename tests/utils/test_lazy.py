"""Lazy package attributes (ppa_dask.utils.lazy): names and submodules imported on first use,
an unknown name an AttributeError, a missing dependency of a submodule not hidden as one."""

from __future__ import annotations

import sys
import textwrap

import pytest

import ppa_dask
from ppa_dask.utils.lazy import load


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package ``lazypkg`` on sys.path whose __init__ uses attach: ``VALUE`` from .values, a
    submodule ``broken`` whose import fails on a missing dependency."""
    root = tmp_path / "lazypkg"
    root.mkdir()
    (root / "__init__.py").write_text(
        textwrap.dedent(
            """
            from ppa_dask.utils.lazy import attach
            __getattr__, __dir__ = attach(__name__, {"VALUE": "lazypkg.values"})
            """
        )
    )
    (root / "values.py").write_text("VALUE = 42\n")
    (root / "broken.py").write_text("import a_dependency_that_is_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield __import__("lazypkg")
    for name in [m for m in sys.modules if m == "lazypkg" or m.startswith("lazypkg.")]:
        del sys.modules[name]


def test_a_name_is_imported_on_first_use_and_kept(package):
    assert "lazypkg.values" not in sys.modules
    assert "VALUE" in dir(package)
    assert package.VALUE == 42
    assert "lazypkg.values" in sys.modules and vars(package)["VALUE"] == 42


def test_an_unknown_name_is_an_attribute_error_and_a_broken_submodule_says_why(package):
    with pytest.raises(AttributeError, match="module 'lazypkg' has no attribute 'nothing'"):
        package.nothing  # noqa: B018
    assert not hasattr(package, "__wrapped__")
    with pytest.raises(ModuleNotFoundError, match="a_dependency_that_is_not_installed"):
        package.broken  # noqa: B018


def test_the_package_root_and_load():
    assert ppa_dask.store.__name__ == "ppa_dask.store"  # a subpackage, on first use
    with pytest.raises(AttributeError):
        ppa_dask.no_such_name  # noqa: B018
    fractions = load("fractions")
    assert "imported on first use" in repr(fractions)
    assert str(fractions.Fraction(1, 2)) == "1/2"
