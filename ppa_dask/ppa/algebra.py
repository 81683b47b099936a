"""Small-matrix algebra between data passes (runs on the client, never touches samples).

Given the aggregated moments of a pass, these functions choose the leading vector, score every
candidate degree from the fold moments, solve the normal equations and propagate the residual
covariance to the next step (docs/design.md sections 3.1, 3.4 and 3.5). They also predict the
steps after a linear one before its pass, so one pass can gather several steps' moments
(:func:`linear_lookahead`).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
import scipy.linalg
from scipy.linalg.lapack import dposv as _posv

from ppa_dask.ppa.kernels import (
    gram_from_sums,
)  # the Chebyshev product identity, shared with the kernels

# a residual direction whose variance is below this fraction of the total is treated as empty
_DEGENERATE_VARIANCE = 1e-13


def rank_rtol(n_features, dtype=None):
    """Relative tolerance of a fit's numerical rank: ``n_features * eps``.

    A residual whose total variance (the trace of its covariance) is at most ``rank_rtol``
    times the total variance of the data is rounding: the data are reconstructed to rounding
    by the components before it. This is :func:`numpy.linalg.matrix_rank`'s rule (largest
    singular value x size x eps) applied to the ``d x d`` covariance the fit propagates between
    passes, bounded by its trace (at least its largest eigenvalue): the covariance is formed and
    updated in float64, so its eigenvalues carry rounding of about ``eps`` times the trace each.
    ``eps`` is float64's, or the square of the input's (variances are squares of values) when
    that is larger: a float32 input carries its own rounding, about ``eps32**2 = 1.4e-14`` of
    its variance per feature. The number of samples does not enter (matrix_rank's
    ``max(M, N)`` bounds the rounding of an SVD of the ``M x N`` data): the moments are summed
    per block and merged pairwise, so their rounding does not grow with the rows (a measured
    floor below one ``eps`` of the total for 1e3 to 1e6 rows, 2 to 90 features).

    Parameters
    ----------
    n_features : int
    dtype : numpy dtype, optional
        The input's (None: float64; integers are exact in float64).

    Returns
    -------
    rtol : float

    Examples
    --------
    >>> bool(rank_rtol(10) == 10 * np.finfo(np.float64).eps)
    True
    >>> bool(rank_rtol(10, np.float32) == 10 * np.finfo(np.float32).eps ** 2)
    True
    """
    eps = float(np.finfo(np.float64).eps)
    if dtype is not None and np.dtype(dtype).kind == "f":
        eps = max(eps, float(np.finfo(dtype).eps) ** 2)
    return int(n_features) * eps


def numerical_rank(residual, tol, remaining=None):
    """The fewest components after which the residual variance is at most ``tol``.

    Parameters
    ----------
    residual : sequence of float
        Residual variance (trace of the residual covariance) after 0, 1, ... fitted steps.
    tol : float
        Absolute tolerance (``rank_rtol * residual[0]``).
    remaining : ndarray, optional
        Eigenvalues of the covariance left after the last fitted step (in its subspace), used
        when that residual is still above ``tol``: the rank is then the number of steps plus
        the fewest leading eigenvalues whose trailing sum is at most ``tol``.

    Returns
    -------
    rank : int or None
        None when the residual after the last step is above ``tol`` and ``remaining`` is not
        given (the rank is then not known beyond the steps).

    Examples
    --------
    >>> numerical_rank([10.0, 1.0, 1e-20, 1e-21], tol=1e-14)
    2
    >>> numerical_rank([10.0, 1.0], tol=1e-14, remaining=np.array([0.9, 0.1, 1e-20]))
    3
    """
    for k, r in enumerate(residual):
        if r <= tol:
            return k
    steps = len(residual) - 1
    if remaining is None:
        return None
    values = np.sort(np.clip(np.asarray(remaining, dtype=float), 0.0, None))  # ascending
    tails = np.concatenate([[0.0], np.cumsum(values)])[::-1]  # sum of values[j:] (descending)
    return steps + int(np.flatnonzero(tails <= tol)[0])


def leading_direction(C, basis):
    """Leading vector of the residual covariance ``C`` restricted to the span of ``basis``.

    Returns ``(e, variance, next_basis)``: the ambient unit vector (largest-magnitude entry
    positive), its variance and an orthonormal ambient basis of the rest of the subspace.
    Working in the residual subspace keeps ``e`` exactly orthogonal to the earlier leading
    vectors even when the residual has (numerically) zero variance.
    """
    reduced = basis.T @ C @ basis
    values, vectors = np.linalg.eigh((reduced + reduced.T) / 2)
    order = np.argsort(values)[::-1]
    vectors = vectors[:, order]
    e = basis @ vectors[:, 0]
    if e[np.argmax(np.abs(e))] < 0:
        e = -e
    return e, max(float(values[order[0]]), 0.0), basis @ vectors[:, 1:]


def basis_interval(alpha_sample, total_variance, margin=0.1):
    """``(offset, scale)`` mapping the sampled range of ``alpha`` onto ``[-1, 1]`` (plus a margin).

    A range of (numerically) zero width, a residual of zero variance, is widened to a tiny
    fraction of the total standard deviation so the basis stays finite.
    """
    floor = math.sqrt(_DEGENERATE_VARIANCE * total_variance) if total_variance > 0 else 1.0
    if alpha_sample.size == 0:
        return 0.0, float(floor)
    lo, hi = float(alpha_sample.min()), float(alpha_sample.max())
    half = (hi - lo) / 2 * (1 + margin)
    return (hi + lo) / 2, float(max(half, floor))


def solve_normal_equations(S_vv, S_zv):
    """``W = S_zv S_vv^{-1}`` for a symmetric positive (semi)definite ``S_vv``.

    Cholesky when ``S_vv`` is safely positive definite, otherwise the minimum-norm least-squares
    solution (a residual of zero variance makes ``S_vv`` singular; the fit then stays finite).
    LAPACK's ``posv`` is called directly: the factorisation and solve of
    ``scipy.linalg.cho_factor`` / ``cho_solve`` (``potrf`` then ``potrs``) in one call, without
    their validation, which costs more than a small solve (a fit with cross-validation makes
    ``folds x degrees`` of them per step).
    """
    factor, W, info = _posv(S_vv, S_zv.T, lower=1)
    if info == 0:
        diag = [abs(x) for x in factor.diagonal().tolist()]
        # a NaN fails the test (as with numpy's min and max): the sum is then NaN
        if min(diag) > 1e-7 * max(diag) and sum(diag) == sum(diag):
            return W.T
    return scipy.linalg.lstsq(S_vv, S_zv.T, check_finite=False)[0].T


def orthogonal_cross_moments(yv, e):
    """Cross moments of the part of the residual orthogonal to ``e``: ``S_zv = S_yv - e e^T S_yv``.

    ``yv`` is ``(d, g+1)`` or stacked per fold ``(folds, d, g+1)``.
    """
    along_e = np.einsum("i,...ij->...j", e, yv)
    return yv - e[:, None] * along_e[..., None, :]


def cv_scores(moments, e, candidates):
    """Validation error of each candidate degree from per-fold moments (no extra pass).

    For fold ``f`` the coefficients are fitted on the other folds' moments and scored in closed
    form on fold ``f``: ``zz_f - 2 tr(W S_zv,f^T) + tr(W S_vv,f W^T)``. The score of a degree is
    the sum over folds divided by the number of rows (mean squared error per sample).

    Every (fold, degree) system is solved in one batched call: degree ``g``'s Gram matrix is the
    leading ``g + 1`` block of the largest degree's, padded to full size with the identity (and
    its right-hand side with zeros), so the solution's padding is exactly zero and both traces
    can be taken at full size (ten separate solves and their Python loops were 39 % of a
    vehicles fit, 17 steps of 2 folds x 5 degrees; batched, a call takes 135 against 206 us).
    When one of the systems is not safely positive definite the folds are solved one by one as
    :func:`solve_normal_equations` does (its least-squares fallback).
    """
    vv, zz, counts = moments["vv"], moments["zz"], moments["n"]
    zv = orthogonal_cross_moments(moments["yv"], e)
    n_folds = zv.shape[0]
    size = max(candidates) + 1
    vv, zv = vv[:, :size, :size], zv[:, :, :size]
    # each fold's training sums: the sum over the other folds is elementwise, so the leading
    # block of a smaller degree is exactly its own sum
    train_vv, train_zv = _other_folds_sum(vv), _other_folds_sum(zv)
    inside, block, identity = _degree_masks(tuple(candidates))
    A = np.where(block, train_vv[:, None], identity)  # (folds, degrees, size, size)
    B = np.where(inside[None, :, :, None], np.swapaxes(train_zv, 1, 2)[:, None], 0.0)
    try:
        diag = np.abs(np.diagonal(np.linalg.cholesky(A), axis1=-2, axis2=-1))
    except np.linalg.LinAlgError:
        diag = None
    if diag is not None:
        # within each degree's block only (a NaN fails the test, as in solve_normal_equations)
        smallest = np.where(inside, diag, np.inf).min(axis=-1)
        safe = (smallest > 1e-7 * np.where(inside, diag, 0.0).max(axis=-1)).all()
    if diag is None or not safe:
        W = np.zeros_like(B)
        for f in range(n_folds):
            for i, g in enumerate(candidates):
                W[f, i, : g + 1] = solve_normal_equations(
                    train_vv[f, : g + 1, : g + 1], train_zv[f, :, : g + 1]
                ).T
    else:
        W = np.linalg.solve(A, B)  # (folds, degrees, size, d); zero outside each degree
    fit = np.einsum("fgsd,fds->fg", W, zv)
    spread = ((vv[:, None] @ W) * W).sum(axis=(2, 3))
    return (np.asarray(zz)[:, None] - 2.0 * fit + spread).sum(axis=0) / counts.sum()


@functools.lru_cache(maxsize=64)
def _degree_masks(candidates):
    """Which entries of the largest degree's basis each candidate degree uses: ``inside``
    (degrees, size) for the cross moments and ``block`` (degrees, size, size) for the Gram
    matrices, with the identity of that size (read-only, shared between calls)."""
    size = max(candidates) + 1
    inside = np.arange(size)[None, :] < (np.asarray(candidates) + 1)[:, None]
    block = inside[:, :, None] & inside[:, None, :]
    identity = np.eye(size)
    for array in (inside, block, identity):
        array.flags.writeable = False
    return inside, block, identity


def _other_folds_sum(values):
    """For each fold, the sum of the other folds' entries (stacked along axis 0)."""
    n_folds = values.shape[0]
    if n_folds == 2:  # the other fold itself
        return values[::-1]
    return np.stack(
        [values[[j for j in range(n_folds) if j != f]].sum(axis=0) for f in range(n_folds)]
    )


