"""Direct, deliberately plain reference implementation of Principal Polynomial Analysis.

This module is the independent check the test suite holds the fast ``ppa_dask``
implementation against (tests/direct_ppa.py re-exports it), and the baseline of the bench's
``fit_memory_port`` row. It is a literal port of the paper's sequential algorithm
(docs/design.md section 2) on in-memory NumPy arrays: ``numpy.linalg.eigh`` of each residual
covariance and ``numpy.linalg.lstsq`` on raw Vandermonde columns. It favours being obviously
right over being fast or memory-frugal, and shares no code with the rest of ``ppa_dask``: it
imports NumPy and nothing else (tests/ppa/test_direct_reference.py holds it to that), so living
inside the package does not make it a copy of what it checks.

Conventions
-----------
* Samples are rows. The residual after step ``p`` lives in the shrinking frame of
  dimension ``d - p``; ``B_p`` (``d x (d-p)``) maps it back to the ambient frame, with
  ``B_0 = I`` and ``B_p = B_{p-1} @ E_p``.
* The leading vector of step ``p`` is reported in the ambient frame as
  ``B_{p-1} @ e_p``; its sign is fixed so that its largest-|.| entry is positive, and
  ``e_p`` is flipped with it. The last output column (the final one-dimensional residual)
  has ambient direction ``B_{d-1}``; its sign is fixed the same way, by flipping ``E_{d-1}``
  (which flips ``W_{d-1}`` and the last column with it).
* The regressor of step ``p`` is ``t = (alpha_p - c_p) / s_p`` with ``c_p`` the midpoint and
  ``s_p`` the half-width of the training range of ``alpha_p`` (1 if that is zero). The basis
  is still the raw monomials ``1, t, t**2, ...``; an affine change of variable spans the same
  polynomial space, so fitted values and residuals are those of the raw ``alpha`` basis, and
  it keeps degree-15 monomials well enough conditioned for lstsq (dividing by the standard
  deviation alone is not: a Gaussian-like alpha reaches t = 4, and 4**15 swamps the solve).
* ``W_p`` is stored in the paper's orientation, ``(d-p) x (g+1)``, so that the fitted
  conditional mean is ``W_p v(alpha)`` (``V @ W_p.T`` on rows).
"""

import numpy as np

__all__ = [
    "fit_direct",
    "fit_direct_cv",
    "transform_direct",
    "inverse_direct",
    "reconstruct_direct",
    "reconstruct_zeroed_coefficients_direct",
]


def _largest_entry_sign(v):
    """Return +1.0 or -1.0 so that ``sign * v`` has its largest-|.| entry positive."""
    i = int(np.argmax(np.abs(v)))
    return -1.0 if v[i] < 0 else 1.0


def _vander(alpha, scale, degree):
    """Raw Vandermonde columns ``1, t, ..., t**degree`` of ``t = (alpha - mid) / half``."""
    mid, half = scale
    return np.vander((alpha - mid) / half, degree + 1, increasing=True)


def _directions(Xr, B):
    """Leading eigenvector ``e`` and complement ``E`` of the residual covariance.

    Eigenvectors are sorted by descending eigenvalue. The sign of ``e`` is fixed in the
    ambient frame (largest-|.| entry of ``B @ e`` positive).
    """
    n = Xr.shape[0]
    C = Xr.T @ Xr / n
    evals, evecs = np.linalg.eigh(C)
    order = np.argsort(evals)[::-1]
    evecs = evecs[:, order]
    e = evecs[:, 0].copy()
    E = evecs[:, 1:].copy()
    e *= _largest_entry_sign(B @ e)
    return e, E


def _alpha_scale(alpha):
    """(midpoint, half-width) of the training range of alpha."""
    lo, hi = float(np.min(alpha)), float(np.max(alpha))
    half = (hi - lo) / 2
    return ((hi + lo) / 2, half if half > 0 else 1.0)


