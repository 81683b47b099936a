"""PPA of wide data in the span of its samples (``PPA(solver="gram")``).

With ``n`` samples and ``d > n`` features, every residual of a PPA fit lies in the row space of
the centred data ``Y`` (``n x d``): each step's leading vector is a combination of the rows of
the residual, and so is each column of its coefficients (they regress the residual's rows).
PPA commutes with an isometric embedding (``x -> V z`` with ``V^T V = I``): the covariance,
its leading vectors, every coordinate ``alpha`` and every cross moment of ``V z`` are those of
``z`` mapped by ``V``. So with the thin SVD ``Y = W S V^T`` (rank ``r``), the PPA of ``Y`` is the
PPA of the reduced samples ``Z = W S`` (``n x r``) with every vector mapped by ``V``, and
``V a = Y^T (W S^{-1} a)`` needs no ``d x r`` matrix: one product of the data with an
``n x q`` matrix maps all of a model's vectors at once.

The fit is two passes over the data, each along feature slabs that hold every sample, so its
memory is one slab and the ``n x n`` Gram matrix ``K = Y Y^T`` whatever ``d``:

1. :func:`gram_slab` per slab: the slab's column means (exact centring, no cancellation against
   a shift) and its share ``Y_j Y_j^T`` of ``K``, summed over slabs; ``K = W S^2 W^T``.
2. The steps of the reduced samples ``Z`` in memory (:func:`ppa_dask.ppa.steps.fit_steps`, the
   same step loop as every fit, on an ``n x r`` array), then :func:`project_slab` per slab:
   ``Y_j^T B`` for the ``n x q`` matrix ``B`` of the model's reduced vectors times ``W S^{-1}``.

Cost: ``O(n^2 d)`` for the Gram matrix and ``O(n d q)`` for the projection, linear in ``d``;
the steps cost what a PPA of ``n`` features costs. No array of ``d x d`` or ``d x r`` elements
is made: the largest ``d``-sized ones are the mean and the model (``k`` vectors and ``k``
coefficient blocks of ``d x (degree + 1)``).
"""

from __future__ import annotations

import numpy as np

from ppa_dask.ppa import steps as _steps
from ppa_dask.ppa.drivers import NumpyDriver
from ppa_dask.utils.blas import one_blas_thread

__all__ = [
    "AUTO_MIN_FEATURES",
    "SLAB_BYTES",
    "DaskSlabs",
    "NumpySlabs",
    "choose_solver",
    "fit_wide",
    "gram_bytes",
    "machine_memory_bytes",
    "gram_slab",
    "project_slab",
]

#: ``solver="auto"`` takes the Gram path from this many features on (when there are fewer
#: samples than features and a number of components is given): below it the covariance path's
#: ``d x d`` algebra is cheap, and its results stay exactly those of earlier versions.
AUTO_MIN_FEATURES = 1000
#: Bytes of float64 a feature slab of the passes holds (all samples, as many features as fit).
SLAB_BYTES = 64 * 2**20


def choose_solver(solver, n_samples, n_features, n_components):
    """The solver a fit uses: ``"covariance"`` or ``"gram"``.

    ``"auto"`` takes ``"gram"`` when a number of components is given, the features outnumber
    the samples and there are at least :data:`AUTO_MIN_FEATURES` of them; else
    ``"covariance"``.

    Examples
    --------
    >>> choose_solver("auto", 500, 20_000, 3), choose_solver("auto", 10**6, 10, 3)
    ('gram', 'covariance')
    >>> choose_solver("auto", 500, 20_000, None)  # all d - 1 steps: the covariance path
    'covariance'
    """
    if solver != "auto":
        return solver
    wide = n_features >= AUTO_MIN_FEATURES and n_samples < n_features
    return "gram" if wide and n_components is not None else "covariance"


def gram_bytes(n_samples):
    """Bytes the Gram path holds on the client for ``n`` samples: the Gram matrix, its
    eigenvectors and the reduced samples (three ``n x n`` float64 arrays).

    Examples
    --------
    >>> gram_bytes(1000) / 2**20
    22.88818359375
    """
    return 3 * 8 * int(n_samples) ** 2


def machine_memory_bytes():
    """This machine's memory in bytes (the Gram path's matrices live on the client)."""
    import psutil

    return int(psutil.virtual_memory().total)


# --------------------------------------------------------------------------------------------
# the per-slab kernels (numpy and Dask alike)
# --------------------------------------------------------------------------------------------


def _centred(X):
    """A feature slab ``(n, w)`` in float64 and its column means."""
    X = np.asarray(X, dtype=np.float64)
    mean = X.mean(axis=0)
    return X - mean, mean


def gram_slab(X):
    """Column means, non-finite counts and Gram share ``Y Y^T`` of a slab of all samples.

    Parameters
    ----------
    X : ndarray of shape (n_samples, w)
        Every sample, ``w`` of the features.

    Returns
    -------
    dict
        ``mean`` (w,), ``n_nan`` and ``n_inf`` (w,) counts, ``gram`` (n, n).

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(5, 8))
    >>> a, b = gram_slab(X[:, :3]), gram_slab(X[:, 3:])
    >>> Y = X - X.mean(axis=0)
    >>> bool(np.allclose(a["gram"] + b["gram"], Y @ Y.T))
    True
    """
    Y, mean = _centred(X)
    n_nan = np.isnan(Y).sum(axis=0)
    n_inf = np.isinf(Y).sum(axis=0)
    return dict(mean=mean, n_nan=n_nan, n_inf=n_inf, gram=Y @ Y.T)