def choose_degree(scores, candidates, residual_variance):
    """The lowest candidate degree whose CV score is within rounding of the best.

    Scores closer than ``1e-10 * residual_variance`` are ties (a residual of zero variance gives
    scores that are rounding noise); ties go to the lowest degree, so the choice does not
    depend on summation order, hence not on chunking.
    """
    # a handful of numbers: compared as Python floats (the same comparisons, no array calls)
    values = np.asarray(scores).tolist()
    if not all(map(math.isfinite, values)):
        # overflowing moments give NaN/inf scores; no degree can be chosen from them
        raise FloatingPointError(
            f"the cross-validation scores of degrees {list(candidates)} are not finite "
            f"({values}): the residual's moments overflowed float64"
        )
    threshold = min(values) + 1e-10 * max(residual_variance, 0.0)
    return candidates[next(i for i, s in enumerate(values) if s <= threshold)]


def fit_step(moments, e, next_basis, degree):
    """Regression coefficients of a step in the ambient frame from (all folds') moments.

    Returns ``(U, S_vv, S_zv)`` with ``U`` of shape ``(d, degree + 1)`` projected onto the
    residual subspace (so rounding cannot leak into earlier directions).
    """
    size = degree + 1
    S_vv = moments["vv"].sum(axis=0)[:size, :size]
    S_yv = moments["yv"].sum(axis=0)[:, :size]
    S_zv = orthogonal_cross_moments(S_yv, e)
    U = solve_normal_equations(S_vv, S_zv)
    U = next_basis @ (next_basis.T @ U)
    return U, S_vv, S_zv


