"""Several feature dimensions merged into one and split back: ``("time", "band")`` of a series
become one dimension ``time|band`` (labels ``time=2020-05-10|band=B2``) for a fit, and the
rows in feature space come back with both dimensions and their coordinates.

Used by the stacker (fit, transform, inverse) and by the sources (the labels of a source whose
features span several dimensions); it imports neither.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FEATURE_DIM_SEP", "merge_feature_dims", "split_feature_dims"]


#: Joins the names of several feature dimensions into the one they are merged into.
FEATURE_DIM_SEP = "|"


def _feature_label(value):
    value = np.asarray(value)
    if value.dtype.kind == "M":
        text = str(np.datetime_as_string(value, unit="s"))
        return text.removesuffix("T00:00:00")
    return str(value.item() if value.ndim == 0 else value)


def merge_feature_dims(X, dims, where="X"):
    """A DataArray whose feature dimensions ``dims`` are merged into one named
    ``"time|band"``, in C order (the last of ``dims`` varying fastest), labelled
    ``"time=2020-05-10|band=1"``; and ``{dim: coordinate values}`` to split it back.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> X = xr.DataArray(np.zeros((2, 3, 5)), dims=("time", "band", "x"),
    ...                  coords={"time": [1, 2], "band": ["b", "g", "r"]})
    >>> A, coords = merge_feature_dims(X, ("time", "band"))
    >>> A.dims, A["time|band"].values[:2].tolist()
    (('time|band', 'x'), ['time=1|band=b', 'time=1|band=g'])
    """
    import xarray as xr  # here: the command reads FEATURE_DIM_SEP (through .sources) without it

    dims = [str(d) for d in dims]
    for d in dims:
        if d not in X.dims:
            raise ValueError(
                f"feature_dim {tuple(dims)!r}: {d!r} is not a dimension of {where}: {X.dims}"
            )
    if len(set(dims)) != len(dims):
        raise ValueError(f"feature_dim {tuple(dims)!r} names a dimension twice")
    name = FEATURE_DIM_SEP.join(dims)
    coords = {d: np.asarray(X[d].values) if d in X.coords else np.arange(X.sizes[d]) for d in dims}
    others = [d for d in X.dims if d not in dims]
    A = X.transpose(*others, *dims)
    shape = [A.sizes[d] for d in others]
    data = A.data.reshape(*shape, -1)
    grid = np.meshgrid(*[np.arange(len(coords[d])) for d in dims], indexing="ij")
    labels = [
        FEATURE_DIM_SEP.join(f"{d}={_feature_label(coords[d][i[k]])}" for k, d in enumerate(dims))
        for i in zip(*(g.ravel() for g in grid))
    ]
    kept = {k: v for k, v in A.coords.items() if not set(v.dims) & set(dims)}
    merged = xr.DataArray(
        data,
        dims=(*others, name),
        coords={**kept, name: np.asarray(labels, dtype=str)},
        attrs=X.attrs,
    )
    merged.name = X.name  # (given to the constructor, None would take the Dask array's name)
    # the merged dimension where the first of them was (components come back there)
    at = sum(1 for d in X.dims[: X.dims.index(dims[0])] if d not in dims)
    merged = merged.transpose(*others[:at], name, *others[at:])
    merged.encoding = dict(X.encoding)
    return merged, coords


def split_feature_dims(A, name, coords):
    """The inverse of :func:`merge_feature_dims`: ``name`` split back into its dimensions,
    where it was, with their coordinates."""
    import xarray as xr

    dims = list(coords)
    others = [d for d in A.dims if d != name]
    position = A.dims.index(name)
    B = A.transpose(*others, name)
    shape = [B.sizes[d] for d in others] + [len(coords[d]) for d in dims]
    kept = {k: v for k, v in B.coords.items() if name not in v.dims}
    out = xr.DataArray(
        B.data.reshape(shape), dims=(*others, *dims), coords={**kept, **coords}, attrs=A.attrs
    )
    out.name = A.name  # (given to the constructor, None would take the Dask array's name)
    order = others[:position] + dims + others[position:]
    return out.transpose(*order)
