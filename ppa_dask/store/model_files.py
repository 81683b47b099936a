"""Zarr storage: model files, result arrays and input arrays. Arrays and JSON only, never pickle.

Model files
-----------
:func:`save_model` writes a fitted estimator as a Zarr v3 group: one plain numeric array per
fitted array, and one JSON record in the group's attributes (under ``"ppa_dask"``) holding

* ``format`` (``"ppa-dask-model"``), ``format_version`` and the ``library_version`` that wrote it;
* ``estimator``: the class name, ``get_params(deep=False)`` as JSON and every fitted attribute
  (public names ending in ``_``): scalars, strings and ``None`` inline, arrays as references to
  the group's arrays, lists / tuples / dicts of those recursively, and nested estimators (the
  members of an ensemble) in the same form;
* ``arrays``: shape, dtype and SHA-256 of the bytes of every array;
* ``sha256``: SHA-256 of the canonical JSON of everything above.

:func:`load_model` checks all of that before it builds anything: a missing path, a directory
that is not a model file, a file from a newer format version, attributes edited after writing,
an array missing, unreadable (truncated) or whose bytes differ from its checksum each raise a
:class:`ModelFileError` naming the problem (its ``reason`` is one of ``"missing"``,
``"not-a-model"``, ``"future-version"``, ``"tampered"``, ``"truncated"``, ``"unknown-class"``,
``"invalid"``). Loading never executes code from the file: classes are looked up by name in an
allow-list (:func:`register_estimator`), modules named in the file are never imported, and the
only code run is the allow-listed class's ``__init__`` with the checked parameters. The checksums
detect damage and edits; they are not a signature (whoever can write the file can also rewrite
its checksums), but a forged file can only hold wrong numbers, never run code.

Files are written to a hidden temporary sibling (``.<name>.tmp-<random>``) and renamed into place
once complete, so an interrupted save never leaves a file at the target path.

Results
-------
:func:`write_array` writes a numpy or Dask array to a Zarr v3 array (Zarr chunks = the Dask
chunks, made regular when needed) with one task per chunk on the current Dask scheduler (the
distributed Client if there is one), so the array is never gathered. Two guards make an
interrupted write never look complete:

1. a completion marker: the array is created with ``attrs["ppa_dask"]["complete"] = False`` and
   the flag is set to ``True`` only after every chunk is stored; :func:`open_array` and
   :func:`open_input` refuse an array whose flag is ``False``;
2. on a local file system, the array is written to a hidden temporary sibling and renamed into
   place after the marker is set, so the target path only ever holds a complete array. Object
   stores (fsspec URLs such as ``s3://``) have no rename: there the marker alone guards.

:func:`write_dataset` / :func:`open_dataset` do the same for xarray objects.

Inputs
------
:func:`open_input` opens any Zarr array, or a variable of a Zarr group, by local path or fsspec
URL, as a Dask array whose chunks are the store's chunks; :meth:`ppa_dask.PPA.fit` also accepts a
``zarr.Array`` directly.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import shutil
import uuid

import numpy as np

from ppa_dask.utils.arrays import is_dask
from ppa_dask.utils.version import VERSION

__all__ = [
    "FORMAT_VERSION",
    "ModelFileError",
    "ModelFileNotFound",
    "register_estimator",
    "save_model",
    "load_model",
    "model_info",
    "write_array",
    "open_array",
    "write_dataset",
    "open_dataset",
    "open_input",
]

#: Version of the model-file layout written by :func:`save_model` (readers accept <= this).
FORMAT_VERSION = 1
#: Version of the result-array marker written by :func:`write_array`.
RESULT_FORMAT_VERSION = 1
_MODEL_FORMAT = "ppa-dask-model"
_RESULT_FORMAT = "ppa-dask-result"
_KEY = "ppa_dask"  # attribute key of our JSON records

# The allow-list: class name in the file -> (module, attribute) of a class of this library.
# Only these modules are ever imported by load_model; the file cannot name another.
_ESTIMATORS: dict[str, tuple[str, str]] = {"PPA": ("ppa_dask.ppa", "PPA")}
_REGISTERED: dict[str, type] = {}


class ModelFileError(ValueError):
    """A model file that cannot be loaded; ``reason`` says why (see the module docstring)."""

    def __init__(self, message, reason):
        super().__init__(message)
        self.reason = reason


class ModelFileNotFound(ModelFileError, FileNotFoundError):
    """No model file at the path."""

    def __init__(self, message):
        super().__init__(message, "missing")


def _library_version():
    return VERSION


# -------------------------------------------------------------------------------------------
# paths and atomic writes
# -------------------------------------------------------------------------------------------


def _is_remote(path):
    """True for fsspec URLs other than local files."""
    path = os.fspath(path)
    if "://" not in path:
        return False
    return path.split("://", 1)[0] not in ("file", "local")


def _local_path(path):
    path = os.fspath(path)
    if path.startswith(("file://", "local://")):
        path = path.split("://", 1)[1]
    return os.path.abspath(path)


def _temp_sibling(path, tag="tmp"):
    parent, base = os.path.split(path)
    if not base:
        raise ValueError(f"path {path!r} has no final component")
    return os.path.join(parent, f".{base}.{tag}-{uuid.uuid4().hex[:12]}")


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def _zarr_node_type(path):
    """'array' / 'group' for a local Zarr v3 node, None otherwise."""
    meta = os.path.join(path, "zarr.json")
    try:
        with open(meta) as f:
            return json.load(f).get("node_type")
    except (OSError, ValueError):
        return None


def _check_target(path, overwrite, replaceable, what):
    """Refuse an existing target unless ``overwrite`` and ``replaceable(path)``."""
    if not os.path.lexists(path):
        return
    if not overwrite:
        raise FileExistsError(f"{path!r} already exists; pass overwrite=True to replace it")
    if not replaceable(path):
        raise FileExistsError(
            f"{path!r} exists and is not a {what}; refusing to replace it even with overwrite=True"
        )


def _move_into_place(tmp, path, overwrite, replaceable, what):
    """Rename the finished ``tmp`` to ``path`` (swapping out an old one when allowed)."""
    if os.path.lexists(path):
        _check_target(path, overwrite, replaceable, what)  # it may have appeared meanwhile
        old = _temp_sibling(path, "old")
        os.rename(path, old)
        os.rename(tmp, path)
        _remove(old)
    else:
        os.rename(tmp, path)


# -------------------------------------------------------------------------------------------
# estimator <-> JSON tree + arrays
# -------------------------------------------------------------------------------------------


def register_estimator(cls, name=None):
    """Allow ``load_model`` to build instances of ``cls`` (and ``save_model`` to write them).

    Every estimator of the library registers itself; call this for your own estimator classes
    (subclasses of scikit-learn's ``BaseEstimator`` whose fitted state is the public attributes
    ending in ``_``). Only registered classes are ever built from a file.

    Parameters
    ----------
    cls : type
    name : str, optional
        Name written in files (default ``cls.__name__``); must be unique.

    Returns
    -------
    cls : type
        So that it can be used as a class decorator.
    """
    name = cls.__name__ if name is None else str(name)
    known = _REGISTERED.get(name)
    module = _ESTIMATORS.get(name)
    if known is not None and known is not cls:
        raise ValueError(f"estimator name {name!r} is already registered for {known!r}")
    if known is None and module is not None and module != (cls.__module__, cls.__qualname__):
        raise ValueError(f"estimator name {name!r} is reserved for {module[0]}.{module[1]}")
    _REGISTERED[name] = cls
    return cls


def _estimator_class(name):
    """Allow-listed class for ``name``; never imports anything the file names."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _ESTIMATORS:
        import importlib

        module, attr = _ESTIMATORS[name]
        cls = getattr(importlib.import_module(module), attr)
        _REGISTERED[name] = cls
        return cls
    return None


