"""A directory of fitted ensemble members, one ``.npz`` file each: arrays and JSON, never pickle.

Layout::

    store/
        manifest.json          what fit the members belong to (ensemble, parameters, data)
        member_00000.npz       member 0: its fitted arrays plus a JSON header
        member_00001.npz       ...

A member file is written to a temporary name and renamed, so a file that exists is complete;
a fit interrupted at any moment leaves a store from which the next fit picks up the members
already there and fits only the others.

Only estimators whose whole state is arrays and plain values can be written: the class must
come from ``sklearn`` or ``ppa_dask`` (a class is re-created by its import path, so the store
never names arbitrary code), its constructor parameters must be JSON values and every other
attribute a numeric/string array or a JSON scalar. That covers :class:`ppa_dask.PPA` and the
linear models (``LinearRegression``, ``Ridge``, ``Lasso``, ``LogisticRegression``, ...); trees,
forests and pipelines hold Python objects and are kept in memory only (:func:`storable` says
which).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import numbers
import os
import uuid

import numpy as np

__all__ = ["MemberStore", "storable", "estimator_state", "estimator_from_state", "fingerprint"]

_ALLOWED_MODULES = ("sklearn.", "ppa_dask.")
_HEADER = "__header__"


def _json_value(value):
    """``value`` as plain JSON (tuples become lists, numpy scalars Python ones), or raise."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _json_value(v) for k, v in value.items()}
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def estimator_state(estimator):
    """``(header, arrays)`` describing a fitted estimator, or None if it is not array-only."""
    cls = type(estimator)
    path = f"{cls.__module__}.{cls.__qualname__}"
    if not cls.__module__.startswith(_ALLOWED_MODULES) or "." in cls.__qualname__:
        return None
    try:
        params = _json_value(estimator.get_params(deep=False))
    except TypeError:
        return None
    scalars, arrays = {}, {}
    for name, value in vars(estimator).items():
        if name in params:
            continue
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biufcU":
                return None
            arrays[name] = value
            continue
        try:
            scalars[name] = _json_value(value)
        except TypeError:
            return None
    if _HEADER in arrays:  # pragma: no cover - no estimator has this attribute
        return None
    header = dict(cls=path, params=params, scalars=scalars)
    return header, arrays


def storable(estimator):
    """Whether a fitted estimator can be written to a :class:`MemberStore`."""
    return estimator_state(estimator) is not None


def estimator_from_state(header, arrays):
    """Re-create an estimator from :func:`estimator_state`'s output."""
    path = header["cls"]
    if not path.startswith(_ALLOWED_MODULES):
        raise ValueError(f"member store names class {path!r}, outside sklearn and ppa_dask")
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    estimator = cls(**header["params"])
    for key, value in header["scalars"].items():
        setattr(estimator, key, value)
    for key, value in arrays.items():
        setattr(estimator, key, value)
    return estimator


def fingerprint(*arrays):
    """A short digest of the data a fit saw (numpy: its bytes; Dask: its graph name)."""
    digest = hashlib.sha256()
    for a in arrays:
        if a is None:
            digest.update(b"none")
            continue
        name = getattr(a, "name", None)
        if name is not None and hasattr(a, "dask"):
            digest.update(f"dask:{name}:{a.shape}:{a.dtype}".encode())
            continue
        a = np.ascontiguousarray(a)
        digest.update(f"{a.shape}:{a.dtype}".encode())
        digest.update(a.data if a.dtype.kind != "O" else repr(a.tolist()).encode())
    return digest.hexdigest()[:32]


class MemberStore:
    """The members of one ensemble fit, in a directory (see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        Directory; created if missing.
    identity : dict
        JSON description of the fit (ensemble class, parameters, data fingerprint). A directory
        that already belongs to a different fit is refused rather than mixed.
    """

    def __init__(self, path, identity):
        self.path = os.fspath(path)
        self.identity = _json_value(identity)
        os.makedirs(self.path, exist_ok=True)
        manifest = os.path.join(self.path, "manifest.json")
        if os.path.exists(manifest):
            with open(manifest) as f:
                existing = json.load(f)
            if existing != self.identity:
                differ = sorted(
                    k
                    for k in set(existing) | set(self.identity)
                    if existing.get(k) != self.identity.get(k)
                )
                raise ValueError(
                    f"the member store {self.path!r} holds members of a different fit (it "
                    f"differs in {differ}); pass a new directory or empty this one."
                )
        else:
            self._write_text(manifest, json.dumps(self.identity, indent=1, sort_keys=True))

    def _member_path(self, index):
        return os.path.join(self.path, f"member_{int(index):05d}.npz")

    @staticmethod
    def _write_text(path, text):
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)

    def indices(self):
        """Indices of the members on disk."""
        found = []
        for name in os.listdir(self.path):
            if name.startswith("member_") and name.endswith(".npz"):
                try:
                    found.append(int(name[len("member_") : -len(".npz")]))
                except ValueError:
                    continue
        return sorted(found)

    def save(self, index, estimator, extra=None):
        """Write member ``index``; returns False (writing nothing) if it is not array-only."""
        state = estimator_state(estimator)
        if state is None:
            return False
        header, arrays = state
        header = dict(header, extra=_json_value(extra or {}))
        path = self._member_path(index)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp.npz"
        np.savez(tmp, **{_HEADER: np.array(json.dumps(header))}, **arrays)
        os.replace(tmp, path)
        return True

    def load(self, index):
        """``(estimator, extra)`` of member ``index``, or None if it is not on disk."""
        path = self._member_path(index)
        if not os.path.exists(path):
            return None
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data[_HEADER]))
            arrays = {k: data[k] for k in data.files if k != _HEADER}
        return estimator_from_state(header, arrays), header.get("extra", {})