def next_covariance(C, e, U, S_vv, S_zv, n):
    """Second-moment matrix of the next residual from small matrices (docs/design.md section 3.1).

    With ``P = I - e e^T`` and ``y_next = P y - U v``:
    ``C_next = P C P - (S_zv/n) U^T - U (S_zv/n)^T + U (S_vv/n) U^T``.
    """
    Ce = C @ e
    # (column * row products are np.outer's own arithmetic, without its wrapper)
    ec, Cec = e[:, None], Ce[:, None]
    PCP = C - ec * Ce - Cec * e + (ec * e) * (e @ Ce)
    M = S_zv / n
    C_next = PCP - M @ U.T - U @ M.T + U @ (S_vv / n) @ U.T
    return (C_next + C_next.T) / 2


# --------------------------------------------------------------------------------------------
# Gathering steps ahead: fewer passes than steps when steps are linear
# --------------------------------------------------------------------------------------------


class Prediction(NamedTuple):
    """A step as it will be if every step between now and it is linear (all known now)."""

    direction: np.ndarray
    variance: float
    next_basis: np.ndarray
    offset: float
    scale: float


def linear_lookahead(C, e, next_basis, sample, total_variance, n_ahead):
    """The next ``n_ahead`` steps on the hypothesis that this step and those up to each are linear.

    A step whose polynomial is linear (degree 1) leaves no polynomial term: its coefficients
    regress the part of the residual orthogonal to ``e`` on ``[1, alpha]``, and both cross
    moments vanish, the first because the residual is centred, the second because
    ``sum (P y) alpha = n P C e = 0`` for the leading eigenvector ``e`` of ``C``. (In floating
    point they are rounding, and the next covariance differs from ``P C P`` only by
    ``S_zv S_vv^{-1} S_zv^T / n``, second order in it.) So after linear steps the residual is
    ``y - sum_i e_i alpha_i``, its covariance the deflated ``P C P``, and the next leading vector,
    its variance and the range of its coordinate on the row sample follow from small matrices
    now, before the pass. The pass can then take the next steps' fold moments on the current
    residual (``alpha_j = e_j . y``, since ``e_j`` is orthogonal to the earlier directions),
    and, when the degrees chosen confirm the hypothesis, those steps need no pass of their own.

    Parameters
    ----------
    C : ndarray of shape (d, d)
        Covariance of the residual entering this step.
    e, next_basis : ndarray
        This step's leading vector and the orthonormal basis of the rest of its subspace.
    sample : ndarray of shape (d, m)
        The range sample entering this step (feature-major).
    total_variance : float
    n_ahead : int

    Returns
    -------
    predictions : list of Prediction
        One per step ahead, in order.

    Examples
    --------
    >>> C = np.diag([4.0, 2.0, 1.0])
    >>> e, _, rest = leading_direction(C, np.eye(3))
    >>> [p.direction.tolist() for p in linear_lookahead(C, e, rest, np.eye(3), 7.0, 2)]
    [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    out = []
    shift = None  # e (e . sample), in one buffer: the sample can be large (all rows up to 8192)
    for _ in range(int(n_ahead)):
        if next_basis.shape[1] == 0:
            break
        Ce = C @ e
        ec = e[:, None]
        C = C - ec * Ce - Ce[:, None] * e + (ec * e) * (e @ Ce)
        C = (C + C.T) / 2
        if shift is None:
            shift = np.multiply(ec, e @ sample)
            sample = sample - shift  # a copy: the caller's sample is left as it was
        else:
            np.subtract(sample, np.multiply(ec, e @ sample, out=shift), out=sample)
        e, variance, next_basis = leading_direction(C, next_basis)
        offset, scale = basis_interval(e @ sample, total_variance)
        out.append(Prediction(e, variance, next_basis, offset, scale))
    return out


def confirms(prediction, e, offset, scale, tol=1e-9):
    """True when the step found after the linear ones is the one predicted before the pass.

    After a linear step the true next covariance, leading vector and coordinate range differ from
    the prediction only by rounding; a larger difference means a near tie of eigenvalues that
    rounding can flip, and then the step gets a pass of its own (the model is then exactly the
    one-pass-per-step model).
    """
    return bool(
        np.max(np.abs(prediction.direction - e)) <= tol
        and abs(prediction.offset - offset) <= tol * scale
        and abs(prediction.scale - scale) <= tol * scale
    )


def deflate_ahead(moments, directions):
    """Moments gathered ahead, made those of the deflated residuals they stand for.

    ``moments[j]`` was taken on the pass's residual ``y`` for the direction ``directions[j + 1]``
    (``directions[0]`` is the pass's own step). On the hypothesis the residual of step ``j`` is
    ``y - sum_{i <= j} e_i alpha_i`` with orthonormal ``e_i``, so its cross moments are
    ``sum y T_k - sum_i e_i (e_i . sum y T_k)``: the projection of ``yv`` orthogonal to the
    earlier directions (the kernel already took them out of ``zz``).
    """
    out = []
    directions = np.asarray(directions)
    for j, m in enumerate(moments):
        earlier = directions[: j + 1]  # (j + 1, d)
        yv = m["yv"] - np.einsum(
            "id,fik->fdk", earlier, np.einsum("id,fdk->fik", earlier, m["yv"])
        )
        out.append(dict(m, yv=yv))
    return out


# --------------------------------------------------------------------------------------------
# PPA-GD (paper section 2.3): the step objective, its gradient and a descent on the sphere
# --------------------------------------------------------------------------------------------


def chebyshev_derivative_matrix(degree):
    """``D`` of shape ``(degree + 1, degree)`` with ``T'_k(t) = sum_m D[k, m] T_m(t)``.

    The Chebyshev form of the paper's matrix ``Q`` (eq. 12), which differentiates the monomial
    basis.

    Examples
    --------
    >>> chebyshev_derivative_matrix(2).tolist()   # T'_1 = T_0, T'_2 = 4 T_1
    [[0.0, 0.0], [1.0, 0.0], [0.0, 4.0]]
    """
    D = np.zeros((degree + 1, degree))
    for k in range(1, degree + 1):
        c = np.polynomial.chebyshev.chebder(np.eye(degree + 1)[k])
        D[k, : c.size] = c
    return D


def objective_fit_moments(moments):
    """:func:`kernels.objective_moments` in the layout of step moments (for :func:`fit_step`)."""
    size = moments["vv"].shape[0]
    return dict(
        n=np.array([moments["n"]]),
        vv=moments["vv"][None],
        yv=moments["yt"][None, :, :size],
        zz=np.zeros(1),
        tmin=moments["tmin"],
        tmax=moments["tmax"],
    )


def gd_objective(moments, e, subspace, scale):
    """Objective ``f(e)`` of a PPA step and its gradient on the sphere, from one pass's moments.

    ``f(e) = (1/n) sum ||z - U v||^2`` with ``z = (I - e e^T) y`` and ``U`` the least-squares
    coefficients for this ``e`` (closed form from the same moments): the mean squared residual
    the step leaves, the paper's eq. (10). Because ``U`` minimises ``f`` for fixed ``e``, the
    derivative is the partial one with ``U`` held fixed (envelope theorem); with ``r = z - U v``,
    ``t = (alpha - offset) / scale`` and ``e^T r = 0``::

        df/de = -(2/n) sum [ alpha r + y (r^T U v'(t)) / scale ]

    (eq. 11 of the paper on the Chebyshev basis). Every sum reduces to the moments of
    :func:`kernels.objective_moments`. The gradient returned is projected on the tangent space
    of the unit sphere within ``span(subspace)`` (the residual subspace).

    Parameters
    ----------
    moments : dict
        Merged :func:`kernels.objective_moments` at ``e`` (ambient frame).
    e : ndarray of shape (d,)
        Unit vector in ``span(subspace)``.
    subspace : ndarray of shape (d, m)
        Orthonormal basis of the residual subspace.
    scale : float
        Scale of the basis coordinate ``t`` used for the moments.

    Returns
    -------
    f : float
    gradient : ndarray of shape (d,)
        Riemannian gradient (orthogonal to ``e``, inside ``span(subspace)``).
    """
    n = moments["n"]
    vv, yt = moments["vv"], moments["yt"]
    yyt = (moments["yyt"] + np.swapaxes(moments["yyt"], 1, 2)) / 2
    degree = vv.shape[0] - 1
    S_yv = yt[:, : degree + 1]
    S_zv = orthogonal_cross_moments(S_yv, e)
    U = solve_normal_equations(vv, S_zv)
    Se = yyt[0] @ e  # sum y alpha
    f = (np.trace(yyt[0]) - e @ Se - np.sum(U * S_zv)) / n
    # sum alpha r = P sum y alpha - U sum v alpha
    along = Se - e * (e @ Se) - U @ (S_yv.T @ e)
    # sum y y^T (P U) v' : sum y y^T v'_k = sum_m D[k, m] yyt[m]
    D = chebyshev_derivative_matrix(degree)
    PU = U - np.outer(e, e @ U)
    G3 = np.einsum("km,mij->kij", D, yyt)
    quad = np.einsum("kij,jk->i", G3, PU)
    # sum y v^T (U^T U) v' : sum y T_j T_m from the product identity on yt
    ytt = gram_from_sums(yt, degree)  # (d, g+1, g+1): sum y T_i T_j
    H = np.einsum("km,djm->djk", D, ytt[:, :, :degree])  # sum y v_j v'_k
    cross = np.einsum("jk,djk->d", U.T @ U, H)
    grad = -(2.0 / n) * (along + (quad - cross) / scale)
    tangent = subspace @ (subspace.T @ grad)
    tangent -= e * (e @ tangent)
    return float(f), tangent


def complement_basis(subspace, e):
    """Orthonormal basis of the complement of unit ``e`` within ``span(subspace)``: ``(d, m-1)``."""
    c = subspace.T @ e
    # the right-singular vectors of c^T beyond the first span its null space
    _, _, Vt = np.linalg.svd(c[None, :])
    return subspace @ Vt[1:].T


def canonical_sign(e):
    """``e`` with its largest-magnitude entry positive (the convention of the leading vectors)."""
    return -e if e[np.argmax(np.abs(e))] < 0 else e


class _BudgetExhausted(Exception):
    """Raised by the objective wrapper when the pass budget of a step is spent."""


def sphere_minimize(evaluate, e0, subspace, max_evals, tol):
    """Minimise ``f`` over unit vectors of ``span(subspace)`` from ``e0`` (quasi-Newton, L-BFGS).

    The sphere is charted once around ``e0``: ``e(x) = (e0 + N x) / sqrt(1 + |x|^2)`` with ``N``
    an orthonormal basis of the complement of ``e0`` in the subspace, which reaches every
    direction up to sign (and ``f(-e) = f(e)``); near ``x = 0``, ``|x|`` is the angle to ``e0``
    in radians. scipy's L-BFGS-B minimises ``f(e(x)) / f(e0)`` with the chain-rule gradient
    ``N^T grad / sqrt(1 + |x|^2)``. Every call of ``evaluate`` is one pass over the data and
    returns the gradient with the value, so the line search needs no extra pass; once
    ``max_evals`` calls are spent the search stops. The best point evaluated is returned, so
    the result is never worse than ``e0``. (Plain steepest descent with an Armijo search took
    three times as many passes on curved data: it zig-zags.)

    Parameters
    ----------
    evaluate : callable
        ``evaluate(e) -> (f, gradient, payload)``, the gradient as in :func:`gd_objective`.
        It is called with ``e`` in :func:`canonical_sign` form.
    e0 : ndarray of shape (d,)
        The start, a unit vector of ``span(subspace)``; its evaluation is the first call.
    subspace : ndarray of shape (d, m)
    max_evals : int
        Calls of ``evaluate`` allowed, the start included.
    tol : float
        L-BFGS-B's ``ftol`` and ``gtol`` on the normalised objective: stop when an iteration
        lowers ``f`` by less than ``tol * f(e0)``, or when every gradient component (per
        radian, near ``e0``) is below ``tol * f(e0)``.

    Returns
    -------
    best : tuple
        ``(e, f, gradient, payload)`` of the lowest ``f`` evaluated.
    info : dict
        ``f_start`` (``f(e0)``), ``n_iter`` (L-BFGS iterations), ``n_evals`` (start included)
        and ``converged`` (stopped by ``tol``, not by the budget or a failed line search).
    """
    import scipy.optimize

    N = complement_basis(subspace, e0)
    state = dict(best=None, start=None, n_evals=0)

    def objective(x):
        if state["n_evals"] >= max_evals:
            raise _BudgetExhausted
        r = np.sqrt(1.0 + x @ x)
        if x.any():
            e = subspace @ (subspace.T @ (e0 + N @ x))  # no drift out of the residual subspace
            e /= np.linalg.norm(e)
        else:
            e = e0.copy()  # the start exactly
        canonical = canonical_sign(e)
        f, gradient, payload = evaluate(canonical)
        state["n_evals"] += 1
        if state["best"] is None or f < state["best"][1]:
            state["best"] = (canonical, f, gradient, payload)
        if canonical is not e:
            gradient = -gradient  # f(-e) = f(e): the gradient at e is minus that at -e
        if state["start"] is None:
            state["start"] = f
        norm = state["start"] if state["start"] > 0 else 1.0
        return f / norm, (N.T @ gradient) / (r * norm)

    info = dict(n_iter=0, converged=False)
    if N.shape[1] == 0:  # a one-dimensional residual has a single direction (up to sign)
        objective(np.zeros(0))
        info["converged"] = True
    else:
        try:
            result = scipy.optimize.minimize(
                objective,
                np.zeros(N.shape[1]),
                jac=True,
                method="L-BFGS-B",
                options=dict(
                    ftol=tol,
                    gtol=tol,
                    maxfun=np.iinfo(np.int32).max,
                    maxiter=np.iinfo(np.int32).max,
                ),
            )
            info = dict(n_iter=int(result.nit), converged=bool(result.success))
        except _BudgetExhausted:
            pass
    return state["best"], dict(info, f_start=state["start"], n_evals=state["n_evals"])
