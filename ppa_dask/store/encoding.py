"""Estimator state as a JSON tree plus named numeric arrays, and the allow-list of classes.

Model files (:mod:`.model_files`) and ensemble member files (:mod:`.members`) hold an estimator
in the same form, written by :class:`Encoder` and read back by :class:`Decoder`:

* an estimator is ``{"__estimator__": name, "params": ..., "fitted": ...}``: its class name in
  the allow-list, ``get_params(deep=False)`` and every fitted attribute (public names ending in
  ``_``); every other attribute must be one its constructor sets, or the state is refused,
  since a file could not restore it;
* values are JSON scalars and lists inline, ``{"__array__": name}`` for a numeric array (held
  beside the tree), ``{"__str_array__": [...]}`` for strings, ``{"__tuple__"}``,
  ``{"__dict__"}``, ``{"__range__"}``, ``{"__float__"}`` for non-finite floats, and nested
  estimators (the members of an ensemble) in the same form.

The allow-list
--------------
A file names a class; the decoder builds it only if it is

1. registered by name with :func:`register_estimator` (the library's estimators register
   themselves, e.g. ``"PPA"``), or
2. a scikit-learn estimator, named ``"sklearn.<module>.<Class>"``, whose module is *already*
   in ``sys.modules`` and which is a subclass of ``sklearn.base.BaseEstimator`` defined there.

Nothing a file names is ever imported: an unknown name, or a scikit-learn module this process
has not imported, is refused with ``ModelFileError(reason="unknown-class")`` when the tree is
checked, before any class is built. The only code a file can make run is an allowed class's
``__init__`` with the file's parameters (JSON values, arrays and allowed estimators), followed
by setting its public fitted attributes.

:func:`canonical_json`, :func:`sha256_hex`, :func:`array_table` and :func:`verify_array` give
both file kinds the same checksums.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import sys

import numpy as np
from sklearn.base import BaseEstimator

__all__ = [
    "NUMERIC_KINDS",
    "ModelFileError",
    "ModelFileNotFound",
    "Encoder",
    "Decoder",
    "register_estimator",
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

# name in files -> class, filled by register_estimator (the library's classes at import)
_REGISTERED: dict[str, type] = {}


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


def _sklearn_class(name):
    """The scikit-learn estimator class ``name`` of an already imported module, or None."""
    module_name, _, attr = name.rpartition(".")
    if not module_name.startswith(_SKLEARN) and module_name != "sklearn":
        return None
    module = sys.modules.get(module_name)  # never imported here: only what is loaded already
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
    """The allowed class a file names, or None; never imports anything.

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
        f"the registered classes {sorted(_REGISTERED)} and scikit-learn estimator classes of "
        "modules already imported"
    )


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
        base = "".join(c if c.isalnum() or c in "_.-" else "_" for c in where).lstrip("_.")
        base = base or "array"
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
        raise TypeError(
            f"{where}: cannot save a value of type {type(value).__name__} (files hold "
            "arrays, numbers, strings, None, lists/tuples/dicts of those and allowed "
            "estimators)"
        )

    def array(self, a, where):
        if a.dtype.kind in NUMERIC_KINDS:
            name = self._array_name(where)
            self.arrays[name] = np.array(a, order="C")  # (ascontiguousarray makes 0-d 1-d)
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
        raw = est.get_params(deep=False)
        params = {}
        for key, val in raw.items():
            if isinstance(val, (np.random.RandomState, np.random.Generator)):
                raise TypeError(
                    f"{where or 'estimator'}: parameter {key!r} is a {type(val).__name__}, which "
                    "cannot be saved; set it to an int (or None) before saving"
                )
            params[key] = self.value(val, f"{where}.params.{key}")
        fitted_names = _fitted_names(est)
        # state outside the parameters and the fitted attributes would be lost on loading,
        # unless the constructor sets it again (checked on a fresh instance, never guessed)
        unsaved = set(vars(est)) - set(raw) - set(fitted_names)
        if unsaved:
            unsaved -= set(vars(type(est)(**raw)))
        if unsaved:
            raise TypeError(
                f"{where or 'estimator'}: {type(est).__name__} holds attribute(s) "
                f"{sorted(unsaved)} that are neither parameters nor public fitted attributes "
                "ending in '_'; a file could not restore them"
            )
        fitted = {
            k: self.value(getattr(est, k), f"{where}.{k}" if where else k) for k in fitted_names
        }
        return {"__estimator__": name, "params": params, "fitted": fitted}


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

    def check(self, node, where="model"):
        """Validate the whole tree (classes, attribute names, array references) up front, so
        that nothing is built from a file that fails anywhere."""
        if isinstance(node, list):
            for i, v in enumerate(node):
                self.check(v, f"{where}[{i}]")
        elif isinstance(node, dict):
            if "__estimator__" in node:
                name = node["__estimator__"]
                if estimator_class(name) is None:
                    raise ModelFileError(
                        f"{self.path!r}: {where} names the estimator class {name!r}, which is not "
                        f"in the allow-list ({_allow_list_text()}); nothing was imported or built",
                        "unknown-class",
                    )
                for part in ("params", "fitted"):
                    if not isinstance(node.get(part, {}), dict):
                        raise self._bad(f"{where}.{part} is not a JSON object")
                for k in node.get("params", {}):
                    if not (isinstance(k, str) and k.isidentifier() and not k.startswith("__")):
                        raise self._bad(f"{k!r} is not a parameter name")
                for k in node.get("fitted", {}):
                    if not (isinstance(k, str) and k.endswith("_") and not k.startswith("_")):
                        raise self._bad(f"{k!r} is not a fitted attribute name")
            if "__array__" in node:
                self.array(node)
            for k, v in node.items():
                self.check(v, f"{where}.{k}")

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
        try:
            est = cls(**params)
        except TypeError as exc:
            raise self._bad(f"the parameters do not fit {cls.__name__}: {exc}") from None
        for k, v in fitted.items():
            setattr(est, k, v)
        return est

    def build(self, tree):
        """:meth:`check` then build the estimator ``tree``; every failure a ModelFileError."""
        if not isinstance(tree, dict) or "__estimator__" not in tree:
            raise ModelFileError(f"{self.path!r}: the record holds no estimator", "invalid")
        self.check(tree)
        try:
            return self.estimator(tree)
        except ModelFileError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise self._bad(f"the estimator record is malformed ({exc})") from None


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