def _class_name(est):
    cls = type(est)
    for name in set(_ESTIMATORS) | set(_REGISTERED):
        if _estimator_class(name) is cls:
            return name
    return None


def _is_estimator(value):
    return hasattr(value, "get_params") and not isinstance(value, type)


def _fitted_names(est):
    return sorted(k for k in vars(est) if k.endswith("_") and not k.startswith("_"))


_NUMERIC_KINDS = "biufc"


class _Encoder:
    """Turns an estimator into a JSON tree plus a dict of named numpy arrays."""

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
        if isinstance(value, np.generic) and value.dtype.kind in _NUMERIC_KINDS + "Mm":
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
            f"{where}: cannot save a value of type {type(value).__name__} (model files hold "
            "arrays, numbers, strings, None, lists/tuples/dicts of those and registered "
            "estimators)"
        )

    def array(self, a, where):
        if a.dtype.kind in _NUMERIC_KINDS:
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
        name = _class_name(est)
        if name is None:
            raise TypeError(
                f"{where}: {type(est).__module__}.{type(est).__qualname__} is not a registered "
                "estimator class; call ppa_dask.store.register_estimator on it first"
            )
        params = {}
        for key, val in est.get_params(deep=False).items():
            if isinstance(val, (np.random.RandomState, np.random.Generator)):
                raise TypeError(
                    f"{where}: parameter {key!r} is a {type(val).__name__}, which cannot be "
                    "saved; set it to an int (or None) before saving"
                )
            params[key] = self.value(val, f"{where}.params.{key}")
        fitted = {
            k: self.value(getattr(est, k), f"{where}.{k}" if where else k)
            for k in _fitted_names(est)
        }
        return {"__estimator__": name, "params": params, "fitted": fitted}


