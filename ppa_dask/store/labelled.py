"""Per-sample results of any shape back to labelled xarray objects.

:class:`~ppa_dask.store.stacker.Stacker` stacks a cube into ``(samples, features)`` rows and
unstacks 2-D results. Methods that return more per sample (a Jacobian or a metric matrix, a
Frenet frame, a vector of errors for k = 0..n) or less (one score) use the helpers here,
with the stacker's :class:`~ppa_dask.store.stacker.Samples`:

* :func:`map_valid_rows` applies a per-block function to the rows without NaN (NaN results
  elsewhere, as ``transform`` does), one task per row chunk for Dask rows;
* :func:`feature_coords` gives the fitted feature dimension's coordinates (every fitted
  feature, or only the kept ones), optionally renamed for a second feature-like dimension;
* :func:`scatter_kept` puts NaN at the features dropped at fit along chosen axes;
* :func:`unstack_samples` reshapes the row axis back to the sample dimensions, with the
  result's own dimensions where the feature dimension was, coordinates and attrs kept.

Examples
--------
>>> import numpy as np, xarray as xr
>>> from ppa_dask.store.stacker import Stacker
>>> da = xr.DataArray(np.ones((3, 4, 5)), dims=("band", "y", "x"), attrs={"units": "1"})
>>> stacker = Stacker(feature_dim="band")
>>> _ = stacker.fit_stack(da)
>>> rows, samples = stacker.stack(da)
>>> norms = map_valid_rows(rows, lambda block: (block**2).sum(axis=1), ())
>>> out = unstack_samples(norms, samples, (), {}, "norm", da.attrs)
>>> out.dims, out.attrs
(('y', 'x'), {'units': '1'})
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ppa_dask.utils.arrays import is_dask

__all__ = ["apply_method", "feature_coords", "map_valid_rows", "scatter_kept", "unstack_samples"]


def apply_method(block, estimator, name, kwargs):
    """``estimator.<name>(block, **kwargs)``: a picklable per-block call for :func:`map_valid_rows`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.preprocessing import StandardScaler
    >>> X = np.arange(6.0).reshape(3, 2)
    >>> apply_method(X, StandardScaler().fit(X), "transform", {})[:, 0].tolist()
    [-1.224744871391589, 0.0, 1.224744871391589]
    """
    return getattr(estimator, name)(block, **kwargs)


def _valid_rows(block, func, tail, args):
    X = np.asarray(block)
    valid = ~np.isnan(X).any(axis=1)
    out = np.full((X.shape[0], *tail), np.nan)
    if valid.all():
        out[...] = func(X, *args)
    elif valid.any():
        out[valid] = func(X[valid], *args)
    return out


def map_valid_rows(rows, func, tail, args=()):
    """``func(rows, *args)`` on the rows without NaN; NaN of shape ``tail`` for the others.

    Parameters
    ----------
    rows : numpy.ndarray or dask.array.Array of shape (n_samples, n_features)
        As :meth:`~ppa_dask.store.stacker.Stacker.stack` gives them (one chunk along the
        features for Dask).
    func : callable
        ``func(block, *args)`` returns an array of shape ``(len(block), *tail)`` for a block of
        finite rows (a pure per-block kernel: a task runs it on each row chunk).
    tail : tuple of int
        The shape of the result per sample (``()`` for one number).
    args : tuple
        Further arguments of ``func``.

    Returns
    -------
    out : numpy.ndarray or dask.array.Array of shape (n_samples, *tail)
        float64; lazy for Dask rows, one task per row chunk, chunk sizes known.

    Examples
    --------
    >>> import numpy as np
    >>> rows = np.array([[1.0, 2.0], [np.nan, 1.0]])
    >>> map_valid_rows(rows, lambda b: b.sum(axis=1), ()).tolist()
    [3.0, nan]
    """
    tail = tuple(int(s) for s in tail)
    if not is_dask(rows):
        return _valid_rows(rows, func, tail, args)
    extra = {}
    if len(tail) == 0:
        extra["drop_axis"] = 1
    elif len(tail) > 1:
        extra["new_axis"] = list(range(2, len(tail) + 1))
    chunks = (rows.chunks[0],) + tuple((s,) for s in tail)
    return rows.map_blocks(
        _valid_rows,
        func,
        tail,
        args,
        dtype=np.float64,
        chunks=chunks,
        meta=np.empty((0,) * (1 + len(tail))),
        **extra,
    )


def feature_coords(layout, dim=None, kept_only=False):
    """Coordinates of the fitted feature dimension, for a result along it.

    Parameters
    ----------
    layout : dict
        A stacker's layout (:attr:`~ppa_dask.store.stacker.Stacker.layout`).
    dim : str, optional
        Name of the result's dimension (default: the fitted feature dimension). Coordinates
        are renamed with the same suffix (``band -> band_2`` makes ``wavelength ->
        wavelength_2``), so that two feature-like dimensions can coexist.
    kept_only : bool, default=False
        Only the features kept at fit (NaN somewhere), instead of every fitted feature.

    Returns
    -------
    coords : dict
        name -> ``(dim, values)``; a Dataset's variable names as the coordinate ``dim``.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from ppa_dask.store.stacker import Stacker
    >>> stacker = Stacker(feature_dim="band")
    >>> _ = stacker.fit_stack(xr.DataArray(np.ones((2, 3)), dims=("band", "pixel"),
    ...                                    coords={"band": [450, 550]}))
    >>> {k: v[1].tolist() for k, v in feature_coords(stacker.layout, "band_2").items()}
    {'band_2': [450, 550]}
    """
    fdim = layout["feature_dim"]
    dim = fdim if dim is None else dim
    suffix = dim[len(fdim) :] if dim.startswith(fdim) else f"_{dim}"
    select = np.asarray(layout["kept"]) if kept_only else slice(None)
    coords = {}
    for name, values in layout["feature_coords"].items():
        coords[dim if name == fdim else f"{name}{suffix}"] = (dim, np.asarray(values)[select])
    if layout["kind"] == "Dataset":
        names = np.array(layout["variables"], dtype=object)
        coords[dim] = (dim, names[select])
    return coords


def _scatter(block, kept_idx, n_features, axes):
    out = np.asarray(block)
    for axis in axes:
        shape = list(out.shape)
        shape[axis] = n_features
        full = np.full(shape, np.nan)
        index = [slice(None)] * out.ndim
        index[axis] = kept_idx
        full[tuple(index)] = out
        out = full
    return out


def scatter_kept(values, layout, axes):
    """Put the kept-feature axes ``axes`` of ``values`` back on every fitted feature (NaN for
    the features dropped at fit).

    Parameters
    ----------
    values : numpy.ndarray or dask.array.Array
        Rows first; each axis in ``axes`` has one entry per kept feature (one chunk).
    layout : dict
        The stacker's layout.
    axes : tuple of int
        Axes along the kept features (never 0, the rows).

    Returns
    -------
    out : numpy.ndarray or dask.array.Array
        ``values`` itself when no feature was dropped.

    Examples
    --------
    >>> import numpy as np
    >>> layout = {"kept": np.array([True, False, True])}
    >>> scatter_kept(np.ones((1, 2)), layout, (1,)).tolist()
    [[1.0, nan, 1.0]]
    """
    kept = np.asarray(layout["kept"])
    if kept.all():
        return values
    kept_idx, d = np.flatnonzero(kept), kept.size
    if not is_dask(values):
        return _scatter(values, kept_idx, d, axes)
    chunks = tuple((d,) if a in axes else c for a, c in enumerate(values.chunks))
    return values.rechunk({a: -1 for a in axes}).map_blocks(
        _scatter, kept_idx, d, axes, dtype=np.float64, chunks=chunks
    )


def unstack_samples(values, samples, dims, coords, name=None, attrs=None):
    """Per-sample results back to a DataArray over the sample dimensions.

    Parameters
    ----------
    values : numpy.ndarray or dask.array.Array of shape (n_samples, *shape)
        One entry per sample of ``samples`` (rows in the stacker's order).
    samples : ppa_dask.store.stacker.Samples
        As :meth:`~ppa_dask.store.stacker.Stacker.stack` gave it.
    dims : tuple of str
        Names of the result's own axes (``values.shape[1:]``); they take the place of the
        stacked feature dimension among the input's dimensions (first for a Dataset input).
    coords : dict
        Coordinates along ``dims`` (name -> values or ``(dim, values)``).
    name : str, optional
    attrs : dict, optional
        The input's attrs, kept on the result.

    Returns
    -------
    xarray.DataArray
        With the input's sample coordinates; lazy for Dask values.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from ppa_dask.store.stacker import Stacker
    >>> da = xr.DataArray(np.ones((2, 3, 4)), dims=("y", "band", "x"))
    >>> stacker = Stacker(feature_dim="band")
    >>> _ = stacker.fit_stack(da)
    >>> rows, samples = stacker.stack(da)
    >>> unstack_samples(np.zeros((8, 3, 3)), samples, ("out", "in"), {}).dims
    ('y', 'out', 'in', 'x')
    """
    dims = tuple(dims)
    if values.ndim != 1 + len(dims) or values.shape[0] != samples.n_samples:
        raise ValueError(
            f"expected {samples.n_samples} rows (one per sample) and {len(dims)} more axes "
            f"{dims}, got shape {values.shape}"
        )
    data = values.reshape(*samples.shape, *values.shape[1:])
    all_coords = dict(samples.coords)
    all_coords.update(coords)
    out = xr.DataArray(
        data, dims=list(samples.dims) + list(dims), coords=all_coords, name=name, attrs=attrs
    )
    order = list(samples.dims)
    order[samples.position : samples.position] = dims
    return out.transpose(*order)
