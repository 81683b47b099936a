"""What kind of array a value is, told without importing libraries the caller has not used."""

from __future__ import annotations

import sys

__all__ = ["is_dask", "is_xarray"]


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
