"""Batch pipelines described by YAML files: load -> preprocess -> fit -> transform -> evaluate
-> plots, each stage writing under the run folder, a rerun resuming where a killed run stopped.

A pipeline file (see ``pipelines/*.yaml``)::

    pipeline: 1                  # format version
    name: magic-gamma
    description: optional text
    output: runs/magic-gamma     # the run folder (default: runs/<name>)
    seed: 0                      # data generation, train/test split, cross-validation folds
    cluster: null                # a cluster file (cluster/*.yaml); CLI options win
    data:                        # where the samples come from (one of the sources below)
      source: dataset
      name: magic_gamma
      chunk_rows: 65536          # rows per chunk of the tables the pipeline writes
    preprocess:
      scale: minmax              # every feature to [0, 1] over the valid samples ("none": as is)
      test_fraction: 0.5         # samples held out for testing (tables; default 0)
      mask:
        nonfinite: drop          # samples with a NaN/inf are left out ("error": refuse them)
        valid_range: null        # [lo, hi]: values outside count as missing (fill values)
    model:                       # PPA parameters (random_state is the seed)
      degree: [1, 2, 3, 4, 5]
      cv: 2
      n_components: null
      whiten: false
      extrapolation: linear
      residual_cache: auto
    transform:
      components: 3              # components written (null: all)
      format: zarr               # zarr | geotiff | netcdf | same (see below)
    evaluate: {pca: true}        # reconstruction MSE of PPA and PCA for k = 1..steps, on the
                                 # training samples and (test_fraction > 0) the held-out ones
    plots: {components: 3, max_points: 20000, dpi: 100}   # PNGs: components, error curves

Data sources (``data.source``):

* ``zarr`` -- a 2-D (samples x features) Zarr array, or ``variable`` of a Zarr group, by local
  path or fsspec URL (``path``); read in place, not copied.
* ``xarray`` -- ``variable`` of an xarray Zarr store (``path``) with a ``feature_dim`` (e.g.
  ``band``); every other dimension is a sample dimension (a cube). Read in place.
  ``feature_dim`` may list several dimensions (``[time, band]``, for ``xarray``, ``netcdf``
  and ``geotiff``): the features span them all, scaled and fitted as one merged dimension and
  recorded by the model, whose ``inverse_transform`` restores them.
* ``dataset`` -- a data set bundled with ppa-dask (``name``: ``magic_gamma``, ``sat``, ...; any
  ``ppa_dask.datasets.load_<name>`` returning ``(X, y)``), written to the run folder.
* ``make_cube`` -- a synthetic hyperspectral cube, ``ppa_dask.datasets.make_cube(**params)``
  written to the run folder; ``variable`` (default ``reflectance``) along ``feature_dim``
  (default ``band``).
* ``generated`` -- ``ppa_dask.datasets`` generators (``kind``: ``curved`` or ``helix``,
  ``n_samples``, ``n_features``, ``params``), written to Zarr in the run folder. With ``path``
  (a local folder) the samples are generated chunk by chunk on the cluster
  (``ppa_dask.datasets.write_zarr``, ``chunk_rows`` rows per chunk, never all in this process)
  into that Zarr array, which a later run reuses when its recorded generator, seed, sizes,
  parameters and chunk rows match (and rewrites otherwise). The values are the same either way.

Cubes are fitted through the xarray adapter (``PPA().fit(cube, feature_dim=...)``): masked
pixels are left out and come back NaN in the component images; tables are fitted on the valid
(scaled) samples.

The transform stage writes the components to ``04-transform/components.zarr`` (``format:
zarr``, the default), or in the format of the input file: ``geotiff`` writes
``components.tif`` (one band per component, the input's CRS and transform; ``data.source``
must be ``geotiff``), ``netcdf`` writes ``components.nc`` (the input's coordinates and global
attributes, CF ``long_name`` and ``units``: ``"1"`` after min-max scaling, else the input's;
any cube source), and ``same`` is the input's own format (``geotiff`` / ``netcdf`` for those
sources, ``zarr`` for ``zarr`` / ``xarray``). Any other combination is refused before the
run starts, naming ``transform.format``. The file is one of the stage's fingerprinted
outputs, like every other.

Relative paths (``output``, ``data.path``, ``cluster``) are relative to the current directory.

The run folder holds one folder per stage (``01-load`` ... ``06-plots``), ``pipeline.yaml`` (the
validated configuration with every default filled in), ``pipeline.log`` and ``summary.json``.

**Whose folder it is.** A run folder is one the library made: it creates the run in a new or
empty folder and writes ``.ppa-dask-run.json`` there (format, versions, the pipeline's name, the
SHA-256 of the configuration, the times, and the stage folders it created). A non-empty folder
without that record is refused before anything is written, and a stage folder the record does
not list is never removed (not by ``--force`` either). While a run uses the folder it holds
``.ppa-dask-run.lock`` (created with O_CREAT | O_EXCL; pid, host and start time): a second run
on the folder is refused with the owner's pid and host, and the lock of a run whose process is
gone (same host, pid not running: a killed batch job) is taken over with a note in the log.
The lock is removed when the run ends, also when it fails.

Files are read strictly: a key given twice in one mapping is an error naming the file, the key
and both lines (``ppa_dask.utils.yamlfile``).

**Resuming.** A stage is complete when its folder holds ``_complete.json``, written last (by an
atomic rename) after every output of the stage. The marker records a key, the SHA-256 of the
stage's configuration, of the keys of the stages it reads from and of the fingerprints of the
external inputs (file names, sizes and modification times of an input store), and the
fingerprints of its own outputs. A rerun skips a stage whose marker has the same key and whose
outputs are unchanged, and reruns it from an empty folder otherwise; a changed configuration or
input therefore reruns that stage and every stage after it. A killed run leaves no marker in the
stage it was in, so rerunning the same command resumes there.
"""

from __future__ import annotations

import copy
import csv
import datetime
import hashlib
import inspect
import json
import math
import numbers
import os
import re
import socket
import sys
import time

import numpy as np

from ppa_dask import datasets, store
from ppa_dask.app.baseline import pca_reconstruction_errors
from ppa_dask.app.cluster import compute_with_progress, step_reporter
from ppa_dask.app.plotting import robust_limits
from ppa_dask.ppa.estimator import PARAMETER_CONSTRAINTS, PPA
from ppa_dask.ppa.kernels import row_hash
from ppa_dask.store.feature_dims import FEATURE_DIM_SEP, merge_feature_dims, split_feature_dims
from ppa_dask.store.sources import fingerprint
from ppa_dask.store.stacker import fill_warning
from ppa_dask.utils.files import read_json_file, remove_path, write_json_atomic, write_text_atomic
from ppa_dask.utils.params import (
    AnyOf,
    Integer,
    Options,
    candidate_degrees,
    did_you_mean,
    is_int,
    unknown_key,
)
from ppa_dask.utils.progress import Reporter
from ppa_dask.utils.seeds import child_seed
from ppa_dask.utils.version import VERSION
from ppa_dask.utils.warnings import NoDataWarning, warn
from ppa_dask.utils.yamlfile import YAMLFileError, read_yaml_file

__all__ = [
    "PipelineError",
    "STAGES",
    "check_pipeline_data",
    "load_pipeline",
    "too_many_components",
    "validate_pipeline",
    "run_pipeline",
    "fingerprint",
    "pca_reconstruction_errors",
]

#: Version of the pipeline file format (the ``pipeline:`` key) and of the completion markers.
FORMAT_VERSION = 1
#: The stages, in order; each writes under ``<run>/<NN>-<stage>/``.
STAGES = ("load", "preprocess", "fit", "transform", "evaluate", "plots")
STAGE_DIRS = {name: f"{i + 1:02d}-{name}" for i, name in enumerate(STAGES)}
#: The completion marker of a stage (written last).
MARKER = "_complete.json"
#: Sections of the configuration each stage depends on (besides the stages it reads from).
STAGE_CONFIG = {
    "load": ("data", "seed"),
    "preprocess": ("preprocess", "data"),
    "fit": ("model", "seed"),
    "transform": ("transform",),
    "evaluate": ("evaluate",),
    "plots": ("plots",),
}
#: The stages whose outputs each stage reads.
STAGE_INPUTS = {
    "load": (),
    "preprocess": ("load",),
    "fit": ("preprocess",),
    "transform": ("preprocess", "fit"),
    "evaluate": ("preprocess", "fit"),
    "plots": ("preprocess", "transform", "evaluate"),
}
#: Rows per chunk of the tables written by the pipeline (samples x features).
DEFAULT_CHUNK_ROWS = 65536
#: The record that makes a folder a run folder: written by the library into the empty folder it
#: creates the run in, listing the stage folders it made there (the only ones it ever removes).
RUN_RECORD = ".ppa-dask-run.json"
#: The lock file of the run using a run folder (pid, host, start time); removed at its end.
RUN_LOCK = ".ppa-dask-run.lock"


class PipelineError(ValueError):
    """A pipeline file or run that cannot go on; the message names the key and what was expected."""


# ---------------------------------------------------------------------------------------------
# the schema
# ---------------------------------------------------------------------------------------------

_REQUIRED = object()


class _Bad(Exception):
    """A value that does not match its field (message: what was expected)."""


class _Field:
    """One key: ``check(value) -> normalised value`` raising :class:`_Bad`."""

    def __init__(self, expected, check, default=_REQUIRED):
        self.expected, self.check, self.default = expected, check, default


def _leaf_field(constraint, text, default):
    """A field checked by a constraint of :mod:`ppa_dask.utils.params` (the package's one
    vocabulary of parameter checks), described in the config file's own words (``null``)."""

    def check(v):
        if not constraint.accepts(v):
            raise _Bad(text)
        return constraint.convert(v)

    return _Field(text, check, default)


def _int_field(minimum=None, default=_REQUIRED, none=False):
    text = "an integer" + (f" >= {minimum}" if minimum is not None else "")
    constraint = Integer(minimum)
    if none:
        text += " or null"
        constraint = AnyOf(None, constraint)
    return _leaf_field(constraint, text, default)


def _choice_field(options, default=_REQUIRED):
    text = "one of " + ", ".join(repr(o) for o in options)
    return _leaf_field(Options(*options), text, default)


def _bool_field(default):
    def check(v):
        if not isinstance(v, bool):
            raise _Bad("true or false")
        return v

    return _Field("true or false", check, default)


def _str_field(default=_REQUIRED, none=False, pattern=None, what="a string"):
    text = what + (" or null" if none else "")

    def check(v):
        if v is None and none:
            return None
        if not isinstance(v, str) or not v or (pattern and not re.fullmatch(pattern, v)):
            raise _Bad(text)
        return v

    return _Field(text, check, default)


