"""Model files: a fitted estimator as a Zarr v3 group of plain arrays plus JSON, never pickle.

:func:`save_model` writes a fitted estimator as a Zarr v3 group: one plain numeric array per
fitted array, and one JSON record in the group's attributes (under ``"ppa_dask"``) holding

* ``format`` (``"ppa-dask-model"``), ``format_version`` and the ``library_version`` that wrote it;
* ``estimator``: the estimator as the JSON tree of :mod:`.encoding` (its class name in the
  allow-list, ``get_params(deep=False)`` and every fitted attribute, arrays as references to the
  group's arrays, nested estimators such as the members of an ensemble in the same form);
* ``arrays``: shape, dtype and SHA-256 of the bytes of every array;
* ``sha256``: SHA-256 of the canonical JSON of everything above.

:func:`load_model` checks all of that before it builds anything: a missing path, a directory
that is not a model file, a file from a newer format version, attributes edited after writing,
an array missing, unreadable (truncated) or whose bytes differ from its checksum each raise a
:class:`ModelFileError` naming the problem (its ``reason`` is one of ``"missing"``,
``"not-a-model"``, ``"future-version"``, ``"tampered"``, ``"truncated"``, ``"unknown-class"``,
``"invalid"``). Loading never executes code from the file: classes come from the allow-list of
:mod:`.encoding` (registered classes such as ``PPA``, and scikit-learn estimators of modules
already imported), modules named in the file are never imported, and the only code run is the
allowed class's ``__init__`` with the checked parameters (and scikit-learn's decision and
neighbour trees built from checked arrays, see :mod:`.encoding`), and then the class's own
``check_fitted_state`` (when it has one: :meth:`ppa_dask.PPA.check_fitted_state`), which refuses
fitted attributes inconsistent with the parameters or each other (``"invalid"``). The checksums
detect damage and edits; they are not a signature (whoever can write the file can also rewrite
its checksums), but a forged file can only hold wrong numbers, never run code.

Reading a file costs little whatever it holds: the group's ``zarr.json`` is read within the
bounds of :func:`~ppa_dask.utils.files.read_json_file` (16 MiB, 100 levels), and each array's
``zarr.json`` is checked against the sealed record (shape, dtype, one chunk of the whole array,
the bytes codec and at most zstd) and its chunk decompressed into a buffer of the record's size
before Zarr reads it; a metadata or compression bomb is refused (``"tampered"`` /
``"truncated"``) before anything of its claimed size is allocated.

Files are written to a hidden temporary sibling (``.<name>.tmp-<random>``) and renamed into place
once complete, so an interrupted save never leaves a file at the target path.

Format version 1 is the only layout so far: files written before the allow-list took in
scikit-learn classes name ``"PPA"`` (or another registered name) and read as they always did.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ppa_dask.store.encoding import (
    NUMERIC_KINDS,
    Decoder,
    ModelFileError,
    ModelFileNotFound,
    array_table,
    encode_estimator,
    seal,
    seal_matches,
    verify_array,
)
from ppa_dask.store.results import (
    ATTRS_KEY,
    check_target,
    is_remote,
    local_path,
    move_into_place,
    written_by_us,
)
from ppa_dask.utils.files import (
    JSONFileError,
    file_kind,
    read_json_file,
    remove_path,
    temp_sibling,
)
from ppa_dask.utils.version import VERSION

__all__ = [
    "FORMAT_VERSION",
    "ModelFileError",
    "ModelFileNotFound",
    "save_model",
    "load_model",
    "model_info",
]

#: Version of the model-file layout written by :func:`save_model` (readers accept <= this).
FORMAT_VERSION = 1
_MODEL_FORMAT = "ppa-dask-model"


def save_model(model, path, overwrite=False):
    """Save a fitted estimator to a Zarr v3 group of plain arrays plus JSON attributes.

    Parameters
    ----------
    model : estimator
        A fitted estimator of the allow-list: ``PPA``, any class passed to
        :func:`~ppa_dask.store.register_estimator`, or a scikit-learn estimator whose state
        is plain data (``LinearRegression``, ``SVC``, ``KNeighborsClassifier``, pipelines of
        those) or decision trees (:mod:`.encoding` says exactly what is held). A parameter that
        is a function (``CurveFitRegressor(func)``) is refused with a TypeError: a file never
        holds code.
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

    if is_remote(path):
        raise ValueError(f"model files are local directories; got the URL {path!r}")
    check_is_fitted(model)
    tree, arrays = encode_estimator(model)
    record = seal(
        {
            "format": _MODEL_FORMAT,
            "format_version": FORMAT_VERSION,
            "library_version": VERSION,
            "estimator": tree,
            "arrays": array_table(arrays),
        }
    )

    path = local_path(path)
    check_target(path, overwrite, _is_model_dir, "ppa-dask model file")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = temp_sibling(path)
    try:
        group = zarr.open_group(tmp, mode="w-", zarr_format=3)
        for name, a in arrays.items():
            z = group.create_array(
                name,
                shape=a.shape,
                dtype=a.dtype,
                chunks=tuple(max(s, 1) for s in a.shape),
            )
            z[...] = a
        # the record goes last: a group without it is not a model file
        group.attrs[ATTRS_KEY] = record
        move_into_place(tmp, path, overwrite, _is_model_dir, "ppa-dask model file")
    except BaseException:
        remove_path(tmp)
        raise
    return path


