"""Small-matrix algebra between data passes (runs on the client, never touches samples).

Given the aggregated moments of a pass, these functions choose the leading vector, score every
candidate degree from the fold moments, solve the normal equations and propagate the residual
covariance to the next step (DESIGN.md section 3, points 1, 4 and 5).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

# a residual direction whose variance is below this fraction of the total is treated as empty
_DEGENERATE_VARIANCE = 1e-13


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
    values, vectors = values[order], vectors[:, order]
    e = basis @ vectors[:, 0]
    if e[np.argmax(np.abs(e))] < 0:
        e = -e
    return e, max(float(values[0]), 0.0), basis @ vectors[:, 1:]


def basis_interval(alpha_sample, total_variance, margin=0.1):
    """``(offset, scale)`` mapping the sampled range of ``alpha`` onto ``[-1, 1]`` (plus a margin).

    A range of (numerically) zero width, a residual of zero variance, is widened to a tiny
    fraction of the total standard deviation so the basis stays finite.
    """
    floor = np.sqrt(_DEGENERATE_VARIANCE * total_variance) if total_variance > 0 else 1.0
    if alpha_sample.size == 0:
        return 0.0, float(floor)
    lo, hi = float(alpha_sample.min()), float(alpha_sample.max())
    half = (hi - lo) / 2 * (1 + margin)
    return (hi + lo) / 2, float(max(half, floor))


def solve_normal_equations(S_vv, S_zv):
    """``W = S_zv S_vv^{-1}`` for a symmetric positive (semi)definite ``S_vv``.

    Cholesky when ``S_vv`` is safely positive definite, otherwise the minimum-norm least-squares
    solution (a residual of zero variance makes ``S_vv`` singular; the fit then stays finite).
    """
    try:
        factor = scipy.linalg.cho_factor(S_vv, lower=True, check_finite=False)
        diag = np.abs(np.diag(factor[0]))
        if diag.min() > 1e-7 * diag.max():
            return scipy.linalg.cho_solve(factor, S_zv.T, check_finite=False).T
    except np.linalg.LinAlgError:
        pass
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
    """
    vv, zz, counts = moments["vv"], moments["zz"], moments["n"]
    zv = orthogonal_cross_moments(moments["yv"], e)
    n_folds = vv.shape[0]
    scores = np.empty(len(candidates))
    for i, g in enumerate(candidates):
        size = g + 1
        total = 0.0
        for f in range(n_folds):
            others = [j for j in range(n_folds) if j != f]
            train_vv = vv[others, :size, :size].sum(axis=0)
            train_zv = zv[others, :, :size].sum(axis=0)
            W = solve_normal_equations(train_vv, train_zv)
            held_vv = vv[f, :size, :size]
            held_zv = zv[f, :, :size]
            total += zz[f] - 2.0 * np.sum(W * held_zv) + np.sum((W @ held_vv) * W)
        scores[i] = total / counts.sum()
    return scores


def choose_degree(scores, candidates, residual_variance):
    """The lowest candidate degree whose CV score is within rounding of the best.

    Scores closer than ``1e-10 * residual_variance`` are ties (a residual of zero variance gives
    scores that are rounding noise); ties go to the lowest degree, so the choice does not
    depend on summation order, hence not on chunking.
    """
    scores = np.asarray(scores)
    tolerance = 1e-10 * max(residual_variance, 0.0)
    return candidates[int(np.flatnonzero(scores <= scores.min() + tolerance)[0])]


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
    """Second-moment matrix of the next residual from small matrices (DESIGN section 3.1).

    With ``P = I - e e^T`` and ``y_next = P y - U v``:
    ``C_next = P C P - (S_zv/n) U^T - U (S_zv/n)^T + U (S_vv/n) U^T``.
    """
    Ce = C @ e
    PCP = C - np.outer(e, Ce) - np.outer(Ce, e) + np.outer(e, e) * (e @ Ce)
    M = S_zv / n
    C_next = PCP - M @ U.T - U @ M.T + U @ (S_vv / n) @ U.T
    return (C_next + C_next.T) / 2