def _degree_check(v):
    # the estimator's own reading of a degree (ppa_dask.utils.params.candidate_degrees), for
    # the two forms a file writes: an integer or a list
    if is_int(v) or isinstance(v, list):
        try:
            candidates = candidate_degrees(v)
        except (TypeError, ValueError):
            pass
        else:
            return candidates[0] if is_int(v) else candidates
    raise _Bad("an integer >= 1 or a non-empty list of integers >= 1")


def _range_check(v):
    text = "null or a list [low, high] of two numbers with low < high"
    if v is None:
        return None
    if (
        isinstance(v, list)
        and len(v) == 2
        and all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in v)
        and math.isfinite(v[0])
        and math.isfinite(v[1])
        and v[0] < v[1]
    ):
        return [float(v[0]), float(v[1])]
    raise _Bad(text)


def _fraction_check(v):
    if isinstance(v, numbers.Real) and not isinstance(v, bool) and 0.0 <= v < 1.0:
        return float(v)
    raise _Bad("a number in [0, 1)")


def _mapping_check(v):
    if v is None:
        return {}
    if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
        raise _Bad("a mapping of parameter names to values")
    return dict(v)


_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
# the sources read from the formats users hold (ppa_dask.store.sources, where they are
# declared): cubes read in place, tables copied to the run folder
_FILE_CUBES = store.sources.CUBE_FORMATS
_FILE_TABLES = store.sources.TABLE_FORMATS
_SOURCES = ("zarr", "xarray", "dataset", "make_cube", "generated", *_FILE_CUBES, *_FILE_TABLES)


def _paths_check(v):
    if isinstance(v, str) and v:
        return v
    if isinstance(v, list) and v and all(isinstance(p, str) and p for p in v):
        return list(v)
    raise _Bad("a file path or glob (string), or a non-empty list of file paths")


def _columns_check(v):
    if v is None or (isinstance(v, list) and v and all(isinstance(c, str) for c in v)):
        return v
    raise _Bad("null (every column) or a non-empty list of column names")


# the options of the file formats (ppa_dask.store.sources.FORMATS) as data keys
def _nodata_check(v):
    try:
        return store.sources.parse_nodata(v)
    except ValueError:
        raise _Bad("a number (the value marking missing pixels), 'none' or null") from None


_NODATA_FIELD = _Field(
    "a number (the value marking missing pixels), 'none' or null", _nodata_check, None
)


def _variables_check(v):
    if v is None or v == store.sources.ALL_VARIABLES:
        return v
    if isinstance(v, list) and v and all(isinstance(n, str) and n for n in v):
        return list(v)
    raise _Bad("null, 'all' or a non-empty list of variable names")


_VARIABLES_FIELD = _Field(
    "null, 'all' or a non-empty list of variable names", _variables_check, None
)

_FEATURE_DIM_EXPECTED = (
    "the name of the feature dimension (string), or a list of several ([time, band]) each "
    "named once"
)


def _feature_dim_check(v):
    try:
        parsed = store.sources.parse_feature_dim(v)
    except ValueError:
        raise _Bad(_FEATURE_DIM_EXPECTED) from None
    if parsed is None:
        raise _Bad(_FEATURE_DIM_EXPECTED)
    return list(parsed) if isinstance(parsed, tuple) else parsed


def _feature_dim_field(default=_REQUIRED):
    return _Field(_FEATURE_DIM_EXPECTED, _feature_dim_check, default)


def _dims(feature_dim):
    """The feature dimension(s) of a configuration or a record, as a list."""
    return list(feature_dim) if isinstance(feature_dim, (list, tuple)) else [feature_dim]


def _fit_dim(feature_dim):
    """What the fit takes as ``feature_dim``: the name, or a tuple of several."""
    return tuple(feature_dim) if isinstance(feature_dim, (list, tuple)) else feature_dim


_FILE_OPTIONS = {
    "nodata": _NODATA_FIELD,
    "variables": _VARIABLES_FIELD,
    "variable": _str_field(default=None, none=True, what="a variable name (string)"),
    "feature_dim": _feature_dim_field(),
    "concat_dim": _str_field(default="time", what="the dimension a series of files spans"),
    "columns": _Field("null or a list of column names", _columns_check, default=None),
}


def _file_source_fields(fmt):
    spec = store.sources.FORMATS[fmt]
    path = _Field(spec.paths, _paths_check) if spec.lists else _str_field(what=spec.paths)
    fields = {"path": path, **{name: _FILE_OPTIONS[name] for name in spec.options}}
    if fmt == "geotiff" and "feature_dim" in fields:
        # a GeoTIFF's features are its bands; a series' may span its dates too
        fields["feature_dim"] = _feature_dim_field(store.sources.BAND_DIM)
    return fields


_DATA_COMMON = {
    "source": _choice_field(_SOURCES),
    "chunk_rows": _int_field(1, default=DEFAULT_CHUNK_ROWS),
}
_DATA_BY_SOURCE = {
    "zarr": {
        "path": _str_field(what="a Zarr path or URL (string)"),
        "variable": _str_field(default=None, none=True, what="a variable name (string)"),
    },
    "xarray": {
        "path": _str_field(what="a Zarr path or URL (string)"),
        "variable": _str_field(default=None, none=True, what="a variable name (string)"),
        "feature_dim": _feature_dim_field(),
        "nodata": _NODATA_FIELD,
        "variables": _VARIABLES_FIELD,
    },
    "dataset": {
        "name": _str_field(what="a bundled data set name (string)"),
    },
    "make_cube": {
        "params": _Field("a mapping of make_cube parameters", _mapping_check, default={}),
        "variable": _str_field(default="reflectance", what="a variable of the cube (string)"),
        "feature_dim": _str_field(default="band", what="the name of the feature dimension"),
    },
    "generated": {
        "kind": _choice_field(("curved", "helix"), default="curved"),
        "n_samples": _int_field(1),
        "n_features": _int_field(2),
        "params": _Field("a mapping of generator parameters", _mapping_check, default={}),
        "path": _str_field(default=None, none=True, what="a local Zarr path (string)"),
    },
    **{fmt: _file_source_fields(fmt) for fmt in store.sources.FORMATS},
}
_SECTIONS = {
    "preprocess": {
        "scale": _choice_field(("minmax", "none"), default="minmax"),
        "test_fraction": _Field("a number in [0, 1)", lambda v: _fraction_check(v), 0.0),
        "mask": {
            "nonfinite": _choice_field(("drop", "error"), default="drop"),
            "valid_range": _Field(
                "null or a list [low, high] of two numbers with low < high", _range_check, None
            ),
        },
    },
    "model": {
        "degree": _Field(
            "an integer >= 1 or a non-empty list of integers >= 1",
            _degree_check,
            default=[1, 2, 3, 4, 5],
        ),
        "cv": _int_field(2, default=2),
        "n_components": _int_field(1, default=None, none=True),
        "whiten": _bool_field(False),
        # the estimator's own choices (ppa_dask.ppa.estimator.PARAMETER_CONSTRAINTS)
        "extrapolation": _choice_field(
            PARAMETER_CONSTRAINTS["extrapolation"].values, default="linear"
        ),
        "residual_cache": _choice_field(
            PARAMETER_CONSTRAINTS["residual_cache"].values, default="auto"
        ),
    },
    "transform": {
        "components": _int_field(1, default=None, none=True),
        "format": _choice_field(("zarr", *sorted(_FILE_CUBES), "same"), default="zarr"),
    },
    "evaluate": {
        "pca": _bool_field(True),
    },
    "plots": {
        "components": _int_field(0, default=3),
        "max_points": _int_field(1, default=20000),
        "dpi": _int_field(20, default=100),
    },
}
_TOP = {
    "pipeline": _Field(
        f"{FORMAT_VERSION} (the pipeline format version)",
        lambda v: (
            v
            if v == FORMAT_VERSION and is_int(v)
            else _raise(f"{FORMAT_VERSION} (the pipeline format version)")
        ),
        default=FORMAT_VERSION,
    ),
    "name": _str_field(pattern=_NAME, what="a name of letters, digits, '.', '_' or '-'"),
    "description": _str_field(default=None, none=True),
    "output": _str_field(default=None, none=True, what="a folder path (string)"),
    "seed": _int_field(0, default=0),
    "cluster": _str_field(default=None, none=True, what="a cluster configuration file"),
}


def _raise(expected):
    raise _Bad(expected)


def _check_section(raw, fields, where, errors):
    """Validate one mapping against ``fields`` (nested dicts are sub-sections)."""
    out = {}
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        errors.append(f"{where}: expected a mapping, got {type(raw).__name__} {raw!r}")
        return out
    for key in raw:
        if key not in fields:
            name = f"{where}.{key}" if where else str(key)
            errors.append(unknown_key(name, str(key), fields))
    for key, field in fields.items():
        name = f"{where}.{key}" if where else key
        if isinstance(field, dict):
            out[key] = _check_section(raw.get(key), field, name, errors)
            continue
        if key not in raw:
            if field.default is _REQUIRED:
                errors.append(f"{name}: required; expected {field.expected}")
            else:
                out[key] = copy.deepcopy(field.default)
            continue
        try:
            out[key] = field.check(raw[key])
        except _Bad as exc:
            errors.append(f"{name}: expected {exc}, got {raw[key]!r}")
    return out


def _dataset_names():
    # the loaders of tables: load_<name>(return_X_y=True) -> (X, y)
    return sorted(
        n[len("load_") :]
        for n in dir(datasets)
        if n.startswith("load_")
        and callable(getattr(datasets, n))
        and "return_X_y" in inspect.signature(getattr(datasets, n)).parameters
        and n != "load_paper_dataset"
    )


def _is_url(path):
    return "://" in path