def _canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _array_digest(a):
    return _sha256(np.array(a, order="C").tobytes())


def save_model(model, path, overwrite=False):
    """Save a fitted estimator to a Zarr v3 group of plain arrays plus JSON attributes.

    Parameters
    ----------
    model : estimator
        A fitted, registered estimator (``PPA`` or any class passed to
        :func:`register_estimator`).
    path : str or os.PathLike
        Local directory to create (by convention ending in ``.zarr``).
    overwrite : bool, default=False
        Replace an existing model file at ``path``. Anything else at ``path`` is never replaced.

    Returns
    -------
    path : str
        Absolute path of the file.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from ppa_dask import PPA
    >>> from ppa_dask.store import save_model, load_model
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> model = PPA(degree=2, random_state=0).fit(X)
    >>> p = save_model(model, os.path.join(tempfile.mkdtemp(), "model.zarr"))
    >>> bool(np.array_equal(load_model(p).transform(X), model.transform(X)))
    True
    """
    import zarr
    from sklearn.utils.validation import check_is_fitted

    if _is_remote(path):
        raise ValueError(f"model files are local directories; got the URL {path!r}")
    check_is_fitted(model)
    encoder = _Encoder()
    tree = encoder.estimator(model, "")
    record = {
        "format": _MODEL_FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": _library_version(),
        "estimator": tree,
        "arrays": {
            name: {"shape": list(a.shape), "dtype": a.dtype.str, "sha256": _array_digest(a)}
            for name, a in encoder.arrays.items()
        },
    }
    record["sha256"] = _sha256(_canonical(record).encode())

    path = _local_path(path)
    _check_target(path, overwrite, _is_model_dir, "ppa-dask model file")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = _temp_sibling(path)
    try:
        group = zarr.open_group(tmp, mode="w-", zarr_format=3)
        for name, a in encoder.arrays.items():
            z = group.create_array(
                name,
                shape=a.shape,
                dtype=a.dtype,
                chunks=tuple(max(s, 1) for s in a.shape),
            )
            z[...] = a
        # the record goes last: a group without it is not a model file
        group.attrs[_KEY] = record
        _move_into_place(tmp, path, overwrite, _is_model_dir, "ppa-dask model file")
    except BaseException:
        _remove(tmp)
        raise
    return path


def _is_model_dir(path):
    if _zarr_node_type(path) != "group":
        return False
    with open(os.path.join(path, "zarr.json")) as f:
        attrs = json.load(f).get("attributes", {})
    return isinstance(attrs.get(_KEY), dict) and attrs[_KEY].get("format") == _MODEL_FORMAT


