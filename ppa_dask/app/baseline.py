"""The PCA baseline: PCA's reconstruction error with k = 0 .. d-1 components.

One implementation for the pipeline's evaluate stage (and so the demo), the paper's
experiments and the benchmarks. In memory it is scikit-learn's PCA, the error of each k being
that of ``inverse_transform(transform(x))`` with the components after the k-th zeroed (what a
PCA fitted with ``n_components=k`` returns), computed in blocks of rows with one BLAS thread.
Data too large to load are reduced blockwise with Dask to the covariance, whose eigenvectors
give the same errors.
"""

from __future__ import annotations

import numpy as np

from ppa_dask.utils.blas import one_blas_thread

__all__ = [
    "PCA_IN_MEMORY_BYTES",
    "PCA_ERROR_BLOCK_ROWS",
    "pca_model_errors",
    "pca_reconstruction_errors",
]

#: Largest training (and evaluated) array, in float64 bytes, loaded into memory for
#: scikit-learn; larger ones go through the Dask covariance.
PCA_IN_MEMORY_BYTES = 256 * 2**20
#: Rows per block when computing the errors in memory (bounds the temporary arrays).
PCA_ERROR_BLOCK_ROWS = 131072

_IN_MEMORY_METHOD = (
    "sklearn PCA(svd_solver='covariance_eigh') fitted on all training samples in "
    "memory; MSE_k = mean ||x - inverse_transform(transform(x) with components "
    "k+1..d zeroed)||^2"
)
_DASK_METHOD = (
    "data too large to load: PCA from the covariance computed with Dask (ddof=0); "
    "MSE_k = trace of the evaluated samples' second moment about the training mean "
    "minus its part on the k leading training eigenvectors (on the training data: "
    "the sum of the discarded eigenvalues, identical to sklearn PCA's "
    "inverse_transform(transform) error)"
)


def pca_model_errors(pca, X, block_rows=PCA_ERROR_BLOCK_ROWS):
    """Reconstruction MSE of ``X`` by a fitted full scikit-learn PCA, for k = 0 .. d-1.

    Parameters
    ----------
    pca : sklearn.decomposition.PCA
        Fitted with all ``d`` components.
    X : array-like of shape (n, d)
        Samples whose error is measured (in memory).
    block_rows : int
        Rows transformed at a time.

    Returns
    -------
    errors : ndarray of shape (d,)
        Mean over rows of the squared Euclidean error; ``errors[0]`` is the mean squared
        distance to the PCA mean (the total variance on the training data).

    Examples
    --------
    >>> from sklearn.decomposition import PCA
    >>> X = np.random.default_rng(0).normal(size=(500, 3)) * [3.0, 2.0, 1.0]
    >>> pca = PCA().fit(X)
    >>> Xc, V = X - X.mean(axis=0), pca.components_[:2]
    >>> direct = ((Xc - Xc @ V.T @ V) ** 2).sum(axis=1).mean()   # keep 2 components
    >>> bool(np.isclose(pca_model_errors(pca, X)[2], direct))
    True
    """
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    if pca.components_.shape[0] != d:
        raise ValueError("the PCA baseline needs a PCA with all components (n_components=d)")
    sums = np.zeros(d)
    with one_blas_thread():  # threaded BLAS is several times slower on this work
        for start in range(0, X.shape[0], block_rows):
            block = X[start : start + block_rows]
            Z = pca.transform(block)
            for k in range(d):
                Zk = Z.copy()
                Zk[:, k:] = 0.0
                R = block - pca.inverse_transform(Zk)
                sums[k] += float(np.einsum("ij,ij->", R, R))
    return sums / X.shape[0]


def pca_reconstruction_errors(X, in_memory_bytes=PCA_IN_MEMORY_BYTES, X_eval=None):
    """PCA's reconstruction MSE for k = 0..d-1 components, fitted on ``X``.

    In memory (``X`` a numpy array, or small enough): scikit-learn's
    ``PCA(svd_solver="covariance_eigh")`` with all components, errors by
    :func:`pca_model_errors`. Otherwise from the covariance computed with Dask: with
    eigenvectors ``v_i`` of the training covariance and ``S`` the second moment of the evaluated
    samples about the training mean, ``MSE_k = tr S - sum_{i<=k} v_i' S v_i`` (on the training
    data itself, the sum of the discarded eigenvalues).

    Parameters
    ----------
    X : ndarray or dask.array.Array of shape (n, d)
        Training samples.
    in_memory_bytes : int
        Largest ``X`` (float64 bytes) loaded into memory for scikit-learn.
    X_eval : array of shape (m, d), optional
        Samples on which the error is measured (default: ``X``, the training error).

    Returns
    -------
    errors : ndarray of shape (d,)
    eigen_tails : ndarray of shape (d,)
        Sums of the discarded training eigenvalues (equal to ``errors`` on the training data).
    method : str
        A sentence saying how the errors were computed (for table captions).

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(300, 3)) * [3.0, 2.0, 1.0]
    >>> errors, tails, _ = pca_reconstruction_errors(X)
    >>> bool(np.allclose(errors, tails))
    True
    """
    from sklearn.decomposition import PCA

    n, d = X.shape
    same = X_eval is None
    small = 8.0 * n * d <= in_memory_bytes and (
        same or 8.0 * X_eval.shape[0] * d <= in_memory_bytes
    )
    if isinstance(X, np.ndarray) or small:
        X = np.asarray(X, dtype=np.float64)
        E = X if same else np.asarray(X_eval, dtype=np.float64)
        with one_blas_thread():
            pca = PCA(svd_solver="covariance_eigh").fit(X)
        errors = pca_model_errors(pca, E)
        eigen = pca.explained_variance_ * ((n - 1) / n)
        tails = np.array([eigen[k:].sum() for k in range(d)])
        return errors, tails, _IN_MEMORY_METHOD
    import dask.array as da

    X = X.astype(np.float64)
    mean = X.mean(axis=0).compute()
    Xc = X - mean
    scatter = da.dot(Xc.T, Xc).compute()
    eigen, vectors = np.linalg.eigh(scatter / n)
    eigen, vectors = np.maximum(eigen[::-1], 0.0), vectors[:, ::-1]
    tails = np.array([eigen[k:].sum() for k in range(d)])
    if same:
        return tails, tails, _DASK_METHOD
    Ec = X_eval.astype(np.float64) - mean
    S = da.dot(Ec.T, Ec).compute() / X_eval.shape[0]
    captured = np.concatenate([[0.0], np.cumsum(np.einsum("ji,jk,ki->i", vectors, S, vectors))])
    return np.trace(S) - captured[:d], tails, _DASK_METHOD