def sum_grams(parts):
    """The sum of :func:`gram_slab` Gram shares (a tree-reduction's combine)."""
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total


def project_slab(X, B):
    """``Y^T B`` for a slab ``X`` of all samples centred by its own column means: ``(w, q)``.

    The means are those :func:`gram_slab` found for the same slab (same arithmetic).

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(5, 8))
    >>> B = np.ones((5, 2))
    >>> Y = X - X.mean(axis=0)
    >>> bool(np.allclose(np.vstack([project_slab(X[:, :3], B), project_slab(X[:, 3:], B)]),
    ...                  Y.T @ B))
    True
    """
    Y, _ = _centred(X)
    return Y.T @ B


# --------------------------------------------------------------------------------------------
# the two passes, in memory and on Dask
# --------------------------------------------------------------------------------------------


def slab_width(n_samples, slab_bytes=SLAB_BYTES):
    """Features per slab: as many float64 columns of ``n`` samples as ``slab_bytes`` holds."""
    return max(1, int(slab_bytes) // (8 * max(int(n_samples), 1)))


class NumpySlabs:
    """The Gram path's passes over an in-memory array, one feature slab at a time.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(4, 10))
    >>> slabs = NumpySlabs(X, width=3)
    >>> first = slabs.gram()
    >>> bool(np.allclose(first["mean"], X.mean(axis=0))), slabs.n_passes
    (True, 1)
    """

    def __init__(self, X, width=None):
        self.X = X
        self.n_samples, self.n_features = X.shape
        self.width = slab_width(self.n_samples) if width is None else int(width)
        self.n_passes = 0

    def _slabs(self):
        for a in range(0, self.n_features, self.width):
            yield self.X[:, a : a + self.width]

    def gram(self):
        self.n_passes += 1
        K = np.zeros((self.n_samples, self.n_samples))
        means, nans, infs = [], [], []
        with one_blas_thread():
            for slab in self._slabs():
                part = gram_slab(slab)
                K += part["gram"]
                means.append(part["mean"])
                nans.append(part["n_nan"])
                infs.append(part["n_inf"])
        return dict(
            gram=K,
            mean=np.concatenate(means),
            n_nan=np.concatenate(nans),
            n_inf=np.concatenate(infs),
        )

    def project(self, B):
        self.n_passes += 1
        with one_blas_thread():
            return np.vstack([project_slab(slab, B) for slab in self._slabs()])


class DaskSlabs:
    """The Gram path's passes over a Dask array: its chunks merged along the samples.

    Every task holds a slab of all samples (the array is rechunked to one chunk of rows and
    feature chunks of at most :data:`SLAB_BYTES` in float64, keeping the input's own feature
    chunks where they are smaller), so a pass's memory per task is one slab and an
    ``n x n`` Gram share whatever the number of features.
    """

    def __init__(self, X, slab_bytes=SLAB_BYTES):
        self.n_samples, self.n_features = X.shape
        width = slab_width(self.n_samples, slab_bytes)
        if max(X.chunks[1]) > width:
            X = X.rechunk({0: -1, 1: width})
        elif X.numblocks[0] > 1:
            X = X.rechunk({0: -1})
        self.X = X
        self.n_passes = 0

    def _delayed_slabs(self):
        return list(self.X.to_delayed().ravel())

    def gram(self):
        import dask

        from ppa_dask.utils.compute import compute, tree_reduce

        self.n_passes += 1
        slab = dask.delayed(gram_slab, pure=True)
        pick = dask.delayed(_pick, pure=True)
        parts = [slab(block) for block in self._delayed_slabs()]
        grams = [pick(part, "gram") for part in parts]
        small = [pick(part, ("mean", "n_nan", "n_inf")) for part in parts]
        K, small = compute(tree_reduce(grams, sum_grams, 8, name="ppa-gram"), small)
        mean, nan, inf = (np.concatenate(column) for column in zip(*small))
        return dict(gram=K, mean=mean, n_nan=nan, n_inf=inf)

    def project(self, B):
        import dask

        from ppa_dask.utils.compute import compute

        self.n_passes += 1
        project = dask.delayed(project_slab, pure=True)
        (parts,) = compute([project(block, B) for block in self._delayed_slabs()])
        return np.vstack(parts)


def _pick(part, keys):
    if isinstance(keys, str):
        return part[keys]
    return tuple(part[k] for k in keys)


# --------------------------------------------------------------------------------------------
# the fit
# --------------------------------------------------------------------------------------------


def reduced_samples(K, rank_tol):
    """The samples' coordinates in their own span, from their Gram matrix.

    Parameters
    ----------
    K : ndarray of shape (n, n)
        ``Y Y^T`` of the centred samples.
    rank_tol : float
        Eigenvalues of ``K`` at most this are rounding (directions the samples do not span).

    Returns
    -------
    Z : ndarray of shape (n, r)
        ``W S``: coordinates of the samples on the right singular vectors of ``Y``.
    to_features : ndarray of shape (n, r)
        ``W S^{-1}``: ``Y^T (to_features @ a)`` is the feature-space vector ``V a``.

    Examples
    --------
    >>> Y = np.random.default_rng(0).normal(size=(6, 40))
    >>> Y -= Y.mean(axis=0)
    >>> Z, to_features = reduced_samples(Y @ Y.T, 1e-9)
    >>> V = Y.T @ to_features  # orthonormal columns
    >>> Z.shape, bool(np.allclose(V.T @ V, np.eye(5))), bool(np.allclose(Z @ V.T, Y))
    ((6, 5), True, True)
    """
    values, vectors = np.linalg.eigh((K + K.T) / 2)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    r = int(np.count_nonzero(values > rank_tol))
    s = np.sqrt(values[:r])
    return vectors[:, :r] * s, vectors[:, :r] / s


def _flip_step(fitted, p):
    """Step ``p`` with its leading vector negated: ``alpha -> -alpha``, ``t -> -t``, so the
    Chebyshev coefficient of ``T_j`` changes sign with odd ``j``; the model is the same map up to
    the sign of that output."""
    fitted["leading_vectors_"][p] *= -1
    signs = (-1.0) ** np.arange(fitted["coefficients_"].shape[2])
    fitted["coefficients_"][p] *= signs
    fitted["basis_intervals_"][p, 0] *= -1
    low, high = fitted["alpha_ranges_"][p]
    fitted["alpha_ranges_"][p] = (-high, -low)


def fit_wide(slabs, settings, progress=None, owner=None):
    """The fitted attributes of a PPA through the Gram path (two passes of ``slabs``).

    Parameters
    ----------
    slabs : NumpySlabs or DaskSlabs
        The data's passes.
    settings : ppa_dask.ppa.steps.StepSettings
        As for :func:`ppa_dask.ppa.steps.fit_steps`; ``rank_rtol`` is that of the input's
        features (:func:`ppa_dask.ppa.algebra.rank_rtol`).
    progress, owner
        As for :func:`ppa_dask.ppa.steps.fit_steps`.

    Returns
    -------
    dict
        The fitted attributes of :func:`~ppa_dask.ppa.steps.fit_steps` in the input's frame,
        with ``residual_basis_`` None (it would be ``d x (d - k)``).

    Raises
    ------
    ValueError
        For non-finite input, and when the samples span too few dimensions for the steps.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(50, 300))
    >>> settings = _steps.StepSettings(candidates=(1, 2), n_steps=2, seed=0, cv=2)
    >>> fitted = fit_wide(NumpySlabs(X), settings)
    >>> fitted["leading_vectors_"].shape, fitted["coefficients_"].shape
    ((2, 300), (2, 300, 3))
    """
    first = slabs.gram()
    _steps.report_nonfinite(first["n_nan"], first["n_inf"])
    K = first["gram"]
    n, d = slabs.n_samples, slabs.n_features
    if not np.isfinite(K).all():
        raise ValueError(
            "X's Gram matrix (sums of squares over its features) overflows float64: values "
            "this large need the covariance path (solver='covariance'), which rescales them"
        )
    total = float(np.trace(K))
    with one_blas_thread():
        Z, to_features = reduced_samples(K, settings.rank_rtol * total)
    r = Z.shape[1]
    if settings.n_steps >= r:
        raise ValueError(
            f"n_components={settings.n_steps} needs at least {settings.n_steps + 1} "
            f"dimensions of variation, but the {n} centred samples of X span {r} (its "
            f"numerical rank); with solver='gram' choose n_components <= {max(r - 1, 0)}"
        )
    with one_blas_thread():
        fitted = _steps.fit_steps(NumpyDriver(Z, limit_blas=False), settings, progress, owner)
    k, width = fitted["coefficients_"].shape[0], fitted["coefficients_"].shape[2]
    # every reduced vector of the model mapped by V in one pass: the mean's shift, the k
    # leading vectors and the k coefficient blocks
    reduced = np.hstack(
        [
            fitted["mean_"][:, None],
            fitted["leading_vectors_"].T,
            fitted["coefficients_"].transpose(1, 0, 2).reshape(r, k * width),
        ]
    )
    mapped = slabs.project(to_features @ reduced)  # (d, 1 + k + k * width)
    fitted["mean_"] = first["mean"] + mapped[:, 0]
    fitted["leading_vectors_"] = np.ascontiguousarray(mapped[:, 1 : 1 + k].T)
    fitted["coefficients_"] = np.ascontiguousarray(
        mapped[:, 1 + k :].reshape(d, k, width).transpose(1, 0, 2)
    )
    for p in range(k):
        e = fitted["leading_vectors_"][p]
        if e[np.argmax(np.abs(e))] < 0:  # the covariance path's sign, in the input's frame
            _flip_step(fitted, p)
    fitted["residual_basis_"] = None
    return fitted