def _degree_list(degrees, n_steps):
    if np.ndim(degrees) == 0:
        return [int(degrees)] * n_steps
    degrees = [int(g) for g in degrees]
    if len(degrees) != n_steps:
        raise ValueError(f"need {n_steps} per-step degrees, got {len(degrees)}")
    return degrees


def _fit(X, choose_degree):
    """Shared fitting loop; ``choose_degree(p, alpha, scale, Z)`` returns the degree."""
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    mean = X.mean(axis=0)
    Xr = X - mean
    B = np.eye(d)
    steps = []
    leading = np.zeros((max(d - 1, 0), d))
    for p in range(1, d):
        e, E = _directions(Xr, B)
        leading[p - 1] = B @ e
        B = B @ E
        if p == d - 1:
            # B is now d x 1: the ambient direction of the last output column.
            s = _largest_entry_sign(B[:, 0])
            E = s * E
            B = s * B
        alpha = Xr @ e
        Z = Xr @ E
        scale = _alpha_scale(alpha)
        g = choose_degree(p, alpha, scale, Z)
        V = _vander(alpha, scale, g)
        Wt, *_ = np.linalg.lstsq(V, Z, rcond=None)
        Xr = Z - V @ Wt
        steps.append({"e": e, "E": E, "W": Wt.T.copy(), "degree": g, "scale": scale})
    return {
        "mean": mean,
        "steps": steps,
        "leading": leading,
        "last_direction": B[:, 0].copy(),
        "degrees": [s["degree"] for s in steps],
    }


def fit_direct(X, degrees):
    """Fit PPA directly (reference implementation).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Training samples as rows.
    degrees : int or sequence of int
        Polynomial degree of every step, or one degree per step (``d - 1`` values).

    Returns
    -------
    model : dict
        ``mean`` (d,); ``steps``, a list of ``d - 1`` dicts with ``e`` (m,), ``E``
        (m, m-1), ``W`` (m-1, g+1), ``degree`` and ``scale`` for the residual dimension
        ``m = d - p + 1`` of step ``p``; ``leading`` (d-1, d), the ambient leading vectors;
        ``last_direction`` (d,), the ambient direction of the last output column;
        ``degrees``, the list of per-step degrees.
    """
    d = np.asarray(X).shape[1]
    degs = _degree_list(degrees, d - 1)
    return _fit(X, lambda p, alpha, scale, Z: degs[p - 1])


def fit_direct_cv(X, candidates, folds):
    """Fit PPA choosing each step's degree by brute-force K-fold cross-validation.

    At every step the directions ``e_p, E_p`` come from all rows. For each candidate degree
    and each fold, ``W`` is fitted by least squares on the rows outside the fold and the
    squared error ``||Z_i - W v(alpha_i)||^2`` is summed over the rows inside it. The score
    of a degree is the total over folds divided by ``n``. The smallest score wins (ties go
    to the smallest degree); ``W`` is then refitted on all rows with that degree.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Training samples as rows.
    candidates : sequence of int
        Candidate degrees.
    folds : array_like of int, shape (n,)
        Fold label of every row, ``0 .. cv-1``.

    Returns
    -------
    model : dict
        As returned by :func:`fit_direct`.
    cv_scores : ndarray, shape (d-1, len(candidates))
        Mean held-out squared error per sample, in the order of ``candidates``.
    chosen : list of int
        Chosen degree of every step.
    """
    candidates = [int(g) for g in candidates]
    folds = np.asarray(folds)
    n, d = np.asarray(X).shape
    if folds.shape != (n,):
        raise ValueError("folds must have one label per row")
    labels = np.unique(folds)
    scores = np.zeros((max(d - 1, 0), len(candidates)))

    def choose(p, alpha, scale, Z):
        for j, g in enumerate(candidates):
            total = 0.0
            for f in labels:
                test = folds == f
                train = ~test
                Wt, *_ = np.linalg.lstsq(_vander(alpha[train], scale, g), Z[train], rcond=None)
                err = Z[test] - _vander(alpha[test], scale, g) @ Wt
                total += float(np.sum(err**2))
            scores[p - 1, j] = total / n
        best = scores[p - 1].min()
        return min(g for j, g in enumerate(candidates) if scores[p - 1, j] == best)

    model = _fit(X, choose)
    return model, scores, list(model["degrees"])


