"""PPA with leading vectors from a Krylov method on the implicit residual (``solver="krylov"``).

When both the samples and the features are many (say ``10^5 x 10^5``), neither the
covariance path's ``d x d`` matrix nor the Gram path's ``n x n`` one fits. Each step needs only
the leading eigenvector of the residual covariance ``Y_p^T Y_p / n``, and products with it need
no matrix: the residual is kept implicit,

    ``Y_p = X - 1 mean^T - C F^T``,

with ``F`` (``d x q``) the model's vectors so far (``[e_1, U_1, ..., e_p, U_p]``) and ``C``
(``n x q``) each sample's shifts (``[alpha_1, v(alpha_1), ...]``), so ``Y_p V`` and
``Y_p^T W`` are one product of the data each (a pass) plus small corrections. Each step:

1. the leading eigenvector by Lanczos (scipy's ``eigsh``, ARPACK) on the operator
   ``v -> Y_p^T (Y_p v) / n``, warm-started from the previous step's second Ritz vector, to a
   residual tolerance :data:`EIGSH_TOL`; two products per iteration;
2. ``alpha = Y_p e`` and the basis interval from the fit's row sample, as every fit;
3. one pass for the per-fold cross moments ``Y_p^T V_f`` and the samples' squared norms, from
   which the degree is chosen by cross-validation (:func:`ppa_dask.ppa.steps.choose_degree`) and
   the coefficients solved, as on the covariance path.

Memory: the data's passes, ``F`` and ``C`` (``O((n + d) q)``) and Lanczos's few vectors of
``d``; no ``d x d`` or ``n x n`` matrix. Cost per step: the Lanczos iterations' ``O(n d)``
products. The passes are counted in ``n_passes_``.
"""

from __future__ import annotations

import numpy as np

from ppa_dask.ppa import algebra as _algebra
from ppa_dask.ppa import kernels
from ppa_dask.ppa import steps as _steps
from ppa_dask.utils.arrays import is_dask
from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.compute import compute
from ppa_dask.utils.warnings import warn

__all__ = ["EIGSH_TOL", "GAP_WARNING", "ImplicitResidual", "LeadingVectorWarning", "fit_krylov"]

#: ARPACK's tolerance on the Ritz pairs' residuals, relative to the eigenvalue: the angle to the
#: exact leading vector is at most about ``EIGSH_TOL * lambda_1 / (lambda_1 - lambda_2)``.
EIGSH_TOL = 1e-14
#: A step whose angle bound ``EIGSH_TOL * lambda_1 / gap`` exceeds this is warned about.
GAP_WARNING = 1e-10
#: Rows per block of the in-memory products.
BLOCK_BYTES = 16 * 2**20


class LeadingVectorWarning(UserWarning):
    """A step's leading vector is not identifiable to the stated accuracy (a tiny eigengap)."""


