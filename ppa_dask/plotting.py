"""Principal curves, surfaces and volumes of a fitted PPA model (the paper's Fig. 7).

A uniform grid in the first one, two or three PPA coefficients, mapped back to the input space
with the closed-form inverse, shows the curvilinear coordinates the model found: the inverse of
a line of the first coefficient is the principal curve (the 1-D reconstruction of the data),
of a 2-D grid a principal surface, of a 3-D grid a principal volume. :func:`principal_grids`
draws them over the data, projected on chosen input dimensions, with matplotlib's Agg canvas
(no display, no global pyplot state). :func:`robust_limits` gives the colour limits of the
component images (the pipelines' plots stage, the gallery).
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
from sklearn.utils.validation import check_is_fitted

__all__ = ["PrincipalGrid", "principal_grids", "robust_limits"]

#: Percentiles of the finite pixels that bound the colour scale of component images.
ROBUST_PERCENTILES = (2.0, 98.0)


def robust_limits(image, percentiles=ROBUST_PERCENTILES):
    """Colour limits ``(vmin, vmax)`` of an image from percentiles of its finite pixels.

    A few extreme pixels (a cloud edge, a fill value, saturated pixels) set the range of
    min-max limits and leave the rest of the image one flat colour; the 2nd and 98th
    percentiles follow the bulk of the pixels and clip the extremes. NaN pixels (masked) are
    ignored. When the percentiles coincide (an image that is mostly one value) the finite
    minimum and maximum are used; an image without a finite pixel gives ``(None, None)``
    (matplotlib's own limits).

    Parameters
    ----------
    image : array-like
    percentiles : (float, float), default=(2, 98)

    Returns
    -------
    vmin, vmax : float or None
        For ``imshow(image, vmin=vmin, vmax=vmax)``.

    Examples
    --------
    >>> import numpy as np
    >>> image = np.linspace(0.0, 1.0, 10_000).reshape(100, 100)
    >>> image[0, :3] = [1e6, -1e6, np.nan]  # extreme pixels and a masked one
    >>> [round(v, 2) for v in robust_limits(image)]
    [0.02, 0.98]
    """
    values = np.asarray(image, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None, None
    lo, hi = (float(v) for v in np.percentile(values, percentiles))
    if not lo < hi:
        lo, hi = float(values.min()), float(values.max())
    return lo, hi


class PrincipalGrid(NamedTuple):
    """What :func:`principal_grids` drew (every array is in the model's own spaces).

    Attributes
    ----------
    curve : ndarray of shape (n_points, n_features)
        The principal curve: ``model.inverse_transform(curve_coefficients)``.
    curve_coefficients : ndarray of shape (n_points, dims[0] + 1)
        PPA coefficients of the curve: ``dims[0]`` varies, the earlier ones are 0 and the
        residual after step ``dims[0] + 1`` is 0 (for ``dims[0] = 0`` the curve is the set of
        one-component reconstructions, ``inverse_transform(transform(X)[:, :1])``).
    lines : list of ndarray of shape (n_points, n_features)
        Grid lines in the input space, ``model.inverse_transform(line_coefficients[i])``.
    line_coefficients : list of ndarray of shape (n_points, max(dims) + 1)
        Their PPA coefficients: one grid dimension varies, the other grid dimensions are fixed
        at grid values, every other coefficient is 0 and so is the residual after step
        ``max(dims) + 1`` (for ``dims = (0, 1)`` the grid covers the surface of two-component
        reconstructions).
    levels : ndarray of shape (len(dims), n_lines)
        Grid values of each PPA dimension in ``dims``.
    ax : matplotlib.axes.Axes
    figure : matplotlib.figure.Figure
    """

    curve: np.ndarray
    curve_coefficients: np.ndarray
    lines: list
    line_coefficients: list
    levels: np.ndarray
    ax: object
    figure: object


def _check_dims(dims, n_components, what, limit_len):
    try:
        dims = tuple(dims)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of ints, got {dims!r}") from None
    if not 1 <= len(dims) <= limit_len:
        raise ValueError(f"{what} must hold 1 to {limit_len} indices, got {dims!r}")
    if not all(isinstance(p, numbers.Integral) and not isinstance(p, bool) for p in dims):
        raise TypeError(f"{what} must hold ints, got {dims!r}")
    if len(set(dims)) != len(dims) or not all(0 <= p < n_components for p in dims):
        raise ValueError(
            f"{what} must be distinct indices between 0 and {n_components - 1}, got {dims!r}"
        )
    return tuple(int(p) for p in dims)


def principal_grids(
    model,
    X,
    dims=(0, 1),
    n_lines=7,
    n_points=200,
    input_dims=(0, 1),
    ax=None,
    path=None,
    quantiles=(0.01, 0.99),
    max_scatter=5000,
    random_state=0,
):
    """Draw the inverted uniform grid of PPA dimensions ``dims`` over the data (Fig. 7).

    The data are drawn in blue, the grid lines in grey, and the principal curve (the line of
    ``dims[0]`` with the other coefficients and the later residual at 0, i.e. the curve of
    one-component reconstructions for ``dims[0] = 0``) in red, all projected on the input
    dimensions ``input_dims`` (2 for a plane, 3 for a 3-D view).

    Parameters
    ----------
    model : PPA
        A fitted model (whitened or not: the grid is laid out in its ``transform`` space).
    X : array-like of shape (n_samples, n_features)
        Data to draw; also sets the grid range.
    dims : sequence of 1 to 3 ints, default=(0, 1)
        PPA coefficients spanned by the grid: ``(0,)`` a principal curve, ``(0, 1)`` a
        principal surface, ``(0, 1, 2)`` a principal volume.
    n_lines : int, default=7
        Grid values per dimension (lines drawn along each dimension through every combination
        of the other grid dimensions' values).
    n_points : int, default=200
        Points along each line.
    input_dims : sequence of 2 or 3 ints, default=(0, 1)
        Input features shown on the axes.
    ax : matplotlib.axes.Axes or None
        Axes to draw on (3-D axes for three ``input_dims``); None makes a new Agg figure.
    path : str or path-like or None
        Save the figure there as PNG.
    quantiles : (float, float), default=(0.01, 0.99)
        Range of each grid dimension, as quantiles of the data's coefficients.
    max_scatter : int, default=5000
        At most this many data points are drawn (a seeded random subset).
    random_state : int, default=0

    Returns
    -------
    PrincipalGrid
        The coefficients and input-space points of everything drawn, the axes and figure.

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask import PPA
    >>> from ppa_dask.datasets import make_helix
    >>> X = make_helix(1000, random_state=0)
    >>> model = PPA(degree=7).fit(X)
    >>> grid = principal_grids(model, X, dims=(0, 1), n_lines=5, input_dims=(0, 2))
    >>> grid.curve.shape, len(grid.lines)
    ((200, 3), 10)
    """
    check_is_fitted(model)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != model.n_features_in_:
        raise ValueError(
            f"X must have shape (n_samples, {model.n_features_in_}) for this model, got {X.shape}"
        )
    dims = _check_dims(dims, model.n_components_, "dims", 3)
    input_dims = _check_dims(input_dims, model.n_features_in_, "input_dims", 3)
    if len(input_dims) < 2:
        raise ValueError(f"input_dims must hold 2 or 3 input features, got {input_dims!r}")
    for name, value, low in (("n_lines", n_lines, 2), ("n_points", n_points, 2)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    lo_q, hi_q = quantiles
    if not 0 <= lo_q < hi_q <= 1:
        raise ValueError(f"quantiles must satisfy 0 <= low < high <= 1, got {quantiles!r}")

    R = model.transform(X)
    m = max(dims) + 1
    levels = np.array([np.linspace(*np.quantile(R[:, p], [lo_q, hi_q]), n_lines) for p in dims])
    fine = np.array([np.linspace(*np.quantile(R[:, p], [lo_q, hi_q]), n_points) for p in dims])

    # the curve: dims[0] varies, the earlier coefficients and the later residual are 0
    curve_coefficients = np.zeros((n_points, dims[0] + 1))
    curve_coefficients[:, dims[0]] = fine[0]
    curve = model.inverse_transform(curve_coefficients)

    line_coefficients = []
    if len(dims) > 1:
        for i, p in enumerate(dims):
            others = [j for j in range(len(dims)) if j != i]
            for values in (
                np.array(np.meshgrid(*levels[others], indexing="ij")).reshape(len(others), -1).T
            ):
                coef = np.zeros((n_points, m))
                coef[:, p] = fine[i]
                for j, value in zip(others, values):
                    coef[:, dims[j]] = value
                line_coefficients.append(coef)
    lines = [model.inverse_transform(coef) for coef in line_coefficients]

    three_d = len(input_dims) == 3
    if ax is None:
        figure = Figure(figsize=(6, 5))
        FigureCanvasAgg(figure)
        ax = figure.add_subplot(projection="3d" if three_d else None)
    else:
        figure = ax.figure
    shown = X
    if X.shape[0] > max_scatter:
        rows = np.random.default_rng(random_state).choice(X.shape[0], max_scatter, replace=False)
        shown = X[np.sort(rows)]
    cols = list(input_dims)
    ax.scatter(*shown[:, cols].T, s=2, color="tab:blue", alpha=0.3, label="data")
    for k, line in enumerate(lines):
        ax.plot(
            *line[:, cols].T,
            color="0.45",
            lw=0.8,
            label=f"PPA dims {tuple(p + 1 for p in dims)} grid" if k == 0 else None,
        )
    ax.plot(*curve[:, cols].T, color="red", lw=2, label=f"PPA dim {dims[0] + 1} curve")
    ax.set_xlabel(f"x{cols[0] + 1}")
    ax.set_ylabel(f"x{cols[1] + 1}")
    if three_d:
        ax.set_zlabel(f"x{cols[2] + 1}")
    ax.legend(loc="best", fontsize="small")
    if path is not None:
        if figure.canvas is None or not hasattr(figure.canvas, "print_png"):
            FigureCanvasAgg(figure)
        figure.savefig(path, format="png", dpi=120)
    return PrincipalGrid(curve, curve_coefficients, lines, line_coefficients, levels, ax, figure)
