"""The PPA-induced metric ``M(x) = J(x)^T Lambda^{-1} J(x)`` (paper eq. 20-21).

Part of the engine because :meth:`ppa_dask.PPA.metric` applies it; users find it in
:mod:`ppa_dask.geometry` with the rest of the model's geometry.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

__all__ = ["coefficient_variances", "metric_from_jacobian"]


def coefficient_variances(model):
    """Variances ``Lambda`` of the ``d`` coordinates of the volume-preserving PPA map.

    The Jacobian of a fitted model (``PPA.jacobian``) has ``d`` rows: ``alpha_1 .. alpha_k`` and
    the residual after ``k`` steps in ``residual_basis_`` coordinates. With all ``d - 1`` steps
    fitted these are the model's ``explained_variance_``. With ``n_components=k < d - 1`` the
    fit keeps only the total variance of the ``d - k``-dimensional residual
    (``residual_variance_[-1]``), so each residual coordinate gets its share,
    ``residual_variance_[-1] / (d - k)`` (an isotropic residual; ``ddof=1`` like
    ``explained_variance_``). Zero variances are replaced by 1, as whitening does, so the
    metric stays finite.

    Parameters
    ----------
    model : PPA
        A fitted model.

    Returns
    -------
    variances : ndarray of shape (n_features,)

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask import PPA
    >>> X = np.random.default_rng(0).normal(size=(500, 3)) * [3.0, 2.0, 1.0]
    >>> model = PPA(degree=1).fit(X)
    >>> bool(np.allclose(coefficient_variances(model), model.explained_variance_))
    True
    """
    check_is_fitted(model)
    d = model.n_features_in_
    variances = np.asarray(model.explained_variance_, dtype=np.float64)
    missing = d - variances.shape[0]
    if missing > 0:
        n = model.n_samples_
        ddof = n / (n - 1) if n > 1 else 1.0
        residual = float(model.residual_variance_[-1]) * ddof / missing
        variances = np.concatenate([variances, np.full(missing, residual)])
    return np.where(variances > 0, variances, 1.0)


def metric_from_jacobian(J, weights=None):
    """``M = J^T diag(weights) J`` for a stack of Jacobians (a pure per-block kernel).

    Parameters
    ----------
    J : ndarray of shape (n, d, d)
        Jacobians ``dR/dx`` per sample.
    weights : ndarray of shape (d,) or None
        Inverse variances ``Lambda^{-1}`` of the output coordinates; None for the identity
        (``M = J^T J``, the metric the Euclidean distance of the unwhitened coefficients
        induces).

    Returns
    -------
    M : ndarray of shape (n, d, d)
        Symmetric by construction (formed as ``K^T K`` with ``K = sqrt(weights) J``).

    Examples
    --------
    >>> import numpy as np
    >>> J = np.array([[[1.0, 2.0], [0.0, 1.0]]])
    >>> metric_from_jacobian(J, np.array([1.0, 4.0]))[0].tolist()
    [[1.0, 2.0], [2.0, 8.0]]
    """
    J = np.asarray(J, dtype=np.float64)
    K = J if weights is None else J * np.sqrt(np.asarray(weights, dtype=np.float64))[:, None]
    return np.matmul(np.swapaxes(K, -1, -2), K)
