"""xarray adapter: fit, transform and invert labelled cubes (``PPA().fit(da, feature_dim="band")``).

:class:`ppa_dask.PPA` dispatches here when given an ``xarray.DataArray`` or ``Dataset``; all the
mathematics stays in the numpy / Dask paths of the estimator, which see a plain
``(samples, features)`` array. The functions take the estimator as first argument and only call
its ``fit`` / ``transform`` / ``inverse_transform`` on 2-D arrays, so any transformer of the
library can use them.

Layout
------
* DataArray: ``feature_dim`` holds the features; every other dimension is a sample dimension.
  The array is transposed to ``(*sample_dims, feature_dim)`` and reshaped to
  ``(n_samples, n_features)`` in C order (samples in row-major order of the sample dimensions,
  whatever the chunking, so the folds of degree selection do not depend on chunks).
* Dataset: the data variables are the features (each must have the same dimensions, which are
  the sample dimensions); internally stacked along a ``"variable"`` dimension.
* ``transform`` returns a DataArray named ``"components"`` with a ``component`` dimension
  (coordinate 1..k) in place of the feature dimension (first for a Dataset) and the input's
  sample coordinates. ``inverse_transform`` replaces ``component`` by the feature dimension
  again, with the feature coordinates recorded at fit (``xarray_layout_``), or returns the
  Dataset of the fitted variables.
* Dask-backed input (``xr.open_zarr``) gives lazy output: one task per row chunk, chunk sizes
  known.

Missing data
------------
``fit`` makes one counting pass (NaN per sample and per feature; for Dask input one computation
that reads each chunk once and brings back a small integer per sample), then

* features NaN in every sample are dropped (restored as all-NaN by ``inverse_transform``);
* samples NaN in every remaining feature (clouds, masked land or sea) are left out of the fit;
* samples NaN in some but not all remaining features ("isolated" NaNs) are reported with their
  count, the features concerned and the coordinates of the first ones: ``nan_policy="raise"``
  (default) raises ValueError with that report, ``"drop_samples"`` leaves them out of the fit
  too and warns with the report.

The valid rows are then selected with the concrete boolean mask, so a Dask array keeps known
chunk sizes (no ``compute_chunk_sizes``). ``transform`` and ``inverse_transform`` return NaN for
every sample with a NaN in a fitted feature (or coefficient), whatever ``nan_policy`` was; they
never need the mask pass. Infinite values are not missing data: they raise.

Examples
--------
>>> from ppa_dask import PPA
>>> from ppa_dask.datasets import make_cube
>>> cube = make_cube(n_bands=8, ny=20, nx=20, random_state=0)["reflectance"]
>>> model = PPA(degree=2, random_state=0).fit(cube, feature_dim="band")
>>> comps = model.transform(cube)
>>> comps.dims
('component', 'y', 'x')
>>> back = model.inverse_transform(comps)
>>> back.dims == cube.dims and bool(back.isnull().equals(cube.isnull()))
True
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from ppa_dask.utils.arrays import is_dask

__all__ = ["COMPONENT_DIM", "NAN_POLICIES", "fit", "transform", "inverse_transform"]

#: Name of the output dimension of ``transform``.
COMPONENT_DIM = "component"
NAN_POLICIES = ("raise", "drop_samples")
_VARIABLE_DIM = "variable"  # features of a Dataset
_REPORT_ROWS = 1000  # partial-NaN samples inspected to name the features concerned


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
    if feature_dim not in X.dims:
        raise ValueError(f"feature_dim {feature_dim!r} is not a dimension of {where}: {X.dims}")
    return X, feature_dim, "DataArray", None


def _stack(A, feature_dim):
    """(data2d, sample_dims, sample_shape) with rows in C order of the sample dimensions."""
    sample_dims = [d for d in A.dims if d != feature_dim]
    sample_shape = tuple(A.sizes[d] for d in sample_dims)
    n = int(np.prod(sample_shape, dtype=np.int64))
    data = A.transpose(*sample_dims, feature_dim).data
    data2d = data.reshape(n, A.sizes[feature_dim])
    return data2d, sample_dims, sample_shape


def _unstack(data2d, sample_shape, sample_dims, new_dim, position, coords, name):
    """The inverse of :func:`_stack`, with ``new_dim`` at ``position`` among the dimensions."""
    data = data2d.reshape(*sample_shape, data2d.shape[1])
    dims = list(sample_dims) + [new_dim]
    out = xr.DataArray(data, dims=dims, coords=coords, name=name)
    order = list(sample_dims)
    order.insert(position, new_dim)
    return out.transpose(*order)


def _sample_coords(A, feature_dim):
    return {k: v for k, v in A.coords.items() if feature_dim not in v.dims}


def _layout(est):
    layout = getattr(est, "xarray_layout_", None)
    if layout is None:
        raise ValueError(
            f"this {type(est).__name__} was fitted on a plain array; fit it on a DataArray or "
            "Dataset to transform xarray input"
        )
    return layout


def _n_outputs(est):
    return len(est.get_feature_names_out())


# -------------------------------------------------------------------------------------------
# missing data
# -------------------------------------------------------------------------------------------


def _nan_counts(data2d):
    """NaN count per sample (small unsigned ints) and per feature, in one read of the data."""
    d = data2d.shape[1]
    dtype = np.uint8 if d < 2**8 else np.uint16 if d < 2**16 else np.uint32
    if is_dask(data2d):
        import dask
        import dask.array as da

        isnan = da.isnan(data2d)
        return dask.compute(isnan.sum(axis=1, dtype=dtype), isnan.sum(axis=0, dtype=np.int64))
    isnan = np.isnan(data2d)
    return isnan.sum(axis=1, dtype=dtype), isnan.sum(axis=0, dtype=np.int64)


def _label(values, i):
    return values[i].item() if hasattr(values[i], "item") else values[i]


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
# fit / transform / inverse
# -------------------------------------------------------------------------------------------


def fit(est, X, feature_dim=None, nan_policy="raise", progress=None):
    """Fit ``est`` on a DataArray (features along ``feature_dim``) or a Dataset (variables).

    Parameters
    ----------
    est : estimator
        Fitted in place on the valid samples, as a numpy or Dask ``(samples, features)`` array.
    X : xarray.DataArray or xarray.Dataset
        numpy- or Dask-backed.
    feature_dim : str
        DataArray only: the feature dimension; every other dimension is a sample dimension.
    nan_policy : {"raise", "drop_samples"}, default="raise"
        For samples with NaN in some but not all (non-empty) features: raise a ValueError that
        gives their count, the features concerned and where the first ones are, or leave them
        out of the fit with a warning giving the same report. Samples NaN in every feature are
        always left out, features NaN everywhere always dropped.
    progress : callable, optional
        Passed to ``est.fit``.

    Returns
    -------
    est
        With ``xarray_layout_``: the feature dimension, the feature coordinates, which features
        were kept and a NaN summary (``nan_summary``: samples in all, fitted, fully masked,
        with isolated NaNs, and the positions of the dropped features).
    """
    if nan_policy not in NAN_POLICIES:
        raise ValueError(f"nan_policy must be one of {NAN_POLICIES}, got {nan_policy!r}")
    A, fdim, kind, variables = _as_feature_array(X, feature_dim)
    if COMPONENT_DIM in A.dims:
        raise ValueError(
            f"the input has a {COMPONENT_DIM!r} dimension, the name of the output dimension; "
            "rename it first"
        )
    data2d, sample_dims, sample_shape = _stack(A, fdim)
    if not np.issubdtype(data2d.dtype, np.floating):
        data2d = data2d.astype(np.float64)
    n, d = data2d.shape
    feature_coords = {k: np.asarray(v.values) for k, v in A.coords.items() if v.dims == (fdim,)}
    labels = feature_coords.get(fdim, np.arange(d))
    labels = [_label(labels, i) for i in range(d)]

    per_sample, per_feature = _nan_counts(data2d)
    dropped = per_feature == n
    kept_idx = np.flatnonzero(~dropped)
    if kept_idx.size == 0:
        raise ValueError(f"every {fdim} is NaN in every sample: nothing to fit")
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
        if nan_policy == "raise":
            raise ValueError(
                report + ". Pass nan_policy='drop_samples' to leave these samples out of the fit "
                "(transform returns NaN for them), or fill the gaps first."
            )
        warnings.warn(
            report + "; these samples are left out of the fit (nan_policy='drop_samples').",
            UserWarning,
            stacklevel=3,
        )
    if not valid.any():
        raise ValueError(
            f"no sample has every {fdim} valid ({summary['n_masked']} fully masked, "
            f"{summary['n_isolated_samples']} with isolated NaNs): nothing to fit"
        )
    summary["n_fitted"] = int(valid.sum())

    Xfit = data2d if not dropped.any() else data2d[:, kept_idx]
    if not valid.all():
        # a concrete numpy mask keeps the Dask chunk sizes known
        Xfit = Xfit[valid]
        if is_dask(Xfit) and 0 in Xfit.chunks[0]:
            Xfit = Xfit.rechunk({0: tuple(c for c in Xfit.chunks[0] if c > 0)})
    if progress is None:
        est.fit(Xfit)
    else:
        est.fit(Xfit, progress=progress)
    est.xarray_layout_ = {
        "kind": kind,
        "feature_dim": fdim,
        "n_features": int(d),
        "kept": ~dropped,
        "feature_coords": feature_coords,
        "name": None if A.name is None or kind == "Dataset" else str(A.name),
        "variables": variables,
        "nan_summary": summary,
    }
    return est


def _check_features(layout, A, fdim, where):
    d = layout["n_features"]
    if A.sizes[fdim] != d:
        raise ValueError(
            f"{where} has {A.sizes[fdim]} entries along {fdim!r}; the model was fitted on {d}"
        )
    fitted = layout["feature_coords"].get(fdim)
    if fitted is not None and fdim in A.coords:
        given = np.asarray(A.coords[fdim].values)
        if given.shape != fitted.shape or not np.array_equal(given, fitted):
            raise ValueError(
                f"the {fdim!r} coordinate of {where} differs from the one the model was fitted "
                f"on ({list(fitted)[:8]}...)"
            )


def _transform_rows(block, est, kept_idx, n_out):
    X = np.asarray(block)
    if kept_idx is not None:
        X = X[:, kept_idx]
    valid = ~np.isnan(X).any(axis=1)
    out = np.full((X.shape[0], n_out), np.nan)
    if valid.all():
        out[:] = est.transform(X)
    elif valid.any():
        out[valid] = est.transform(X[valid])
    return out


def transform(est, X):
    """Coefficients of a DataArray / Dataset shaped like the one ``est`` was fitted on.

    Returns
    -------
    components : xarray.DataArray
        Named ``"components"``; the input's dimensions with ``component`` (coordinate 1..k) in
        place of the feature dimension (first for a Dataset); sample coordinates kept. NaN for
        samples with a NaN in a fitted feature. Lazy for Dask-backed input.
    """
    layout = _layout(est)
    if layout["kind"] == "Dataset":
        if not isinstance(X, xr.Dataset):
            raise TypeError("the model was fitted on a Dataset; transform a Dataset")
        missing = [v for v in layout["variables"] if v not in X.data_vars]
        if missing:
            raise ValueError(f"the Dataset lacks the fitted variable(s) {missing}")
        X = X[layout["variables"]]
        A, fdim, _, _ = _as_feature_array(X, None)
    else:
        if not isinstance(X, xr.DataArray):
            raise TypeError("the model was fitted on a DataArray; transform a DataArray")
        fdim = layout["feature_dim"]
        A, fdim, _, _ = _as_feature_array(X, fdim)
    if COMPONENT_DIM in A.dims:
        raise ValueError(f"the input already has a {COMPONENT_DIM!r} dimension")
    _check_features(layout, A, fdim, "X")
    data2d, sample_dims, sample_shape = _stack(A, fdim)
    kept = np.asarray(layout["kept"])
    kept_idx = None if kept.all() else np.flatnonzero(kept)
    n_out = _n_outputs(est)
    if is_dask(data2d):
        data2d = data2d.rechunk({1: -1})
        out = data2d.map_blocks(
            _transform_rows,
            est,
            kept_idx,
            n_out,
            dtype=np.float64,
            chunks=(data2d.chunks[0], (n_out,)),
            meta=np.empty((0, 0)),
        )
    else:
        out = _transform_rows(data2d, est, kept_idx, n_out)
    coords = _sample_coords(A, fdim)
    coords[COMPONENT_DIM] = np.arange(1, n_out + 1)
    return _unstack(
        out, sample_shape, sample_dims, COMPONENT_DIM, A.dims.index(fdim), coords, "components"
    )


def _inverse_rows(block, est, kept_idx, n_features):
    R = np.asarray(block)
    valid = ~np.isnan(R).any(axis=1)
    out = np.full((R.shape[0], n_features), np.nan)
    if valid.any():
        rows = est.inverse_transform(R if valid.all() else R[valid])
        if valid.all() and kept_idx is None:
            out[:] = rows
        else:
            r = np.flatnonzero(valid)
            c = np.arange(n_features) if kept_idx is None else kept_idx
            out[np.ix_(r, c)] = rows
    return out


def inverse_transform(est, R):
    """Back from coefficients to the fitted layout (dimensions, coordinates, variables).

    Parameters
    ----------
    R : xarray.DataArray
        With a ``component`` dimension holding the leading ``m`` components (``1..m``, as
        ``transform`` returns them, or ``components.isel(component=slice(0, m))`` for the
        ``m``-component reconstruction).

    Returns
    -------
    X : xarray.DataArray or xarray.Dataset
        The feature dimension (with its fitted coordinates) in place of ``component``, or the
        fitted Dataset variables. Features dropped at fit (NaN everywhere) and samples with a
        NaN coefficient are NaN. Lazy for Dask-backed input.
    """
    layout = _layout(est)
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
    fdim = layout["feature_dim"]
    if fdim in R.dims:
        raise ValueError(f"R already has the feature dimension {fdim!r}")
    data2d, sample_dims, sample_shape = _stack(R, COMPONENT_DIM)
    d = layout["n_features"]
    kept = np.asarray(layout["kept"])
    kept_idx = None if kept.all() else np.flatnonzero(kept)
    if is_dask(data2d):
        data2d = data2d.rechunk({1: -1})
        out = data2d.map_blocks(
            _inverse_rows,
            est,
            kept_idx,
            d,
            dtype=np.float64,
            chunks=(data2d.chunks[0], (d,)),
            meta=np.empty((0, 0)),
        )
    else:
        out = _inverse_rows(data2d, est, kept_idx, d)
    coords = _sample_coords(R, COMPONENT_DIM)
    for k, v in layout["feature_coords"].items():
        coords[k] = (fdim, v)
    if layout["kind"] == "Dataset":
        coords[fdim] = (fdim, np.array(layout["variables"], dtype=object))
        arr = _unstack(out, sample_shape, sample_dims, fdim, 0, coords, None)
        return arr.to_dataset(dim=fdim)
    return _unstack(
        out, sample_shape, sample_dims, fdim, R.dims.index(COMPONENT_DIM), coords, layout["name"]
    )