def _read_record(path):
    """Open a model file and return (group, verified record); raises ModelFileError."""
    import zarr

    path = _local_path(path)
    if not os.path.exists(path):
        raise ModelFileNotFound(f"no model file at {path!r}")
    if _zarr_node_type(path) is None:
        raise ModelFileError(
            f"{path!r} is not a ppa-dask model file (no readable Zarr metadata zarr.json)",
            "not-a-model",
        )
    try:
        group = zarr.open_group(path, mode="r")
    except Exception as exc:
        raise ModelFileError(
            f"{path!r} is not a ppa-dask model file (not a Zarr group: {exc})", "not-a-model"
        ) from None
    record = group.attrs.get(_KEY)
    if not isinstance(record, dict) or record.get("format") != _MODEL_FORMAT:
        raise ModelFileError(
            f"{path!r} is a Zarr group but not a ppa-dask model file (no "
            f"attrs[{_KEY!r}]['format'] == {_MODEL_FORMAT!r})",
            "not-a-model",
        )
    version = record.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFileError(
            f"{path!r}: invalid format_version {version!r} (expected an int >= 1)", "tampered"
        )
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"{path!r} was written in model format version {version} (by ppa-dask "
            f"{record.get('library_version', '?')}); this ppa-dask ({_library_version()}) reads "
            f"versions up to {FORMAT_VERSION}. Upgrade ppa-dask to load it.",
            "future-version",
        )
    body = {k: v for k, v in record.items() if k != "sha256"}
    try:
        digest = _sha256(_canonical(body).encode())
    except (TypeError, ValueError):
        digest = None
    if digest is None or digest != record.get("sha256"):
        raise ModelFileError(
            f"{path!r} has been tampered with or damaged: its attributes do not match their "
            "SHA-256 checksum",
            "tampered",
        )
    return path, group, record


def _read_arrays(path, group, record):
    """Read and verify every array listed in the record."""
    listed = record.get("arrays")
    if not isinstance(listed, dict):
        raise ModelFileError(f"{path!r}: the record has no array table", "tampered")
    present = set(group.array_keys())
    extra = sorted(present - set(listed))
    if extra:
        raise ModelFileError(
            f"{path!r} has been tampered with: array(s) {extra} are not in its record", "tampered"
        )
    arrays = {}
    for name, meta in listed.items():
        if name not in present:
            raise ModelFileError(
                f"{path!r} is truncated: array {name!r} listed in its record is missing",
                "truncated",
            )
        try:
            z = group[name]
            shape, dtype = tuple(z.shape), np.dtype(z.dtype).str
        except Exception as exc:
            raise ModelFileError(
                f"{path!r} is truncated or damaged: array {name!r} cannot be opened ({exc})",
                "truncated",
            ) from None
        if np.dtype(dtype).kind not in _NUMERIC_KINDS:
            raise ModelFileError(
                f"{path!r}: array {name!r} has dtype {dtype}; model files hold numeric arrays only",
                "tampered",
            )
        if list(shape) != meta.get("shape") or dtype != meta.get("dtype"):
            raise ModelFileError(
                f"{path!r} has been tampered with: array {name!r} has shape {list(shape)} and "
                f"dtype {dtype}, its record says {meta.get('shape')} and {meta.get('dtype')}",
                "tampered",
            )
        try:
            a = np.asarray(z[...])
        except Exception as exc:
            raise ModelFileError(
                f"{path!r} is truncated or damaged: array {name!r} cannot be read ({exc})",
                "truncated",
            ) from None
        if _array_digest(a) != meta.get("sha256"):
            # a deleted chunk reads back as the fill value, so this also catches lost chunks
            raise ModelFileError(
                f"{path!r} has been tampered with or damaged: the values of array {name!r} do "
                "not match its SHA-256 checksum",
                "tampered",
            )
        arrays[name] = a
    return arrays


class _Decoder:
    """JSON tree + arrays -> Python values. Checks class names before building anything."""

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
                if not isinstance(name, str) or _estimator_class(name) is None:
                    allowed = sorted(set(_ESTIMATORS) | set(_REGISTERED))
                    raise ModelFileError(
                        f"{self.path!r}: {where} names the estimator class {name!r}, which is not "
                        f"in the allow-list {allowed}; nothing was built",
                        "unknown-class",
                    )
                for k in node.get("fitted", {}):
                    if not (isinstance(k, str) and k.endswith("_") and not k.startswith("_")):
                        raise self._bad(f"{k!r} is not a fitted attribute name")
            if "__array__" in node:
                self.array(node)
            for k, v in node.items():
                self.check(v, f"{where}.{k}")

    def array(self, node):
        name = node["__array__"]
        if name not in self.arrays:
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
        cls = _estimator_class(node["__estimator__"])
        params = {k: self.value(v) for k, v in node.get("params", {}).items()}
        fitted = {k: self.value(v) for k, v in node.get("fitted", {}).items()}
        try:
            est = cls(**params)
        except TypeError as exc:
            raise self._bad(f"the parameters do not fit {cls.__name__}: {exc}") from None
        for k, v in fitted.items():
            setattr(est, k, v)
        return est


