"""k-nearest neighbours in the PPA-induced metric (paper section 5.1), and its test data.

The generalised Mahalanobis PPA metric (eq. 21 with ``Lambda`` the variances of the PPA
coefficients) is, to first order, the Euclidean distance between whitened PPA coefficients:
``||R_w(x + dx) - R_w(x)||^2 = dx^T M(x) dx + O(|dx|^3)``. So a k-NN classifier in that metric
is a scikit-learn pipeline, whitened PPA followed by an ordinary Euclidean
``KNeighborsClassifier``::

    make_pipeline(PPA(whiten=True, degree=2), KNeighborsClassifier(n_neighbors=5))

:func:`make_ppa_knn` builds it; :func:`make_mahalanobis_knn` is the linear counterpart
(whitened PCA). :func:`make_parabolas` draws the two noisy parabolas of the paper's Fig. 3.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.decomposition import PCA
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline

from .ppa import PPA

__all__ = ["make_ppa_knn", "make_mahalanobis_knn", "make_parabolas"]


def make_ppa_knn(n_neighbors=5, *, knn_params=None, **ppa_params):
    """k-NN classifier in the generalised Mahalanobis PPA metric (paper section 5.1).

    ``make_pipeline(PPA(whiten=True, **ppa_params), KNeighborsClassifier(n_neighbors,
    **knn_params))``: the PPA is fitted (unsupervised) on the training samples, and Euclidean
    distance between whitened PPA coefficients is the PPA metric ``PPA.metric`` locally.

    Parameters
    ----------
    n_neighbors : int, default=5
    knn_params : dict or None
        Further ``KNeighborsClassifier`` parameters (``weights``, ``algorithm``, ...).
    **ppa_params
        ``PPA`` parameters (``degree``, ``cv``, ``random_state``, ...); ``whiten`` is always
        True.

    Returns
    -------
    sklearn.pipeline.Pipeline
        Steps ``"ppa"`` and ``"kneighborsclassifier"``.

    Examples
    --------
    >>> X, y = make_parabolas(200, random_state=0)
    >>> clf = make_ppa_knn(n_neighbors=3, degree=2).fit(X[:100], y[:100])
    >>> bool(clf.score(X[100:], y[100:]) > 0.9)
    True
    """
    if "whiten" in ppa_params and not ppa_params["whiten"]:
        raise ValueError("make_ppa_knn whitens the PPA coefficients; do not pass whiten=False")
    ppa_params = dict(ppa_params, whiten=True)
    knn = KNeighborsClassifier(n_neighbors=n_neighbors, **(knn_params or {}))
    return make_pipeline(PPA(**ppa_params), knn)


def make_mahalanobis_knn(n_neighbors=5, *, knn_params=None, **pca_params):
    """k-NN classifier in the (linear) Mahalanobis metric: whitened PCA + Euclidean k-NN.

    The degree-1 special case of :func:`make_ppa_knn`, with scikit-learn's PCA.

    Examples
    --------
    >>> X, y = make_parabolas(200, random_state=0)
    >>> make_mahalanobis_knn(3).fit(X[:100], y[:100]).score(X[100:], y[100:]) > 0.5
    True
    """
    pca_params = dict(pca_params, whiten=True)
    knn = KNeighborsClassifier(n_neighbors=n_neighbors, **(knn_params or {}))
    return make_pipeline(PCA(**pca_params), knn)


def make_parabolas(n_samples=1000, curvature=1.5, gap=0.4, noise=0.05, random_state=None):
    """Two classes on parallel noisy parabolas (the data of the paper's Figs. 3 and 4).

    Class ``c`` (0 or 1, alternating rows, so any prefix is balanced) lies on
    ``y = curvature * x^2 + c * gap`` with ``x ~ Uniform(-1, 1)``, plus isotropic Gaussian
    noise of standard deviation ``noise``. The classes are not linearly separable; where the
    arms are steep (large ``curvature * |x|``) the Euclidean distance between the two curves,
    about ``gap / sqrt(1 + (2 curvature x)^2)``, is much smaller than ``gap``, which is what
    makes the problem hard for Euclidean k-NN. Along the parabolas the data vary most along
    ``x`` for ``curvature`` up to about 1.9 (the first principal direction is horizontal, so
    the conditional mean of ``y`` is a degree-2 polynomial of the first PCA coefficient).

    Parameters
    ----------
    n_samples : int, default=1000
    curvature : float, default=1.5
        Coefficient of ``x^2`` ("high curvature"; the paper's low-curvature case is about 0.5).
    gap : float, default=0.4
        Vertical distance between the two parabolas.
    noise : float, default=0.05
    random_state : int or None

    Returns
    -------
    X : ndarray of shape (n_samples, 2)
    y : ndarray of shape (n_samples,), int

    Examples
    --------
    >>> X, y = make_parabolas(6, random_state=0)
    >>> X.shape, y.tolist()
    ((6, 2), [0, 1, 0, 1, 0, 1])
    """
    if not isinstance(n_samples, numbers.Integral) or isinstance(n_samples, bool) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    for name, value in (("curvature", curvature), ("gap", gap), ("noise", noise)):
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    rng = np.random.default_rng(random_state)
    labels = np.arange(n_samples) % 2
    x = rng.uniform(-1.0, 1.0, n_samples)
    X = np.column_stack([x, curvature * x**2 + labels * gap])
    X += noise * rng.normal(size=X.shape)
    return X, labels
