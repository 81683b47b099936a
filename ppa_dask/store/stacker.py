"""xarray stacker: labelled cubes to ``(samples, features)`` arrays and back.

A :class:`Stacker` knows nothing about estimators. Fitted on a DataArray or Dataset it stacks
the sample dimensions into one ``(samples, features)`` numpy or Dask array of the valid samples
and records the layout (:attr:`Stacker.layout`, a dict of plain values and numpy arrays that
model files save); given a new input it checks it against that layout and stacks it the same
way; and it unstacks 2-D results (coefficients, or reconstructions in feature space) back into
DataArrays / Datasets with the sample dimensions and coordinates restored. A model loaded from
a file rebuilds its stacker with :meth:`Stacker.from_layout`. The estimators use it through
:mod:`ppa_dask.store.seam`, which runs their plain-array code in between.

Layout
------
* DataArray: ``feature_dim`` holds the features; every other dimension is a sample dimension.
  The array is transposed to ``(*sample_dims, feature_dim)`` and reshaped to
  ``(n_samples, n_features)`` in C order (samples in row-major order of the sample dimensions,
  whatever the chunking, so the folds of degree selection do not depend on chunks).
* Dataset: the data variables are the features (each must have the same dimensions, which are
  the sample dimensions); internally stacked along a ``"variable"`` dimension.
* Coefficients are unstacked into a DataArray named ``"components"`` with a ``component``
  dimension (coordinate 1..k) in place of the feature dimension (first for a Dataset) and the
  input's sample coordinates. Rows in feature space are unstacked with the feature dimension in
  place of ``component`` again, with the feature coordinates recorded at fit, or into the
  Dataset of the fitted variables.
* Dask-backed input (``xr.open_zarr``) stays lazy: one task per row chunk, chunk sizes known.

Missing data
------------
:meth:`Stacker.fit_stack` makes one counting pass (NaN per sample and per feature; for Dask
input one computation that reads each chunk once and brings back a small integer per sample),
then

* features NaN in every sample are dropped (unstacked as all-NaN); so are the features equal
  to the no-data value in every sample of a cube a reader masked
  (:func:`~ppa_dask.store.sources.nodata_mask`): the reader's rule is applied again without
  them, rather than letting them make every sample missing;
* samples NaN in every remaining feature (clouds, masked land or sea) are left out;
* samples NaN in some but not all remaining features ("isolated" NaNs) are reported with their
  count, the features concerned and the coordinates of the first ones: ``nan_policy="raise"``
  (default) raises ValueError with that report, ``"drop_samples"`` leaves them out too and
  warns with the report.

The valid rows are then selected with the concrete boolean mask, so a Dask array keeps known
chunk sizes (no ``compute_chunk_sizes``). :meth:`Stacker.stack` keeps every sample (NaN rows
included) and never needs the mask pass; the caller maps its rows with NaN out for rows with a
NaN. Infinite values are not missing data: the stacker passes them on.

Examples
--------
>>> from ppa_dask.datasets import make_cube
>>> from ppa_dask.store.stacker import Stacker
>>> cube = make_cube(n_bands=8, ny=20, nx=20, random_state=0)["reflectance"]
>>> stacker = Stacker(feature_dim="band")
>>> train = stacker.fit_stack(cube)  # (valid pixels, bands): what an estimator is fitted on
>>> rows, samples = stacker.stack(cube)  # every pixel, cloudy ones NaN
>>> stacker.unstack_components(rows[:, :3], samples).dims
('component', 'y', 'x')
>>> back = stacker.unstack_features(rows, samples)
>>> back.dims == cube.dims and bool(back.isnull().equals(cube.isnull()))
True
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import xarray as xr

from ppa_dask.store.feature_dims import FEATURE_DIM_SEP, merge_feature_dims, split_feature_dims
from ppa_dask.store.sources import (
    FILL_WARN_FRACTION,
    NAN_POLICIES,
    apply_attrs_nodata,
    nodata_mask,
    without_mask,
)
from ppa_dask.utils.arrays import is_dask
from ppa_dask.utils.warnings import MissingSamplesWarning, NoDataWarning, warn

__all__ = ["COMPONENT_DIM", "LATITUDE_NAMES", "NAN_POLICIES", "Samples", "Stacker"]

#: Name of the output dimension of ``transform``.
COMPONENT_DIM = "component"
_VARIABLE_DIM = "variable"  # features of a Dataset
_REPORT_ROWS = 1000  # partial-NaN samples inspected to name the features concerned
_KINDS = ("DataArray", "Dataset")
_LAYOUT_KEYS = ("kind", "feature_dim", "n_features", "kept", "feature_coords")


# -------------------------------------------------------------------------------------------
# stacking
# -------------------------------------------------------------------------------------------


def _as_feature_array(X, feature_dim, where="X"):
    """A DataArray with the features along one dimension, and its kind / variables."""
    if isinstance(X, xr.Dataset):
        if feature_dim is not None:
            raise ValueError(
                "for a Dataset the data variables are the features; feature_dim must be None "
                "(select one variable, ds[name], to fit along one of its dimensions)"
            )
        names = list(X.data_vars)
        if not names:
            raise ValueError(f"{where} is a Dataset without data variables")
        dims = X[names[0]].dims
        for name in names[1:]:
            if set(X[name].dims) != set(dims):
                raise ValueError(
                    f"Dataset variables must share their sample dimensions to be fitted as "
                    f"features: {names[0]!r} has dims {dims}, {name!r} has {X[name].dims}"
                )
        if _VARIABLE_DIM in dims:
            raise ValueError(f"a Dataset with a {_VARIABLE_DIM!r} dimension cannot be stacked")
        stacked = X[names].to_dataarray(dim=_VARIABLE_DIM)
        return stacked, _VARIABLE_DIM, "Dataset", [str(n) for n in names]
    if not isinstance(X, xr.DataArray):
        raise TypeError(f"{where} must be an xarray DataArray or Dataset, got {type(X)}")
    if feature_dim is None:
        raise ValueError(
            f"feature_dim is required for a DataArray: the dimension holding the features, one "
            f"of {X.dims}"
        )
    if isinstance(feature_dim, (list, tuple)):
        if len(feature_dim) == 1:
            feature_dim = feature_dim[0]
        else:
            merged, _ = merge_feature_dims(X, feature_dim, where)
            return merged, FEATURE_DIM_SEP.join(map(str, feature_dim)), "DataArray", None
    if feature_dim not in X.dims:
        raise ValueError(f"feature_dim {feature_dim!r} is not a dimension of {where}: {X.dims}")
    return X, feature_dim, "DataArray", None


def _stack(A, feature_dim):
    """(data2d, sample_dims, sample_shape) with rows in C order of the sample dimensions."""
    sample_dims = [d for d in A.dims if d != feature_dim]
    sample_shape = tuple(A.sizes[d] for d in sample_dims)
    n = int(np.prod(sample_shape, dtype=np.int64))
    data = A.transpose(*sample_dims, feature_dim).data
    if is_dask(data) and data.ndim > 2:
        # the reshape needs whole rows of the later sample dimensions: merge the tiles of each
        # row of tiles (a GeoTIFF's y chunks stay the row chunks) with the task-based rechunk.
        # Left to the reshape, dask picks a P2P shuffle on a cluster once the raster has many
        # tiles, for what is a merge of neighbouring blocks (and distributed logs each shuffle)
        merged = {axis: -1 for axis in range(1, data.ndim)}
        if any(len(data.chunks[axis]) > 1 for axis in merged):
            data = data.rechunk(merged, method="tasks")
    data2d = data.reshape(n, A.sizes[feature_dim])
    return data2d, sample_dims, sample_shape


def _samples(A, stacked_dim, sample_dims, sample_shape):
    coords = {k: v for k, v in A.coords.items() if stacked_dim not in v.dims}
    return Samples(tuple(sample_dims), tuple(sample_shape), coords, A.dims.index(stacked_dim))


def _single_column_chunk(rows):
    # the row functions see whole samples: one chunk along the features, row chunks kept
    if is_dask(rows) and rows.numblocks[1] != 1:
        return rows.rechunk({1: -1})
    return rows


def _finite_rows(block):
    return block[~np.isnan(block).any(axis=1)]


def _complete_rows(rows, valid):
    """The rows without NaN (``valid``, a concrete mask of them), chunk sizes known.

    For Dask rows each task selects its own block's rows again from the data rather than from
    ``valid``: a numpy mask indexing a Dask array is copied into the graph (a mask of a
    6000 x 6000 scene is 36 MB the client sends the scheduler); its per-chunk counts are the
    chunk sizes.
    """
    if not is_dask(rows):
        return rows[valid]
    rows = _single_column_chunk(rows)
    bounds = np.cumsum((0,) + rows.chunks[0])
    counts = tuple(int(np.count_nonzero(valid[a:b])) for a, b in zip(bounds[:-1], bounds[1:]))
    out = rows.map_blocks(_finite_rows, chunks=(counts, rows.chunks[1]), dtype=rows.dtype)
    if 0 in counts:
        out = out.rechunk({0: tuple(c for c in counts if c > 0)}, method="tasks")
    return out


def _label(values, i):
    return values[i].item() if hasattr(values[i], "item") else values[i]


@dataclasses.dataclass(frozen=True)
class Samples:
    """Where the rows of a stacked array came from: what :class:`Stacker` needs to unstack.

    Parameters
    ----------
    dims : tuple of str
        The sample dimensions, in the order the rows run through them (C order).
    shape : tuple of int
        Their sizes; the stacked array has ``prod(shape)`` rows.
    coords : dict
        The input's coordinates that do not depend on the stacked dimension.
    position : int
        Where the stacked dimension was among the input's dimensions; the unstacked dimension
        takes its place.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from ppa_dask.store.stacker import Stacker
    >>> da = xr.DataArray(np.ones((3, 4, 5)), dims=("band", "y", "x"))
    >>> stacker = Stacker(feature_dim="band")
    >>> rows = stacker.fit_stack(da)
    >>> _, samples = stacker.stack(da)
    >>> samples.dims, samples.shape, samples.position, samples.n_samples
    (('y', 'x'), (4, 5), 0, 20)
    """

    dims: tuple
    shape: tuple
    coords: dict
    position: int

    @property
    def n_samples(self):
        """Number of rows of the stacked array."""
        return int(np.prod(self.shape, dtype=np.int64))


def _unstack(rows, samples, new_dim, coords, name):
    """The inverse of :func:`_stack`, with ``new_dim`` where the stacked dimension was."""
    if rows.ndim != 2 or rows.shape[0] != samples.n_samples:
        raise ValueError(
            f"expected a 2-D array of {samples.n_samples} rows (one per sample of "
            f"{dict(zip(samples.dims, samples.shape))}), got shape {rows.shape}"
        )
    data = rows.reshape(*samples.shape, rows.shape[1])
    dims = list(samples.dims) + [new_dim]
    out = xr.DataArray(data, dims=dims, coords=coords)
    out.name = name  # (given to the constructor, None would take the Dask array's name)
    order = list(samples.dims)
    order.insert(samples.position, new_dim)
    return out.transpose(*order)


def _scatter_features(block, kept_idx, n_features):
    out = np.full((block.shape[0], n_features), np.nan)
    out[:, kept_idx] = block
    return out


#: Names a latitude coordinate goes by when ``coslat=True`` (else its ``standard_name``).
LATITUDE_NAMES = ("lat", "latitude")


def _latitude_coord(X, coslat):
    """The name of the latitude coordinate of ``X`` that ``coslat`` means."""
    if isinstance(coslat, str):
        if coslat not in X.coords:
            raise ValueError(f"coslat={coslat!r} is not a coordinate of X: {list(X.coords)}")
        return coslat
    found = [k for k in X.coords if str(k).lower() in LATITUDE_NAMES]
    found = found or [k for k in X.coords if X[k].attrs.get("standard_name") == "latitude"]
    if len(found) != 1:
        which = "no" if not found else f"{len(found)} ({found})"
        raise ValueError(
            f"coslat=True found {which} latitude coordinate(s) among {list(X.coords)} (names "
            f"{LATITUDE_NAMES} or standard_name 'latitude'); name it: coslat='<coordinate>'"
        )
    return found[0]


def _latitude_weights(X, feature_dim, coslat):
    """``sqrt(cos(latitude))`` of each feature, in the stacked order; None without coslat.

    The latitude must run along the features (a DataArray's feature dimension(s)): the weights
    scale features, as EOF analysis of a (time, latitude, longitude) field weights each cell by
    its area. A latitude along the samples would weight samples instead, which no output in
    feature space could undo, so it is refused.
    """
    if coslat is False or coslat is None:
        return None, None
    if not isinstance(coslat, (bool, str)):
        raise TypeError(f"coslat must be a bool or a coordinate name, got {coslat!r}")
    if isinstance(X, xr.Dataset):
        raise ValueError(
            "coslat weights features by their latitude; the features of a Dataset are its "
            "variables, which have no latitude: fit a DataArray with feature_dim"
        )
    name = _latitude_coord(X, coslat)
    lat = X.coords[name]
    fdims = feature_dim if isinstance(feature_dim, (list, tuple)) else [feature_dim]
    fdims = [str(d) for d in fdims]
    if not lat.dims or not set(lat.dims) <= set(fdims):
        raise ValueError(
            f"coslat weights features by their latitude, but the coordinate {name!r} runs along "
            f"{lat.dims}, not along the feature dimension(s) {tuple(fdims)}: put the latitude "
            "among the features (feature_dim) or fit without coslat"
        )
    # broadcast over the feature dimensions in C order, the order they are merged in
    lat = lat.expand_dims({d: X.sizes[d] for d in fdims if d not in lat.dims})
    degrees = np.asarray(lat.transpose(*fdims).values, dtype=np.float64).ravel()
    if not np.isfinite(degrees).all() or np.abs(degrees).max() > 90:
        raise ValueError(
            f"coslat needs latitudes in degrees within [-90, 90]; {name!r} holds values from "
            f"{np.nanmin(degrees)} to {np.nanmax(degrees)}"
        )
    # cos is about 6e-17 at the poles, never 0: the weights stay invertible
    return name, np.sqrt(np.cos(np.deg2rad(degrees)))


# -------------------------------------------------------------------------------------------
# missing data
# -------------------------------------------------------------------------------------------


def _nan_counts(data2d, fill_values=(), flags=None):
    """NaN count per sample (small unsigned ints) and per feature, and, for ``fill_values``,
    the count per feature of each (an array, ``(len(fill_values), features)``) and each
    feature's minimum and maximum without NaN (an array ``(2, features)``, +-inf for a feature
    NaN everywhere), in one read of the data; with ``flags`` (booleans shaped as ``data2d``)
    the count of True per feature last, else None."""
    n, d = data2d.shape
    dtype = np.uint8 if d < 2**8 else np.uint16 if d < 2**16 else np.uint32
    extremes = len(fill_values) > 0 and n > 0
    flagged = None
    if is_dask(data2d):
        import dask
        import dask.array as da

        isnan = da.isnan(data2d)
        fills = [(data2d == v).sum(axis=0, dtype=np.int64) for v in fill_values]
        if flags is not None:
            # after the extremes, so that the slices below find them where they look
            flagged = flags.sum(axis=0, dtype=np.int64)
        if extremes:
            fills += [
                da.where(isnan, np.inf, data2d).min(axis=0),
                da.where(isnan, -np.inf, data2d).max(axis=0),
            ]
        per_sample, per_feature, flagged, *fills = dask.compute(
            isnan.sum(axis=1, dtype=dtype), isnan.sum(axis=0, dtype=np.int64), flagged, *fills
        )
    else:
        isnan = np.isnan(data2d)
        per_sample, per_feature = isnan.sum(axis=1, dtype=dtype), isnan.sum(axis=0, dtype=np.int64)
        fills = [(data2d == v).sum(axis=0, dtype=np.int64) for v in fill_values]
        if extremes:
            fills += [
                np.where(isnan, np.inf, data2d).min(axis=0),
                np.where(isnan, -np.inf, data2d).max(axis=0),
            ]
        if flags is not None:
            flagged = np.asarray(flags).sum(axis=0, dtype=np.int64)
    bounds = np.asarray(fills[len(fill_values) :], dtype=np.float64).reshape(-1, d)
    counts = np.asarray(fills[: len(fill_values)], dtype=np.int64).reshape(-1, d)
    return per_sample, per_feature, counts, bounds, flagged


def _fill_warning(fill_values, fills, n, fdim, kept, bounds):
    """The no-data warning for the fill-like value filling the largest share of the samples
    in every kept feature, when that share is at least FILL_WARN_FRACTION and the value is
    the minimum or the maximum of every kept feature (``bounds``: their minima and maxima; a
    value inside the data's range is data); None otherwise."""
    if not len(fill_values) or n == 0:
        return None
    low, high = bounds[0, kept], bounds[1, kept]
    at_edge = np.array([((low == v) | (high == v)).all() for v in fill_values])
    share = np.where(at_edge, fills[:, kept].min(axis=1) / n, 0.0)
    best = int(np.argmax(share))
    if share[best] < FILL_WARN_FRACTION:
        return None
    v = f"{fill_values[best]:g}"
    return (
        f"{v} fills {share[best]:.1%} of the samples in every {fdim} and no no-data value is "
        f"declared: fill values fitted as data dominate the model; declare it with --nodata "
        f"{v} (nodata={v} in Python, data.nodata: {v} in a pipeline), or --nodata none if "
        "these are data"
    )


def fill_warning(cube, feature_dim):
    """The no-data warning a fit of ``cube`` would issue, or None: one read of the data when
    its reader listed fill-like values to check (nothing declared), none otherwise.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> cube = xr.DataArray(np.zeros((2, 10)), dims=("band", "x"))
    >>> fill_warning(cube, "band") is None  # not read from a file: nothing to check
    True
    >>> cube.encoding["ppa_dask_fill_check"] = [0.0]
    >>> fill_warning(cube, "band")[:43]
    '0 fills 100.0% of the samples in every band'
    """
    values = cube.encoding.get("ppa_dask_fill_check") or []
    if not values:
        return None
    A, fdim, _, _ = _as_feature_array(cube, feature_dim)
    data2d = _stack(A, fdim)[0]
    _, per_feature, fills, bounds, _ = _nan_counts(data2d, values)
    kept = np.flatnonzero(per_feature < data2d.shape[0])
    return _fill_warning(values, fills, data2d.shape[0], fdim, kept, bounds)


def _remasked(X, mask, exempt):
    """``X`` (the cube ``mask`` made) with the no-data rule applied again, the features
    ``exempt`` left out of it: X's coordinates, attributes and encoding, the record of the
    mask dropped (it no longer describes the data)."""
    out = X.copy(data=mask.apply(exempt).transpose(*X.dims).data)
    out.encoding = without_mask(X.encoding)
    return out


def _feature_flags(X, feature_dim, flags):
    """``flags`` (one per stacked feature) as a boolean DataArray over the feature
    dimension(s) of ``X``: several are merged in their order, the last varying fastest."""
    dims = list(feature_dim) if isinstance(feature_dim, (list, tuple)) else [feature_dim]
    shape = [X.sizes[d] for d in dims]
    return xr.DataArray(np.asarray(flags, dtype=bool).reshape(shape), dims=dims)


def _where(index, sample_dims, sample_shape, A):
    """'y=120.0, x=35.0' for a flat sample index (coordinates when the dims have them)."""
    pos = np.unravel_index(index, sample_shape)
    parts = []
    for dim, p in zip(sample_dims, pos):
        if dim in A.coords and A.coords[dim].dims == (dim,):
            parts.append(f"{dim}={_label(A.coords[dim].values, int(p))}")
        else:
            parts.append(f"{dim}[{int(p)}]")
    return "(" + ", ".join(parts) + ")"


def _partial_report(
    data2d, partial, nan_kept, kept_idx, feature_labels, sample_dims, sample_shape, A, feature_dim
):
    rows = np.flatnonzero(partial)
    look = rows[:_REPORT_ROWS]
    block = data2d[look]
    block = np.asarray(block.compute() if is_dask(block) else block)[:, kept_idx]
    per_feature = np.isnan(block).sum(axis=0)
    named = [
        f"{feature_dim} {feature_labels[kept_idx[j]]} ({int(per_feature[j])})"
        for j in np.argsort(-per_feature, kind="stable")
        if per_feature[j] > 0
    ]
    sampled = "" if len(rows) <= _REPORT_ROWS else f" (in the first {_REPORT_ROWS} such samples)"
    first = ", ".join(_where(int(i), sample_dims, sample_shape, A) for i in rows[:5])
    return (
        f"{int(nan_kept[partial].sum())} isolated NaN value(s) in {len(rows)} sample(s) whose "
        f"other features are valid; NaN count by {feature_dim}{sampled}: "
        f"{', '.join(named[:10])}{' ...' if len(named) > 10 else ''}; first samples at {first}"
    )


# -------------------------------------------------------------------------------------------
# layouts
# -------------------------------------------------------------------------------------------


def _checked_layout(layout):
    """A copy of ``layout`` with numpy arrays for ``kept`` and the feature coordinates.

    Accepts the dict :attr:`Stacker.layout` gives, as a model file loads it or as read back
    from JSON (lists in place of arrays).
    """
    if not isinstance(layout, dict):
        raise TypeError(f"an xarray layout is a dict, got {type(layout)}")
    missing = [k for k in _LAYOUT_KEYS if k not in layout]
    if missing:
        raise ValueError(f"the xarray layout lacks the key(s) {missing}")
    kind = layout["kind"]
    if kind not in _KINDS:
        raise ValueError(f"the xarray layout's kind must be one of {_KINDS}, got {kind!r}")
    d = layout["n_features"]
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 1:
        raise ValueError(f"the xarray layout's n_features must be a positive int, got {d!r}")
    kept = np.asarray(layout["kept"])
    if kept.dtype != bool or kept.shape != (d,):
        raise ValueError(
            f"the xarray layout's kept must be {d} booleans (one per feature), got "
            f"{kept.dtype} of shape {kept.shape}"
        )
    if not kept.any():
        raise ValueError("the xarray layout keeps no feature")
    fdim = layout["feature_dim"]
    if not isinstance(fdim, str):
        raise ValueError(f"the xarray layout's feature_dim must be a str, got {fdim!r}")
    feature_coords = {}
    for k, v in dict(layout["feature_coords"]).items():
        v = np.asarray(v)
        if v.shape != (d,):
            raise ValueError(
                f"the xarray layout's feature coordinate {k!r} has shape {v.shape}; expected "
                f"({d},)"
            )
        feature_coords[k] = v
    weights = layout.get("feature_weights")
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (d,) or not (weights[kept] > 0).all():
            raise ValueError(
                f"the xarray layout's feature_weights must be {d} numbers, positive for the kept "
                f"features, got shape {weights.shape}"
            )
    variables = layout.get("variables")
    if kind == "Dataset":
        if variables is None or len(variables) != d:
            raise ValueError(
                f"the xarray layout of a Dataset must name its {d} variables, got {variables!r}"
            )
        variables = [str(v) for v in variables]
    out = dict(layout)
    out.update(
        kind=kind,
        feature_dim=fdim,
        n_features=int(d),
        kept=kept,
        feature_coords=feature_coords,
        name=layout.get("name"),
        variables=variables,
    )
    if weights is not None:
        out["feature_weights"] = weights
    return out


# -------------------------------------------------------------------------------------------
# the stacker
# -------------------------------------------------------------------------------------------


class Stacker:
    """Stacks xarray cubes into ``(samples, features)`` arrays and unstacks results.

    Parameters
    ----------
    feature_dim : str, optional
        DataArray only: the dimension holding the features; every other dimension is a sample
        dimension. For a Dataset (``None``) the data variables are the features.
    nan_policy : {"raise", "drop_samples"}, default="raise"
        What :meth:`fit_stack` does with samples NaN in some but not all (non-empty)
        features: raise a ValueError that gives their count, the features concerned and where
        the first ones are, or leave them out with a warning giving the same report. Samples
        NaN in every feature are always left out, features NaN everywhere always dropped.
    coslat : bool or str, default=False
        DataArray only: weight each feature by ``sqrt(cos(latitude))`` (in degrees), as EOF
        analysis of a (time, latitude, longitude) field weights each grid cell by its area.
        ``True`` finds the latitude coordinate by its name (``lat``, ``latitude``) or its
        ``standard_name``; a string names it. It must run along the feature dimension(s). The
        stacked rows are the weighted values; :meth:`unstack_features` divides the weights
        back out, so values in feature space come back in the input's units.

    Attributes
    ----------
    layout : dict
        After :meth:`fit_stack` (or :meth:`from_layout`): ``kind`` ("DataArray" or
        "Dataset"), ``feature_dim``, ``n_features``, ``kept`` (booleans, one per feature),
        ``feature_coords`` (name -> numpy array along the feature dimension), ``name`` (of the
        DataArray), ``variables`` (of the Dataset) and ``nan_summary`` (samples in all,
        fitted, fully masked, with isolated NaNs, and the positions of the dropped features);
        with ``coslat``, ``coslat`` (the latitude coordinate's name) and ``feature_weights``
        (one weight per feature). Plain values and numpy arrays only, so a model file can save
        it.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from ppa_dask.store.stacker import Stacker
    >>> values = np.arange(24.0).reshape(2, 3, 4)
    >>> values[:, 0, 1] = np.nan  # a masked pixel
    >>> da = xr.DataArray(values, dims=("band", "y", "x"), coords={"band": [450, 550]})
    >>> stacker = Stacker(feature_dim="band")
    >>> stacker.fit_stack(da).shape  # the 11 valid pixels
    (11, 2)
    >>> rows, samples = stacker.stack(da)  # every pixel, NaN rows included
    >>> rows.shape
    (12, 2)
    >>> back = stacker.unstack_features(rows, samples)
    >>> back.dims, bool(back.identical(da))
    (('band', 'y', 'x'), True)
    >>> rebuilt = Stacker.from_layout(stacker.layout)
    >>> rebuilt.unstack_components(rows[:, :1], samples).dims
    ('component', 'y', 'x')
    """

    def __init__(self, feature_dim=None, nan_policy="raise", coslat=False):
        if nan_policy not in NAN_POLICIES:
            raise ValueError(f"nan_policy must be one of {NAN_POLICIES}, got {nan_policy!r}")
        self.feature_dim = feature_dim
        self.nan_policy = nan_policy
        self.coslat = coslat
        self._layout = None

    @classmethod
    def from_layout(cls, layout):
        """A fitted stacker from a recorded :attr:`layout` (say, of a model loaded from a file).

        Parameters
        ----------
        layout : dict
            As :attr:`layout` gives it, or read back from JSON (lists in place of arrays).

        Returns
        -------
        Stacker

        Examples
        --------
        >>> import json, numpy as np, xarray as xr
        >>> from ppa_dask.store.stacker import Stacker
        >>> da = xr.DataArray(np.ones((2, 5)), dims=("band", "pixel"))
        >>> fitted = Stacker(feature_dim="band")
        >>> _ = fitted.fit_stack(da)
        >>> as_json = json.dumps(fitted.layout, default=lambda a: a.tolist())
        >>> Stacker.from_layout(json.loads(as_json)).layout["kept"]
        array([ True,  True])
        """
        checked = _checked_layout(layout)
        fdim = None if checked["kind"] == "Dataset" else checked["feature_dim"]
        return cls(feature_dim=fdim).restore(checked)

    def restore(self, layout):
        """Take ``layout`` (checked as in :meth:`from_layout`) as this stacker's fitted layout.

        Returns
        -------
        self : Stacker
        """
        self._layout = _checked_layout(layout)
        return self

    def _fitted_layout(self):
        if self._layout is None:
            raise ValueError("this Stacker is not fitted; call fit_stack or from_layout first")
        return self._layout

    @property
    def layout(self):
        """The recorded layout (a new dict each time); ValueError before any fit."""
        return dict(self._fitted_layout())

    @property
    def n_kept(self):
        """Number of features in the stacked arrays (the fitted features NaN nowhere)."""
        return int(np.count_nonzero(self._fitted_layout()["kept"]))

    @property
    def kept_weights(self):
        """The weights of the kept features (the stacked columns), or None without coslat."""
        layout = self._fitted_layout()
        weights = layout.get("feature_weights")
        return None if weights is None else weights[layout["kept"]]

    # ---------------------------------------------------------------------------------------
    # stacking
    # ---------------------------------------------------------------------------------------

    def fit_stack(self, X):
        """Record the layout of ``X`` and stack its valid samples.

        One counting pass over the data (one Dask computation for Dask-backed input). Warnings
        of ``nan_policy="drop_samples"`` point to the caller of this method's caller (the user
        of the estimator that stacks).

        Parameters
        ----------
        X : xarray.DataArray or xarray.Dataset
            numpy- or Dask-backed.

        Returns
        -------
        rows : numpy.ndarray or dask.array.Array of shape (n_valid_samples, n_kept)
            Floating point; a Dask array keeps known chunk sizes (empty row chunks removed).

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> from ppa_dask.store.stacker import Stacker
        >>> values = np.ones((3, 4))
        >>> values[2] = np.nan  # a dead feature
        >>> values[:, 0] = np.nan  # a masked sample
        >>> stacker = Stacker(feature_dim="band")
        >>> stacker.fit_stack(xr.DataArray(values, dims=("band", "pixel"))).shape
        (3, 2)
        >>> stacker.layout["nan_summary"]["dropped_features"]
        [2]
        """
        if isinstance(X, xr.DataArray):
            # the no-data value the array's own attributes declare (rioxarray's _FillValue)
            X = apply_attrs_nodata(X, self.feature_dim)
        A, fdim, kind, variables = _as_feature_array(X, self.feature_dim)
        if COMPONENT_DIM in A.dims:
            raise ValueError(
                f"the input has a {COMPONENT_DIM!r} dimension, the name of the output dimension; "
                "rename it first"
            )
        latitude, weights = _latitude_weights(X, self.feature_dim, self.coslat)
        data2d, sample_dims, sample_shape = _stack(A, fdim)
        if not np.issubdtype(data2d.dtype, np.floating):
            data2d = data2d.astype(np.float64)
        n, d = data2d.shape
        feature_coords = {
            k: np.asarray(v.values) for k, v in A.coords.items() if v.dims == (fdim,)
        }
        labels = feature_coords.get(fdim, np.arange(d))
        labels = [_label(labels, i) for i in range(d)]

        # a cube read from a file with no no-data value declared: the fill-like values its
        # reader listed are counted in the same pass (ppa_dask.store.sources.open_cube)
        fill_values = (X.encoding.get("ppa_dask_fill_check") or []) if kind != "Dataset" else []
        # the reader's no-data rule, when it made this cube (a file read by open_cube): the
        # features equal to the no-data value in every sample are counted in the same pass
        mask = nodata_mask(X) if kind == "DataArray" else None
        equal = None
        if mask is not None:
            equal = _stack(_as_feature_array(mask.equal, self.feature_dim)[0], fdim)[0]
        per_sample, per_feature, fills, bounds, filled = _nan_counts(data2d, fill_values, equal)
        if filled is not None and (filled == n).any() and not (filled == n).all() and n:
            # one rule for a feature missing everywhere, whether its fill is the no-data
            # value or NaN: it is dropped. Made missing by the rule, it would make every
            # sample missing (a date stored entirely as fill); the rule is applied again
            # without it, and the cube so made is stacked instead (one more counting pass)
            exempt = _feature_flags(X, self.feature_dim, filled == n)
            return self.fit_stack(_remasked(X, mask, exempt))
        dropped = per_feature == n
        kept_idx = np.flatnonzero(~dropped)
        if kept_idx.size == 0:
            raise ValueError(f"every {fdim} is NaN in every sample: nothing to fit")
        message = _fill_warning(fill_values, fills, n, fdim, kept_idx, bounds)
        if message is not None:
            warn(message, NoDataWarning)
        n_kept = kept_idx.size
        nan_kept = per_sample.astype(np.int64) - int(dropped.sum())
        valid = nan_kept == 0
        masked = nan_kept == n_kept
        partial = ~valid & ~masked
        summary = {
            "n_samples": int(n),
            "n_masked": int(masked.sum()),
            "n_isolated_samples": int(partial.sum()),
            "n_isolated_values": int(nan_kept[partial].sum()),
            "dropped_features": [int(i) for i in np.flatnonzero(dropped)],
        }
        if partial.any():
            report = _partial_report(
                data2d, partial, nan_kept, kept_idx, labels, sample_dims, sample_shape, A, fdim
            )
            if self.nan_policy == "raise":
                raise ValueError(
                    report + ". Pass nan_policy='drop_samples' (on the command line "
                    "--nan-policy drop_samples) to leave these samples out of the fit (transform "
                    "returns NaN for them), or fill the gaps first."
                )
            warnings.warn(
                report + "; these samples are left out of the fit (nan_policy='drop_samples').",
                MissingSamplesWarning,
                stacklevel=3,
            )
        if not valid.any():
            raise ValueError(
                f"no sample has every {fdim} valid ({summary['n_masked']} fully masked, "
                f"{summary['n_isolated_samples']} with isolated NaNs): nothing to fit"
            )
        summary["n_fitted"] = int(valid.sum())

        rows = data2d if not dropped.any() else data2d[:, kept_idx]
        if not valid.all():
            rows = _complete_rows(rows, valid)
        if weights is not None:
            rows = rows * weights[kept_idx].astype(rows.dtype)
        self._layout = {
            "kind": kind,
            "feature_dim": fdim,
            "n_features": int(d),
            "kept": ~dropped,
            "feature_coords": feature_coords,
            "name": None if A.name is None or kind == "Dataset" else str(A.name),
            "variables": variables,
            "nan_summary": summary,
            # the no-data value the cube's reader applied (None: none, or not read from a file)
            "nodata": None if kind == "Dataset" else X.encoding.get("ppa_dask_nodata"),
        }
        if isinstance(self.feature_dim, (list, tuple)) and len(self.feature_dim) > 1:
            # several feature dimensions merged into one: what splits the results back
            _, coords = merge_feature_dims(X, self.feature_dim)
            self._layout["feature_dims"] = list(coords)
            self._layout["feature_dim_coords"] = coords
        if weights is not None:
            self._layout["coslat"] = str(latitude)
            self._layout["feature_weights"] = weights
        return rows

    def _check_features(self, A, fdim, where):
        d = self._fitted_layout()["n_features"]
        if A.sizes[fdim] != d:
            raise ValueError(
                f"{where} has {A.sizes[fdim]} entries along {fdim!r}; the model was fitted on {d}"
            )
        fitted = self._fitted_layout()["feature_coords"].get(fdim)
        if fitted is not None and fdim in A.coords:
            given = np.asarray(A.coords[fdim].values)
            if given.shape != fitted.shape or not np.array_equal(given, fitted):
                raise ValueError(
                    f"the {fdim!r} coordinate of {where} differs from the one the model was "
                    f"fitted on ({list(fitted)[:8]}...)"
                )

    def stack(self, X):
        """Stack every sample of ``X``, checked against the recorded layout.

        Parameters
        ----------
        X : xarray.DataArray or xarray.Dataset
            Of the kind fitted, with the fitted features (a Dataset's variables are found by
            name); the sample dimensions may differ from the fitted ones.

        Returns
        -------
        rows : numpy.ndarray or dask.array.Array of shape (n_samples, n_kept)
            The kept features of every sample, NaN rows included; a Dask array has the input's
            row chunks and one chunk along the features.
        samples : Samples
            For :meth:`unstack_components`.

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> from ppa_dask.store.stacker import Stacker
        >>> da = xr.DataArray(np.ones((2, 3, 4)), dims=("band", "y", "x"))
        >>> stacker = Stacker(feature_dim="band")
        >>> _ = stacker.fit_stack(da)
        >>> rows, samples = stacker.stack(da.isel(y=slice(0, 2)))
        >>> rows.shape, samples.shape
        ((8, 2), (2, 4))
        """
        layout = self._fitted_layout()
        if layout["kind"] == "Dataset":
            if not isinstance(X, xr.Dataset):
                raise TypeError("the model was fitted on a Dataset; transform a Dataset")
            missing = [v for v in layout["variables"] if v not in X.data_vars]
            if missing:
                raise ValueError(f"the Dataset lacks the fitted variable(s) {missing}")
            A, fdim, _, _ = _as_feature_array(X[layout["variables"]], None)
        else:
            if not isinstance(X, xr.DataArray):
                raise TypeError("the model was fitted on a DataArray; transform a DataArray")
            dims = layout.get("feature_dims") or layout["feature_dim"]
            mask = nodata_mask(X)
            if mask is not None and not layout["kept"].all():
                # the features dropped at fit take no part in the no-data rule either: a
                # sample whose only fill is in them is transformed
                X = _remasked(X, mask, _feature_flags(X, dims, ~layout["kept"]))
            A, fdim, _, _ = _as_feature_array(apply_attrs_nodata(X, dims), dims)
        if COMPONENT_DIM in A.dims:
            raise ValueError(f"the input already has a {COMPONENT_DIM!r} dimension")
        self._check_features(A, fdim, "X")
        data2d, sample_dims, sample_shape = _stack(A, fdim)
        kept = layout["kept"]
        rows = _single_column_chunk(data2d)
        if not kept.all():
            rows = rows[:, np.flatnonzero(kept)]
        if self.kept_weights is not None:  # the fit's weighting (coslat)
            rows = rows * self.kept_weights.astype(rows.dtype)
        return rows, _samples(A, fdim, sample_dims, sample_shape)

    def stack_components(self, R):
        """Stack a DataArray of coefficients (a ``component`` dimension) into rows.

        Parameters
        ----------
        R : xarray.DataArray
            With a ``component`` dimension holding the leading ``m`` components (``1..m``, as
            :meth:`unstack_components` gives them, or ``R.isel(component=slice(0, m))``).

        Returns
        -------
        rows : numpy.ndarray or dask.array.Array of shape (n_samples, m)
            One chunk along the components for Dask input.
        samples : Samples
            For :meth:`unstack_features`.

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> from ppa_dask.store.stacker import Stacker
        >>> stacker = Stacker(feature_dim="band")
        >>> _ = stacker.fit_stack(xr.DataArray(np.ones((3, 4)), dims=("band", "pixel")))
        >>> R = xr.DataArray(np.ones((2, 4)), dims=("component", "pixel"))
        >>> stacker.stack_components(R)[0].shape
        (4, 2)
        """
        fdim = self._fitted_layout()["feature_dim"]
        if not isinstance(R, xr.DataArray):
            raise TypeError(f"inverse_transform needs a DataArray of components, got {type(R)}")
        if COMPONENT_DIM not in R.dims:
            raise ValueError(f"R has no {COMPONENT_DIM!r} dimension (dims {R.dims})")
        m = R.sizes[COMPONENT_DIM]
        if COMPONENT_DIM in R.coords:
            labels = np.asarray(R.coords[COMPONENT_DIM].values)
            if not np.array_equal(labels, np.arange(1, m + 1)):
                raise ValueError(
                    f"inverse_transform needs the leading components 1..{m} in order; R has "
                    f"components {labels.tolist()}"
                )
        if fdim in R.dims:
            raise ValueError(f"R already has the feature dimension {fdim!r}")
        data2d, sample_dims, sample_shape = _stack(R, COMPONENT_DIM)
        return _single_column_chunk(data2d), _samples(R, COMPONENT_DIM, sample_dims, sample_shape)

    # ---------------------------------------------------------------------------------------
    # unstacking
    # ---------------------------------------------------------------------------------------

    def unstack_components(self, rows, samples):
        """Coefficient rows back to a DataArray named ``"components"``.

        Parameters
        ----------
        rows : numpy.ndarray or dask.array.Array of shape (n_samples, k)
            One row per sample of ``samples`` (NaN for samples without coefficients).
        samples : Samples
            As :meth:`stack` gave it.

        Returns
        -------
        components : xarray.DataArray
            The sample dimensions and coordinates, with ``component`` (coordinate 1..k) where
            the feature dimension was.

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> from ppa_dask.store.stacker import Stacker
        >>> da = xr.DataArray(np.ones((3, 4)), dims=("band", "pixel"))
        >>> stacker = Stacker(feature_dim="band")
        >>> _ = stacker.fit_stack(da)
        >>> rows, samples = stacker.stack(da)
        >>> stacker.unstack_components(rows[:, :2], samples)["component"].values.tolist()
        [1, 2]
        """
        self._fitted_layout()  # an unfitted stacker says so
        coords = dict(samples.coords)
        coords[COMPONENT_DIM] = np.arange(1, rows.shape[1] + 1)
        return _unstack(rows, samples, COMPONENT_DIM, coords, "components")

    def unstack_features(self, rows, samples):
        """Rows of the kept features back to the fitted layout (dimensions, coordinates).

        Parameters
        ----------
        rows : numpy.ndarray or dask.array.Array of shape (n_samples, n_kept)
            One row per sample of ``samples``, one column per kept feature.
        samples : Samples
            As :meth:`stack_components` (or :meth:`stack`) gave it.

        Returns
        -------
        X : xarray.DataArray or xarray.Dataset
            The feature dimension (with its fitted coordinates) where the stacked dimension
            was, or the fitted Dataset variables; features dropped at fit are NaN. Lazy for
            Dask rows.

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> from ppa_dask.store.stacker import Stacker
        >>> values = np.ones((3, 4))
        >>> values[1] = np.nan  # dropped at fit
        >>> stacker = Stacker(feature_dim="band")
        >>> _ = stacker.fit_stack(xr.DataArray(values, dims=("band", "pixel")))
        >>> rows, samples = stacker.stack(xr.DataArray(values, dims=("band", "pixel")))
        >>> stacker.unstack_features(rows, samples).isnull().values[:, 0].tolist()
        [False, True, False]
        """
        layout = self._fitted_layout()
        fdim, d, kept = layout["feature_dim"], layout["n_features"], layout["kept"]
        n_kept = int(np.count_nonzero(kept))
        if rows.ndim != 2 or rows.shape[1] != n_kept:
            raise ValueError(
                f"expected one column per kept feature ({n_kept}), got shape {rows.shape}"
            )
        if self.kept_weights is not None:  # back to the input's units (coslat)
            rows = rows / self.kept_weights
        if not kept.all():
            kept_idx = np.flatnonzero(kept)
            if is_dask(rows):
                rows = _single_column_chunk(rows).map_blocks(
                    _scatter_features,
                    kept_idx,
                    d,
                    dtype=np.float64,
                    chunks=(rows.chunks[0], (d,)),
                    meta=np.empty((0, 0)),
                )
            else:
                rows = _scatter_features(rows, kept_idx, d)
        coords = dict(samples.coords)
        for k, v in layout["feature_coords"].items():
            coords[k] = (fdim, v)
        if layout["kind"] == "Dataset":
            coords[fdim] = (fdim, np.array(layout["variables"], dtype=object))
            position0 = dataclasses.replace(samples, position=0)
            return _unstack(rows, position0, fdim, coords, None).to_dataset(dim=fdim)
        out = _unstack(rows, samples, fdim, coords, layout["name"])
        if layout.get("feature_dims"):
            split = {
                d: np.asarray(layout["feature_dim_coords"][d]) for d in layout["feature_dims"]
            }
            out = split_feature_dims(out, fdim, split)
        return out