def _is_model_dir(path):
    return written_by_us(path, "group", _MODEL_FORMAT)


#: Largest ``zarr.json`` of one array of a model file (the library writes about 600 bytes).
MAX_ARRAY_METADATA_BYTES = 2**20
#: Most dimensions of an array of a model file (NumPy's own limit).
_MAX_NDIM = 64


def _read_record(path):
    """The verified record of a model file; raises ModelFileError.

    The group's ``zarr.json`` is read within the bounds of
    :func:`~ppa_dask.utils.files.read_json_file` (size, nesting) before it is parsed."""
    path = local_path(path)
    if not os.path.exists(path):
        raise ModelFileNotFound(f"no model file at {path!r}")
    try:
        meta = read_json_file(os.path.join(path, "zarr.json"))
    except (FileNotFoundError, NotADirectoryError):
        meta = None
    except (OSError, JSONFileError) as exc:
        raise ModelFileError(
            f"{path!r} is not a ppa-dask model file: its Zarr metadata zarr.json cannot be read "
            f"({getattr(exc, 'problem', exc)})",
            "not-a-model",
        ) from None
    if not isinstance(meta, dict) or meta.get("node_type") is None:
        raise ModelFileError(
            f"{path!r} is not a ppa-dask model file (no readable Zarr metadata zarr.json)",
            "not-a-model",
        )
    attrs = meta.get("attributes")
    record = attrs.get(ATTRS_KEY) if isinstance(attrs, dict) else None
    if (
        meta.get("node_type") != "group"
        or meta.get("zarr_format") != 3
        or not isinstance(record, dict)
        or record.get("format") != _MODEL_FORMAT
    ):
        raise ModelFileError(
            f"{path!r} is not a ppa-dask model file (no Zarr v3 group with "
            f"attrs[{ATTRS_KEY!r}]['format'] == {_MODEL_FORMAT!r})",
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
            f"{record.get('library_version', '?')}); this ppa-dask ({VERSION}) reads "
            f"versions up to {FORMAT_VERSION}. Upgrade ppa-dask to load it.",
            "future-version",
        )
    if not seal_matches(record):
        raise ModelFileError(
            f"{path!r} has been tampered with or damaged: its attributes do not match their "
            "SHA-256 checksum",
            "tampered",
        )
    return path, record


def _dtype_or_none(name):
    """The NumPy dtype a string names, or None (for anything else, never an error)."""
    if not isinstance(name, str):
        return None
    try:
        return np.dtype(name)
    except (TypeError, ValueError):
        return None


