"""The configuration schema of a pipeline file: every key, what it may be and its default.

Each key is a :class:`_Field` (what is expected, in the file's own words, a check that
normalises the value or raises :class:`_Bad`, and a default); a section is a mapping of fields,
checked by :func:`_check_section`, which collects every error (an unknown key names the closest
known one). The model's choices are the estimator's own
(:data:`ppa_dask.ppa.estimator.PARAMETER_CONSTRAINTS`), its degree is read as the estimator
reads it (:func:`ppa_dask.utils.params.candidate_degrees`), and the data sources' options are
the file formats' (:mod:`ppa_dask.store.sources`). :func:`validate_pipeline` checks a parsed
file and fills in every default; :func:`load_pipeline` reads the file strictly first.

>>> validate_pipeline({"name": "x", "data": {"source": "dataset", "name": "vehicles"}}
...                   )["model"]["residual_cache"]
'auto'
"""

from __future__ import annotations

import copy
import inspect
import math
import numbers
import os
import re

from ppa_dask import datasets, store
from ppa_dask.ppa.estimator import PARAMETER_CONSTRAINTS
from ppa_dask.utils.params import (
    AnyOf,
    Integer,
    Options,
    candidate_degrees,
    did_you_mean,
    is_int,
    unknown_key,
)
from ppa_dask.utils.yamlfile import YAMLFileError, read_yaml_file

__all__ = [
    "COMPONENT_FILES",
    "DEFAULT_CHUNK_ROWS",
    "FORMAT_VERSION",
    "PipelineError",
    "components_format",
    "dims_of",
    "fit_dim",
    "load_pipeline",
    "validate_pipeline",
]

#: Version of the pipeline file format (the ``pipeline:`` key) and of the completion markers.
FORMAT_VERSION = 1
#: Rows per chunk of the tables written by the pipeline (samples x features).
DEFAULT_CHUNK_ROWS = 65536


class PipelineError(ValueError):
    """A pipeline file or run that cannot go on; the message names the key and what was expected."""


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


def dims_of(feature_dim):
    """The feature dimension(s) of a configuration or a record, as a list."""
    return list(feature_dim) if isinstance(feature_dim, (list, tuple)) else [feature_dim]


def fit_dim(feature_dim):
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
        "solver": _choice_field(PARAMETER_CONSTRAINTS["solver"].values, default="auto"),
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
    return sorted(datasets.TABLE_LOADERS)


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
COMPONENT_FILES = {fmt: "components" + store.sources.suffix(fmt) for fmt in ("zarr", *_FILE_CUBES)}
_CUBE_SOURCES = ("xarray", "make_cube", *_FILE_CUBES)
#: ``transform.format: same``: the format of the input (Zarr sources are Zarr).
# (in the order the messages have always listed them)
_SAME_FORMAT = {**{fmt: fmt for fmt in sorted(_FILE_CUBES)}, "zarr": "zarr", "xarray": "zarr"}


def components_format(config):
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
