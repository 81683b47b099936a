"""Differential geometry of a fitted PPA model: induced metric, curvilinear axes, Frenet frames.

PPA maps a sample ``x`` to coefficients ``r = R(x)``; its inverse is closed form. Two geometric
objects follow from the fitted model (Laparra et al., 2014, sections 3.4 and 5.2):

* the **induced metric** ``M(x) = J(x)^T Lambda^{-1} J(x)`` (eq. 21), with ``J = dR/dx`` and
  ``Lambda`` the variances of the PPA coefficients, a generalised Mahalanobis metric
  (:func:`ppa_dask.geometry.metric_from_jacobian`, :func:`ppa_dask.geometry.coefficient_variances`,
  computed in :mod:`ppa_dask.ppa.metric` beside the estimator; ``PPA.metric`` applies them);
* the **curvilinear axes**: the ``p``-th axis through ``x`` is the curve
  ``c(t) = R^{-1}(R(x) + t e_p)``. Its derivatives at ``t = 0``
  (:func:`axis_derivatives`) give the Frenet-Serret frame and the generalised curvatures
  ``chi_1 .. chi_{d-1}`` (:func:`frenet_serret`).

Why the derivatives are exact and cheap
---------------------------------------
In the ambient frame each inverse step adds a function of its own coefficient only,
``y_{p-1} = y_p + e_p alpha_p + U_p v(t_p(alpha_p))``, so
``R^{-1}(r) = mean + B r_res + sum_p (e_p alpha_p + U_p v(t_p(alpha_p)))`` with ``B`` the
residual basis. Moving one coefficient moves one term: the ``p``-th axis through ``x`` is the
``p``-th step's polynomial curve translated to ``x``,
``c(t) = x + e_p t + U_p (v(t_p(alpha_p + t)) - v(t_p(alpha_p)))``, and its ``j``-th derivative
at ``t = 0`` is ``delta_{j1} e_p + U_p v^{(j)}(t_p) / scale_p^j`` (the Taylor jet of the inverse
collapses to the one step that moves). Beyond the training range of ``alpha_p`` the basis is
continued along its tangent (``extrapolation="linear"``), so there the axis is a straight line and
its derivatives of order >= 2 are zero. Residual axes (``p >= n_steps``) are straight lines too.
No finite differences are involved.

The curvatures come from the QR factorisation ``[c', c'', ..., c^{(d)}] = Q R`` (Gram-Schmidt
with positive diagonal): the columns of ``Q`` are the Frenet vectors and
``chi_i = R_{i+1,i+1} / (R_{ii} ||c'||)``, the standard closed form of
``<e_i', e_{i+1}> / ||c'||`` (for ``d = 3``, ``chi_1`` is the curvature
``|c' x c''| / |c'|^3`` and ``chi_2`` the torsion ``det(c', c'', c''') / |c' x c''|^2``).
The last vector completes a positively oriented frame, so the last curvature carries a sign.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from ppa_dask.ppa import kernels
from ppa_dask.store.seam import labelled
from ppa_dask.utils.arrays import check_dask_samples, is_dask
from ppa_dask.utils.blas import one_blas_thread

__all__ = [
    "FRAME_DIM",
    "CURVATURE_DIM",
    "axis_derivatives",
    "derivatives_block",
    "frenet_from_derivatives",
    "frenet_serret",
]

#: Dimension of the Frenet vectors in xarray results (1 the tangent, 2 the normal, ...).
FRAME_DIM = "frame"
#: Dimension of the generalised curvatures in xarray results (1..d-1).
CURVATURE_DIM = "curvature"

# a derivative vector whose component off the span of the earlier ones is below this fraction
# of its norm is treated as linearly dependent (the curve is degenerate there)
_DEPENDENT = 1e-9


# --------------------------------------------------------------------------------------------
# curvilinear axes and their Frenet-Serret frames (paper section 5.2)
# --------------------------------------------------------------------------------------------


def _check_axis(model, axis):
    check_is_fitted(model)
    d = model.n_features_in_
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise TypeError(f"axis must be an int, got {axis!r}")
    if not 0 <= axis < d:
        raise ValueError(
            f"axis must be between 0 and {d - 1} (the model has {d} output coordinates), "
            f"got {axis}"
        )
    return int(axis)


def _check_finite(X):
    if not np.isfinite(X).all():
        bad = np.flatnonzero(~np.isfinite(X).all(axis=0)).tolist()
        raise ValueError(f"X contains NaN or inf values in columns {bad}; points must be finite.")


def _check_model_points(model, X, axis):
    """Validated numpy points and axis for a fitted model (clear errors for bad input)."""
    axis = _check_axis(model, axis)
    # scikit-learn's check names the width the model expects
    X = validate_data(
        model, X, reset=False, dtype=[np.float64, np.float32], copy=False, ensure_all_finite=False
    )
    _check_finite(X)
    return np.asarray(X, dtype=np.float64), axis


def _check_dask_points(model, X, axis):
    axis = _check_axis(model, axis)
    X = check_dask_samples(X, "X", who="frenet_serret")
    if X.shape[1] != model.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but the model is expecting {model.n_features_in_} "
            "features as input."
        )
    return (X if X.numblocks[1] == 1 else X.rechunk({1: -1})), axis


def derivatives_block(X, params, axis, order):
    """:func:`axis_derivatives` of a block of finite points, from the model's kernel parameters.

    A pure per-block kernel (the Dask path maps it over row chunks).

    Parameters
    ----------
    X : ndarray of shape (n, d)
    params : ppa_dask.ppa.kernels.ModelParams
        ``model.model_params()``.
    axis, order : int

    Returns
    -------
    D : ndarray of shape (n, d, order)

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask import PPA
    >>> s = np.linspace(-1, 1, 201)
    >>> model = PPA(degree=2).fit(np.column_stack([s, 0.5 * s**2]))
    >>> derivatives_block(np.array([[0.5, 0.125]]), model.model_params(), 0, 2)[0].round(6).tolist()
    [[1.0, 0.0], [0.5, 1.0]]
    """
    X = np.asarray(X, dtype=np.float64)
    _check_finite(X)
    n, d = X.shape
    D = np.zeros((n, d, order))
    k = len(params.steps)
    if axis >= k:
        D[:, :, 0] = params.residual_basis[:, axis - k]
        return D
    Yt = kernels.centred_block(X, params.mean)
    for step in params.steps[:axis]:
        _, Yt = kernels.step_forward(Yt, step)
    step = params.steps[axis]
    alpha = step.direction @ Yt
    degree = step.coef.shape[1] - 1
    # derivatives of the (linearly continued) Chebyshev basis with respect to t = (alpha -
    # offset) / scale; each derivative in alpha divides by the scale once more
    # (derivatives above the degree are zero)
    top = min(order, degree)
    rows = kernels.extended_rows(step.coordinate(alpha), degree, step.lo, step.hi, top)
    for j in range(1, top + 1):
        D[:, :, j - 1] = (step.coef @ rows[j]).T / step.scale**j
    D[:, :, 0] += step.direction
    return D


def axis_derivatives(model, X, axis=0, order=None):
    """Exact derivatives of the ``axis``-th curvilinear axis through each row of ``X``.

    The axis through ``x`` is ``c(t) = R^{-1}(R(x) + t e_axis)`` in the coordinates of the
    volume-preserving (unwhitened) map; ``c(0) = x`` and ``c'(0)`` is column ``axis`` of
    ``J(x)^{-1}``. See the module docstring for the closed form.

    Parameters
    ----------
    model : PPA
        A fitted model.
    X : array-like of shape (n, n_features)
        Points the axes pass through.
    axis : int, default=0
        Output coordinate: ``0 .. n_steps - 1`` are the curvilinear axes ``alpha_1 ..``; higher
        indices are the (straight) residual axes.
    order : int or None
        Highest derivative; default ``n_features_in_`` (what the Frenet frame needs).

    Returns
    -------
    D : ndarray of shape (n, n_features, order)
        ``D[i, :, j]`` is ``c^{(j+1)}(0)`` at row ``i``.

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask import PPA
    >>> s = np.linspace(-1, 1, 201)
    >>> X = np.column_stack([s, 0.5 * s**2])       # a parabola, symmetric sample
    >>> model = PPA(degree=2).fit(X)
    >>> D = axis_derivatives(model, [[0.5, 0.125]], axis=0, order=2)
    >>> D[0].round(6).tolist()                      # c' = (1, s), c'' = (0, 1)
    [[1.0, 0.0], [0.5, 1.0]]
    """
    X, axis = _check_model_points(model, X, axis)
    order = model.n_features_in_ if order is None else int(order)
    if order < 1:
        raise ValueError(f"order must be >= 1, got {order}")
    with one_blas_thread():
        return derivatives_block(X, model.model_params(), axis, order)


def frenet_from_derivatives(D):
    """Frenet-Serret frames and generalised curvatures from derivative vectors ``c', c'', ...``.

    Parameters
    ----------
    D : ndarray of shape (n, d, d)
        ``D[i, :, j] = c^{(j+1)}`` at point ``i`` (as :func:`axis_derivatives` returns).

    Returns
    -------
    frames : ndarray of shape (n, d, d)
        ``frames[i, j]`` is the ``(j+1)``-th Frenet vector at point ``i`` (``frames[i, 0]`` the
        unit tangent, ``frames[i, 1]`` the principal normal, ...); each ``frames[i]`` is an
        orthogonal matrix with determinant +1.
    curvatures : ndarray of shape (n, d - 1)
        ``chi_1 .. chi_{d-1}``; all but the last are >= 0, the last carries the orientation
        (the signed torsion for ``d = 3``). Where a derivative depends linearly on the earlier
        ones (a straight or otherwise degenerate stretch) that curvature and all later ones are
        0 and the frame is completed by an arbitrary orthonormal, positively oriented set.

    Examples
    --------
    >>> import numpy as np
    >>> # a circle of radius 2 at t = 0: c' = (0, 2), c'' = (-2, 0)
    >>> frames, chi = frenet_from_derivatives(np.array([[[0.0, -2.0], [2.0, 0.0]]]))
    >>> chi.round(6).tolist(), (frames[0].round(6) + 0.0).tolist()
    ([[0.5]], [[0.0, 1.0], [-1.0, 0.0]])
    """
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 3 or D.shape[1] != D.shape[2]:
        raise ValueError(f"D must have shape (n, d, d), got {D.shape}")
    n, d, _ = D.shape
    Q, R = np.linalg.qr(D)
    diag = np.diagonal(R, axis1=1, axis2=2).copy()
    # Gram-Schmidt convention: positive diagonal for the first d - 1 vectors, the last chosen
    # to make the frame a rotation
    signs = np.where(diag < 0, -1.0, 1.0)
    signs[:, -1] = 1.0
    Q = Q * signs[:, None, :]
    diag = diag * signs
    det = np.linalg.det(Q)
    flip = np.where(det < 0, -1.0, 1.0)
    Q[:, :, -1] *= flip[:, None]
    diag[:, -1] *= flip
    norms = np.linalg.norm(D, axis=1)
    dependent = np.abs(diag) <= _DEPENDENT * norms
    dependent = np.logical_or.accumulate(dependent, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        chi = diag[:, 1:] / (diag[:, :-1] * diag[:, :1])
    chi = np.where(dependent[:, 1:], 0.0, chi)
    return np.ascontiguousarray(np.swapaxes(Q, 1, 2)), chi


def _frenet_packed(X, params, axis):
    """Frames and curvatures of a block as one (n, d * d + d - 1) array (one task output)."""
    d = X.shape[1]
    with one_blas_thread():
        frames, chi = frenet_from_derivatives(derivatives_block(X, params, axis, d))
    return np.concatenate([frames.reshape(X.shape[0], d * d), chi], axis=1)


def _unpack(packed, d):
    frames = packed[:, : d * d].reshape(packed.shape[0], d, d)
    return frames, packed[:, d * d :]


def _check_xarray_axis(model, axis=0):
    _check_axis(model, axis)


def _frenet_labelled(rows, axis=0):
    """Frames ``(frame, <feature dim>)`` and curvatures ``(curvature,)`` per sample."""
    model, axis = rows.estimator, int(axis)
    if rows.weights is not None:
        # the frames live in the weighted space; in the input's they are other vectors (not
        # unit, not orthogonal) and the curvatures change: not one division away
        raise ValueError(
            "frenet_serret of a model fitted with coslat would give frames and curvatures of "
            "the latitude-weighted values; fit without coslat for the geometry of the field"
        )
    d = model.n_features_in_
    packed = rows.map_kernel(_frenet_packed, (d * d + d - 1,), (model.model_params(), axis))
    frames, chi = _unpack(packed, d)
    coords = rows.feature_coords()
    coords[FRAME_DIM] = np.arange(1, d + 1)
    frames = rows.per_sample(frames, (FRAME_DIM, rows.feature_dim), coords, "frames", (2,))
    chi = rows.per_sample(chi, (CURVATURE_DIM,), {CURVATURE_DIM: np.arange(1, d)}, "curvatures")
    return frames, chi


@labelled(_frenet_labelled, use="take xarray points", check=_check_xarray_axis)
def frenet_serret(model, X, axis=0):
    """Frenet-Serret frames and generalised curvatures of a curvilinear PPA axis.

    At each row ``x`` of ``X`` the ``axis``-th curvilinear axis ``c(t) = R^{-1}(R(x) + t e_p)``
    is differentiated exactly ``d`` times at ``t = 0`` (:func:`axis_derivatives`; no finite
    differences) and the derivatives are turned into the Frenet frame and the curvatures
    ``chi_i = <e_i', e_{i+1}> / ||c'||`` (:func:`frenet_from_derivatives`), in any dimension
    ``d`` (paper section 5.2). Curvatures do not depend on the parametrisation, so whitening
    does not change them.

    Parameters
    ----------
    model : PPA
        A fitted model.
    X : array-like, dask.array.Array, xarray.DataArray or xarray.Dataset
        Points: arrays of shape (n, n_features), finite. A Dask array gives lazy results, one
        task per row chunk (the same per-block kernel as for numpy, so the values are the
        same). xarray input (of a model fitted on xarray) is stacked as ``PPA.transform``
        stacks it; samples with a NaN give NaN.
    axis : int, default=0
        Which output coordinate's axis: ``0`` is the first curvilinear feature.

    Returns
    -------
    frames : ndarray, dask.array.Array or xarray.DataArray
        Arrays: shape (n, d, d); ``frames[i, 0]`` is the unit tangent at row ``i``,
        ``frames[i, 1]`` the normal, ...; each ``frames[i]`` is a rotation matrix (rows are the
        Frenet vectors). xarray: a DataArray ``"frames"`` with the dimensions
        ``("frame", <feature dim>)`` where the feature dimension was (``frame`` 1..d: 1 the
        tangent, 2 the normal, ...; the feature dimension with its fitted coordinates, NaN for
        features dropped at fit) and the input's sample dimensions, coordinates and attrs.
    curvatures : ndarray, dask.array.Array or xarray.DataArray
        Arrays: shape (n, d - 1), ``chi_1 .. chi_{d-1}`` (for ``d = 3``: curvature and signed
        torsion). Degenerate points (a straight stretch, e.g. beyond the training range where
        the axes continue as lines, or a residual axis) give zeros from the first undefined
        curvature on. xarray: a DataArray ``"curvatures"`` with a ``curvature`` dimension
        (1..d-1) where the feature dimension was.

    Raises
    ------
    ValueError
        ``X`` of the wrong width or with NaN/inf (a Dask array: when computed); ``axis``
        outside ``0 .. d - 1``; xarray input for a model fitted on a plain array.

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask import PPA
    >>> from ppa_dask.datasets import make_helix
    >>> X = make_helix(2000, noise=0.05, random_state=0)
    >>> model = PPA(degree=9).fit(X)
    >>> frames, chi = frenet_serret(model, X[:5])
    >>> frames.shape, chi.shape
    ((5, 3, 3), (5, 2))
    >>> import dask.array as da
    >>> lazy_frames, lazy_chi = frenet_serret(model, da.from_array(X[:5], chunks=2))
    >>> bool(np.allclose(lazy_chi.compute(), chi, rtol=1e-12, atol=1e-12))
    True
    """
    if is_dask(X):
        X, axis = _check_dask_points(model, X, axis)
        d = model.n_features_in_
        packed = X.map_blocks(
            _frenet_packed,
            model.model_params(),
            axis,
            dtype=np.float64,
            chunks=(X.chunks[0], (d * d + d - 1,)),
            meta=np.empty((0, 0)),
        )
        return _unpack(packed, d)
    X, axis = _check_model_points(model, X, axis)
    with one_blas_thread():
        D = derivatives_block(X, model.model_params(), axis, model.n_features_in_)
    return frenet_from_derivatives(D)
