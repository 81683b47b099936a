"""A directory of fitted ensemble members, one ``.npz`` file each: arrays and JSON, never pickle.

Layout::

    store/
        manifest.json          what fit the members belong to (ensemble, parameters, data)
        member_00000.npz       member 0: its fitted arrays plus a small JSON record
        member_00001.npz       ...

A member file is a zip archive as ``numpy.savez`` writes it (``numpy.load(path,
allow_pickle=False)`` opens it): one ``<name>.npy`` entry per numeric array of the member's
state and one text entry ``record.json`` holding

* ``format`` (``"ppa-dask-member"``), ``format_version`` and ``library_version``;
* ``index``, the member's number, and ``check``: small values the caller gives to recognise its
  member (the ensembles give the feature list, the seeds and a digest of the sample indices:
  never the indices themselves, since members are functions of the ensemble's seed and the
  caller knows them);
* ``estimator``: the member as the JSON tree of :mod:`.encoding`, the one encoder of model files,
  with the same allow-list (registered classes such as ``PPA``, scikit-learn estimators of
  modules already imported or of the scikit-learn packages the library uses,
  :data:`~ppa_dask.store.encoding.LIBRARY_SKLEARN_PACKAGES`; nothing a file chooses is ever
  imported);
* ``arrays``: shape, dtype and SHA-256 of every array, and ``sha256`` of the whole record.

A member file is written to a hidden temporary sibling and renamed, so a file that exists is
complete; a fit interrupted at any moment leaves a store from which the next fit picks up the
members already there and fits only the others.

Files that cannot be used
-------------------------
:meth:`MemberStore.load` raises :class:`~ppa_dask.store.encoding.ModelFileError` for a member
file it cannot use, checked before anything is built: damaged or truncated (``"truncated"``,
``"tampered"``), naming a class outside the allow-list (``"unknown-class"``), written by a newer
ppa-dask (``"future-version"``), holding another member than the caller expects
(``"mismatch"``) or in the layout of earlier versions (``"old-format"``).
Reading is bounded before anything is unpacked: ``record.json`` by its ``ZipInfo.file_size``
(at most 16 MiB, parsed within 100 levels), each ``.npy`` entry by its header, whose shape and
dtype must be the record's and whose entry must be exactly the header plus those values; a
member store's ``manifest.json`` that cannot be read within the same bounds, or is not a JSON
object, raises :class:`MemberStoreError`. :meth:`MemberStore.load_usable`, which the ensembles
use, turns each of these into a
:class:`MemberFileWarning` naming the file and returns None, so that the member is fitted again
and its file rewritten: a member is a function of the ensemble's seed, so the refit is the same
member.

Member stores of earlier versions (a ``__header__`` entry naming a module path such as
``"sklearn.linear_model._base.LinearRegression"``, with ``params`` and ``scalars``) are *refitted
with a warning*, not read: their headers set any attribute named in the file, private ones
included, and kept tuples as lists, so they cannot be read through the allow-list faithfully,
and refitting costs only time.

Only estimators whose whole state the model-file encoder can hold are written (it refuses
anything else, and :func:`storable` says which): :class:`ppa_dask.PPA`, the linear models,
decision trees, SVMs and nearest neighbours, and pipelines of those; estimators holding code (a
function parameter) or state that is not plain data (forests' lists of trees, boosting, MLPs)
are kept in memory only.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import struct
import tokenize
import warnings
import zipfile
import zlib

import numpy as np

from ppa_dask.store.encoding import (
    Decoder,
    ModelFileError,
    array_table,
    encode_estimator,
    seal,
    seal_matches,
    verify_array,
)
from ppa_dask.utils.files import (
    MAX_JSON_BYTES,
    JSONFileError,
    file_kind,
    parse_json,
    read_json_file,
    remove_path,
    temp_sibling,
    write_text_atomic,
)
from ppa_dask.utils.version import VERSION

__all__ = [
    "MEMBER_FORMAT_VERSION",
    "MemberFileWarning",
    "MemberStore",
    "MemberStoreError",
    "storable",
    "fingerprint",
    "write_member_file",
    "read_member_file",
]

#: Version of the member-file layout (readers accept <= this).
MEMBER_FORMAT_VERSION = 1
_MEMBER_FORMAT = "ppa-dask-member"
_RECORD = "record.json"
_OLD_HEADER = "__header__.npy"  # the JSON header of member files before the shared encoder
# what reading a damaged zip archive or .npy entry raises
_READ_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    OSError,
    EOFError,
    ValueError,
    KeyError,
    NotImplementedError,  # an entry compressed by a method zipfile does not know
    RuntimeError,  # an encrypted entry
    OverflowError,
    struct.error,
    SyntaxError,  # a .npy header that is not a Python literal (numpy parses it)
    tokenize.TokenError,
)


class MemberFileWarning(UserWarning):
    """A member file that cannot be used: the member is fitted again and the file rewritten."""


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


def storable(estimator):
    """Whether a fitted estimator can be written to a :class:`MemberStore`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import FunctionTransformer
    >>> X, y = np.eye(3), np.arange(3.0)
    >>> with_code = make_pipeline(FunctionTransformer(np.tanh), LinearRegression())
    >>> storable(LinearRegression().fit(X, y)), storable(with_code.fit(X, y))
    (True, False)
    """
    try:
        encode_estimator(estimator)
    except TypeError:
        return False
    return True


def fingerprint(*arrays):
    """A short digest of the data a fit saw (numpy: its bytes; Dask: its graph name).

    Examples
    --------
    >>> import numpy as np
    >>> fingerprint(np.arange(3)) == fingerprint(np.arange(3)) != fingerprint(np.arange(4))
    True
    """
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


# -------------------------------------------------------------------------------------------
# one member file
# -------------------------------------------------------------------------------------------


def write_member_file(path, estimator, index, check=None):
    """Write a fitted estimator as a member file, atomically (temporary sibling + rename).

    Parameters
    ----------
    path : str or os.PathLike
    estimator : estimator
        Fitted; its state must be encodable (:func:`storable`), else TypeError.
    index : int
        The member's number, kept in the record.
    check : dict, optional
        Small JSON values that identify the member, compared by :func:`read_member_file`.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> p = os.path.join(tempfile.mkdtemp(), "member_00000.npz")
    >>> write_member_file(p, Ridge().fit(np.eye(3), [1.0, 2.0, 3.0]), 0, {"features": [0, 1]})
    >>> read_member_file(p, 0, {"features": [0, 1]}).coef_.shape
    (3,)
    """
    tree, arrays = encode_estimator(estimator)
    record = seal(
        {
            "format": _MEMBER_FORMAT,
            "format_version": MEMBER_FORMAT_VERSION,
            "library_version": VERSION,
            "index": int(index),
            "check": _json_value(check or {}),
            "estimator": tree,
            "arrays": array_table(arrays),
        }
    )
    path = os.fspath(path)
    tmp = temp_sibling(path)
    try:
        # the layout of numpy.savez: uncompressed zip64 entries written by numpy's .npy writer
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive:
            archive.writestr(_RECORD, json.dumps(record, allow_nan=False))
            for name, a in arrays.items():
                with archive.open(f"{name}.npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, a, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        remove_path(tmp)
        raise


def _read_record(path, archive):
    names = set(archive.namelist())
    if _RECORD not in names:
        if _OLD_HEADER in names:
            raise ModelFileError(
                f"{path!r} is a member file of an earlier ppa-dask (a __header__ naming a module "
                "path); it is not read",
                "old-format",
            )
        raise ModelFileError(
            f"{path!r} is not a ppa-dask member file (no {_RECORD})", "not-a-model"
        )
    size = archive.getinfo(_RECORD).file_size
    if size > MAX_JSON_BYTES:  # (before anything is decompressed)
        raise ModelFileError(
            f"{path!r} has been tampered with: its {_RECORD} unpacks to {size} bytes, more "
            f"than the {MAX_JSON_BYTES} a record may hold",
            "tampered",
        )
    try:
        # zipfile stops at the entry's recorded size, so a lying size cannot read more
        with archive.open(_RECORD) as f:
            record = parse_json(f.read(MAX_JSON_BYTES + 1), f"{path}:{_RECORD}")
    except JSONFileError as exc:
        raise ModelFileError(
            f"{path!r} is truncated or damaged: its {_RECORD} cannot be read ({exc.problem})",
            "truncated",
        ) from None
    except _READ_ERRORS as exc:
        raise ModelFileError(
            f"{path!r} is truncated or damaged: its {_RECORD} cannot be read ({exc})", "truncated"
        ) from None
    if not isinstance(record, dict) or record.get("format") != _MEMBER_FORMAT:
        raise ModelFileError(f"{path!r} is not a ppa-dask member file", "not-a-model")
    version = record.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFileError(f"{path!r}: invalid format_version {version!r}", "tampered")
    if version > MEMBER_FORMAT_VERSION:
        raise ModelFileError(
            f"{path!r} was written in member format version {version} (by ppa-dask "
            f"{record.get('library_version', '?')}); this ppa-dask ({VERSION}) reads versions up "
            f"to {MEMBER_FORMAT_VERSION}",
            "future-version",
        )
    if not seal_matches(record):
        raise ModelFileError(
            f"{path!r} has been tampered with or damaged: its record does not match its SHA-256 "
            "checksum",
            "tampered",
        )
    if not isinstance(record.get("arrays"), dict):
        raise ModelFileError(f"{path!r}: the record has no array table", "tampered")
    extra = sorted(names - {_RECORD} - {f"{name}.npy" for name in record["arrays"]})
    if extra:
        raise ModelFileError(
            f"{path!r} has been tampered with: entries {extra} are not in its record", "tampered"
        )
    return record


def _check_npy_entry(path, archive, name, meta):
    """An array's ``.npy`` entry against the record before its values are read: the header's
    shape and dtype are the record's, and the entry unpacks to exactly the header and those
    values (so reading it allocates what the record says, and no more is decompressed)."""
    entry = f"{name}.npy"

    def refuse(what):
        raise ModelFileError(
            f"{path!r} has been tampered with: array {name!r} ({entry}) {what}", "tampered"
        )

    shape = meta.get("shape") if isinstance(meta, dict) else None
    if not (
        isinstance(shape, list)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        refuse(f"has no shape in the record ({meta!r:.200})")
    size = archive.getinfo(entry).file_size
    try:
        with archive.open(entry) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                found = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                found = np.lib.format.read_array_header_2_0(f)
            else:
                found = None
            start = f.tell()
    except _READ_ERRORS as exc:
        raise ModelFileError(
            f"{path!r} is truncated or damaged: array {name!r} cannot be read ({exc})",
            "truncated",
        ) from None
    if found is None:
        refuse(f"is in .npy format version {version}, not 1.0 or 2.0")
    header_shape, _, dtype = found
    if list(header_shape) != shape or dtype.str != meta.get("dtype"):
        refuse(
            f"has shape {list(header_shape)} and dtype {dtype.str} in its header, its record "
            f"says {shape} and {meta.get('dtype')}"
        )
    expected = start + math.prod(shape) * dtype.itemsize
    if size != expected:
        refuse(f"unpacks to {size} bytes, not the {expected} of its header and values")


def _read_arrays(path, archive, record):
    arrays = {}
    names = set(archive.namelist())
    for name, meta in record["arrays"].items():
        if f"{name}.npy" not in names:
            raise ModelFileError(
                f"{path!r} is truncated: array {name!r} listed in its record is missing",
                "truncated",
            )
        _check_npy_entry(path, archive, name, meta)
        try:
            with archive.open(f"{name}.npy") as f:
                a = np.lib.format.read_array(f, allow_pickle=False)
        except MemoryError:
            raise ModelFileError(
                f"{path!r}: array {name!r} of shape {meta.get('shape')} does not fit in memory",
                "invalid",
            ) from None
        except _READ_ERRORS as exc:
            raise ModelFileError(
                f"{path!r} is truncated or damaged: array {name!r} cannot be read ({exc})",
                "truncated",
            ) from None
        verify_array(path, name, a, meta)
        arrays[name] = a
    return arrays


def read_member_file(path, index, check=None):
    """The member estimator in a file written by :func:`write_member_file`, checked first.

    Parameters
    ----------
    path : str or os.PathLike
    index : int
        The member expected; a file holding another raises (``reason="mismatch"``).
    check : dict, optional
        Must equal the ``check`` the file was written with (``reason="mismatch"`` otherwise).

    Raises
    ------
    ModelFileError
        Missing, damaged, tampered, old layout, newer version, another member, or a class
        outside the allow-list; ``reason`` says which. Nothing is imported, and nothing is
        built before every check has passed.

    Examples
    --------
    See :func:`write_member_file`.
    """
    path = os.fspath(path)
    kind = file_kind(path)
    if kind not in (None, "a regular file"):  # a FIFO would block the read, /dev/zero never end
        raise ModelFileError(f"{path!r} is {kind}, not a member file", "tampered")
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise ModelFileError(f"no member file at {path!r}", "missing") from None
    except _READ_ERRORS as exc:
        raise ModelFileError(
            f"{path!r} is truncated or damaged: not a readable .npz archive ({exc})", "truncated"
        ) from None
    with archive:
        record = _read_record(path, archive)
        expected = {"index": int(index), "check": _json_value(check or {})}
        found = {"index": record.get("index"), "check": record.get("check")}
        if found != expected:
            raise ModelFileError(
                f"{path!r} holds another member ({found}) than the one expected ({expected})",
                "mismatch",
            )
        arrays = _read_arrays(path, archive, record)
    return Decoder(path, arrays).build(record.get("estimator"))


# -------------------------------------------------------------------------------------------
# the store
# -------------------------------------------------------------------------------------------


def _identity_text(identity):
    return json.dumps(identity, indent=1, sort_keys=True)


def _same_text(path, identity):
    with open(path) as f:
        return f.read() == _identity_text(identity)


def _current_identity(identity):
    """A manifest in the current form: stores written before the package was laid out by
    concept name the ensemble class by its module path (``ppa_dask.ensemble.FeatureBagging
    Regressor``); the ensemble is now named by its class name alone, which survives moves."""
    name = identity.get("ensemble") if isinstance(identity, dict) else None
    if isinstance(name, str) and name.startswith("ppa_dask."):
        identity = dict(identity, ensemble=name.rpartition(".")[2])
    return identity


class MemberStoreError(ValueError):
    """A member store's directory that cannot be used: its ``manifest.json`` cannot be read
    (damaged, too large, not a JSON object) or describes a different fit. Nothing in the
    directory is changed; name a new directory (or empty this one)."""


def _read_manifest(folder, manifest):
    """The identity a store's manifest records (read within the bounds of
    :func:`~ppa_dask.utils.files.read_json_file`); MemberStoreError when it cannot be read."""
    try:
        identity = read_json_file(manifest)
    except (OSError, JSONFileError) as exc:
        problem = getattr(exc, "problem", None) or getattr(exc, "strerror", None) or exc
        raise MemberStoreError(
            f"the member store {folder!r} cannot be used: its manifest {manifest!r} cannot be "
            f"read ({problem}); pass a new directory or empty this one"
        ) from None
    if not isinstance(identity, dict):
        raise MemberStoreError(
            f"the member store {folder!r} cannot be used: its manifest {manifest!r} holds a "
            f"JSON {type(identity).__name__} ({identity!r:.80}), not the JSON object of a fit; "
            "pass a new directory or empty this one"
        )
    return _current_identity(identity)


class MemberStore:
    """The members of one ensemble fit, in a directory (see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        Directory; created if missing.
    identity : dict
        JSON description of the fit (ensemble class, parameters, data fingerprint). A directory
        that already belongs to a different fit is refused rather than mixed.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> store = MemberStore(tempfile.mkdtemp(), {"fit": "example"})
    >>> store.save(3, LinearRegression().fit(np.eye(2), [0.0, 1.0]), check={"features": [0, 1]})
    True
    >>> store.indices(), type(store.load_usable(3, check={"features": [0, 1]})).__name__
    ([3], 'LinearRegression')
    """

    def __init__(self, path, identity):
        self.path = os.fspath(path)
        self.identity = _json_value(identity)
        os.makedirs(self.path, exist_ok=True)
        manifest = os.path.join(self.path, "manifest.json")
        if os.path.exists(manifest):
            existing = _read_manifest(self.path, manifest)
            if existing == self.identity and not _same_text(manifest, self.identity):
                # a store written before 0.2 names its ensemble by module path: same fit,
                # recorded again in the current form (its member files are refitted on load)
                write_text_atomic(manifest, _identity_text(self.identity))
            if existing != self.identity:
                differ = sorted(
                    k
                    for k in set(existing) | set(self.identity)
                    if existing.get(k) != self.identity.get(k)
                )
                raise MemberStoreError(
                    f"the member store {self.path!r} holds members of a different fit (it "
                    f"differs in {differ}); pass a new directory or empty this one."
                )
        else:
            write_text_atomic(manifest, _identity_text(self.identity))

    def member_path(self, index):
        """Path of member ``index``'s file."""
        return os.path.join(self.path, f"member_{int(index):05d}.npz")

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

    def save(self, index, estimator, check=None):
        """Write member ``index``; returns False (writing nothing) if it is not array-only.

        ``check``: small JSON values identifying the member (see :func:`write_member_file`).
        """
        if not storable(estimator):
            return False
        write_member_file(self.member_path(index), estimator, index, check)
        return True

    def load(self, index, check=None):
        """Member ``index`` as a fitted estimator, or None if it is not on disk.

        Raises ModelFileError for a file that cannot be used (see :func:`read_member_file`).
        """
        path = self.member_path(index)
        if not os.path.exists(path):
            return None
        return read_member_file(path, index, check)

    def load_usable(self, index, check=None):
        """Like :meth:`load`, but a file that cannot be used gives a :class:`MemberFileWarning`
        naming it and why, and None: the caller fits the member again and rewrites the file."""
        try:
            return self.load(index, check)
        except ModelFileError as exc:
            warnings.warn(
                f"member {int(index)} cannot be used: {exc} ({exc.reason}); it is fitted again "
                "and its file rewritten",
                MemberFileWarning,
                stacklevel=2,
            )
            return None