def _recorded_layout(path, name, meta):
    """Shape and dtype of an array as the (sealed) record gives them, checked to be an array
    a model file can hold: a list of at most 64 sizes >= 0 and a numeric dtype."""
    shape = meta.get("shape") if isinstance(meta, dict) else None
    dtype = meta.get("dtype") if isinstance(meta, dict) else None
    dtype = _dtype_or_none(dtype)
    if not (
        isinstance(shape, list)
        and len(shape) <= _MAX_NDIM
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
        and dtype is not None
        and dtype.kind in NUMERIC_KINDS
    ):
        raise ModelFileError(
            f"{path!r}: the record's entry for array {name!r} is not a shape and a numeric "
            f"dtype ({meta!r:.200})",
            "tampered",
        )
    return tuple(shape), dtype


def _check_layout(path, name, zmeta, shape, dtype):
    """The array's Zarr metadata against its record, before any chunk is read: the same shape
    and element type, and the one layout :func:`save_model` writes (a single chunk of the
    whole array, the bytes codec, at most zstd compression). Returns the compressor's name (or
    None) and the chunk's key."""

    def refuse(what):
        raise ModelFileError(
            f"{path!r} has been tampered with: array {name!r} {what}", "tampered"
        ) from None

    if not isinstance(zmeta, dict) or zmeta.get("node_type") != "array":
        refuse("has no Zarr v3 array metadata")
    if zmeta.get("zarr_format") != 3:
        refuse(f"is a Zarr format {zmeta.get('zarr_format')!r} array, not 3")
    if zmeta.get("shape") != list(shape):
        refuse(
            f"has shape {zmeta.get('shape')!r:.100} in its zarr.json, its record says {list(shape)}"
        )
    stored = _dtype_or_none(zmeta.get("data_type"))
    if stored is None:
        refuse(f"has data_type {zmeta.get('data_type')!r:.100}, not a numeric dtype")
    if stored.kind != dtype.kind or stored.itemsize != dtype.itemsize:
        refuse(
            f"has data_type {zmeta.get('data_type')!r} in its zarr.json, its record says {dtype.str}"
        )
    chunks = [max(n, 1) for n in shape]
    grid = {"name": "regular", "configuration": {"chunk_shape": chunks}}
    if zmeta.get("chunk_grid") != grid:
        refuse(
            f"has the chunk grid {zmeta.get('chunk_grid')!r:.200}; model files hold each array "
            f"as one chunk of its shape {chunks}"
        )
    keys = zmeta.get("chunk_key_encoding")
    if keys not in ({"name": "default"}, {"name": "default", "configuration": {"separator": "/"}}):
        refuse(f"has the chunk key encoding {keys!r:.200}, not the default one")
    if zmeta.get("storage_transformers", []) != []:
        refuse("has storage transformers; model files use none")
    codecs = zmeta.get("codecs")
    names = [c.get("name") if isinstance(c, dict) else None for c in codecs or []]
    if not isinstance(codecs, list) or names not in (["bytes"], ["bytes", "zstd"]):
        refuse(
            f"is stored with the codecs {names!r:.200}; model files use the bytes codec and at "
            "most zstd compression"
        )
    return (names[1] if len(names) > 1 else None), "/".join(["c"] + ["0"] * len(shape))


def _check_chunk(path, name, folder, compressor, key, nbytes):
    """The one chunk of an array holds at most its ``nbytes`` once decompressed: checked by
    decompressing it into a buffer of that size (zstd refuses a frame that would need more)
    before Zarr reads it. A missing chunk reads as the fill value (the checksum decides)."""
    from numcodecs import zstd

    chunk = os.path.join(folder, *key.split("/"))
    kind = file_kind(chunk)
    if kind is None:
        return
    if kind != "a regular file":  # a FIFO would block zarr's read, /dev/zero never end it
        raise ModelFileError(
            f"{path!r} has been tampered with: chunk {key} of array {name!r} is {kind}, not a "
            "regular file",
            "tampered",
        )
    size = os.path.getsize(chunk)
    # zstd never makes data larger than this (its compress bound, rounded up)
    limit = nbytes if compressor is None else nbytes + nbytes // 128 + 4096
    if size > limit:
        raise ModelFileError(
            f"{path!r} has been tampered with: chunk {key} of array {name!r} is {size} bytes, "
            f"more than its {nbytes} bytes of values could take",
            "tampered",
        )
    if compressor is None:
        return
    with open(chunk, "rb") as f:
        data = f.read(limit + 1)
    try:
        zstd.decompress(data, bytearray(nbytes))
    except (ValueError, RuntimeError) as exc:
        raise ModelFileError(
            f"{path!r} is truncated or damaged: array {name!r} cannot be read: its chunk {key} "
            f"does not decompress into the {nbytes} bytes its record gives ({exc})",
            "truncated",
        ) from None