class ImplicitResidual:
    """The residual ``Y_p = X - 1 mean^T - C F^T`` of a fit, never formed whole.

    Products with it are passes over ``X`` (numpy in row blocks, or a Dask array), counted in
    ``n_passes``.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(50, 8))
    >>> r = ImplicitResidual(X)
    >>> r.start()["n"]
    50
    >>> Y = X - X.mean(axis=0)
    >>> v = np.ones((8, 1))
    >>> bool(np.allclose(r.times(v), Y @ v))
    True
    >>> bool(np.allclose(r.transposed_times(Y @ v), Y.T @ Y @ v))
    True
    """

    def __init__(self, X):
        self.X = X
        self.n_samples, self.n_features = X.shape
        self.lazy = is_dask(X)
        self.mean = None
        self.F = np.zeros((self.n_features, 0))
        self.C = np.zeros((self.n_samples, 0))
        self.n_passes = 0
        rows = max(1, BLOCK_BYTES // (8 * max(self.n_features, 1)))
        self._blocks = [slice(a, a + rows) for a in range(0, self.n_samples, rows)]

    def start(self):
        """The first pass: the mean and the non-finite counts per feature."""
        self.n_passes += 1
        if self.lazy:
            import dask.array as da

            mean, n_nan, n_inf = compute(
                self.X.mean(axis=0, dtype=np.float64),
                da.isnan(self.X).sum(axis=0),
                da.isinf(self.X).sum(axis=0),
            )
        else:
            with one_blas_thread():
                mean = self.X.mean(axis=0, dtype=np.float64)
                n_nan, n_inf = np.isnan(self.X).sum(axis=0), np.isinf(self.X).sum(axis=0)
        self.mean = np.asarray(mean, dtype=np.float64)
        return dict(n=self.n_samples, mean=self.mean, n_nan=n_nan, n_inf=n_inf)

    def add(self, columns, shifts):
        """Take a step: ``Y <- Y - shifts columns^T`` (``columns`` d x m, ``shifts`` n x m)."""
        self.F = np.hstack([self.F, columns])
        self.C = np.hstack([self.C, shifts])

    def times(self, V):
        """``Y_p V`` (n x b): one pass."""
        self.n_passes += 1
        V = np.asarray(V, dtype=np.float64)
        if self.lazy:
            (XV,) = compute(self.X.astype(np.float64) @ V)
        else:
            with one_blas_thread():
                XV = np.vstack([np.asarray(self.X[b], dtype=np.float64) @ V for b in self._blocks])
        return XV - (self.mean @ V)[None, :] - self.C @ (self.F.T @ V)

    def transposed_times(self, W):
        """``Y_p^T W`` (d x b): one pass."""
        self.n_passes += 1
        W = np.asarray(W, dtype=np.float64)
        if self.lazy:
            (XW,) = compute(self.X.astype(np.float64).T @ W)
        else:
            with one_blas_thread():
                XW = sum(np.asarray(self.X[b], dtype=np.float64).T @ W[b] for b in self._blocks)
        return XW - np.outer(self.mean, W.sum(axis=0)) - self.F @ (self.C.T @ W)

    def gram_times(self, V):
        """``Y_p^T (Y_p V)``: one pass in memory (each row block's share is its own), two on
        Dask (the products of a feature-chunked array need the first one whole)."""
        if self.lazy:
            return self.transposed_times(self.times(V))
        self.n_passes += 1
        V = np.asarray(V, dtype=np.float64)
        FV, shift = self.F.T @ V, self.mean @ V
        out = np.zeros((self.n_features, V.shape[1]))
        with one_blas_thread():
            for b in self._blocks:
                X = np.asarray(self.X[b], dtype=np.float64)
                YV = X @ V - shift - self.C[b] @ FV
                out += X.T @ YV - np.outer(self.mean, YV.sum(axis=0)) - self.F @ (self.C[b].T @ YV)
        return out

    def squared_norms(self):
        """``||y_i||^2`` of every sample's residual (n,): one pass."""
        self.n_passes += 1
        if self.lazy:
            import dask.array as da

            X = self.X.astype(np.float64)
            C = da.from_array(self.C, chunks=(X.chunks[0], (self.C.shape[1],)))
            Y = X - self.mean - C @ self.F.T
            (norms,) = compute((Y * Y).sum(axis=1))
            return np.asarray(norms)
        with one_blas_thread():
            out = []
            for b in self._blocks:
                Y = np.asarray(self.X[b], dtype=np.float64) - self.mean - self.C[b] @ self.F.T
                out.append(np.einsum("ij,ij->i", Y, Y))
        return np.concatenate(out)


def leading_pair(residual, earlier, v0, n):
    """The residual covariance's leading eigenvector, its eigenvalue and the second Ritz pair.

    Returns ``(e, variance, second, angle_bound)``; ``e`` is orthogonal to ``earlier`` (the
    earlier leading vectors, d x p) with its largest-magnitude entry positive.
    """
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    d = residual.n_features

    def apply(V):
        return residual.gram_times(V.reshape(d, -1)) / n

    operator = LinearOperator((d, d), matvec=apply, matmat=apply, dtype=np.float64)
    k = min(2, d - 1)
    try:
        values, vectors = eigsh(operator, k=k, which="LA", v0=v0, tol=EIGSH_TOL)
    except ArpackNoConvergence as exc:  # the pairs found so far, when there are some
        if len(exc.eigenvalues) == 0:
            raise
        values, vectors = exc.eigenvalues, exc.eigenvectors
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    e = vectors[:, 0]
    if earlier.shape[1]:
        e = e - earlier @ (earlier.T @ e)  # rounding out of the earlier directions
    e = _algebra.canonical_sign(e / np.linalg.norm(e))
    lead = max(float(values[0]), 0.0)
    gap = lead - float(values[1]) if values.size > 1 else lead
    bound = EIGSH_TOL * lead / gap if gap > 0 else np.inf
    second = vectors[:, 1] if values.size > 1 else None
    return e, lead, second, bound


def fit_krylov(residual, settings, progress=None):
    """The fitted attributes of a PPA whose leading vectors come from Lanczos.

    Parameters
    ----------
    residual : ImplicitResidual
    settings : ppa_dask.ppa.steps.StepSettings
        With ``leading_vector="pca"``; the lookahead does not apply.
    progress : callable, optional
        ``progress(p, k)`` after step ``p`` of ``k``.

    Returns
    -------
    dict
        As :func:`ppa_dask.ppa.steps.fit_steps` returns, ``residual_basis_`` None.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(300, 20)) * np.arange(1, 21)
    >>> settings = _steps.StepSettings(candidates=(1, 2), n_steps=2, seed=0, cv=2)
    >>> fitted = fit_krylov(ImplicitResidual(X), settings)
    >>> fitted["leading_vectors_"].shape, int(np.argmax(np.abs(fitted["leading_vectors_"][0])))
    ((2, 20), 19)
    """
    s = settings
    candidates, n_steps, seed = list(s.candidates), s.n_steps, s.seed
    first = residual.start()
    _steps.report_nonfinite(first["n_nan"], first["n_inf"])
    n, d = residual.n_samples, residual.n_features
    norms = residual.squared_norms()
    total = float(norms.sum()) / n
    rank_tol = s.rank_rtol * total
    sample_index = _steps.range_sample_index(n, seed)
    folds = kernels.fold_labels(0, n, seed, s.n_folds)
    counts = np.bincount(folds, minlength=s.n_folds)
    rng = np.random.default_rng([seed, 41])
    v0 = rng.normal(size=d)  # a seeded start; later steps start from the previous second vector
    E = np.zeros((d, 0))
    steps, degrees, scores, variances, residual_var = [], [], [], [], [total]
    past_rank = False
    for p in range(n_steps):
        past_rank = past_rank or residual_var[-1] <= rank_tol
        e, variance, second, bound = leading_pair(residual, E, v0, n)
        if bound > GAP_WARNING and not past_rank:
            warn(
                f"the leading vector of step {p + 1} is not identifiable to {GAP_WARNING:g} in "
                f"angle: its eigengap is {bound / EIGSH_TOL:.3g} times smaller than its "
                "eigenvalue, so another fit (another chunking, solver) may turn it within "
                f"about {bound:.1e} radians",
                LeadingVectorWarning,
            )
        alpha = residual.times(e[:, None])[:, 0]
        offset, scale = _algebra.basis_interval(alpha[sample_index], total)
        t = (alpha - offset) / scale
        V = kernels.chebyshev_basis(t, s.max_degree, derivatives=0)[0]  # (n, g+1)
        # every fold's cross moments in one product: V's columns masked per fold
        masked = np.zeros((n, s.n_folds * V.shape[1]))
        for f in range(s.n_folds):
            masked[folds == f, f * V.shape[1] : (f + 1) * V.shape[1]] = V[folds == f]
        yv = residual.transposed_times(masked).reshape(d, s.n_folds, V.shape[1])
        z_norms = norms - alpha**2
        moments = dict(
            n=counts,
            vv=np.stack([V[folds == f].T @ V[folds == f] for f in range(s.n_folds)]),
            yv=yv.transpose(1, 0, 2),
            zz=np.array([z_norms[folds == f].sum() for f in range(s.n_folds)]),
            tmin=float(t.min()),
            tmax=float(t.max()),
        )
        chosen, step_scores = _steps.choose_degree(
            moments, e, candidates, residual_var[-1], n, past_rank
        )
        if step_scores is not None:
            scores.append(step_scores)
        size = chosen + 1
        S_vv = moments["vv"].sum(axis=0)[:size, :size]
        S_zv = _algebra.orthogonal_cross_moments(moments["yv"].sum(axis=0)[:, :size], e)
        U = _algebra.solve_normal_equations(S_vv, S_zv)
        E = np.column_stack([E, e])
        U = U - E @ (E.T @ U)  # inside the residual subspace, as on the covariance path
        step = kernels.StepParams(e, U, offset, scale, moments["tmin"], moments["tmax"])
        steps.append(step)
        degrees.append(chosen)
        variances.append(variance)
        # Z U = Y_p U (U's columns are orthogonal to e), one product before the step is added
        ZU = residual.times(U)
        residual.add(np.column_stack([e, U]), np.column_stack([alpha, V[:, :size]]))
        # the samples' residual norms after the step, from Z U and the moments:
        # ||z - U v||^2 = ||z||^2 - 2 v^T U^T z + v^T U^T U v
        fitted_part = np.einsum("ij,ij->i", V[:, :size] @ (U.T @ U), V[:, :size])
        cross = np.einsum("ij,ij->i", V[:, :size], ZU)
        norms = z_norms - 2.0 * cross + fitted_part
        residual_var.append(max(float(norms.sum()) / n, 0.0))
        if second is not None:
            v0 = second - E @ (E.T @ second)
        if progress is not None:
            progress(p + 1, n_steps)
    rank = _algebra.numerical_rank(residual_var, rank_tol)
    rank = min(n, d) if rank is None else rank  # beyond the steps: not known, not below
    return _steps.fitted_attributes(
        s, residual.mean, steps, degrees, scores, variances, residual_var, n, rank
    )