def _check_data(raw, errors):
    if not isinstance(raw, dict):
        errors.append(f"data: expected a mapping with a 'source' key, got {raw!r}")
        return {}
    source = raw.get("source")
    if source not in _SOURCES:
        if "source" not in raw:
            errors.append(
                f"data.source: required; expected one of {', '.join(map(repr, _SOURCES))}"
            )
        else:
            errors.append(
                f"data.source: expected one of {', '.join(map(repr, _SOURCES))}, got {source!r}"
            )
        return {}
    fields = {**_DATA_COMMON, **_DATA_BY_SOURCE[source]}
    if raw.get("variables") is not None and "feature_dim" in fields and "feature_dim" not in raw:
        # variables stacked as the features: their dimension is 'variable'
        raw = {**raw, "feature_dim": store.sources.VARIABLE_DIM}
    data = _check_section(raw, fields, "data", errors)
    if source == "dataset" and isinstance(data.get("name"), str):
        names = _dataset_names()
        if data["name"] not in names:
            errors.append(
                f"data.name: expected a bundled data set ({', '.join(names)}), got "
                f"{data['name']!r}{did_you_mean(data['name'], names)}"
            )
    if source in ("zarr", "xarray") and isinstance(data.get("path"), str):
        path = data["path"]
        if not _is_url(path) and not os.path.exists(path):
            errors.append(f"data.path: no such file or folder {path!r}")
    if source in _FILE_CUBES + _FILE_TABLES and "path" in data:
        try:
            store.sources.expand_paths(data["path"])
        except FileNotFoundError as exc:
            errors.append(f"data.path: {exc}")
    if source == "make_cube" and "params" in data:
        _check_params_against("make_cube", data["params"], "data.params", errors)
    if source == "generated" and isinstance(data.get("path"), str) and _is_url(data["path"]):
        errors.append(
            f"data.path: expected a local folder for the generated data set, got {data['path']!r}"
        )
    if source == "generated" and "params" in data:
        for key, instead in (
            ("n_samples", "data.n_samples"),
            ("n_features", "data.n_features"),
            ("kind", "data.kind"),
            ("random_state", "seed"),
        ):
            if key in data["params"]:
                errors.append(f"data.params.{key}: not allowed here; set {instead} instead")
        _check_generator_params(data, errors)
    return data


#: The generator of each ``generated`` kind, and its arguments the pipeline sets itself.
_GENERATORS = {"curved": "make_curved_manifold", "helix": "make_helix"}
_GENERATOR_OWN = ("n_samples", "n_features", "random_state", "return_latent", "return_t")


def _check_generator_params(data, errors):
    """``data.params`` of the ``generated`` source: names the generator takes, and values it
    accepts (a call on two samples, cheap, instead of a traceback once the run has started)."""
    kind, params = data.get("kind"), data.get("params")
    if kind not in _GENERATORS or not isinstance(params, dict):
        return
    name = _GENERATORS[kind]
    func = getattr(datasets, name)
    allowed = sorted(p for p in inspect.signature(func).parameters if p not in _GENERATOR_OWN)
    unknown = [key for key in params if key not in allowed and key not in _GENERATOR_OWN]
    for key in unknown:
        errors.append(
            f"data.params.{key}: unknown parameter of the {kind!r} generator ({name})"
            f"{did_you_mean(key, allowed)}; expected one of {', '.join(allowed)}"
        )
    if unknown or any(key in _GENERATOR_OWN for key in params):
        return
    if not is_int(data.get("n_features")) or not is_int(data.get("n_samples")):
        return  # reported by their own fields
    try:
        func(2, n_features=data["n_features"], random_state=0, **params)
    except (TypeError, ValueError) as exc:
        errors.append(
            f"data: the {kind!r} generator ({name}) refuses n_features={data['n_features']}"
            f"{''.join(f', {k}={v!r}' for k, v in params.items())}: {exc}"
        )


def _check_params_against(func_name, params, where, errors):
    """Keys of ``params`` must be keyword arguments of ``ppa_dask.datasets.<func_name>``."""
    func = getattr(datasets, func_name, None)
    if func is None:
        errors.append(f"data.source: ppa_dask.datasets.{func_name} is not available")
        return
    sig = inspect.signature(func)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    allowed = sorted(
        n
        for n, p in sig.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and n not in ("path", "random_state", "store", "overwrite")
    )
    for key in params:
        if key not in allowed:
            errors.append(
                f"{where}.{key}: unknown parameter of {func_name}"
                f"{did_you_mean(key, allowed)};"
                f" expected one of {', '.join(allowed)}"
            )


#: The file the transform stage writes the components to, by ``transform.format``.
#: The file the transform stage writes, by ``transform.format``.
_COMPONENT_FILES = {
    fmt: "components" + store.sources.suffix(fmt) for fmt in ("zarr", *_FILE_CUBES)
}
_CUBE_SOURCES = ("xarray", "make_cube", *_FILE_CUBES)
#: ``transform.format: same``: the format of the input (Zarr sources are Zarr).
# (in the order the messages have always listed them)
_SAME_FORMAT = {**{fmt: fmt for fmt in sorted(_FILE_CUBES)}, "zarr": "zarr", "xarray": "zarr"}


def _components_format(config):
    """The format the transform stage writes the components in (``transform.format``, with
    ``same`` resolved to the input's format): ``"zarr"``, ``"geotiff"`` or ``"netcdf"``."""
    fmt = config["transform"].get("format", "zarr")
    return _SAME_FORMAT[config["data"]["source"]] if fmt == "same" else fmt


def _check_transform_format(config, errors):
    """``transform.format`` against ``data.source``: a GeoTIFF needs the images (and the CRS
    and transform) of a GeoTIFF source, a NetCDF file a cube, ``same`` a source with a format
    the components can be written in."""
    fmt = config["transform"].get("format")
    source = config["data"].get("source")
    if fmt is None or source is None:
        return  # reported by their own fields
    if fmt == "same" and source not in _SAME_FORMAT:
        errors.append(
            f"transform.format: 'same' writes the components in the input's format, and "
            f"data.source {source!r} has none they can be written in (it works for "
            f"{', '.join(map(repr, _SAME_FORMAT))}); choose 'zarr'"
        )
    elif fmt == "geotiff" and source != "geotiff":
        errors.append(
            f"transform.format: 'geotiff' needs data.source 'geotiff' (the component images "
            f"take its CRS and transform), got data.source {source!r}; choose "
            + ("'netcdf' or 'zarr'" if source in _CUBE_SOURCES else "'zarr'")
        )
    elif fmt == "netcdf" and source not in _CUBE_SOURCES:
        errors.append(
            f"transform.format: 'netcdf' needs a cube (data.source one of "
            f"{', '.join(map(repr, _CUBE_SOURCES))}), got data.source {source!r}; choose 'zarr'"
        )


def validate_pipeline(raw, where="pipeline"):
    """Validate a pipeline configuration (a parsed YAML mapping) before anything runs.

    Parameters
    ----------
    raw : mapping
        The parsed file.
    where : str
        Name used in error messages (the file name).

    Returns
    -------
    config : dict
        The configuration with every default filled in.

    Raises
    ------
    PipelineError
        Naming every bad key and what was expected, e.g.
        ``model.degree: expected an integer >= 1 or a non-empty list of integers >= 1, got 0``.

    Examples
    --------
    >>> validate_pipeline({"name": "x", "data": {"source": "dataset", "name": "vehicles"}}
    ...                   )["model"]["degree"]
    [1, 2, 3, 4, 5]
    """
    errors = []
    if not isinstance(raw, dict):
        raise PipelineError(
            f"{where}: expected a mapping of pipeline settings at the top, got "
            f"{type(raw).__name__}"
        )
    fields = {**_TOP, "data": None, **_SECTIONS}
    for key in raw:
        if key not in fields:
            errors.append(unknown_key(str(key), str(key), fields))
    config = _check_section({k: v for k, v in raw.items() if k in _TOP}, _TOP, "", errors)
    if "data" not in raw:
        errors.append("data: required; expected a mapping with a 'source' key")
        config["data"] = {}
    else:
        config["data"] = _check_data(raw["data"], errors)
    for section, fields_ in _SECTIONS.items():
        config[section] = _check_section(raw.get(section), fields_, section, errors)
    model = config.get("model", {})
    source = config["data"].get("source")
    if config["preprocess"].get("test_fraction") and source in (
        "xarray",
        "make_cube",
        *_FILE_CUBES,
    ):
        errors.append(
            f"preprocess.test_fraction: expected 0 for a cube (data.source {source!r});"
            " held-out samples are supported for tables"
        )
    _check_transform_format(config, errors)
    if isinstance(model.get("degree"), list) and len(model["degree"]) == 1:
        model["degree"] = model["degree"][0]
    if errors:
        more = (
            f" (and {len(errors) - 1} more: {'; '.join(errors[1:4])})" if len(errors) > 1 else ""
        )
        raise PipelineError(f"{where}: {errors[0]}{more}")
    if config["output"] is None:
        config["output"] = os.path.join("runs", config["name"])
    return config


