"""k-nearest neighbours in the PPA-induced metric (paper section 5.1).

The generalised Mahalanobis PPA metric (eq. 21 with ``Lambda`` the variances of the PPA
coefficients) is, to first order, the Euclidean distance between whitened PPA coefficients:
``||R_w(x + dx) - R_w(x)||^2 = dx^T M(x) dx + O(|dx|^3)``. So a k-NN classifier in that metric
is a scikit-learn pipeline, whitened PPA followed by an ordinary Euclidean
``KNeighborsClassifier``::

    make_pipeline(PPA(whiten=True, degree=2), KNeighborsClassifier(n_neighbors=5))

:func:`make_ppa_knn` builds it; :func:`make_mahalanobis_knn` is the linear counterpart
(whitened PCA). The paper's two-parabola test data are :func:`ppa_dask.datasets.make_parabolas`.
"""

from __future__ import annotations

from sklearn.decomposition import PCA
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline

from ppa_dask.ppa.estimator import PPA

__all__ = ["make_ppa_knn", "make_mahalanobis_knn"]


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
    >>> from ppa_dask.datasets import make_parabolas
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
    >>> from ppa_dask.datasets import make_parabolas
    >>> X, y = make_parabolas(200, random_state=0)
    >>> make_mahalanobis_knn(3).fit(X[:100], y[:100]).score(X[100:], y[100:]) > 0.5
    True
    """
    pca_params = dict(pca_params, whiten=True)
    knn = KNeighborsClassifier(n_neighbors=n_neighbors, **(knn_params or {}))
    return make_pipeline(PCA(**pca_params), knn)