def _forward(model, X, n_steps):
    """Residual after ``n_steps`` steps and the list of ``alpha`` columns."""
    Xr = np.asarray(X, dtype=float) - model["mean"]
    alphas = []
    for step in model["steps"][:n_steps]:
        alpha = Xr @ step["e"]
        Z = Xr @ step["E"]
        V = _vander(alpha, step["scale"], step["degree"])
        Xr = Z - V @ step["W"].T
        alphas.append(alpha)
    return Xr, alphas


def _backward(model, Xr, alphas):
    """Invert the first ``len(alphas)`` steps, starting from residual ``Xr``."""
    for step, alpha in reversed(list(zip(model["steps"], alphas))):
        V = _vander(alpha, step["scale"], step["degree"])
        Xr = np.outer(alpha, step["e"]) + (Xr + V @ step["W"].T) @ step["E"].T
    return Xr + model["mean"]


def transform_direct(model, X):
    """PPA coefficients ``[alpha_1, ..., alpha_{d-1}, x_{d-1}]`` of ``X``.

    Parameters
    ----------
    model : dict
        From :func:`fit_direct` or :func:`fit_direct_cv`.
    X : array_like, shape (n, d)

    Returns
    -------
    R : ndarray, shape (n, d)
    """
    Xr, alphas = _forward(model, X, len(model["steps"]))
    return np.column_stack(alphas + [Xr])


def inverse_direct(model, R):
    """Exact inverse of :func:`transform_direct` for full ``d``-column coefficients.

    Parameters
    ----------
    model : dict
    R : array_like, shape (n, d)

    Returns
    -------
    X : ndarray, shape (n, d)
    """
    R = np.asarray(R, dtype=float)
    n_steps = len(model["steps"])
    alphas = [R[:, p] for p in range(n_steps)]
    return _backward(model, R[:, n_steps:], alphas)


def reconstruct_direct(model, X, k):
    """``k``-component PPA reconstruction of ``X``.

    Transform through steps ``1..k``, set the residual ``x_k`` to zero and invert steps
    ``k..1``. Its squared error is exactly ``||x_k||^2`` per sample (paper, eq. 7).
    ``k = 0`` gives the mean, ``k = d`` the identity.

    Parameters
    ----------
    model : dict
    X : array_like, shape (n, d)
    k : int
        Number of components, ``0 <= k <= d``.

    Returns
    -------
    X_hat : ndarray, shape (n, d)
    """
    d = model["mean"].shape[0]
    if not 0 <= k <= d:
        raise ValueError(f"k must be in [0, {d}]")
    if k == d:
        return inverse_direct(model, transform_direct(model, X))
    Xr, alphas = _forward(model, X, k)
    return _backward(model, np.zeros_like(Xr), alphas)


def reconstruct_zeroed_coefficients_direct(model, X, k):
    """Reconstruction keeping ``r[:, :k]`` and zeroing the other coefficients.

    This is the alternative truncation (zero ``alpha_{k+1}, ..., x_{d-1}`` and run the
    full inverse). It differs from :func:`reconstruct_direct` whenever a later step's
    curve does not pass through the origin at ``alpha = 0``.

    Parameters
    ----------
    model : dict
    X : array_like, shape (n, d)
    k : int
        Number of kept coefficients, ``0 <= k <= d``.

    Returns
    -------
    X_hat : ndarray, shape (n, d)
    """
    R = transform_direct(model, X)
    R[:, k:] = 0.0
    return inverse_direct(model, R)