def load_pipeline(path):
    """Read and validate a pipeline file; returns the configuration (see :func:`validate_pipeline`).

    Raises
    ------
    PipelineError
        For a missing file, invalid YAML, a key given twice in one mapping
        (``p.yaml: duplicate key 'degree' on line 9 (first on line 7); ...``) or an invalid
        configuration.
    """
    import yaml

    path = os.fspath(path)
    try:
        raw = read_yaml_file(path)
    except FileNotFoundError:
        raise PipelineError(f"pipeline file {path!r} does not exist") from None
    except IsADirectoryError:
        raise PipelineError(f"pipeline file {path!r} is a folder") from None
    except YAMLFileError as exc:  # a key given twice, too large, too deep
        raise PipelineError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise PipelineError(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from None
    return validate_pipeline(raw, where=path)


# ---------------------------------------------------------------------------------------------
# sizes and counts, checked against the data before the first stage
# ---------------------------------------------------------------------------------------------

#: A pass over chunks under this many bytes is mostly scheduling (a task costs milliseconds
#: whatever its chunk holds) ...
SMALL_CHUNK_BYTES = 2**20
#: ... once there are more than this many of them (a hundred small chunks cost well under a
#: second a pass; a small data set split in a few small chunks is not worth a word)
FEW_CHUNKS = 100
#: Past this many chunks a pass is mostly scheduling whatever their size.
MANY_CHUNKS = 10**5
#: The generators' peak memory as a multiple of the array they return (their temporaries;
#: measured 2.3-2.9 for make_curved_manifold and make_helix with 6 and 60 features).
GENERATOR_MEMORY_FACTOR = 3


def too_many_components(key, wanted, available, model):
    """The refusal of more components than a model has, or None: one sentence for the CLI's
    ``--components`` and the pipeline's ``transform.components``.

    Examples
    --------
    >>> too_many_components("--components", 99, 6, "MODEL 'm.zarr'")
    "--components 99: MODEL 'm.zarr' has 6 components"
    >>> too_many_components("--components", 3, 6, "MODEL 'm.zarr'") is None
    True
    """
    if wanted is None or wanted <= available:
        return None
    return f"{key} {wanted}: {model} has {available} components"


def _planned_data(config):
    """What the fit will see, from the configuration and the inputs' metadata alone:
    ``(n_rows, n_features, layout)`` with ``n_rows`` an upper bound (masked and held-out rows
    leave later), or None when it cannot be known so (a CSV or Parquet table's rows, an input
    that does not open: the load stage says why)."""
    data = config["data"]
    source = data.get("source")
    try:
        if source == "generated":
            return int(data["n_samples"]), int(data["n_features"]), "table"
        if source == "dataset":
            X = getattr(datasets, f"load_{data['name']}")(return_X_y=True)[0]
            return int(np.shape(X)[0]), int(np.shape(X)[1]), "table"
        if source == "make_cube":
            bound = inspect.signature(datasets.make_cube).bind_partial(**data["params"])
            bound.apply_defaults()
            a = bound.arguments
            return int(a["ny"] * a["nx"] * (a["n_times"] or 1)), int(a["n_bands"]), "cube"
        if source == "zarr":
            shape = store.open_input(data["path"], variable=data.get("variable")).shape
            return (int(shape[0]), int(shape[1]), "table") if len(shape) == 2 else None
        if source == "xarray" or source in _FILE_CUBES:
            fmt = "zarr" if source == "xarray" else source
            cube = store.open_source(
                data["path"],
                variable=data.get("variable"),
                feature_dim=data.get("feature_dim"),
                concat_dim=data.get("concat_dim", "time"),
                format=fmt,
                front="pipeline",
            )
            sizes = dict(cube.data.sizes)
            d = math.prod(sizes.pop(dim) for dim in _dims(cube.feature_dim))
            return int(math.prod(sizes.values())), int(d), "cube"
    except store.SourceError as exc:
        if exc.key == "feature_dim" and isinstance(data.get("feature_dim"), list):
            raise  # feature dimensions that are not there: told before the run
        return None
    except Exception:  # noqa: BLE001 - not known from metadata; the load stage reports it
        return None
    return None


def _suggested_chunk_rows(n, d):
    """Rows per chunk for ``n x d`` float64 samples: the default, or more when that leaves
    chunks under :data:`SMALL_CHUNK_BYTES` or a tenth of :data:`MANY_CHUNKS` chunks."""
    rows = max(DEFAULT_CHUNK_ROWS, -(-SMALL_CHUNK_BYTES // (8 * d)), -(-n // (MANY_CHUNKS // 10)))
    return min(rows, n)


def _chunking_warning(n, d, chunk_rows):
    from dask.utils import format_bytes

    rows = max(min(chunk_rows, n), 1)
    count, nbytes = -(-n // rows), rows * d * 8
    if count <= MANY_CHUNKS and (nbytes >= SMALL_CHUNK_BYTES or count <= FEW_CHUNKS):
        return None
    better = _suggested_chunk_rows(n, d)
    chunks = -(-n // better)
    return (
        f"data.chunk_rows {chunk_rows}: {n:,} x {d} samples in {count:,} chunks of "
        f"{format_bytes(nbytes)}; a pass over them is mostly scheduling. chunk_rows: {better} "
        f"gives {chunks:,} chunk{'s' if chunks > 1 else ''} of {format_bytes(better * d * 8)}"
    )


def check_pipeline_data(config, where="pipeline"):
    """Check a validated configuration against its data before anything is written.

    The sizes and counts the stages would fail on, or spend their time on, found from the
    configuration and the inputs' metadata (:func:`_planned_data`): a ``generated`` data set
    without ``data.path`` larger than this process can hold while generating it; the model's
    degrees, folds and components against the data's shape, in the words of
    :meth:`ppa_dask.PPA.check_shape` (the fit's own); ``transform.components`` against the
    components the model will have, in the CLI's words (:func:`too_many_components`); and a
    chunking under which a pass is mostly scheduling (chunks under :data:`SMALL_CHUNK_BYTES`
    when there are more than :data:`FEW_CHUNKS` of them, or more than :data:`MANY_CHUNKS`).

    Parameters
    ----------
    config : dict
        From :func:`load_pipeline` or :func:`validate_pipeline`.
    where : str
        Name used in error messages (the file name).

    Returns
    -------
    warnings : list of str
        The chunking warning, with the chunking suggested instead (empty when none).

    Raises
    ------
    PipelineError
        For what the run would refuse later, or could not hold.

    Examples
    --------
    >>> config = validate_pipeline({"name": "x", "data": {"source": "generated",
    ...     "n_samples": 1000, "n_features": 6}, "transform": {"components": 99}})
    >>> check_pipeline_data(config, "p.yaml")
    Traceback (most recent call last):
    ...
    ppa_dask.app.pipeline.PipelineError: p.yaml: transform.components 99: the model (6 features,
    model.n_components: null) has 6 components
    """
    data = config["data"]
    if data.get("source") == "generated" and data.get("path") is None:
        import psutil
        from dask.utils import format_bytes

        n, d = int(data["n_samples"]), int(data["n_features"])
        need = n * d * 8 * GENERATOR_MEMORY_FACTOR
        available = psutil.virtual_memory().available
        if need > available:
            raise PipelineError(
                f"{where}: data.n_samples: {n:,} x {d} generated samples are "
                f"{format_bytes(n * d * 8)} (float64), and generating them in this process "
                f"takes about {GENERATOR_MEMORY_FACTOR} times that, more than its "
                f"{format_bytes(available)} of available memory: set data.path to write them "
                "blockwise to a Zarr store on the cluster, or ask for fewer samples"
            )
    try:
        planned = _planned_data(config)
    except store.SourceError as exc:
        raise PipelineError(f"{where}: data.feature_dim: {exc}") from None
    if planned is None:
        return []
    n, d, layout = planned
    params = dict(config["model"])
    try:
        available = PPA(random_state=config["seed"], **params).check_shape(n, d)
    except (TypeError, ValueError) as exc:
        raise PipelineError(
            f"{where}: model: {exc} (the data: at most {n:,} samples x {d} features)"
        ) from None
    k = params.get("n_components")
    refusal = too_many_components(
        "transform.components",
        config["transform"].get("components"),
        available,
        f"the model ({d} features, model.n_components: {'null' if k is None else k})",
    )
    if refusal is not None:
        raise PipelineError(f"{where}: {refusal}")
    if layout == "table":
        warning = _chunking_warning(n, d, data["chunk_rows"])
        return [] if warning is None else [warning]
    return []


# ---------------------------------------------------------------------------------------------
# fingerprints and completion markers
# ---------------------------------------------------------------------------------------------


def _canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def _sha256(obj):
    return hashlib.sha256(_canonical(obj).encode()).hexdigest()


def _read_marker(stage_dir):
    """A stage's completion marker, or None when absent, unreadable or not of the form the
    library writes (the stage then runs again and rewrites it); read within the bounds of
    :func:`~ppa_dask.utils.files.read_json_file`."""
    try:
        marker = read_json_file(os.path.join(stage_dir, MARKER))
    except (OSError, ValueError):
        return None
    return marker if _is_marker(marker) else None


def _is_marker(marker):
    """Whether ``marker`` has the form :meth:`Run._stage` writes: a damaged one must not make
    a resumed run fail later (a field of another type), nor fingerprint a path outside its
    stage folder (an output named ``../..`` would have the whole disk walked)."""
    if not isinstance(marker, dict) or not isinstance(marker.get("key"), str):
        return False
    outputs, info, wall = marker.get("outputs"), marker.get("info"), marker.get("wall_time_s")
    if not isinstance(outputs, dict) or not all(
        _is_output_name(name) and isinstance(value, str) for name, value in outputs.items()
    ):
        return False
    if not isinstance(wall, (int, float)) or isinstance(wall, bool) or not math.isfinite(wall):
        return False
    if info is None:
        return True
    if not isinstance(info, dict) or info.get("layout", "table") not in ("table", "cube"):
        return False
    names, nodata = info.get("feature_names"), info.get("nodata")
    if names is not None and not (
        isinstance(names, list) and all(isinstance(n, str) for n in names)
    ):
        return False
    if nodata is not None and (not isinstance(nodata, (int, float)) or isinstance(nodata, bool)):
        return False
    if info.get("layout") == "cube":
        dims = info.get("feature_dim")
        return isinstance(dims, str) or (
            isinstance(dims, list) and bool(dims) and all(isinstance(d, str) for d in dims)
        )
    return True


def _is_output_name(name):
    """A relative path inside the stage folder, written as the library writes it."""
    parts = name.split("/")
    return bool(name) and not os.path.isabs(name) and ".." not in parts and "" not in parts


def _write_json_atomic(path, obj):
    write_json_atomic(path, obj, default=str)


# ---------------------------------------------------------------------------------------------
# the run folder: whose it is, and who is using it
# ---------------------------------------------------------------------------------------------


def _now():
    return datetime.datetime.now().isoformat(timespec="seconds")


def _read_run_record(root):
    """The run folder's record (:data:`RUN_RECORD`): None if absent; PipelineError if it is
    not one the library wrote (the folder is then not used)."""
    path = os.path.join(root, RUN_RECORD)
    if not os.path.lexists(path):
        return None
    try:
        record = read_json_file(path)
    except (OSError, ValueError) as exc:
        record = exc
    if (
        not isinstance(record, dict)
        or record.get("format") != "ppa-dask-run"
        or not isinstance(record.get("stages"), list)
    ):
        why = f" ({getattr(record, 'problem', record)})" if isinstance(record, Exception) else ""
        raise PipelineError(
            f"output {root!r}: {RUN_RECORD} is not a ppa-dask run record{why}; the folder is "
            "not used (name another output folder)"
        )
    return record


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _acquire_lock(path):
    """Create the lock file ``path`` (O_CREAT | O_EXCL: one run wins) holding this process's pid,
    host and start time; returns a note (str) when a stale lock (its process is dead, on this
    host) was taken over, else None. Raises PipelineError when another live run holds it."""
    host = socket.gethostname()
    note = None
    for _ in range(3):  # a stale lock taken over, then created again
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                json.dump({"pid": os.getpid(), "host": host, "started": _now()}, f)
                f.write("\n")
            return note
        try:
            owner = read_json_file(path)
            pid, owner_host = int(owner["pid"]), str(owner["host"])
        except FileNotFoundError:
            continue  # released meanwhile: try again
        except (OSError, ValueError, KeyError, TypeError):
            raise PipelineError(
                f"the run folder is locked by {path} whose content is unreadable; if no "
                "ppa-dask run uses this folder, remove that file"
            ) from None
        if owner_host == host and pid != os.getpid() and not _pid_alive(pid):
            note = (
                f"took over the lock {path} of process {pid} on {host} (started "
                f"{owner.get('started', '?')}), which is no longer running"
            )
            remove_path(path)
            continue
        raise PipelineError(
            f"the run folder is in use by another ppa-dask run: lock file {path} is held by "
            f"pid {pid} on host {owner_host} (started {owner.get('started', '?')}); wait for "
            "it to finish, or remove the lock file if that run is gone"
        )
    raise PipelineError(f"could not take the lock file {path} (it keeps reappearing)")


def _release_lock(path):
    """Remove the lock file if this process still holds it (never another run's)."""
    try:
        owner = read_json_file(path)
    except (OSError, ValueError):
        return
    ours = isinstance(owner, dict) and owner.get("pid") == os.getpid()
    if ours and owner.get("host") == socket.gethostname():
        remove_path(path)


# ---------------------------------------------------------------------------------------------
# reconstruction-error tables (the PCA baseline is ppa_dask.app.baseline)
# ---------------------------------------------------------------------------------------------


def _percent_cell(pct):
    """A ratio cell: ``-`` where there is none (k at or past the rank: rounding over rounding)."""
    return "-" if pct is None else f"{pct:.1f}"


def format_error_table(rows):
    """Plain-text table of (k, pca, ppa, percent) rows (``-``: no ratio, see :func:`error_rows`)."""
    header = ("k", "PCA MSE", "PPA MSE", "PPA/PCA %")
    body = [(str(k), f"{pca:.6g}", f"{ppa:.6g}", _percent_cell(pct)) for k, pca, ppa, pct in rows]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(4)]

    def line(cells):
        return "  ".join(c.rjust(w) for c, w in zip(cells, widths))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in body)])


def write_error_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["k", "pca_mse", "ppa_mse", "ppa_over_pca_percent"])
        for k, pca, ppa, pct in rows:
            # no ratio past the rank: an empty cell (a missing value to CSV readers)
            cell = "" if pct is None else repr(float(pct))
            w.writerow([k, repr(float(pca)), repr(float(ppa)), cell])


