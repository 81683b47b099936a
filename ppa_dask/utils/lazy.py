"""Lazy attributes of a package (in the manner of SPEC 1 and scikit-image): a public name is
imported from its module on first use, so ``import ppa_dask`` and the ``ppa-dask`` command's
``--help`` pay for no import they do not need (Dask, xarray, scikit-learn and numba take
seconds).

The library's own estimators (and records) register themselves with the model-file allow-list
when their modules are imported (:func:`ppa_dask.store.register_estimator`);
:data:`DEFERRED_ESTIMATORS` and :data:`DEFERRED_RECORDS` name those modules by the registered
names (filled by the package root), so that a file naming ``"NLPCA"`` loads in a process that
never imported :mod:`ppa_dask.nlpca`. A file's name is only ever a key into these tables of the
package's own modules: nothing a file names is imported.

Examples
--------
>>> getattr_, dir_ = attach("demo_package", {"dumps": "json"})  # as a package's __getattr__
>>> getattr_("dumps")({"a": 1})
'{"a": 1}'
>>> "dumps" in dir_()
True
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["DEFERRED_ESTIMATORS", "DEFERRED_RECORDS", "attach", "import_deferred", "load"]

#: registered estimator name -> the module of the package whose import registers it
DEFERRED_ESTIMATORS: dict[str, str] = {}
#: registered record name -> the module of the package whose import registers it
DEFERRED_RECORDS: dict[str, str] = {}


def import_deferred(name, table):
    """Import the module that registers the library class ``name``, if ``table`` (one of the
    two above) names it; returns whether it does."""
    module = table.get(name) if isinstance(name, str) else None
    if module is None:
        return False
    importlib.import_module(module)
    return True


def attach(package, names):
    """``__getattr__`` and ``__dir__`` for the package named ``package``.

    Parameters
    ----------
    package : str
        The package's name (its ``__name__``).
    names : dict of str to str
        Each public name and the module it is imported from on first access. Any other name
        not starting with ``__`` is tried as a submodule of the package
        (``ppa_dask.store`` after ``import ppa_dask``).

    Returns
    -------
    getattr_, dir_ : callable
        To be bound as the package's module-level ``__getattr__`` and ``__dir__``.
    """

    def getattr_(name):
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
        elif not name.startswith("__"):
            full = f"{package}.{name}"
            try:
                value = importlib.import_module(full)
            except ModuleNotFoundError as exc:
                if exc.name != full:
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = sys.modules.get(package)
        if module is not None:
            setattr(module, name, value)  # found at once the next time
        return value

    def dir_():
        module = sys.modules.get(package)
        return sorted(set(vars(module) if module is not None else ()) | set(names))

    return getattr_, dir_


def load(name):
    """A stand-in for the module ``name``, which is imported on the first access to one of
    its attributes through it.

    For a module-level name of a module at the top of the layers (the command) whose functions
    alone need ``name``: the command's parser and its argument checks then come without it.
    Below the top a module imports its modules plainly, where import-linter sees them. (Not
    importlib's ``LazyLoader``: in Python 3.11 a package loaded that way can fail to import
    its own submodules.)

    Examples
    --------
    >>> fractions = load("fractions")
    >>> fractions.Fraction(1, 3) + fractions.Fraction(1, 6)
    Fraction(1, 2)
    """
    return _Deferred(name)


class _Deferred:
    """The module named ``name``, imported on first attribute access (see :func:`load`)."""

    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attribute):
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self):
        return f"<module {self._name!r}, imported on first use>"