def _read_arrays(path, record):
    """Read and verify every array listed in the record; each array's Zarr metadata and chunk
    are checked against the record before Zarr reads them (see :func:`_check_layout`)."""
    import zarr

    listed = record.get("arrays")
    if not isinstance(listed, dict):
        raise ModelFileError(f"{path!r}: the record has no array table", "tampered")
    try:
        entries = os.listdir(path)
    except OSError as exc:
        raise ModelFileError(f"{path!r} cannot be listed ({exc})", "truncated") from None
    # every Zarr node inside (a folder holding zarr.json): listed without reading any of them
    present = {e for e in entries if os.path.isfile(os.path.join(path, e, "zarr.json"))}
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
        shape, dtype = _recorded_layout(path, name, meta)
        folder = os.path.join(path, name)
        try:
            zmeta = read_json_file(os.path.join(folder, "zarr.json"), MAX_ARRAY_METADATA_BYTES)
        except (OSError, JSONFileError) as exc:
            raise ModelFileError(
                f"{path!r} is truncated or damaged: the metadata {name}/zarr.json of array "
                f"{name!r} cannot be read ({getattr(exc, 'problem', exc)})",
                "truncated",
            ) from None
        compressor, key = _check_layout(path, name, zmeta, shape, dtype)
        nbytes = math.prod(max(n, 1) for n in shape) * dtype.itemsize
        _check_chunk(path, name, folder, compressor, key, nbytes)
        try:
            a = np.asarray(zarr.open_array(folder, mode="r", zarr_format=3)[...])
        except MemoryError:
            raise ModelFileError(
                f"{path!r}: array {name!r} of shape {list(shape)} ({nbytes} bytes) does not "
                "fit in memory",
                "invalid",
            ) from None
        except Exception as exc:
            raise ModelFileError(
                f"{path!r} is truncated or damaged: array {name!r} cannot be read ({exc})",
                "truncated",
            ) from None
        verify_array(path, name, a, meta)
        arrays[name] = a
    return arrays


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
        Not a model file, a newer format version, tampered, truncated, naming a class outside
        the allow-list, or holding fitted attributes that the class's ``check_fitted_state``
        refuses (``reason`` says which). Nothing is built before the file's checks pass.
    """
    path, record = _read_record(path)
    arrays = _read_arrays(path, record)
    model = Decoder(path, arrays).build(record.get("estimator"))
    _check_fitted_states(path, model, "model")
    return model


def _check_fitted_states(path, value, where):
    """Run each built estimator's own consistency check (its public ``check_fitted_state``,
    if its class has one), nested estimators included; a failure is an invalid file."""
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_fitted_states(path, v, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _check_fitted_states(path, v, f"{where}[{k!r}]")
        return
    if not (hasattr(value, "get_params") and not isinstance(value, type)):
        return
    fitted = {k: v for k, v in vars(value).items() if k.endswith("_") and not k.startswith("_")}
    for name, v in fitted.items():
        _check_fitted_states(path, v, f"{where}.{name}")
    # fitted estimators can also be parameters: a Pipeline's steps (make_ppa_knn's PPA)
    for name, v in value.get_params(deep=False).items():
        _check_fitted_states(path, v, f"{where}.{name}")
    check = getattr(type(value), "check_fitted_state", None)
    if fitted and callable(check):  # (an unfitted template has nothing to check)
        try:
            value.check_fitted_state()
        except ValueError as exc:
            raise ModelFileError(
                f"{path!r}: {where} ({type(value).__name__}) is inconsistent: {exc}", "invalid"
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
    path, record = _read_record(path)
    arrays = _read_arrays(path, record)
    decoder = Decoder(path, arrays)
    tree = record.get("estimator")
    if not isinstance(tree, dict) or "__estimator__" not in tree:
        raise ModelFileError(f"{path!r}: the record holds no estimator", "invalid")
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