def write_error_markdown(path, rows, total_variance, caption):
    lines = [
        "| k | PCA MSE | PPA MSE | PPA/PCA % |",
        "|---:|---:|---:|---:|",
        *(f"| {k} | {pca:.6g} | {ppa:.6g} | {_percent_cell(pct)} |" for k, pca, ppa, pct in rows),
        "",
        f"Total variance (k = 0): {total_variance:.6g}. {caption}",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def error_rows(pca_errors, ppa_errors, ks, rank=None):
    """``(k, pca, ppa, percent)`` rows of a reconstruction-error table.

    ``percent`` is ``100 * ppa / pca``, or None (shown ``-``) from ``k = rank`` on, where both
    errors are rounding (the data are reconstructed by ``rank`` components: the fitted model's
    ``rank_``), and where PCA's error is zero.

    Examples
    --------
    >>> error_rows([4.0, 2.0, 1e-30], [4.0, 1.0, 2e-31], [1, 2], rank=2)
    [(1, 2.0, 1.0, 50.0), (2, 1e-30, 2e-31, None)]
    """
    rows = []
    for k in ks:
        pca, ppa = float(pca_errors[k]), float(ppa_errors[k])
        past = rank is not None and k >= rank
        rows.append((k, pca, ppa, 100.0 * ppa / pca if pca > 0 and not past else None))
    return rows


# ---------------------------------------------------------------------------------------------
# data access (the store API and the xarray cubes)
# ---------------------------------------------------------------------------------------------


def _write_table(X, path, attrs=None):
    """Write a 2-D Dask/numpy array as a result array (temporary sibling, marked complete,
    renamed into place: ppa_dask.store.write_array)."""
    store.write_array(X, path, attrs=attrs)


def _open_table(path):
    return store.open_array(path)


def _write_cube(cube, path, name):
    """Write a DataArray as a Zarr group (atomically: ppa_dask.store.write_dataset)."""
    store.write_dataset(cube.rename(name), path)


def _open_cube(path, name):
    return store.open_dataset(path)[name]


def _component_attrs(scale):
    """CF attributes of the component images the pipeline writes as GeoTIFF / NetCDF: min-max
    scaled features are dimensionless, so are their PPA coefficients (PPA preserves volume);
    unscaled, they take the input's ``units`` (``write_cube``)."""
    if scale == "minmax":
        return {"units": "1", "comment": "PPA of the features min-max scaled to [0, 1]"}
    return {}


def _save_model(model, path):
    store.save_model(model, path)


def _load_model(path):
    return store.load_model(path)


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------


class Run:
    """One execution of a validated pipeline configuration in a run folder."""

    def __init__(self, config, output=None, stream=None, force=False, clock=None):
        self.config = config
        self.clock = clock  # perf_counter() value the log's times count from
        self.root = os.path.abspath(output or config["output"])
        self.stream = sys.stdout if stream is None else stream
        self.force = force
        self.keys = {}  # stage -> key of its (current) completion marker
        self.times = {}
        self.skipped = []
        self.log = None
        self.record = None  # the run folder's record (RUN_RECORD), once claimed
        self.data_warnings = None  # check_pipeline_data's, once checked

    def dir(self, stage):
        return os.path.join(self.root, STAGE_DIRS[stage])

    def path(self, stage, name):
        return os.path.join(self.dir(stage), name)

    # -- orchestration ---------------------------------------------------------------------

    def check_data(self, where="pipeline"):
        """:func:`check_pipeline_data` for this run, once (before its folder is created);
        returns the warnings, which :meth:`execute` writes to the log."""
        if self.data_warnings is None:
            self.data_warnings = check_pipeline_data(self.config, where)
        return self.data_warnings

    def execute(self):
        warnings = self.check_data()
        note = self._claim_folder()
        try:
            self.log = Reporter(self.stream, os.path.join(self.root, "pipeline.log"), self.clock)
            t_start = time.perf_counter()
            self.log(f"pipeline {self.config['name']!r}: run folder {self.root}")
            if note:
                self.log(f"  note: {note}")
            for warning in warnings:
                self.log(f"  warning: {warning}")
            _write_yaml(os.path.join(self.root, "pipeline.yaml"), self.config)
            for stage in STAGES:
                self._stage(stage)
            self._summary()
            self.log(
                f"pipeline {self.config['name']!r}: done in "
                f"{time.perf_counter() - t_start:.1f} s "
                f"({len(self.skipped)} of {len(STAGES)} stages already complete)"
            )
        finally:
            _release_lock(os.path.join(self.root, RUN_LOCK))
        return self.root

    def check_folder(self):
        """Refuse an output that cannot become this run's folder, before any work starts (a
        file, or a folder that is not empty and holds no run record of the library's).
        :meth:`execute` checks again, under the folder's lock."""
        root = self.root
        if os.path.lexists(root) and not os.path.isdir(root):
            raise PipelineError(f"output {root!r} exists and is not a folder")
        if (
            os.path.isdir(root)
            and set(os.listdir(root)) - {RUN_LOCK}
            and _read_run_record(root) is None
        ):
            raise self._not_a_run_folder()

    def _not_a_run_folder(self):
        return PipelineError(
            f"output {self.root!r} is a folder that is not empty and not a ppa-dask run folder "
            f"(it has no {RUN_RECORD}); nothing was written: name a new or empty folder"
        )

    def _claim_folder(self):
        """Make sure the run folder is ours and take its lock, before anything is written:
        a new or empty folder becomes a run folder; a non-empty folder without the library's
        record is refused, and so is a folder another live run holds. Returns the stale-lock
        note or None."""
        root = self.root
        self.check_folder()
        os.makedirs(root, exist_ok=True)
        lock = os.path.join(root, RUN_LOCK)
        note = _acquire_lock(lock)
        try:
            record = _read_run_record(root)  # again, now that no other run can write it
            if record is None:
                if set(os.listdir(root)) - {RUN_LOCK}:
                    raise self._not_a_run_folder()
                record = {
                    "format": "ppa-dask-run",
                    "version": FORMAT_VERSION,
                    "ppa_dask": VERSION,
                    "pipeline": self.config["name"],
                    "created": _now(),
                    "stages": [],
                }
            foreign = [
                name
                for name in STAGE_DIRS.values()
                if os.path.lexists(os.path.join(root, name)) and name not in record["stages"]
            ]
            if foreign:
                raise PipelineError(
                    f"output {root!r}: {', '.join(foreign)} was not written by ppa-dask (the "
                    f"folder's {RUN_RECORD} does not list it); nothing was removed: move it away"
                )
            record.update(spec_sha256=_sha256(self.config), last_run=_now())
            self.record = record
            self._write_record()
        except BaseException:
            _release_lock(lock)
            raise
        return note

    def _write_record(self):
        _write_json_atomic(os.path.join(self.root, RUN_RECORD), self.record)

    def _own(self, stage):
        """Record the stage folder as the library's before creating it."""
        name = STAGE_DIRS[stage]
        if name not in self.record["stages"]:
            self.record["stages"].append(name)
            self._write_record()

    def _stage_key(self, stage, external):
        config = {name: self.config.get(name) for name in STAGE_CONFIG[stage]}
        upstream = {name: self.keys[name] for name in STAGE_INPUTS[stage]}

        return _sha256(
            {
                "format": FORMAT_VERSION,
                "ppa_dask": VERSION,
                "stage": stage,
                "config": config,
                "upstream": upstream,
                "inputs": external,
            }
        )

    def _outputs_unchanged(self, marker, stage_dir):
        outputs = marker.get("outputs")
        if not isinstance(outputs, dict) or not outputs:
            return False
        for name, recorded in outputs.items():
            target = os.path.join(stage_dir, name)
            try:
                if fingerprint(target) != recorded:
                    return False
            except FileNotFoundError:
                return False
        return True

    def _stage(self, stage):
        runner = getattr(self, f"_run_{stage}")
        external = self._external_inputs(stage)
        key = self._stage_key(stage, external)
        stage_dir = self.dir(stage)
        marker = _read_marker(stage_dir)
        if (
            not self.force
            and marker is not None
            and marker.get("key") == key
            and self._outputs_unchanged(marker, stage_dir)
        ):
            self.keys[stage] = key
            self.times[stage] = 0.0
            self.skipped.append(stage)
            self.log(
                f"stage {stage}: skipped (complete for this configuration and inputs, "
                f"took {marker.get('wall_time_s', 0):.1f} s)"
            )
            return
        why = (
            "forced"
            if self.force
            else "not run before"
            if marker is None
            else "configuration, inputs or outputs changed"
            if marker.get("key") != key
            else "outputs changed"
        )
        self.log(f"stage {stage}: started ({why})")
        # a stale or partial folder is removed first: nothing left from an interrupted run
        # can be mistaken for an output. Only a stage folder the run record lists (the library
        # made it) is ever removed; _claim_folder refused the run otherwise.
        if os.path.lexists(stage_dir):
            if STAGE_DIRS[stage] not in self.record["stages"]:
                raise PipelineError(f"{stage_dir!r} was not written by ppa-dask; not removed")
            remove_path(stage_dir)
        self._own(stage)
        os.makedirs(stage_dir)
        t0 = time.perf_counter()
        outputs, info = runner()
        wall = time.perf_counter() - t0
        record = {
            "stage": stage,
            "key": key,
            "format": FORMAT_VERSION,
            "config": {name: self.config.get(name) for name in STAGE_CONFIG[stage]},
            "upstream": {name: self.keys[name] for name in STAGE_INPUTS[stage]},
            "inputs": external,
            "outputs": {name: fingerprint(os.path.join(stage_dir, name)) for name in outputs},
            "info": info,
            "wall_time_s": round(wall, 3),
            "finished": datetime.datetime.now().isoformat(timespec="seconds"),
        }
        _write_json_atomic(os.path.join(stage_dir, MARKER), record)
        self.keys[stage] = key
        self.times[stage] = wall
        self.log(f"stage {stage}: done in {wall:.1f} s")

    def _external_inputs(self, stage):
        """Fingerprints of what a stage reads from outside the run folder."""
        if stage != "load":
            return {}
        data = self.config["data"]
        if data["source"] in ("zarr", "xarray"):
            return store.sources.source_fingerprint(data["path"], "zarr")
        if data["source"] == "dataset":
            return {"dataset": data["name"], "ppa_dask": VERSION}
        if data["source"] in _FILE_CUBES + _FILE_TABLES:
            return store.sources.source_fingerprint(data["path"], data["source"])
        return {}

    def _summary(self):
        summary = {
            "pipeline": self.config["name"],
            "run": self.root,
            "stages": {},
            "versions": _versions(),
        }
        for stage in STAGES:
            marker = _read_marker(self.dir(stage)) or {}
            summary["stages"][stage] = {
                "folder": STAGE_DIRS[stage],
                "skipped_this_run": stage in self.skipped,
                "wall_time_s": marker.get("wall_time_s"),
                "outputs": sorted(marker.get("outputs", {})),
                "info": marker.get("info"),
            }
        _write_json_atomic(os.path.join(self.root, "summary.json"), summary)

    # -- what each stage reads -------------------------------------------------------------

    def _loaded(self):
        """The loaded data: ("table", dask array, names) or ("cube", DataArray, feature_dim)."""
        info = (_read_marker(self.dir("load")) or {}).get("info") or {}
        data = self.config["data"]
        if info.get("layout") == "cube":
            if data["source"] == "xarray":
                cube = self._open_source(data, "zarr", data["feature_dim"]).data
            elif data["source"] in _FILE_CUBES:
                cube = self._open_source(data, data["source"], info["feature_dim"]).data
                # chunks of whole rows of tiles (the last sample dimension whole), so the
                # stacked rows, and the cubes written from them, have regular chunks
                last = [d for d in cube.dims if d not in _dims(info["feature_dim"])][-1]
                cube = cube.chunk({last: -1})
            else:
                cube = _open_cube(self.path("load", "data.zarr"), data["variable"])
            return "cube", cube, info["feature_dim"]
        if data["source"] == "zarr":
            X = self._open_source(data, "zarr").data
        elif data["source"] == "generated" and data["path"] is not None:
            X = store.open_input(os.path.abspath(data["path"]))
        else:
            X = _open_table(self.path("load", "data.zarr"))
        return "table", X, info.get("feature_names")

    def _open_source(self, data, fmt, feature_dim=None):
        """The input of ``data`` (ppa_dask.store.open_source); a refusal names the data key at
        fault (a file source's: ``data.path``)."""
        try:
            return store.open_source(
                data["path"],
                variable=data.get("variable"),
                variables=data.get("variables"),
                feature_dim=feature_dim,
                columns=data.get("columns"),
                concat_dim=data.get("concat_dim", "time"),
                nodata=data.get("nodata"),
                format=fmt,
                front="pipeline",
            )
        except store.SourceError as exc:
            raise PipelineError(f"data.{'path' if fmt != 'zarr' else exc.key}: {exc}") from None
        except ValueError as exc:
            if fmt == "zarr":
                raise
            raise PipelineError(f"data.path: {exc}") from None

    def _samples(self):
        return _open_table(self.path("preprocess", "samples.zarr"))

    def _preprocess_info(self):
        return read_json_file(self.path("preprocess", "preprocess.json"))

    def _model(self):
        return _load_model(self.path("fit", "model.zarr"))

    # -- the stages --------------------------------------------------------------------------

    def _run_load(self):
        data, seed = self.config["data"], self.config["seed"]
        source = data["source"]
        out = self.path("load", "data.zarr")
        if source == "zarr":
            X = self._open_source(data, "zarr").data
            self.log(
                f"  data: {X.shape[0]:,} x {X.shape[1]} Zarr array at {data['path']} "
                "(read in place)"
            )
            _write_json_atomic(
                self.path("load", "source.json"),
                {"path": data["path"], "variable": data["variable"], "shape": list(X.shape)},
            )
            return ["source.json"], {
                "layout": "table",
                "shape": list(X.shape),
                "feature_names": None,
            }
        if source in _FILE_CUBES + _FILE_TABLES:
            return self._load_file(data, out)
        if source == "xarray":
            dim = data["feature_dim"]
            opened = self._open_source(data, "zarr", dim)
            cube = opened.data
            self.log(f"  data: cube {dict(cube.sizes)} at {data['path']} (read in place)")
            _write_json_atomic(
                self.path("load", "source.json"),
                {"path": data["path"], "variable": data["variable"], "sizes": dict(cube.sizes)},
            )
            return ["source.json"], self._cube_info(opened)
        if source == "make_cube":
            ds = datasets.make_cube(random_state=seed, path=out, **data["params"])
            cube = _cube_variable(ds, data["variable"], data["feature_dim"], "make_cube")
            self.log(f"  data: make_cube {dict(cube.sizes)} written to {out}")
            return ["data.zarr"], {
                "layout": "cube",
                "feature_dim": data["feature_dim"],
                "sizes": dict(cube.sizes),
            }
        import dask.array as da

        if source == "generated" and data["path"] is not None:
            return self._load_generated_zarr(data, seed)
        if source == "dataset":
            X, _ = getattr(datasets, f"load_{data['name']}")(return_X_y=True)
            X = np.asarray(X, dtype=np.float64)
            names = None
            try:
                bunch = getattr(datasets, f"load_{data['name']}")(return_X_y=False)
                names = [str(n) for n in bunch.feature_names]
            except Exception:  # a loader without names: columns are numbered
                names = None
            what = f"bundled data set {data['name']!r}"
        else:  # generated
            gen = datasets.make_helix if data["kind"] == "helix" else datasets.make_curved_manifold
            X = gen(
                data["n_samples"],
                n_features=data["n_features"],
                random_state=seed,
                **data["params"],
            )
            names, what = None, f"generated {data['kind']!r} data"
        rows = min(data["chunk_rows"], X.shape[0])
        _write_table(
            da.from_array(X, chunks=(rows, X.shape[1])),
            out,
            attrs={"feature_names": names} if names else None,
        )
        self.log(f"  data: {what}, {X.shape[0]:,} x {X.shape[1]}, written to {out}")
        return ["data.zarr"], {"layout": "table", "shape": list(X.shape), "feature_names": names}

    def _load_generated_zarr(self, data, seed):
        """The ``generated`` source with a ``path``: written there by ``datasets.write_zarr``
        on the cluster, or reused when the array already there holds the same samples."""
        path = os.path.abspath(data["path"])
        n, d = data["n_samples"], data["n_features"]
        rows = min(data["chunk_rows"], n)
        expected = {
            "kind": data["kind"],
            "n_samples": n,
            "n_features": d,
            "random_state": seed,
            "dtype": "float64",
            "params": data["params"],
        }
        why = _why_not_reusable(path, expected, (n, d), rows)
        if why is not None and (why == _FOREIGN or why.startswith("unreadable")):
            # only a data set the generator wrote is ever replaced
            raise PipelineError(
                f"data.path: {path!r} exists and holds no data set written by ppa-dask's "
                f"generator ({why}); it is not replaced: name a new path"
            )
        if why is None:
            self.log(f"  data: reusing {path} (same parameters)")
        else:
            note = "" if why == "absent" else f" (existing store: {why}; rewriting)"
            self.log(f"  data: writing {n:,} x {d} {data['kind']} samples to {path}{note}")
            datasets.write_zarr(
                path,
                n,
                n_features=d,
                kind=data["kind"],
                chunk_rows=rows,
                random_state=seed,
                overwrite=os.path.lexists(path),
                **data["params"],
            )
        _write_json_atomic(
            self.path("load", "source.json"),
            {"path": path, "reused": why is None, "shape": [n, d], "chunk_rows": rows},
        )
        # the array is an output of this stage although it lies outside the stage folder (an
        # absolute name): a rerun redoes the stage if it was removed or changed
        return ["source.json", path], {
            "layout": "table",
            "shape": [n, d],
            "feature_names": None,
            "path": path,
            "reused": why is None,
        }

    def _cube_info(self, opened):
        """The load stage's record of a cube read in place, its no-data value among it; with
        none declared, the no-data check of the fit (one read of the data), logged and warned
        here since the fit sees the preprocessed cube."""
        message = fill_warning(opened.data, opened.feature_dim)
        if message is not None:
            self.log(f"  warning: {message}")
            warn(message, NoDataWarning)
        elif opened.nodata is not None:
            self.log(
                f"  data: no-data value {opened.nodata:g} (pixels equal to it in any band left out)"
            )
        return {
            "layout": "cube",
            "feature_dim": opened.feature_dim,
            "sizes": dict(opened.data.sizes),
            "nodata": opened.nodata,
        }

    def _load_file(self, data, out):
        """NetCDF / GeoTIFF cubes read in place; Parquet / CSV tables (the selected numeric
        columns, named) copied chunk by chunk to ``data.zarr`` (ppa_dask.store.sources)."""
        source = data["source"]
        opened = self._open_source(data, source, data.get("feature_dim"))
        if source in _FILE_CUBES:
            cube = opened.data
            self.log(f"  data: {source} cube {dict(cube.sizes)} at {data['path']} (read in place)")
            _write_json_atomic(
                self.path("load", "source.json"),
                {"path": data["path"], "variable": cube.name, "sizes": dict(cube.sizes)},
            )
            return ["source.json"], self._cube_info(opened)
        X, names = opened.data, opened.feature_names
        rows = max(min(data["chunk_rows"], X.shape[0]), 1)
        _write_table(X.rechunk((rows, -1)), out, attrs={"feature_names": names})
        self.log(
            f"  data: {source} table {X.shape[0]:,} x {X.shape[1]} ({', '.join(names)}) "
            f"from {data['path']}, written to {out}"
        )
        return ["data.zarr"], {"layout": "table", "shape": list(X.shape), "feature_names": names}

    def _run_preprocess(self):
        layout, data, extra = self._loaded()
        pre = self.config["preprocess"]
        if layout == "cube":
            return self._preprocess_cube(data, extra, pre)
        return self._preprocess_table(data, pre, names=extra)

    def _mask_values(self, X, pre):
        """Values outside the valid range become NaN (fill values count as missing)."""
        import dask.array as da

        rng = pre["mask"]["valid_range"]
        if rng is None:
            return X
        lo, hi = rng
        return da.where((lo <= X) & (hi >= X), X, np.nan)

    def _preprocess_table(self, X, pre, names=None, cube_info=None):
        import dask.array as da

        X = X.astype(np.float64)
        if X.numblocks[1] != 1:
            X = X.rechunk({1: -1})
        X = self._mask_values(X, pre)
        n, d = X.shape
        finite = da.isfinite(X)
        counts, feature_counts, lo, hi = compute_with_progress(
            finite.all(axis=1).sum(),
            finite.sum(axis=0),
            da.nanmin(da.where(finite, X, np.nan), axis=0),
            da.nanmax(da.where(finite, X, np.nan), axis=0),
            label="preprocess: scan",
            stream=self.stream,
        )
        n_valid_any = int(counts)
        empty = np.flatnonzero(np.asarray(feature_counts) == 0)
        kept = np.flatnonzero(np.asarray(feature_counts) > 0)
        if kept.size < 2:
            raise PipelineError(
                f"preprocess: only {kept.size} feature(s) hold any finite value; "
                "PPA needs at least 2"
            )
        if empty.size:
            self.log(
                f"  preprocess: features {empty.tolist()} hold no finite value; dropped "
                "(restored as NaN in cubes)"
            )
            X = X[:, kept]
        valid = da.isfinite(X).all(axis=1)
        n_valid = int(valid.sum().compute()) if empty.size else n_valid_any
        n_masked = n - n_valid
        if n_masked and pre["mask"]["nonfinite"] == "error":
            raise PipelineError(
                f"preprocess.mask.nonfinite is 'error' and {n_masked} of {n} samples hold NaN, "
                f"inf or out-of-range values (first rows: {_first_false(valid, 5)})"
            )
        if n_valid < 2:
            raise PipelineError(
                f"preprocess: {n_valid} sample(s) without missing values; PPA needs more"
            )
        lo, hi = np.asarray(lo)[kept], np.asarray(hi)[kept]
        if pre["scale"] == "minmax":
            # scaled over the valid samples only (a masked sample's values do not count)
            if n_masked:
                Xv = da.where(valid[:, None], X, np.nan)
                lo, hi = compute_with_progress(
                    da.nanmin(Xv, axis=0),
                    da.nanmax(Xv, axis=0),
                    label="preprocess: range",
                    stream=self.stream,
                )
            width = hi - lo
            constant = np.flatnonzero(width <= 0)
            width = np.where(width > 0, width, 1.0)
            X = (X - lo) / width
        else:
            constant = np.array([], dtype=int)
            width = np.ones_like(lo)
            lo = np.zeros_like(lo)
        outputs = ["samples.zarr", "preprocess.json"]
        fraction = pre["test_fraction"]
        rows = self.config["data"]["chunk_rows"]
        if fraction:
            # a row is held out by a hash of (seed, its index): independent of chunking
            held = da.arange(n, chunks=(X.chunks[0],)).map_blocks(
                _held_out_rows, _split_seed(self.config["seed"]), fraction, dtype=bool
            )
            n_test = _write_rows(X, valid & held, rows, self.path("preprocess", "test.zarr"))
            n_train = _write_rows(X, valid & ~held, rows, self.path("preprocess", "samples.zarr"))
            outputs.append("test.zarr")
            if min(n_train, n_test) < 2:
                raise PipelineError(
                    f"preprocess.test_fraction: {fraction} leaves {n_train} "
                    f"training and {n_test} test samples"
                )
        else:
            n_train, n_test = (
                _write_rows(
                    X, valid if n_masked else None, rows, self.path("preprocess", "samples.zarr")
                ),
                0,
            )
        info = {
            "n_samples": int(n),
            "n_valid": int(n_valid),
            "n_masked": int(n_masked),
            "n_train": int(n_train),
            "n_test": int(n_test),
            "test_fraction": fraction,
            "n_features_in": int(d),
            "kept_features": kept.tolist(),
            "dropped_features": empty.tolist(),
            "constant_features": constant.tolist(),
            "scale": pre["scale"],
            "offset": lo.tolist(),
            "width": width.tolist(),
            "feature_names": ([names[j] for j in kept] if names else None),
        }
        if cube_info:
            info.update(cube_info)
        _write_json_atomic(self.path("preprocess", "preprocess.json"), info)
        self.log(
            f"  preprocess: {n_valid:,} of {n:,} samples kept ({n_masked:,} masked), "
            f"{kept.size} features, scale {pre['scale']}"
            + (f"; {n_test:,} held out for testing" if fraction else "")
        )
        return outputs, {
            "n_valid": int(n_valid),
            "n_masked": int(n_masked),
            "n_features": int(kept.size),
        }

    def _preprocess_cube(self, cube, feature_dim, pre):
        import xarray as xr

        dims, original, split = _dims(feature_dim), cube, None
        if len(dims) > 1:
            # features spanning several dimensions (time, band): scaled along the one they are
            # merged into (as the fit merges them), written with them split back
            cube, split = merge_feature_dims(cube, dims)
            feature_dim = FEATURE_DIM_SEP.join(dims)
        sample_dims = [dm for dm in cube.dims if dm != feature_dim]
        stacked = cube.transpose(*sample_dims, feature_dim)
        table = _dask_data(stacked).reshape((-1, stacked.shape[-1]))
        outputs, info = self._preprocess_table(
            table,
            pre,
            names=[str(v) for v in cube[feature_dim].values],
            cube_info={
                "layout": "cube",
                "feature_dim": dims if split else feature_dim,
                "sample_dims": sample_dims,
            },
        )
        meta = self._preprocess_info()
        # the scaled cube (a sample with any missing value entirely NaN), for the fit through
        # the xarray adapter, which leaves such samples out and drops features without data
        d = cube.sizes[feature_dim]
        offset, width = np.zeros(d), np.ones(d)
        offset[meta["kept_features"]] = meta["offset"]
        width[meta["kept_features"]] = meta["width"]
        coord = {feature_dim: cube[feature_dim]} if feature_dim in cube.coords else {}
        scaled = cube.astype(np.float64)
        rng = pre["mask"]["valid_range"]
        if rng is not None:
            scaled = scaled.where((scaled >= rng[0]) & (scaled <= rng[1]))
        scaled = (scaled - xr.DataArray(offset, dims=[feature_dim], coords=coord)) / xr.DataArray(
            width, dims=[feature_dim], coords=coord
        )
        kept = scaled.isel({feature_dim: meta["kept_features"]})
        scaled = scaled.where(np.isfinite(kept).all(feature_dim))
        scaled = scaled.transpose(*cube.dims)
        if split is not None:
            scaled = split_feature_dims(scaled, feature_dim, split).transpose(*original.dims)
        scaled.attrs = {}
        _write_cube(scaled, self.path("preprocess", "cube.zarr"), "data")
        return outputs + ["cube.zarr"], info

    def _run_fit(self):
        params = dict(self.config["model"])
        model = PPA(random_state=self.config["seed"], **params)
        what = f"PPA({', '.join(f'{k}={v!r}' for k, v in params.items())})"
        progress = step_reporter(self.stream, label="fit")
        meta = self._preprocess_info()
        if meta.get("layout") == "cube":
            cube = _open_cube(self.path("preprocess", "cube.zarr"), "data")
            self.log(
                f"  fit: {what} on the cube {dict(cube.sizes)}, features along "
                f"{meta['feature_dim']!r} ({meta['n_valid']:,} valid samples)"
            )
            # the no-data value the load stage applied, recorded by the model
            load_info = (_read_marker(self.dir("load")) or {}).get("info") or {}
            cube.encoding["ppa_dask_nodata"] = load_info.get("nodata")
            model.fit(
                cube,
                feature_dim=_fit_dim(meta["feature_dim"]),
                nan_policy="drop_samples",
                progress=progress,
            )
        else:
            X = self._samples()
            self.log(
                f"  fit: {what} on {X.shape[0]:,} x {X.shape[1]} samples ({X.numblocks[0]} chunks)"
            )
            model.fit(X, progress=progress)
        _save_model(model, self.path("fit", "model.zarr"))
        info = {
            "degrees": [int(g) for g in model.degrees_],
            "n_passes": int(model.n_passes_),
            "residual_cache": model.residual_cache_,
            "explained_variance": np.asarray(model.explained_variance_).tolist(),
        }
        self.log(
            f"  fit: degrees {' '.join(map(str, info['degrees']))}, {model.n_passes_} "
            f"passes, residual cache {model.residual_cache_}"
        )
        return ["model.zarr"], info

    def _n_out(self, model):
        k = self.config["transform"]["components"]
        # checked before the first stage when the data's shape was known from metadata
        refusal = too_many_components("transform.components", k, model.n_components_, "the model")
        if refusal is not None:
            raise PipelineError(refusal)
        return model.n_components_ if k is None else k

    def _run_transform(self):
        model = self._model()
        k = self._n_out(model)
        meta = self._preprocess_info()
        fmt = _components_format(self.config)
        name = _COMPONENT_FILES[fmt]
        target = self.path("transform", name)
        if meta.get("layout") == "cube":
            cube = _open_cube(self.path("preprocess", "cube.zarr"), "data")
            comp = model.transform(cube).isel(component=slice(0, k))
            if fmt == "zarr":
                _write_cube(comp, target, "components")
            else:
                # GeoTIFF / NetCDF: the CRS and transform, coordinates and attributes of the
                # input file (ppa_dask.store.write_result)
                _, source, _ = self._loaded()
                comp = comp.rename("components")
                comp.attrs = _component_attrs(self.config["preprocess"]["scale"])
                store.write_result(comp, target, like=source, name="components")
            self.log(
                f"  transform: {k} component images {dict(comp.sizes)} written to {name} "
                "(masked samples NaN)"
            )
        else:
            X = self._samples()
            R = model.transform(X)[:, :k]
            _write_table(R, target, attrs={"components": k})
            self.log(f"  transform: {X.shape[0]:,} x {k} components written")
        return [name], {"components": int(k), "format": fmt}

    def _run_evaluate(self):
        model = self._model()
        X = self._samples()
        meta = self._preprocess_info()
        sets = [("train", X)]
        if meta.get("n_test"):
            sets.append(("test", _open_table(self.path("preprocess", "test.zarr"))))
        ev = self.dir("evaluate")
        result, outputs = {}, ["reconstruction_error.json"]
        for label, data in sets:
            ppa_errors = np.asarray(model.reconstruction_errors(data), dtype=float)
            ks = list(range(1, len(ppa_errors)))
            part = {
                "n_samples": int(data.shape[0]),
                "k": ks,
                "ppa_mse": [float(ppa_errors[k]) for k in ks],
                "total_variance": float(ppa_errors[0]),
                # the fit's numerical rank: no ratio from k = rank on (rounding over rounding)
                "rank": int(model.rank_),
            }
            if self.config["evaluate"]["pca"]:
                pca_errors, tails, method = pca_reconstruction_errors(
                    X, X_eval=None if label == "train" else data
                )
                rows = error_rows(pca_errors, ppa_errors, ks, rank=int(model.rank_))
                where = (
                    "the preprocessed training samples (the fit's own)"
                    if label == "train"
                    else "the held-out test samples (models fitted on the training samples)"
                )
                caption = (
                    "MSE: mean over samples of the squared Euclidean reconstruction error "
                    f"summed over features, on {where}. PCA: {method}. PPA: "
                    "PPA.reconstruction_errors (one pass)."
                )
                stem = "reconstruction_error" + ("" if label == "train" else "_test")
                write_error_csv(os.path.join(ev, f"{stem}.csv"), rows)
                write_error_markdown(
                    os.path.join(ev, f"{stem}.md"), rows, float(pca_errors[0]), caption
                )
                outputs += [f"{stem}.csv", f"{stem}.md"]
                part.update(
                    pca_mse=[r[1] for r in rows],
                    ppa_over_pca_percent=[r[3] for r in rows],
                    pca_method=method,
                    # sums of the discarded training eigenvalues, k = 0..d-1: a check of the
                    # training errors (equal up to rounding)
                    pca_discarded_eigenvalues=[float(t) for t in tails],
                    pca_total_variance=float(pca_errors[0]),
                )
                self.log.plain()
                # the demo prints this table: the same header as its own table always had
                scope = "" if label == "train" else f", {label} samples"
                self.log.plain(
                    f"Reconstruction error with k components (n={data.shape[0]:,}, "
                    f"d={data.shape[1]}; total variance {float(pca_errors[0]):.6g}){scope}:"
                )
                self.log.plain(format_error_table(rows))
                self.log.plain()
            result[label] = part
        _write_json_atomic(os.path.join(ev, "reconstruction_error.json"), result)
        first = result["train"]["ppa_mse"]
        return sorted(outputs), {"ppa_mse_k1_train": first[0] if first else None}

    def _run_plots(self):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        cfg = self.config["plots"]
        outputs = []
        errors = read_json_file(self.path("evaluate", "reconstruction_error.json"))
        relative = all("pca_mse" in part for part in errors.values())
        fig, axes = plt.subplots(
            1, 2 if relative else 1, figsize=(9 if relative else 5, 3.5), squeeze=False
        )
        ax = axes[0, 0]
        for label, part in errors.items():
            ax.plot(part["k"], part["ppa_mse"], "o-", label=f"PPA, {label}")
            if "pca_mse" in part:
                ax.plot(part["k"], part["pca_mse"], "s--", label=f"PCA, {label}")
        ax.set_xlabel("components k")
        ax.set_ylabel("reconstruction MSE")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
        if relative:
            ax = axes[0, 1]
            for label, part in errors.items():
                # the ratios stop at the rank (None past it: rounding over rounding)
                shown = [
                    (k, p)
                    for k, p in zip(part["k"], part["ppa_over_pca_percent"])
                    if p is not None
                ]
                ax.plot([k for k, _ in shown], [p for _, p in shown], "o-", label=label)
            ax.axhline(100.0, color="grey", lw=0.8)
            ax.set_xlabel("components k")
            ax.set_ylabel("PPA MSE / PCA MSE (%)")
            ax.legend(fontsize=8)
        fig.suptitle(f"{self.config['name']}: reconstruction error")
        fig.tight_layout()
        fig.savefig(self.path("plots", "reconstruction_error.png"), dpi=cfg["dpi"])
        plt.close(fig)
        outputs.append("reconstruction_error.png")

        n_show = cfg["components"]
        meta = self._preprocess_info()
        if n_show:
            fmt = _components_format(self.config)
            comp_path = self.path("transform", _COMPONENT_FILES[fmt])
            if meta.get("layout") == "cube":
                if fmt == "zarr":
                    comp = _open_cube(comp_path, "components")
                else:
                    variable = store.sources.components_variable(comp_path)
                    comp = store.open_cube(comp_path, variable, "component")
                extra = [d for d in comp.dims if d != "component"][:-2]
                if extra:  # a time axis: the first time step
                    comp = comp.isel({d: 0 for d in extra})
                k = min(n_show, comp.sizes["component"])
                images = np.asarray(comp.isel(component=slice(0, k)).values)
                fig, axes = plt.subplots(1, k, figsize=(3.2 * k, 3), squeeze=False)
                for i in range(k):
                    # 2-98 percentile limits: a few extreme pixels would flatten min-max ones
                    vmin, vmax = robust_limits(images[i])
                    im = axes[0, i].imshow(
                        images[i], cmap="viridis", interpolation="nearest", vmin=vmin, vmax=vmax
                    )
                    axes[0, i].set_title(f"component {i + 1}")
                    axes[0, i].set_xticks([])
                    axes[0, i].set_yticks([])
                    fig.colorbar(im, ax=axes[0, i], shrink=0.8)
                fig.suptitle("PPA components (masked samples blank)")
            else:
                R = _open_table(comp_path)
                n = R.shape[0]
                step = max(1, n // cfg["max_points"])
                sample = np.asarray(R[::step, : min(3, R.shape[1])].compute())
                fig, ax = plt.subplots(figsize=(4.5, 4))
                if sample.shape[1] >= 2:
                    c = sample[:, 2] if sample.shape[1] > 2 else None
                    ax.scatter(
                        sample[:, 0], sample[:, 1], s=2, c=c, cmap=None if c is None else "viridis"
                    )
                    ax.set_xlabel("component 1")
                    ax.set_ylabel("component 2")
                else:
                    ax.hist(sample[:, 0], bins=60)
                    ax.set_xlabel("component 1")
                ax.set_title(f"{self.config['name']}: first components")
            fig.tight_layout()
            fig.savefig(self.path("plots", "components.png"), dpi=cfg["dpi"])
            plt.close(fig)
            outputs.append("components.png")
        return outputs, {"files": outputs}


#: Why a Zarr array at ``data.path`` is not reused: it was not written by the generator.
_FOREIGN = "not written by ppa_dask.datasets.write_zarr"


def _why_not_reusable(path, expected, shape, chunk_rows):
    """Why the generated Zarr array at ``path`` cannot be reused (a string), or None if it
    can: its ``ppa_dask.datasets`` record (``datasets.write_zarr``'s attributes) must match
    ``expected`` (``params`` key by key), and its shape and chunk rows must be these."""
    import zarr

    if not os.path.lexists(path):
        return "absent"
    try:
        z = zarr.open_array(path, mode="r")
        record = dict(z.attrs.get("ppa_dask.datasets") or {})
        stored_shape, stored_rows = tuple(z.shape), int(z.chunks[0])
    except Exception as exc:  # not a readable Zarr array: never replaced (not ours)
        return f"unreadable ({type(exc).__name__})"
    if not record:
        return _FOREIGN
    for key, value in expected.items():
        if key == "params":
            stored = record.get("params") or {}
            for name, v in value.items():
                if stored.get(name) != v:
                    return f"params.{name} is {stored.get(name)!r}, not {v!r}"
        elif record.get(key) != value:
            return f"{key} is {record.get(key)!r}, not {value!r}"
    if stored_shape != shape:
        return f"shape is {stored_shape}, not {shape}"
    if stored_rows != chunk_rows:
        return f"chunk rows are {stored_rows}, not {chunk_rows}"
    return None


def _first_false(mask, count):
    """Indices of the first ``count`` False entries of a 1-D Dask array (chunk by chunk)."""
    found, start = [], 0
    for block in mask.blocks:
        values = np.asarray(block.compute())
        found.extend((start + np.flatnonzero(~values)).tolist())
        start += values.size
        if len(found) >= count:
            break
    return found[:count]


def _split_seed(seed):
    """Seed of the train/test split, distinct from the seeds of the data and of the folds."""
    return child_seed(seed, 0x5A17)


def _held_out_rows(index, seed, fraction):
    """Rows of a block of global row indices held out for testing (about ``fraction``)."""
    if index.size == 0:
        return np.zeros(0, dtype=bool)
    h = row_hash(int(index[0]), int(index[-1]) + 1, seed)
    return (h >> np.uint64(11)).astype(np.float64) / 2.0**53 < fraction


def _write_rows(X, keep, chunk_rows, path):
    """Write the rows of ``X`` where ``keep`` (all rows if None) as a table; returns the count."""
    rows = X if keep is None else X[keep].compute_chunk_sizes()
    n = rows.shape[0]
    _write_table(rows.rechunk((max(min(chunk_rows, n), 1), -1)), path)
    return n


def _dask_data(A):
    """The data of a DataArray as a Dask array (wrapping numpy data in one chunk)."""
    import dask.array as da

    data = A.data
    return data if isinstance(data, da.Array) else da.from_array(np.asarray(data))


def _cube_variable(ds, variable, feature_dim, where):
    if variable not in ds.data_vars:
        raise PipelineError(
            f"data.variable: {where} made no variable {variable!r} "
            f"(variables: {', '.join(ds.data_vars)})"
        )
    cube = ds[variable]
    if feature_dim not in cube.dims:
        raise PipelineError(
            f"data.feature_dim: {variable!r} has dimensions {cube.dims}, not {feature_dim!r}"
        )
    return cube


def _versions():
    import platform

    out = {"python": platform.python_version()}
    for name in ("ppa_dask", "numpy", "dask", "distributed", "zarr", "xarray"):
        try:
            out[name] = getattr(__import__(name), "VERSION", "?")
        except Exception:  # pragma: no cover
            out[name] = None
    return out


def _write_yaml(path, config):
    import yaml

    write_text_atomic(path, yaml.safe_dump(config, sort_keys=False))


def run_pipeline(config, output=None, stream=None, force=False):
    """Run a pipeline (a file path or a validated configuration) in its run folder.

    Stages already complete for the same configuration and inputs are skipped (see the module
    docstring). Dask computations run on the current Client, if any.

    Parameters
    ----------
    config : str, os.PathLike or dict
        A pipeline file or a configuration mapping (validated first either way).
    output : str, optional
        Run folder (default: the configuration's ``output``).
    stream : file, optional
        Where log lines go (default: stdout); they are also appended to ``pipeline.log``.
    force : bool, default=False
        Rerun every stage.

    Returns
    -------
    root : str
        The run folder.
    """
    if isinstance(config, (str, os.PathLike)):
        config = load_pipeline(config)
    else:
        config = validate_pipeline(config)
    return Run(config, output=output, stream=stream, force=force).execute()