def load_model(path):
    """Load an estimator saved by :func:`save_model`, checking the file first.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    model : estimator
        A fitted instance of the allow-listed class named in the file.

    Raises
    ------
    ModelFileNotFound
        Nothing at ``path``.
    ModelFileError
        Not a model file, a newer format version, tampered, truncated or naming a class outside
        the allow-list (``reason`` says which). Nothing is built before all checks pass.
    """
    path, group, record = _read_record(path)
    arrays = _read_arrays(path, group, record)
    decoder = _Decoder(path, arrays)
    tree = record.get("estimator")
    if not isinstance(tree, dict) or "__estimator__" not in tree:
        raise ModelFileError(f"{path!r}: the record holds no estimator", "invalid")
    decoder.check(tree)
    try:
        return decoder.estimator(tree)
    except ModelFileError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ModelFileError(
            f"{path!r}: the model record is malformed ({exc})", "invalid"
        ) from None


def model_info(path):
    """Summary of a model file (checked like :func:`load_model`, but nothing is built).

    Returns
    -------
    info : dict
        ``estimator`` (class name), ``params``, ``format_version``, ``library_version``,
        ``fitted`` (attribute name -> ``{"shape", "dtype"}`` for arrays, the value otherwise,
        for the top-level estimator) and ``arrays`` (name -> shape, dtype, sha256).
    """
    path, group, record = _read_record(path)
    arrays = _read_arrays(path, group, record)
    decoder = _Decoder(path, arrays)
    tree = record["estimator"]
    decoder.check(tree)

    def describe(node):
        if isinstance(node, dict) and "__array__" in node:
            a = arrays[node["__array__"]]
            return {"shape": list(a.shape), "dtype": node.get("view", a.dtype.str)}
        if isinstance(node, dict) and "__estimator__" in node:
            return {"estimator": node["__estimator__"]}
        value = decoder.value(node)
        scalar = (int, float, str, bool, type(None))
        if isinstance(value, scalar):
            return value
        if isinstance(value, (list, tuple)) and all(isinstance(v, scalar) for v in value):
            return list(value)  # JSON as it is, e.g. candidate degrees
        return repr(value)

    return {
        "path": path,
        "estimator": tree["__estimator__"],
        "format_version": record["format_version"],
        "library_version": record.get("library_version"),
        "params": {k: describe(v) for k, v in tree.get("params", {}).items()},
        "fitted": {k: describe(v) for k, v in tree.get("fitted", {}).items()},
        "arrays": record["arrays"],
    }


# -------------------------------------------------------------------------------------------
# results
# -------------------------------------------------------------------------------------------


def _regular_chunks(x):
    """Dask chunks that Zarr can hold: per dimension equal chunks except a smaller last one."""
    target = []
    regular = True
    for c in x.chunks:
        if any(isinstance(s, float) and math.isnan(s) for s in c):
            raise ValueError(
                "the array has unknown chunk sizes; call compute_chunk_sizes() before writing"
            )
        size = max(c) if c else 1
        if len(c) > 1 and (any(s != c[0] for s in c[:-1]) or c[-1] > c[0]):
            regular = False
        target.append(max(int(size), 1))
    return tuple(target), regular


