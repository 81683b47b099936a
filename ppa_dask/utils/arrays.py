"""What kind of array a value is, told without importing libraries the caller has not used."""

from __future__ import annotations

import sys

__all__ = ["check_dask_samples", "is_dask", "is_xarray"]


def is_dask(X):
    """True for a ``dask.array.Array``.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> is_dask(np.zeros(2)), is_dask(da.zeros(2))
    (False, True)
    """
    # without dask.array imported, X cannot be a Dask array: no import needed to tell
    da = sys.modules.get("dask.array")
    return da is not None and isinstance(X, da.Array)


def is_xarray(X):
    """True for an ``xarray.DataArray`` or ``xarray.Dataset``.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> is_xarray(np.zeros(2)), is_xarray(xr.DataArray(np.zeros(2)))
    (False, True)
    """
    xr = sys.modules.get("xarray")
    return xr is not None and isinstance(X, (xr.DataArray, xr.Dataset))


def check_dask_samples(
    X, name="X", min_samples=1, min_features=1, who="this estimator", merge_features=True
):
    """Validate a Dask array of samples, the Dask counterpart of scikit-learn's ``check_array``.

    numpy input is validated by scikit-learn (``validate_data`` / ``check_array``); a Dask
    array is checked here without computing anything: two dimensions, a real dtype, known chunk
    sizes (a row count is needed before the first pass), and enough samples and features.
    Feature chunks are merged, since most block kernels need whole rows (``merge_features``
    False keeps them, for the passes along feature slabs of wide data). A boolean array is
    cast to float64 lazily, as scikit-learn casts a numpy one.

    Parameters
    ----------
    X : dask.array.Array
    name : str
        The argument's name, used in the messages.
    min_samples, min_features : int
        The smallest shape accepted.
    who : str
        What needs the array (named in the messages).
    merge_features : bool, default=True
        Merge the feature chunks into one.

    Returns
    -------
    X : dask.array.Array
        One chunk along the features (with ``merge_features``).

    Examples
    --------
    >>> import dask.array as da
    >>> check_dask_samples(da.ones((6, 4), chunks=(3, 2))).chunks
    ((3, 3), (4,))
    >>> check_dask_samples(da.ones((6, 4), dtype=bool)).dtype
    dtype('float64')
    """
    import numpy as np

    if X.ndim != 2:
        raise ValueError(f"Expected a 2D array for {name}, got a {X.ndim}D Dask array.")
    if np.issubdtype(X.dtype, np.bool_):
        X = X.astype(np.float64)
    if not (np.issubdtype(X.dtype, np.floating) or np.issubdtype(X.dtype, np.integer)):
        raise TypeError(f"{name} must hold real numbers, got Dask array of dtype {X.dtype}.")
    for axis, what in ((1, "feature (column)"), (0, "sample (row)")):
        if any(np.isnan(c) for c in X.chunks[axis]):
            raise ValueError(
                f"{name} has unknown chunk sizes (shape {X.shape}): its {what} chunk sizes "
                "are unknown, as after boolean indexing or a dask dataframe's to_dask_array(); "
                "call "
                f"{name}.compute_chunk_sizes() first, or build it with known sizes "
                "(to_dask_array(lengths=True))."
            )
    if X.shape[1] < min_features:
        raise ValueError(
            f"Found array with {X.shape[1]} feature(s) (shape={X.shape}) while a minimum of "
            f"{min_features} is required by {who}."
        )
    if X.shape[0] < min_samples:
        raise ValueError(
            f"Found array with {X.shape[0]} sample(s) (shape={X.shape}) while a minimum of "
            f"{min_samples} is required by {who}."
        )
    return X if X.numblocks[1] == 1 or not merge_features else X.rechunk({1: -1})
