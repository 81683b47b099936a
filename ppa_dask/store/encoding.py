"""Estimator state as a JSON tree plus named numeric arrays, and the allow-list of classes.

Model files (:mod:`.model_files`) and ensemble member files (:mod:`.members`) hold an estimator
in the same form, written by :class:`Encoder` and read back by :class:`Decoder`:

* an estimator is ``{"__estimator__": name, "params": ..., "fitted": ..., "private": ...}``:
  its class name in the allow-list, ``get_params(deep=False)``, every fitted attribute (public
  names ending in ``_``) and, for scikit-learn classes only, the private attributes (names
  starting with one ``_``: an SVC's ``_dual_coef_``, a k-NN's ``_fit_X``) whose values are
  plain data; every other attribute must be one its constructor sets, or the state is refused
  (TypeError naming the attribute and the class), since a file could not restore it. A
  parameter that is a function (``CurveFitRegressor(func)``) is refused: a file never holds
  code. A path (``pathlib.Path``) is written as its string;
* values are JSON scalars and lists inline, ``{"__array__": name}`` for a numeric array (held
  beside the tree), ``{"__str_array__": [...]}`` for strings, ``{"__tuple__"}``,
  ``{"__dict__"}``, ``{"__range__"}``, ``{"__float__"}`` for non-finite floats, nested
  estimators (the members of an ensemble) in the same form, and
  ``{"__record__": name, "fields": {...}}`` for a plain-data record: a frozen dataclass
  registered with :func:`register_record` (an ensemble's ``MemberSpec``), its fields encoded as
  values;
* two compiled scikit-learn objects: a decision tree's ``Tree`` is ``{"__sktree__": ...}``, its
  constructor arguments, depth and node count in JSON, one plain array per field of its node
  table and its values array, rebuilt by ``Tree(...).__setstate__`` after checks that the
  nodes form a tree (children after their parent, each node one parent, features below
  ``n_features``, depth as recorded) so that a forged file cannot make compiled code read out
  of bounds; a k-NN's ``KDTree`` / ``BallTree`` (``_tree``) is ``{"__neighbors_tree__": kind}``
  and is built again from the estimator's ``_fit_X`` at loading, exactly as ``fit`` built it
  (saving checks that the rebuilt tree is identical).

Restored libsvm state (SVC, SVR, ...) is checked for the shapes libsvm relies on (support
vectors, dual coefficients, intercepts per class pair) before the estimator is returned, and a
tree's ``n_features`` / ``n_outputs`` against its estimator's ``n_features_in_`` /
``n_outputs_``: a file that fails raises ``ModelFileError(reason="invalid")``.

The allow-list
--------------
A file names a class; the decoder builds it only if it is

1. registered by name with :func:`register_estimator` (the library's estimators register
   themselves, e.g. ``"PPA"``) or, for plain-data records, :func:`register_record`, or
2. a scikit-learn estimator, named ``"sklearn.<module>.<Class>"``, whose module is *already*
   in ``sys.modules`` and which is a subclass of ``sklearn.base.BaseEstimator`` defined there.

Nothing a file names is ever imported: an unknown name, or a scikit-learn module this process
has not imported, is refused with ``ModelFileError(reason="unknown-class")`` when the tree is
checked, before any class is built. The only code a file can make run is an allowed class's
``__init__`` with the file's parameters (JSON values, arrays and allowed estimators), followed
by setting its fitted (and, for scikit-learn classes, private) attributes and the class's own
``complete_fitted_state`` when it has one (which derives attributes that files of older
versions lack from the others: :meth:`ppa_dask.PPA.complete_fitted_state`), a registered
record's dataclass ``__init__`` with its fields, and the two compiled trees above built from
checked arrays.

:func:`canonical_json`, :func:`sha256_hex`, :func:`array_table` and :func:`verify_array` give
both file kinds the same checksums.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import math
import numbers
import os
import sys

import numpy as np
from sklearn.base import BaseEstimator, is_classifier

from ppa_dask.utils.lazy import DEFERRED_ESTIMATORS, DEFERRED_RECORDS, import_deferred

__all__ = [
    "NUMERIC_KINDS",
    "MAX_TREE_DEPTH",
    "MAX_RANGE_LENGTH",
    "ModelFileError",
    "ModelFileNotFound",
    "Encoder",
    "Decoder",
    "register_estimator",
    "register_record",
    "record_class",
    "estimator_class",
    "class_name",
    "encode_estimator",
    "canonical_json",
    "sha256_hex",
    "array_sha256",
    "array_table",
    "verify_array",
    "seal",
    "seal_matches",
]

#: dtype kinds held as arrays (bool, signed and unsigned int, float, complex)
NUMERIC_KINDS = "biufc"
_SKLEARN = "sklearn."
#: scikit-learn's packages whose estimators a file may name before the reading process has
#: imported them: those of the linear and neighbour models the ensembles and baselines take as
#: estimators, and the transformers a pipeline of them holds (``import ppa_dask`` loaded these
#: while the package imported everything at once, so files of such ensembles loaded in a fresh
#: process). The library names them here; a file's name only selects among them, so reading a
#: file never imports a package the file chooses (an SVR or a tree needs its package imported
#: first, as before).
LIBRARY_SKLEARN_PACKAGES = (
    "sklearn.covariance",
    "sklearn.decomposition",
    "sklearn.discriminant_analysis",
    "sklearn.linear_model",
    "sklearn.neighbors",
    "sklearn.pipeline",
    "sklearn.preprocessing",
)

#: Deepest nesting of an estimator tree (the library writes fewer than 30 levels; each level is
#: a few frames of recursion in the decoder, far below the interpreter's limit).
MAX_TREE_DEPTH = 100
#: Most values a ``range`` in a file may hold (PPA's candidate degrees are a handful).
MAX_RANGE_LENGTH = 10**6

# name in files -> class, filled by register_estimator (the library's classes at import)
_REGISTERED: dict[str, type] = {}
# name in files -> frozen dataclass, filled by register_record
_RECORDS: dict[str, type] = {}


class ModelFileError(ValueError):
    """A file of estimator state that cannot be loaded; ``reason`` says why.

    ``reason`` is one of ``"missing"``, ``"not-a-model"``, ``"future-version"``,
    ``"tampered"``, ``"truncated"``, ``"unknown-class"``, ``"invalid"`` (model and member
    files), ``"old-format"`` and ``"mismatch"`` (member files, see :mod:`.members`).
    """

    def __init__(self, message, reason):
        super().__init__(message)
        self.reason = reason


class ModelFileNotFound(ModelFileError, FileNotFoundError):
    """No model file at the path."""

    def __init__(self, message):
        super().__init__(message, "missing")


# -------------------------------------------------------------------------------------------
# the allow-list
# -------------------------------------------------------------------------------------------


def register_estimator(cls, name=None):
    """Allow files to hold instances of ``cls`` (written and built back by name).

    Every estimator of the library registers itself; call this for your own estimator classes
    (subclasses of scikit-learn's ``BaseEstimator`` whose fitted state is the public attributes
    ending in ``_``). scikit-learn's own estimators need no registration.

    Parameters
    ----------
    cls : type
    name : str, optional
        Name written in files (default ``cls.__name__``); must be unique and must not start
        with ``"sklearn."`` (those names are scikit-learn's classes).

    Returns
    -------
    cls : type
        So that it can be used as a class decorator.

    Examples
    --------
    >>> from ppa_dask import PPA  # registered by ``@register_estimator`` on its class
    >>> register_estimator(PPA) is PPA and estimator_class("PPA") is PPA  # again: harmless
    True
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_estimator needs a class, got {cls!r}")
    name = cls.__name__ if name is None else name
    if not isinstance(name, str) or not name:
        raise ValueError(f"the registered name must be a non-empty str, got {name!r}")
    if name.startswith(_SKLEARN):
        raise ValueError(f"estimator name {name!r}: names starting with 'sklearn.' are reserved")
    known = _REGISTERED.get(name)
    if known is not None and known is not cls:
        raise ValueError(f"estimator name {name!r} is already registered for {known!r}")
    _REGISTERED[name] = cls
    return cls


def register_record(cls, name=None):
    """Allow files to hold instances of the frozen dataclass ``cls`` as plain data.

    A record is written as its name and its fields (each encoded like any other value: numbers,
    strings, arrays, tuples...) and built back by calling ``cls(**fields)``, the dataclass's
    own ``__init__``: no other code of the class runs. The ensembles register their
    ``MemberSpec`` this way.

    Parameters
    ----------
    cls : type
        A frozen dataclass whose ``__init__`` takes exactly its fields.
    name : str, optional
        Name written in files (default ``cls.__name__``); unique among records.

    Returns
    -------
    cls : type
        So that it can be used as a class decorator.

    Examples
    --------
    >>> import dataclasses
    >>> @register_record
    ... @dataclasses.dataclass(frozen=True)
    ... class Span:
    ...     start: int
    ...     stop: int
    >>> record_class("Span") is Span
    True
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"register_record needs a dataclass, got {cls!r}")
    if not cls.__dataclass_params__.frozen:
        raise TypeError(f"register_record needs a frozen dataclass; {cls.__name__} is not frozen")
    if any(not f.init for f in dataclasses.fields(cls)):
        raise TypeError(f"every field of {cls.__name__} must be an __init__ parameter")
    name = cls.__name__ if name is None else name
    if not isinstance(name, str) or not name:
        raise ValueError(f"the registered name must be a non-empty str, got {name!r}")
    known = _RECORDS.get(name)
    if known is not None and known is not cls:
        raise ValueError(f"record name {name!r} is already registered for {known!r}")
    _RECORDS[name] = cls
    return cls


def record_class(name):
    """The registered record class a file names, or None; imports nothing a file names (only
    the library's own module of a deferred record, :mod:`ppa_dask.utils.lazy`).

    Examples
    --------
    >>> record_class("os.system") is None
    True
    """
    if isinstance(name, str) and name not in _RECORDS:
        import_deferred(name, DEFERRED_RECORDS)  # the library's own, registered on import
    return _RECORDS.get(name) if isinstance(name, str) else None


def _record_name(value):
    for name, known in _RECORDS.items():
        if known is type(value):
            return name
    return None


def _sklearn_class(name):
    """The scikit-learn estimator class ``name`` of an already imported module, or None."""
    module_name, _, attr = name.rpartition(".")
    if not module_name.startswith(_SKLEARN) and module_name != "sklearn":
        return None
    module = sys.modules.get(module_name)
    if module is None:
        package = ".".join(module_name.split(".")[:2])
        if package not in LIBRARY_SKLEARN_PACKAGES:
            return None  # what the file names is never imported
        importlib.import_module(package)  # one of the library's own, named above
        module = sys.modules.get(module_name)
        if module is None:
            return None
    # vars(), not getattr(): a module __getattr__ (scikit-learn's lazy submodules) would import
    cls = vars(module).get(attr)
    if not (isinstance(cls, type) and issubclass(cls, BaseEstimator)):
        return None
    if cls.__module__ != module_name or cls.__qualname__ != attr:
        return None  # a re-export or an alias: only the defining module's name is accepted
    return cls


def estimator_class(name):
    """The allowed class a file names, or None; imports nothing a file names (only the
    library's own module of a deferred estimator, :mod:`ppa_dask.utils.lazy`).

    Examples
    --------
    >>> import sklearn.linear_model
    >>> estimator_class("sklearn.linear_model._base.LinearRegression").__name__
    'LinearRegression'
    >>> estimator_class("os.system") is None
    True
    """
    if not isinstance(name, str):
        return None
    if name not in _REGISTERED:
        # the library's own estimators, registered when their module loads (the package root
        # names those modules; the file's name is only a key into that table)
        import_deferred(name, DEFERRED_ESTIMATORS)
    if name in _REGISTERED:
        return _REGISTERED[name]
    return _sklearn_class(name)


def class_name(estimator):
    """The name files use for ``estimator``'s class, or None when it is not allowed.

    Examples
    --------
    >>> from sklearn.linear_model import Ridge
    >>> class_name(Ridge())
    'sklearn.linear_model._ridge.Ridge'
    """
    cls = type(estimator)
    for name, known in _REGISTERED.items():
        if known is cls:
            return name
    name = f"{cls.__module__}.{cls.__qualname__}"
    return name if _sklearn_class(name) is cls else None


def _allow_list_text():
    return (
        f"the registered classes {sorted(_REGISTERED.keys() | DEFERRED_ESTIMATORS.keys())} and "
        "scikit-learn estimator classes of modules already imported or of the packages "
        f"{list(LIBRARY_SKLEARN_PACKAGES)}"
    )


# -------------------------------------------------------------------------------------------
# compiled scikit-learn objects a file can hold: decision trees' Tree, k-NN's KDTree/BallTree
# -------------------------------------------------------------------------------------------

_TREE_MODULE = "sklearn.tree._tree"
_NEIGHBORS_MODULE = "sklearn.neighbors"
_NEIGHBORS_TREES = {"KDTree": "kd_tree", "BallTree": "ball_tree"}  # class -> _fit_method
_TREE_LEAF = -1  # scikit-learn's child index of a leaf


def _tree_class():
    """scikit-learn's ``Tree``, or None when its module is not imported (never imported here:
    a file holding a decision tree also names its estimator, whose module imports it)."""
    cls = vars(sys.modules.get(_TREE_MODULE, sys)).get("Tree")
    return cls if isinstance(cls, type) else None


def _neighbors_tree_class(kind):
    if kind not in _NEIGHBORS_TREES:
        return None
    cls = vars(sys.modules.get(_NEIGHBORS_MODULE, sys)).get(kind)
    return cls if isinstance(cls, type) else None


def _neighbors_tree_kind(value):
    for kind in _NEIGHBORS_TREES:
        cls = _neighbors_tree_class(kind)
        if cls is not None and type(value) is cls:
            return kind
    return None


def _node_dtype(tree_cls):
    """The node dtype of the running scikit-learn, from an empty tree (no import, no file)."""
    return tree_cls(1, np.ones(1, dtype=np.intp), 1).__getstate__()["nodes"].dtype


def _build_neighbors_tree(est, kind):
    """The KDTree/BallTree ``fit`` builds, from the estimator's own ``_fit_X`` and metric."""
    fit_x = vars(est).get("_fit_X")
    if not isinstance(fit_x, np.ndarray):
        raise ValueError("_fit_X, the samples the tree is built on, is not an array")
    if vars(est).get("_fit_method") != _NEIGHBORS_TREES[kind]:
        raise ValueError(f"_fit_method is {vars(est).get('_fit_method')!r}, not a {kind}")
    metric_params = getattr(est, "effective_metric_params_", None) or {}
    if not (isinstance(metric_params, dict) and all(isinstance(k, str) for k in metric_params)):
        raise ValueError("effective_metric_params_ is not a dict of parameters")
    return _neighbors_tree_class(kind)(
        fit_x, est.leaf_size, metric=est.effective_metric_, **metric_params
    )


def _same_neighbors_tree(a, b):
    return all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
        for x, y in zip(a.get_arrays(), b.get_arrays(), strict=True)
    )


def _is_private_name(name):
    return name.startswith("_") and not name.startswith("__") and name[1:].isidentifier()


def _class_defines(cls, name):
    # looked up in the classes' own dicts: no descriptor or __getattr__ runs
    return any(name in vars(c) for c in cls.__mro__)


# -------------------------------------------------------------------------------------------
# estimator -> JSON tree + arrays
# -------------------------------------------------------------------------------------------


def _is_estimator(value):
    return hasattr(value, "get_params") and not isinstance(value, type)


def _fitted_names(est):
    return sorted(k for k in vars(est) if k.endswith("_") and not k.startswith("_"))


class Encoder:
    """Turns an estimator into a JSON tree plus a dict of named numpy arrays (``arrays``).

    Raises TypeError, naming the attribute, for anything a file could not hold or restore.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> X = np.arange(8.0).reshape(4, 2)
    >>> encoder = Encoder()
    >>> tree = encoder.estimator(LinearRegression().fit(X, X[:, 0]), "")
    >>> tree["fitted"]["coef_"], sorted(encoder.arrays)[:2]
    ({'__array__': 'coef_'}, ['coef_', 'intercept_'])
    """

    def __init__(self):
        self.arrays = {}

    def _array_name(self, where):
        base = "".join(c if c.isalnum() or c in "_.-" else "_" for c in where).lstrip(".")
        # one leading "_" kept (a private attribute's array is named like it); "__" is reserved
        base = "_" + base.lstrip("_") if base.startswith("_") else base
        base = base if base.strip("_.") else "array"
        name, i = base, 1
        while name in self.arrays:
            name, i = f"{base}~{i}", i + 1
        return name

    def value(self, value, where):
        if isinstance(value, np.generic) and value.dtype.kind in NUMERIC_KINDS + "Mm":
            # numpy scalars keep their dtype: a 0-d array, read back as a scalar
            return dict(self.array(np.asarray(value), where), scalar=True)
        if value is None or isinstance(value, bool):
            return None if value is None else value
        if isinstance(value, str):
            return value
        if isinstance(value, os.PathLike) and isinstance(os.fspath(value), str):
            return os.fspath(value)  # (a pathlib.Path store=...): loads back as its str
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            value = float(value)
            return value if math.isfinite(value) else {"__float__": repr(value)}
        if isinstance(value, (np.ndarray, np.generic)):
            return self.array(np.asarray(value), where)
        if isinstance(value, range):
            return {"__range__": [value.start, value.stop, value.step]}
        if isinstance(value, tuple):
            return {"__tuple__": [self.value(v, f"{where}.{i}") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [self.value(v, f"{where}.{i}") for i, v in enumerate(value)]
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise TypeError(f"{where}: dict keys must be str to be saved, got {list(value)!r}")
            return {"__dict__": {k: self.value(v, f"{where}.{k}") for k, v in value.items()}}
        if _is_estimator(value):
            return self.estimator(value, where)
        record = _record_name(value)
        if record is not None:
            fields = {
                f.name: self.value(getattr(value, f.name), f"{where}.{f.name}")
                for f in dataclasses.fields(value)
            }
            return {"__record__": record, "fields": fields}
        tree_cls = _tree_class()
        if tree_cls is not None and type(value) is tree_cls:
            return self.tree(value, where)
        if callable(value):
            raise TypeError(
                f"{where}: cannot save the {_code_kind(value)} {_code_name(value)}: a model file "
                "never holds code, since loading it would mean running code from the file"
            )
        raise TypeError(
            f"{where}: cannot save a value of type {type(value).__name__} (files hold "
            "arrays, numbers, strings, None, lists/tuples/dicts of those, allowed "
            "estimators, registered records and decision trees)"
        )

    def tree(self, tree, where):
        """A scikit-learn ``Tree``: constructor arguments, one array per node field, values."""
        state = tree.__getstate__()
        nodes = state["nodes"]
        return {
            "__sktree__": {
                "n_features": int(tree.n_features),
                "n_classes": self.array(
                    np.asarray(tree.n_classes, np.int64), f"{where}.n_classes"
                ),
                "n_outputs": int(tree.n_outputs),
                "max_depth": int(state["max_depth"]),
                "node_count": int(state["node_count"]),
                "fields": [[f, nodes.dtype.fields[f][0].str] for f in nodes.dtype.names],
                "nodes": {
                    f: self.array(np.ascontiguousarray(nodes[f]), f"{where}.nodes.{f}")
                    for f in nodes.dtype.names
                },
                "values": self.array(state["values"], f"{where}.values"),
            }
        }

    def array(self, a, where):
        if a.dtype.kind in NUMERIC_KINDS:
            name = self._array_name(where)
            # dtype by its str: a C longlong (a Tree's node fields) is the int64 Zarr knows
            self.arrays[name] = np.array(a, order="C").view(np.dtype(a.dtype.str))
            return {"__array__": name}
        if a.dtype.kind in "Mm":  # datetimes as their int64 counts, with the unit in the tree
            name = self._array_name(where)
            self.arrays[name] = np.array(a.view(np.int64), order="C")
            return {"__array__": name, "view": a.dtype.str}
        if a.dtype.kind == "U" or (
            a.dtype.kind == "O" and all(isinstance(v, str) for v in a.ravel())
        ):
            return {
                "__str_array__": [str(v) for v in a.ravel()],
                "shape": list(a.shape),
                "object": a.dtype.kind == "O",
            }
        raise TypeError(f"{where}: cannot save an array of dtype {a.dtype}")

    def estimator(self, est, where):
        name = class_name(est)
        if name is None:
            raise TypeError(
                f"{where or 'estimator'}: {type(est).__module__}.{type(est).__qualname__} is not "
                "a registered estimator class; call ppa_dask.store.register_estimator on it first"
            )
        label = where or "estimator"
        cls_name = type(est).__name__
        raw = est.get_params(deep=False)
        fitted_names = _fitted_names(est)
        params = {}
        for key, val in raw.items():
            if isinstance(val, (np.random.RandomState, np.random.Generator)):
                raise TypeError(
                    f"{label}: parameter {key!r} is a {type(val).__name__}, which "
                    "cannot be saved; set it to an int (or None) before saving"
                )
            if callable(val) and not _is_estimator(val):
                raise TypeError(_code_parameter_message(label, est, key, val, fitted_names))
            params[key] = self.value(val, f"{where}.params.{key}")
        # scikit-learn classes keep part of their fitted state in private attributes (SVC's
        # _dual_coef_, k-NN's _fit_X): saved when plain data; the library's own classes keep
        # theirs public, so a private attribute of theirs is refused below like any other
        private_names = (
            sorted(k for k in vars(est) if _is_private_name(k))
            if name.startswith(_SKLEARN)
            else []
        )
        # state outside the parameters and the fitted attributes would be lost on loading,
        # unless the constructor sets it again (checked on a fresh instance, never guessed)
        unsaved = set(vars(est)) - set(raw) - set(fitted_names) - set(private_names)
        fresh = None
        if unsaved or private_names:
            fresh = set(vars(type(est)(**raw)))
            unsaved -= fresh
        if unsaved:
            raise TypeError(
                f"{label}: {cls_name} holds attribute(s) "
                f"{sorted(unsaved)} that are neither parameters nor public fitted attributes "
                "ending in '_'; a file could not restore them"
            )
        fitted = {
            k: self.value(getattr(est, k), f"{where}.{k}" if where else k) for k in fitted_names
        }
        node = {"__estimator__": name, "params": params, "fitted": fitted}
        private = {}
        for k in private_names:
            encoded = self._private(est, k, f"{where}.{k}" if where else k, k in fresh)
            if encoded is not None:
                private[k] = encoded
        if private:
            node["private"] = private
        return node

    def _private(self, est, key, where, set_by_constructor):
        """One private attribute of a scikit-learn estimator; None when it is not to be saved
        (the constructor sets it again). TypeError naming it when a file cannot hold it."""
        value = vars(est)[key]
        cls_name = type(est).__name__
        if _class_defines(type(est), key):
            # a file could set it, but loading refuses instance attributes hiding the class's
            raise TypeError(
                f"{where}: {cls_name} holds the private attribute {key!r}, which hides an "
                "attribute of its class; a model file cannot restore it"
            )
        kind = _neighbors_tree_kind(value)
        if kind is not None:
            # compiled; not stored but built again at loading, as fit built it: only if that
            # gives the very same tree
            try:
                same = _same_neighbors_tree(value, _build_neighbors_tree(est, kind))
            except (TypeError, ValueError):
                same = False
            if not same:
                raise TypeError(
                    f"{where}: {cls_name}'s {kind} is not the tree fit builds from _fit_X "
                    f"(leaf_size, effective_metric_); a model file could not restore it"
                )
            return {"__neighbors_tree__": kind}
        before = set(self.arrays)
        try:
            return self.value(value, where)
        except TypeError as exc:
            for name in set(self.arrays) - before:  # nothing half-encoded stays behind
                del self.arrays[name]
            if set_by_constructor:
                return None
            inside = f" ({exc})" if isinstance(value, (list, tuple, dict)) else ""
            raise TypeError(
                f"{where}: {cls_name} holds the private attribute {key!r} of type "
                f"{type(value).__name__}, which a model file cannot hold: files hold plain data "
                f"(arrays, numbers, strings, None, lists/tuples/dicts of those){inside}"
            ) from None


def _code_kind(value):
    return "class" if isinstance(value, type) else "function"


def _code_name(value):
    name = getattr(value, "__qualname__", None) or type(value).__name__
    module = getattr(value, "__module__", None)
    return f"{module}.{name}" if isinstance(module, str) else str(name)


def _code_parameter_message(label, est, key, value, fitted_names):
    kind, cls_name = _code_kind(value), type(est).__name__
    if fitted_names:
        learned = [k for k in fitted_names if k not in ("n_features_in_", "feature_names_in_")]
        first = (learned or fitted_names)[0]
        how = (
            f"save its fitted attributes yourself ({', '.join(fitted_names)}; e.g. "
            f"numpy.savez(path, {first}=model.{first})) and set them on a new "
            f"{cls_name}({key}=...) made with the same {kind}"
        )
    else:
        how = f"make a new {cls_name}({key}=...) with the same {kind} in your code"
    return (
        f"{label}: parameter {key!r} of {cls_name} is the {kind} {_code_name(value)}, and a "
        f"{kind} cannot be stored in a model file: loading it would mean running code from the "
        f"file. To keep this fit, {how}"
    )


def _rebuilt(node):
    return isinstance(node, dict) and "__neighbors_tree__" in node


def encode_estimator(estimator):
    """``(tree, arrays)`` of a fitted estimator; TypeError if a file could not hold it.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> tree, arrays = encode_estimator(Ridge().fit(np.eye(3), [1.0, 2.0, 3.0]))
    >>> tree["__estimator__"], arrays["coef_"].shape
    ('sklearn.linear_model._ridge.Ridge', (3,))
    """
    encoder = Encoder()
    tree = encoder.estimator(estimator, "")
    return tree, encoder.arrays


# -------------------------------------------------------------------------------------------
# JSON tree + arrays -> estimator
# -------------------------------------------------------------------------------------------


class Decoder:
    """JSON tree + arrays -> Python values; :meth:`check` the whole tree before building.

    Parameters
    ----------
    path : str
        Named in every error.
    arrays : dict of str to ndarray
        The verified arrays the tree refers to.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> model = Ridge().fit(np.eye(3), [1.0, 2.0, 3.0])
    >>> tree, arrays = encode_estimator(model)
    >>> decoder = Decoder("example", arrays)
    >>> decoder.check(tree)
    >>> bool(np.array_equal(decoder.estimator(tree).coef_, model.coef_))
    True
    """

    def __init__(self, path, arrays):
        self.path, self.arrays = path, arrays

    def _bad(self, message):
        return ModelFileError(f"{self.path!r}: {message}", "invalid")

    def check(self, node, where="model", depth=0):
        """Validate the whole tree (classes, attribute names, array references, the form and
        size of every value) up front, so that nothing is built from a file that fails
        anywhere; a tree nested deeper than :data:`MAX_TREE_DEPTH` is refused (never a
        RecursionError)."""
        if depth > MAX_TREE_DEPTH:
            raise self._bad(f"{where}: nested more than {MAX_TREE_DEPTH} levels deep")
        if isinstance(node, list):
            for i, v in enumerate(node):
                self.check(v, f"{where}[{i}]", depth + 1)
        elif isinstance(node, dict):
            self._check_value_node(node, where)
            if "__estimator__" in node:
                name = node["__estimator__"]
                if estimator_class(name) is None:
                    raise ModelFileError(
                        f"{self.path!r}: {where} names the estimator class {name!r}, which is not "
                        f"in the allow-list ({_allow_list_text()}); nothing was imported or built",
                        "unknown-class",
                    )
                for part in ("params", "fitted", "private"):
                    if not isinstance(node.get(part, {}), dict):
                        raise self._bad(f"{where}.{part} is not a JSON object")
                for k in node.get("params", {}):
                    if not (isinstance(k, str) and k.isidentifier() and not k.startswith("__")):
                        raise self._bad(f"{k!r} is not a parameter name")
                for k in node.get("fitted", {}):
                    if not (isinstance(k, str) and k.endswith("_") and not k.startswith("_")):
                        raise self._bad(f"{k!r} is not a fitted attribute name")
                private = node.get("private", {})
                if private and name in _REGISTERED:
                    raise self._bad(f"{where}: {name} keeps no private attributes in files")
                for k in private:
                    if not (isinstance(k, str) and _is_private_name(k)):
                        raise self._bad(f"{k!r} is not a private attribute name")
                    if _class_defines(estimator_class(name), k):
                        raise self._bad(f"{where}: {k!r} would hide an attribute of {name}")
            if "__sktree__" in node:
                if _tree_class() is None:
                    raise ModelFileError(
                        f"{self.path!r}: {where} holds a decision tree, but scikit-learn's "
                        f"{_TREE_MODULE} is not imported (import sklearn.tree first); nothing "
                        "was imported or built",
                        "unknown-class",
                    )
                body = node["__sktree__"]
                keys = {"n_features", "n_classes", "n_outputs", "max_depth", "node_count"}
                keys |= {"fields", "nodes", "values"}
                if len(node) != 1 or not isinstance(body, dict) or set(body) != keys:
                    raise self._bad(f"{where} is not a decision tree record {sorted(keys)}")
            if "__neighbors_tree__" in node:
                kind = node["__neighbors_tree__"]
                if not (where.endswith("._tree") and len(node) == 1 and kind in _NEIGHBORS_TREES):
                    raise self._bad(f"{where}: unexpected neighbors tree {kind!r}")
                if _neighbors_tree_class(kind) is None:
                    raise ModelFileError(
                        f"{self.path!r}: {where} holds a {kind}, but {_NEIGHBORS_MODULE} is not "
                        "imported; nothing was imported or built",
                        "unknown-class",
                    )
            if "__record__" in node:
                name = node["__record__"]
                if record_class(name) is None:
                    raise ModelFileError(
                        f"{self.path!r}: {where} names the record class {name!r}, which is not "
                        f"in the allow-list (the registered records {sorted(_RECORDS)}); "
                        "nothing was imported or built",
                        "unknown-class",
                    )
                fields = node.get("fields")
                known = {f.name for f in dataclasses.fields(record_class(name))}
                if not isinstance(fields, dict) or set(fields) != known:
                    raise self._bad(f"{where} does not hold the fields {sorted(known)} of {name}")
            if "__array__" in node:
                self.array(node)
            for k, v in node.items():
                self.check(v, f"{where}.{k}", depth + 1)
        elif not (node is None or isinstance(node, (bool, int, float, str))):
            raise self._bad(f"{where}: unexpected node {node!r}")

    def _check_value_node(self, node, where):
        """The form of a tagged value (range, tuple, dict, string array, float) before
        :meth:`value` builds it: what it builds is never larger than the record."""
        if "__range__" in node:
            args = node["__range__"]
            if not (
                isinstance(args, list)
                and 1 <= len(args) <= 3
                and all(isinstance(a, int) and not isinstance(a, bool) for a in args)
                and (len(args) < 3 or args[2] != 0)
            ):
                raise self._bad(f"{where}: a range holds 1 to 3 ints (step not 0), got {args!r}")
            if len(range(*args)) > MAX_RANGE_LENGTH:
                raise self._bad(
                    f"{where}: range{tuple(args)} holds {len(range(*args))} values; files hold "
                    f"ranges of at most {MAX_RANGE_LENGTH}"
                )
        if "__tuple__" in node and not isinstance(node["__tuple__"], list):
            raise self._bad(f"{where}: a tuple is a JSON list, got {node['__tuple__']!r}")
        if "__dict__" in node and not isinstance(node["__dict__"], dict):
            raise self._bad(f"{where}: a dict is a JSON object, got {node['__dict__']!r}")
        if "__float__" in node:
            try:
                float(node["__float__"])
            except (TypeError, ValueError):
                raise self._bad(f"{where}: {node['__float__']!r} is not a float") from None
        if "__str_array__" in node:
            values, shape = node["__str_array__"], node.get("shape")
            if not (
                isinstance(values, list)
                and all(isinstance(v, str) for v in values)
                and isinstance(shape, list)
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
                and math.prod(shape) == len(values)
            ):
                raise self._bad(
                    f"{where}: a string array holds a list of strings and a shape of as many "
                    f"values, got shape {shape!r}"
                )

    def array(self, node):
        name = node["__array__"]
        if not isinstance(name, str) or name not in self.arrays:
            raise self._bad(f"reference to unknown array {name!r}")
        a = self.arrays[name]
        if "view" in node:
            view = np.dtype(str(node["view"]))
            if view.kind not in "Mm" or a.dtype != np.int64:
                # only datetimes are stored as views; anything else (object!) is refused
                raise self._bad(f"array {name!r} cannot be viewed as {view}")
            a = a.view(view)
        return a[()] if node.get("scalar") else a

    def value(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.value(v) for v in node]
        if not isinstance(node, dict) or len(node) == 0:
            raise self._bad(f"unexpected node {node!r}")
        if "__array__" in node:
            return self.array(node)
        if "__float__" in node:
            return float(node["__float__"])
        if "__str_array__" in node:
            a = np.array(node["__str_array__"], dtype=object if node.get("object") else str)
            return a.reshape(node["shape"])
        if "__range__" in node:
            return range(*node["__range__"])
        if "__tuple__" in node:
            return tuple(self.value(v) for v in node["__tuple__"])
        if "__dict__" in node:
            return {k: self.value(v) for k, v in node["__dict__"].items()}
        if "__estimator__" in node:
            return self.estimator(node)
        if "__sktree__" in node:
            return self.tree(node["__sktree__"])
        if "__record__" in node:
            cls = record_class(node["__record__"])
            if cls is None:  # check() refuses this first
                raise ModelFileError(
                    f"{self.path!r}: unknown record class {node['__record__']!r}", "unknown-class"
                )
            return cls(**{k: self.value(v) for k, v in node["fields"].items()})
        raise self._bad(f"unexpected node with keys {sorted(node)}")

    def estimator(self, node):
        cls = estimator_class(node["__estimator__"])
        if cls is None:  # check() refuses this first; never build what is not allowed
            raise ModelFileError(
                f"{self.path!r}: unknown estimator class {node['__estimator__']!r}",
                "unknown-class",
            )
        params = {k: self.value(v) for k, v in node.get("params", {}).items()}
        fitted = {k: self.value(v) for k, v in node.get("fitted", {}).items()}
        private_nodes = node.get("private", {})
        rebuilt = {k: v["__neighbors_tree__"] for k, v in private_nodes.items() if _rebuilt(v)}
        private = {k: self.value(v) for k, v in private_nodes.items() if k not in rebuilt}
        try:
            est = cls(**params)
        except TypeError as exc:
            raise self._bad(f"the parameters do not fit {cls.__name__}: {exc}") from None
        for k, v in fitted.items():
            setattr(est, k, v)
        for k, v in private.items():
            setattr(est, k, v)
        complete = getattr(cls, "complete_fitted_state", None)
        if fitted and callable(complete):
            # attributes that files of older versions lack, derived from the others
            try:
                est.complete_fitted_state()
            except (TypeError, ValueError, AttributeError) as exc:
                raise self._bad(f"{cls.__name__}'s fitted state is incomplete: {exc}") from None
        for k, kind in rebuilt.items():
            try:
                setattr(est, k, _build_neighbors_tree(est, kind))
            except (TypeError, ValueError, AttributeError) as exc:
                raise self._bad(f"{cls.__name__}'s {kind} cannot be built again: {exc}") from None
        self._check_compiled_state(est)
        return est

    def tree(self, body):
        """A scikit-learn ``Tree`` from its record, after checks that its nodes form a tree
        the compiled code can walk without reading out of bounds."""
        tree_cls = _tree_class()
        if tree_cls is None:  # check() refuses this first
            raise ModelFileError(f"{self.path!r}: {_TREE_MODULE} is not imported", "unknown-class")
        ints = {k: body[k] for k in ("n_features", "n_outputs", "max_depth", "node_count")}
        for k, v in ints.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if k == "max_depth" else 1):
                low = 0 if k == "max_depth" else 1
                raise self._bad(f"decision tree: {k} must be an int >= {low}, got {v!r}")
        n_features, n_outputs = ints["n_features"], ints["n_outputs"]
        max_depth, n = ints["max_depth"], ints["node_count"]
        n_classes = self.value(body["n_classes"])
        if not (
            isinstance(n_classes, np.ndarray)
            and n_classes.dtype.kind in "iu"
            and n_classes.shape == (n_outputs,)
            and (n_classes >= 1).all()
        ):
            raise self._bad(
                f"decision tree: n_classes must be {n_outputs} int(s) >= 1, got {n_classes!r}"
            )
        n_classes = np.asarray(n_classes, dtype=np.intp)
        expected = _node_dtype(tree_cls)
        want = [[f, expected.fields[f][0].str] for f in expected.names]
        fields, nodes = body["fields"], body["nodes"]
        if (
            fields != want
            or not isinstance(nodes, dict)
            or sorted(nodes) != sorted(expected.names)
        ):
            raise self._bad(
                f"decision tree: the node fields {fields!r} are not those of this scikit-learn's "
                f"Tree {want!r}"
            )
        columns = {f: self.value(nodes[f]) for f in expected.names}
        for f, a in columns.items():  # (checked before the table of node_count rows exists)
            if not (
                isinstance(a, np.ndarray) and a.dtype == expected.fields[f][0] and a.shape == (n,)
            ):
                raise self._bad(
                    f"decision tree: node field {f!r} must be {n} values of dtype "
                    f"{expected.fields[f][0].str}, got {getattr(a, 'shape', a)!r} of "
                    f"{getattr(a, 'dtype', type(a).__name__)}"
                )
        table = np.zeros(n, dtype=expected)
        for f, a in columns.items():
            table[f] = a
        self._check_tree_nodes(table, n_features, max_depth)
        values = self.value(body["values"])
        shape = (n, n_outputs, int(n_classes.max()))
        if not (
            isinstance(values, np.ndarray) and values.dtype == np.float64 and values.shape == shape
        ):
            raise self._bad(
                f"decision tree: values must be float64 of shape {shape}, got "
                f"{getattr(values, 'shape', values)!r} of {getattr(values, 'dtype', '?')}"
            )
        tree = tree_cls(n_features, n_classes, n_outputs)
        try:
            state = {"max_depth": max_depth, "node_count": n, "nodes": table}
            tree.__setstate__(dict(state, values=np.ascontiguousarray(values)))
        except (ValueError, MemoryError) as exc:
            raise self._bad(f"decision tree: {exc}") from None
        return tree

    def _check_tree_nodes(self, table, n_features, max_depth):
        n = table.shape[0]
        left, right, feature = table["left_child"], table["right_child"], table["feature"]
        leaf = left == _TREE_LEAF
        if not np.array_equal(leaf, right == _TREE_LEAF):
            bad = np.flatnonzero(leaf != (right == _TREE_LEAF))[:5].tolist()
            raise self._bad(f"decision tree: nodes {bad} have one child only")
        inner = np.flatnonzero(~leaf)
        index = np.arange(n)
        for side, child in (("left", left), ("right", right)):
            wrong = inner[(child[inner] <= inner) | (child[inner] >= n)]
            if wrong.size:
                raise self._bad(
                    f"decision tree: the {side} child of node(s) {wrong[:5].tolist()} is "
                    f"{child[wrong[:5]].tolist()}, not a later node in [1, {n})"
                )
        children = np.sort(np.concatenate([left[inner], right[inner]]))
        if not np.array_equal(children, index[1:]):
            raise self._bad(
                "decision tree: the nodes do not form a tree (a node has no parent or two)"
            )
        wrong = inner[(feature[inner] < 0) | (feature[inner] >= n_features)]
        if wrong.size:
            raise self._bad(
                f"decision tree: node(s) {wrong[:5].tolist()} split on feature(s) "
                f"{feature[wrong[:5]].tolist()}, not in [0, {n_features})"
            )
        depth, level = 0, np.zeros(1, dtype=np.intp)  # children come after parents: no cycles
        while True:
            level = level[~leaf[level]]
            if level.size == 0:
                break
            level, depth = np.concatenate([left[level], right[level]]), depth + 1
        if depth != max_depth:
            raise self._bad(f"decision tree: max_depth is {max_depth}, its nodes are {depth} deep")

    def _check_compiled_state(self, est):
        """Consistency of the fitted state that compiled code reads without bounds checks."""
        state, name = vars(est), type(est).__name__
        tree_cls = _tree_class()
        for k, v in state.items():
            if tree_cls is None or type(v) is not tree_cls:
                continue
            # (required: without n_features_in_ predict would not check the columns of X,
            # and the compiled tree would read features past them)
            for own, mine in (("n_features", "n_features_in_"), ("n_outputs", "n_outputs_")):
                if getattr(v, own) != state.get(mine):
                    raise self._bad(
                        f"{name}.{k} has {own}={getattr(v, own)}, but {mine} is "
                        f"{state.get(mine, 'missing')!r}"
                    )
        if "_n_support" in state and "_dual_coef_" in state:
            self._check_libsvm_state(est)

    def _check_libsvm_state(self, est):
        state, name = vars(est), type(est).__name__
        arrays = ("_n_support", "support_", "support_vectors_", "_dual_coef_", "_intercept_")
        arrays += ("_probA", "_probB")
        if not all(isinstance(state.get(k), np.ndarray) for k in arrays):
            missing = [k for k in arrays if not isinstance(state.get(k), np.ndarray)]
            raise self._bad(f"{name}: libsvm state {missing} must be arrays")
        n_support, support = state["_n_support"], state["support_"]
        vectors, dual = state["support_vectors_"], state["_dual_coef_"]
        n_class = n_support.shape[0] if n_support.ndim == 1 else 0
        pairs, n_sv = n_class * (n_class - 1) // 2, support.shape[0] if support.ndim == 1 else -1
        problems = []
        if n_class < 2 or n_sv < 0:
            problems.append(f"_n_support {n_support.shape} / support_ {support.shape}")
        if state.get("_sparse") is not False:
            problems.append(f"_sparse={state.get('_sparse')!r} (files hold dense SVMs only)")
        if dual.shape != (n_class - 1, n_sv):
            problems.append(f"_dual_coef_ of shape {dual.shape}, not {(n_class - 1, n_sv)}")
        if state["_intercept_"].shape != (pairs,):
            problems.append(f"_intercept_ of shape {state['_intercept_'].shape}, not {(pairs,)}")
        if state["_probA"].shape != state["_probB"].shape or state["_probA"].shape not in (
            (0,),
            (pairs,),
        ):
            problems.append(
                f"_probA/_probB of shapes {state['_probA'].shape}/{state['_probB'].shape}"
            )
        if getattr(est, "kernel", None) == "precomputed":
            shape_fit = state.get("shape_fit_")
            n_fit = shape_fit[0] if isinstance(shape_fit, tuple) and shape_fit else None
            if not isinstance(n_fit, int) or (
                support.size and not (support.min() >= 0 and support.max() < n_fit)
            ):
                problems.append(f"support_ not indices of the {n_fit!r} training samples")
        elif vectors.shape != (n_sv, state.get("n_features_in_")):
            problems.append(
                f"support_vectors_ of shape {vectors.shape}, not {(n_sv, state.get('n_features_in_'))}"
            )
        if is_classifier(est) and not (n_support.min(initial=0) >= 0 and n_support.sum() == n_sv):
            problems.append(
                f"_n_support {n_support.tolist()} does not count the {n_sv} support vectors"
            )
        if problems:
            raise self._bad(f"{name} is inconsistent: " + "; ".join(problems))

    def build(self, tree):
        """:meth:`check` then build the estimator ``tree``; every failure a ModelFileError."""
        if not isinstance(tree, dict) or "__estimator__" not in tree:
            raise ModelFileError(f"{self.path!r}: the record holds no estimator", "invalid")
        self.check(tree)
        try:
            return self.estimator(tree)
        except ModelFileError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
            raise self._bad(f"the estimator record is malformed ({exc})") from None
        except MemoryError:
            raise self._bad("the estimator does not fit in memory") from None


# -------------------------------------------------------------------------------------------
# checksums
# -------------------------------------------------------------------------------------------


def canonical_json(obj):
    """The one JSON text of ``obj`` that checksums are taken of (sorted keys, no spaces).

    Examples
    --------
    >>> canonical_json({"b": 1, "a": [1.5, None]})
    '{"a":[1.5,null],"b":1}'
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def sha256_hex(data):
    """Hex SHA-256 of ``data`` (bytes).

    Examples
    --------
    >>> sha256_hex(b"")[:12]
    'e3b0c44298fc'
    """
    return hashlib.sha256(data).hexdigest()


def array_sha256(a):
    """Hex SHA-256 of an array's C-order bytes.

    Examples
    --------
    >>> array_sha256(np.zeros(2)) == sha256_hex(bytes(16))
    True
    """
    return sha256_hex(np.array(a, order="C").tobytes())


def array_table(arrays):
    """``{name: {"shape", "dtype", "sha256"}}`` of a dict of arrays, as records hold it.

    Examples
    --------
    >>> array_table({"a": np.zeros(2)})["a"]["shape"]
    [2]
    """
    return {
        name: {"shape": list(a.shape), "dtype": a.dtype.str, "sha256": array_sha256(a)}
        for name, a in arrays.items()
    }


def seal(record):
    """``record`` with ``"sha256"``: the checksum of the canonical JSON of everything else.

    Examples
    --------
    >>> seal_matches(seal({"a": 1}))
    True
    """
    body = {k: v for k, v in record.items() if k != "sha256"}
    return dict(body, sha256=sha256_hex(canonical_json(body).encode()))


def seal_matches(record):
    """Whether ``record["sha256"]`` is the checksum of the rest of ``record``.

    Examples
    --------
    >>> record = seal({"a": 1})
    >>> record["a"] = 2
    >>> seal_matches(record)
    False
    """
    if not isinstance(record, dict):
        return False
    body = {k: v for k, v in record.items() if k != "sha256"}
    try:
        digest = sha256_hex(canonical_json(body).encode())
    except (TypeError, ValueError):
        return False
    return digest == record.get("sha256")


def verify_array(path, name, a, meta):
    """Check one array read from a file against its entry in the record's array table.

    Raises ModelFileError (``"tampered"``) for a non-numeric dtype, a shape or dtype other than
    the record's, or bytes that do not match the SHA-256.

    Examples
    --------
    >>> a = np.arange(3)
    >>> verify_array("f", "a", a, array_table({"a": a})["a"])
    """
    dtype = np.dtype(a.dtype)
    if dtype.kind not in NUMERIC_KINDS:
        raise ModelFileError(
            f"{path!r}: array {name!r} has dtype {dtype.str}; files hold numeric arrays only",
            "tampered",
        )
    if not isinstance(meta, dict):
        raise ModelFileError(f"{path!r}: array {name!r} has no entry in the record", "tampered")
    if list(a.shape) != meta.get("shape") or dtype.str != meta.get("dtype"):
        raise ModelFileError(
            f"{path!r} has been tampered with: array {name!r} has shape {list(a.shape)} and "
            f"dtype {dtype.str}, its record says {meta.get('shape')} and {meta.get('dtype')}",
            "tampered",
        )
    if array_sha256(a) != meta.get("sha256"):
        # a deleted Zarr chunk reads back as the fill value, so this also catches lost chunks
        raise ModelFileError(
            f"{path!r} has been tampered with or damaged: the values of array {name!r} do "
            "not match its SHA-256 checksum",
            "tampered",
        )