def _default_numpy_chunks(shape, itemsize):
    """Row chunks of about 8 MiB, every other dimension whole."""
    if not shape:
        return ()
    per_row = itemsize * int(np.prod(shape[1:], dtype=np.int64)) or itemsize
    rows = max(1, min(shape[0], (8 << 20) // per_row))
    return (max(rows, 1),) + tuple(max(s, 1) for s in shape[1:])


def _check_attrs(attrs):
    attrs = dict(attrs or {})
    if _KEY in attrs:
        raise ValueError(f"attrs must not use the reserved key {_KEY!r}")
    try:
        json.dumps(attrs, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"attrs must be JSON-serialisable: {exc}") from None
    return attrs


def _result_marker(complete, extra=None):
    marker = {
        "format": _RESULT_FORMAT,
        "format_version": RESULT_FORMAT_VERSION,
        "library_version": _library_version(),
        "complete": bool(complete),
    }
    marker.update(extra or {})
    return marker


def _is_result_array(path):
    if _zarr_node_type(path) != "array":
        return False
    with open(os.path.join(path, "zarr.json")) as f:
        attrs = json.load(f).get("attributes", {})
    return isinstance(attrs.get(_KEY), dict) and attrs[_KEY].get("format") == _RESULT_FORMAT


def _store_into(x, z):
    """Fill the Zarr array ``z`` from ``x`` (numpy in-process, Dask one task per chunk)."""

    if is_dask(x):
        import dask.array as da

        # Dask chunks coincide with Zarr chunks, so tasks never share a chunk: no lock
        da.store(x, z, lock=False, compute=True)
    else:
        z[...] = x


def write_array(
    x, path, name=None, attrs=None, overwrite=False, chunks=None, storage_options=None
):
    """Write a numpy or Dask array to Zarr without gathering it; never leaves it half-looking.

    Parameters
    ----------
    x : numpy.ndarray or dask.array.Array
        A Dask array is stored chunk by chunk on the current scheduler (the distributed Client
        if any; its workers must see ``path``). Zarr chunks are its chunks (rechunked to equal
        sizes if they are irregular); numpy arrays get row chunks of about 8 MiB.
    path : str or os.PathLike
        Local path or fsspec URL of the array, or of a group when ``name`` is given.
    name : str, optional
        Write the array as ``name`` inside the group at ``path`` (created if missing).
    attrs : dict, optional
        JSON attributes stored with the array (the key ``"ppa_dask"`` is reserved).
    overwrite : bool, default=False
        Replace an existing result array. Other things at the target are never replaced.
    chunks : tuple of int, optional
        Zarr chunk shape; the Dask array is rechunked to it (default: its own chunks).
    storage_options : dict, optional
        Passed to fsspec for URLs.

    Returns
    -------
    target : str
        Path or URL of the written array.

    Notes
    -----
    Local paths: the array is written to a hidden temporary sibling, its completion marker
    (``attrs["ppa_dask"]["complete"]``) set once every chunk is stored, then renamed into place;
    on an exception the temporary is removed. URLs (object stores cannot rename): the array is
    written in place, marked incomplete until every chunk is stored. :func:`open_array` refuses
    an incomplete array either way. (After a failure the temporary is removed; a chunk task that
    was still running may leave a piece of it behind, hidden and marked incomplete.)

    Examples
    --------
    >>> import os, tempfile, numpy as np, dask.array as da
    >>> from ppa_dask.store import write_array, open_array
    >>> x = da.ones((10, 2), chunks=(4, 2))
    >>> p = write_array(x, os.path.join(tempfile.mkdtemp(), "r.zarr"))
    >>> open_array(p).chunks
    ((4, 4, 2), (2,))
    """
    import zarr

    attrs = _check_attrs(attrs)
    if not is_dask(x):
        x = np.asarray(x)
        if x.dtype.kind not in _NUMERIC_KINDS:
            raise TypeError(f"x must hold numbers, got dtype {x.dtype}")
        zchunks = (
            tuple(chunks)
            if chunks is not None
            else _default_numpy_chunks(x.shape, x.dtype.itemsize)
        )
    else:
        if chunks is not None:
            x = x.rechunk(tuple(chunks))
        zchunks, regular = _regular_chunks(x)
        if not regular:
            x = x.rechunk(zchunks)
    if name is not None and (
        not isinstance(name, str) or not name or "/" in name or name.startswith("__")
    ):
        raise ValueError(f"name must be a non-empty str without '/', got {name!r}")
    marker_extra = {"shape": list(x.shape), "dtype": np.dtype(x.dtype).str}

    def create(store, overwrite_store):
        return zarr.create_array(
            store=store,
            shape=x.shape,
            chunks=zchunks,
            dtype=x.dtype,
            zarr_format=3,
            attributes={**attrs, _KEY: _result_marker(False, marker_extra)},
            overwrite=overwrite_store,
            storage_options=storage_options,
        )

    def finish(z):
        z.attrs[_KEY] = _result_marker(True, marker_extra)

    if _is_remote(path):
        target = os.fspath(path).rstrip("/") + ("/" + name if name else "")
        if name is not None:
            zarr.open_group(os.fspath(path), mode="a", storage_options=storage_options)
        try:
            existing = zarr.open(target, mode="r", storage_options=storage_options)
        except Exception:
            existing = None
        if existing is not None:
            if not overwrite:
                raise FileExistsError(f"{target!r} already exists; pass overwrite=True")
            record = existing.attrs.get(_KEY)
            if not (
                isinstance(existing, zarr.Array)
                and isinstance(record, dict)
                and record.get("format") == _RESULT_FORMAT
            ):
                raise FileExistsError(
                    f"{target!r} exists and is not a ppa-dask result array; refusing to replace it"
                )
        z = create(target, True)
        _store_into(x, z)
        finish(z)
        return target

    path = _local_path(path)
    if name is None:
        target = path
    else:
        kind = _zarr_node_type(path)
        if os.path.lexists(path) and kind != "group":
            raise FileExistsError(f"{path!r} exists and is not a Zarr group")
        if kind is None:
            zarr.open_group(path, mode="w-", zarr_format=3)
        target = os.path.join(path, name)
    _check_target(target, overwrite, _is_result_array, "ppa-dask result array")
    # the temporary sits beside the target's group, not inside it, so it is never a member
    tmp = _temp_sibling(path if name is None else path + "." + name)
    try:
        z = create(tmp, False)
        _store_into(x, z)
        finish(z)
        _move_into_place(tmp, target, overwrite, _is_result_array, "ppa-dask result array")
    except BaseException:
        _remove(tmp)
        raise
    return target


def _open_node(path, storage_options=None):
    import zarr

    if not _is_remote(path):
        path = _local_path(path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no Zarr store at {path!r}")
    try:
        return zarr.open(path, mode="r", storage_options=storage_options)
    except Exception as exc:
        raise ValueError(f"cannot open {path!r} as Zarr: {exc}") from None


def _check_complete(node, where):
    record = node.attrs.get(_KEY)
    if isinstance(record, dict) and record.get("format") in (_RESULT_FORMAT, "ppa-dask-dataset"):
        if record.get("format_version", 1) > RESULT_FORMAT_VERSION:
            raise ValueError(
                f"{where!r} was written in result format version {record.get('format_version')};"
                f" this ppa-dask reads up to {RESULT_FORMAT_VERSION}"
            )
        if record.get("complete") is not True:
            raise ValueError(
                f"{where!r} is an incomplete write (its completion marker is not set): the "
                "writing job was interrupted; write it again"
            )
        return True
    return False


def open_array(path, storage_options=None):
    """Open a result written by :func:`write_array` as a Dask array with the store's chunks.

    Raises ValueError for an incomplete write (interrupted job) or for an array that was not
    written by :func:`write_array` (use :func:`open_input` for arbitrary Zarr arrays).
    """
    import dask.array as da
    import zarr

    node = _open_node(path, storage_options)
    if not isinstance(node, zarr.Array):
        raise ValueError(f"{path!r} is a Zarr group, not an array")
    if not _check_complete(node, path):
        raise ValueError(
            f"{path!r} is not a ppa-dask result (no completion marker); open arbitrary Zarr "
            "arrays with open_input"
        )
    return da.from_zarr(node, chunks=node.chunks)


def open_input(path_or_url, variable=None, storage_options=None):
    """A Zarr array, or a variable of a Zarr group, as a Dask array aligned with its chunks.

    Parameters
    ----------
    path_or_url : str or os.PathLike
        Local path or fsspec URL (``file://``, ``s3://``, ...) of a Zarr array or group.
    variable : str, optional
        Path of the array inside the group (``"x"`` or ``"sub/x"``); may be omitted when the
        group holds exactly one array.
    storage_options : dict, optional
        Passed to fsspec for URLs (credentials, endpoint...).

    Returns
    -------
    X : dask.array.Array
        One Dask chunk per Zarr chunk.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from ppa_dask import PPA
    >>> from ppa_dask.datasets import write_zarr
    >>> from ppa_dask.store import open_input
    >>> p = write_zarr(os.path.join(tempfile.mkdtemp(), "d.zarr"), 3000, chunk_rows=1000,
    ...                random_state=0)
    >>> X = open_input(p)
    >>> X.chunks[0]
    (1000, 1000, 1000)
    >>> model = PPA(degree=2, random_state=0).fit(X)
    """
    import dask.array as da
    import zarr

    node = _open_node(path_or_url, storage_options)
    where = os.fspath(path_or_url)
    if isinstance(node, zarr.Group):
        if variable is None:
            names = sorted(node.array_keys())
            if len(names) != 1:
                raise ValueError(
                    f"{where!r} is a Zarr group with arrays {names}; pass variable= to choose one"
                )
            variable = names[0]
        try:
            node = node[variable]
        except KeyError:
            raise ValueError(
                f"{where!r} has no variable {variable!r}; arrays: {sorted(node.array_keys())}"
            ) from None
        if not isinstance(node, zarr.Array):
            raise ValueError(f"{where!r}: {variable!r} is a group, not an array")
    elif variable is not None:
        raise ValueError(f"{where!r} is a Zarr array; variable={variable!r} applies to groups")
    _check_complete(node, where)
    return da.from_zarr(node, chunks=node.chunks)


def as_dask_if_zarr(X):
    """A ``zarr.Array`` as a Dask array aligned with its chunks; anything else unchanged."""
    import sys

    zarr = sys.modules.get("zarr")
    if zarr is not None and isinstance(X, zarr.Array):
        import dask.array as da

        _check_complete(X, str(X.store_path))
        return da.from_zarr(X, chunks=X.chunks)
    return X


# -------------------------------------------------------------------------------------------
# xarray objects
# -------------------------------------------------------------------------------------------


def write_dataset(obj, path, overwrite=False):
    """Write an xarray Dataset (or named DataArray) to a local Zarr v3 group, atomically.

    Dask-backed variables are computed chunk by chunk on the current scheduler, never gathered.
    Like :func:`write_array`: written to a hidden temporary sibling, marked complete in the
    group attributes (``attrs["ppa_dask"]["complete"]``) and renamed into place.

    Returns
    -------
    path : str
    """
    import xarray as xr

    if isinstance(obj, xr.DataArray):
        obj = obj.to_dataset(name=obj.name if obj.name is not None else "data")
    if not isinstance(obj, xr.Dataset):
        raise TypeError(f"write_dataset needs an xarray Dataset or DataArray, got {type(obj)}")
    if _is_remote(path):
        raise ValueError(f"write_dataset writes local paths; got the URL {path!r}")
    if _KEY in obj.attrs:
        raise ValueError(f"the Dataset's attrs must not use the reserved key {_KEY!r}")
    path = _local_path(path)
    _check_target(path, overwrite, _is_dataset_dir, "ppa-dask dataset")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = _temp_sibling(path)
    try:
        obj.to_zarr(tmp, mode="w-", zarr_format=3, consolidated=False)
        import zarr

        group = zarr.open_group(tmp, mode="r+")
        marker = _result_marker(True)
        marker["format"] = "ppa-dask-dataset"
        group.attrs[_KEY] = marker
        _move_into_place(tmp, path, overwrite, _is_dataset_dir, "ppa-dask dataset")
    except BaseException:
        _remove(tmp)
        raise
    return path


def _is_dataset_dir(path):
    if _zarr_node_type(path) != "group":
        return False
    with open(os.path.join(path, "zarr.json")) as f:
        attrs = json.load(f).get("attributes", {})
    return isinstance(attrs.get(_KEY), dict) and attrs[_KEY].get("format") == "ppa-dask-dataset"


def open_dataset(path, chunks=None):
    """Open a Dataset written by :func:`write_dataset` lazily (Dask chunks = store chunks).

    ``chunks`` is passed to ``xarray.open_zarr``; the default ``None`` uses the store's chunks.

    Raises ValueError if the write was interrupted or ``path`` was not written by
    :func:`write_dataset` (use ``xarray.open_zarr`` for other stores).
    """
    import xarray as xr
    import zarr

    node = _open_node(path)
    if not isinstance(node, zarr.Group) or not _check_complete(node, path):
        raise ValueError(f"{path!r} is not a Dataset written by ppa_dask.store.write_dataset")
    ds = xr.open_zarr(
        _local_path(path), consolidated=False, chunks={} if chunks is None else chunks
    )
    ds.attrs.pop(_KEY, None)
    return ds
