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

from typing import NamedTuple

import numpy as np

from ppa_dask.ppa import kernels
from ppa_dask.ppa import steps as _steps
from ppa_dask.ppa.drivers import NumpyDriver
from ppa_dask.utils.arrays import is_dask
from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.compute import compute, tree_reduce

__all__ = [
    "AUTO_MIN_FEATURES",
    "KRYLOV_MIN_FEATURES",
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
#: ``solver="auto"`` takes the Krylov path (:mod:`ppa_dask.ppa.krylov`) from this many features
#: on when the Gram path does not apply (as many samples as features, or too many samples for
#: an ``n x n`` matrix): a ``d x d`` covariance of 20,000 features is 3.2 GB and its
#: eigendecomposition minutes per step.
KRYLOV_MIN_FEATURES = 20_000
#: Bytes of float64 a feature slab of the passes holds (all samples, as many features as fit).
SLAB_BYTES = 64 * 2**20


def choose_solver(solver, n_samples, n_features, n_components, memory_bytes=None):
    """The solver a fit uses: ``"covariance"``, ``"gram"`` or ``"krylov"``.

    ``"auto"``, when a number of components is given: ``"gram"`` when the features are at
    least :data:`AUTO_MIN_FEATURES` and outnumber the samples, and the Gram path's matrices
    take at most half of ``memory_bytes`` (this machine's memory by default); else
    ``"krylov"`` from :data:`KRYLOV_MIN_FEATURES` features on; else ``"covariance"``, which is
    also the choice for all ``d - 1`` steps (``n_components`` None).

    Examples
    --------
    >>> choose_solver("auto", 500, 20_000, 3), choose_solver("auto", 10**6, 10, 3)
    ('gram', 'covariance')
    >>> choose_solver("auto", 500, 20_000, None)  # all d - 1 steps: the covariance path
    'covariance'
    >>> choose_solver("auto", 10**5, 10**5, 3)  # neither d x d nor n x n
    'krylov'
    """
    if solver != "auto":
        return solver
    if n_components is None or n_features < AUTO_MIN_FEATURES:
        return "covariance"
    memory = machine_memory_bytes() if memory_bytes is None else memory_bytes
    if n_samples < n_features and gram_bytes(n_samples) <= memory // 2:
        return "gram"
    return "krylov" if n_features >= KRYLOV_MIN_FEATURES else "covariance"


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
    """A feature slab ``(n, w)`` in float64 and its column means (one copy of the slab)."""
    Y = np.array(X, dtype=np.float64)  # a copy: centred in place
    mean = Y.mean(axis=0)
    Y -= mean
    return Y, mean


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

    Every task holds a slab of all samples (the array is rechunked to one chunk of rows; its
    own feature chunks are kept up to four times :data:`SLAB_BYTES` in float64, a store's
    chunks being read whole anyway, and split beyond), so a pass's memory per task is one slab
    and an ``n x n`` Gram share whatever the number of features.
    """

    def __init__(self, X, slab_bytes=SLAB_BYTES):
        self.n_samples, self.n_features = X.shape
        width = slab_width(self.n_samples, slab_bytes)
        if max(X.chunks[1]) > 4 * width:
            X = X.rechunk({0: -1, 1: width})
        elif X.numblocks[0] > 1:
            X = X.rechunk({0: -1})
        self.X = X
        self.n_passes = 0

    def _delayed_slabs(self):
        return list(self.X.to_delayed().ravel())

    def gram(self):
        import dask

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
    >>> settings = _steps.StepSettings(candidates=(2,), n_steps=2, seed=0)
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


# --------------------------------------------------------------------------------------------
# applying a model of wide data: feature slabs, never a whole sample
# --------------------------------------------------------------------------------------------
#
# Every step moves the residual by ``F_p c_p`` with ``F_p = [e_p, U_p]`` (d x (g_p + 2)) and
# ``c_p = [alpha_p, v(alpha_p)]``, so with ``F = [F_1 .. F_k]`` the coordinates follow from the
# projections ``F^T y_0`` of the centred sample alone:
# ``alpha_p = e_p . y_0 - sum_{q < p} (e_p^T F_q) c_q``. A transform is then one product per
# feature slab summed over the slabs, and an inverse or the residual norms one slab at a time
# given the coordinates: no task ever holds a whole sample of ``d`` features.


class Frame(NamedTuple):
    """A fitted model as the slab kernels take it.

    ``columns[p]`` is the slice of ``F``'s columns (``F^T`` rows) that step ``p`` moves the
    residual along; ``gram`` is ``F^T F``.
    """

    mean: np.ndarray  # (d,)
    Ft: np.ndarray  # (q, d): the rows e_1, U_1^T, ..., e_k, U_k^T
    gram: np.ndarray  # (q, q)
    steps: tuple  # StepParams without their d-sized arrays (direction and coef None)
    columns: tuple  # of slice
    output_scale: np.ndarray | None


def frame_of(model):
    """The :class:`Frame` of a :class:`~ppa_dask.ppa.kernels.ModelParams`.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(40, 200))
    >>> from ppa_dask import PPA
    >>> frame = frame_of(PPA(n_components=2, degree=2, solver="gram").fit(X).model_params())
    >>> frame.Ft.shape, frame.columns
    ((8, 200), (slice(0, 4, None), slice(4, 8, None)))
    """
    rows, columns, light, start = [], [], [], 0
    for step in model.steps:
        rows.append(step.direction[None, :])
        rows.append(step.coef.T)
        width = 1 + step.coef.shape[1]
        columns.append(slice(start, start + width))
        light.append(step._replace(direction=None, coef=None))
        start += width
    Ft = np.ascontiguousarray(np.vstack(rows))
    with one_blas_thread():
        gram = Ft @ Ft.T
    return Frame(model.mean, Ft, gram, tuple(light), tuple(columns), model.output_scale)


def _shifts(alpha, step, degree):
    """``c_p = [alpha_p, v(alpha_p)]`` of a step: (rows, degree + 2)."""
    V = kernels.extended_rows(step.coordinate(alpha), degree, step.lo, step.hi)[0]
    return np.column_stack([alpha, V.T])


def slab_projections(X, mean, Ft):
    """``(X - mean) F`` of a slab: the slab's share of every sample's projections (rows, q)."""
    return (np.asarray(X, dtype=np.float64) - mean) @ Ft.T


def coordinates_from_projections(P, frame, n_steps=None):
    """The coordinates ``alpha`` and shifts ``c`` of samples from their projections ``F^T y_0``.

    Parameters
    ----------
    P : ndarray of shape (rows, q)
        Summed :func:`slab_projections` of the samples.
    frame : Frame
    n_steps : int, optional
        Steps to follow (all by default).

    Returns
    -------
    C : ndarray of shape (rows, q)
        The shifts ``[c_1 .. c_k]`` (zero beyond ``n_steps``); ``C[:, columns[p].start]`` is
        ``alpha_p``.
    """
    P = np.asarray(P, dtype=np.float64)
    k = len(frame.steps) if n_steps is None else int(n_steps)
    C = np.zeros_like(P)
    for p in range(k):
        first = frame.columns[p].start
        alpha = P[:, first] - C[:, :first] @ frame.gram[:first, first]
        step = frame.steps[p]
        C[:, frame.columns[p]] = _shifts(alpha, step, frame.columns[p].stop - first - 2)
    return C


def alphas_of(C, frame, n_out):
    """The first ``n_out`` coordinates from shifts ``C``, whitened when the model is."""
    alphas = C[:, [frame.columns[p].start for p in range(n_out)]]
    if frame.output_scale is not None:
        alphas = alphas / frame.output_scale[:n_out]
    return alphas


def shifts_from_alphas(R, frame):
    """The shifts ``[c_1 .. c_m]`` (rows, q) of coordinates ``R`` (rows, m), unwhitened first."""
    R = np.asarray(R, dtype=np.float64)
    m = R.shape[1]
    if frame.output_scale is not None:
        R = R * frame.output_scale[:m]
    C = np.zeros((R.shape[0], frame.gram.shape[0]))
    for p in range(m):
        cols = frame.columns[p]
        C[:, cols] = _shifts(R[:, p], frame.steps[p], cols.stop - cols.start - 2)
    return C


def slab_inverse(C, mean, Ft):
    """A slab of the samples whose shifts are ``C``: ``mean + C F^T`` (rows, w)."""
    return mean + C @ Ft


def slab_residual_norms(X, mean, Ft, C, columns):
    """``||y_p||^2`` of a slab's share of each sample's residual, p = 0..k: (rows, k + 1)."""
    Y = np.asarray(X, dtype=np.float64) - mean
    out = np.empty((Y.shape[0], len(columns) + 1))
    out[:, 0] = np.einsum("ij,ij->i", Y, Y)
    for p, cols in enumerate(columns):
        Y -= C[:, cols] @ Ft[cols]
        out[:, p + 1] = np.einsum("ij,ij->i", Y, Y)
    return out


def _slices(d, width):
    return [slice(a, min(d, a + width)) for a in range(0, d, width)]


def transform(X, model, n_out):
    """The coordinates of samples under a model of wide data (numpy or Dask input, lazy then)."""
    frame = frame_of(model)
    if is_dask(X):
        P = _projections(X, frame)
        return P.map_blocks(_alphas_of_projections, frame, n_out, dtype=np.float64,
                            chunks=(P.chunks[0], (n_out,)), meta=np.empty((0, 0)))  # fmt: skip
    with one_blas_thread():
        width = slab_width(X.shape[0])
        P = sum(
            slab_projections(X[:, s], frame.mean[s], frame.Ft[:, s])
            for s in _slices(X.shape[1], width)
        )
        return _alphas_of_projections(P, frame, n_out)


def _alphas_of_projections(P, frame, n_out):
    return alphas_of(coordinates_from_projections(P, frame, n_out), frame, n_out)


def inverse_transform(R, model, slab_bytes=SLAB_BYTES):
    """Samples from coordinates ``R`` (rows, m <= k) under a model of wide data."""
    frame = frame_of(model)
    d = frame.mean.shape[0]
    if is_dask(R):
        rows = max(R.chunks[0])
        width = max(1, int(slab_bytes) // (8 * max(rows, 1)))
        C = R.map_blocks(shifts_from_alphas, frame, dtype=np.float64,
                         chunks=(R.chunks[0], (frame.Ft.shape[0],)), meta=np.empty((0, 0)))  # fmt: skip
        import dask.array as da

        widths = tuple(s.stop - s.start for s in _slices(d, width))
        mean, Ft = _aligned(frame, widths)
        return da.blockwise(
            slab_inverse, "ij", C, "iq", mean, "j", Ft, "qj",
            concatenate=True, dtype=np.float64, meta=np.empty((0, 0)),
        )  # fmt: skip
    with one_blas_thread():
        C = shifts_from_alphas(R, frame)
        return slab_inverse(C, frame.mean, frame.Ft)


def residual_norms(X, model, n_steps=None):
    """``||residual after p steps||^2`` of each sample, p = 0..k: (n, k + 1), lazy on Dask."""
    frame = frame_of(model)
    k = len(frame.steps)
    if is_dask(X):
        import dask.array as da

        mean, Ft = _aligned(frame, X)
        C = _projections(X, frame).map_blocks(
            coordinates_from_projections, frame, dtype=np.float64, meta=np.empty((0, 0))
        )
        norms = da.blockwise(
            slab_residual_norms, "ij", X, "ij", mean, "j", Ft, "qj", C, "iq",
            frame.columns, None, adjust_chunks={"j": k + 1}, concatenate=True, dtype=np.float64,
            meta=np.empty((0, 0)),
        )  # fmt: skip
        return _sum_over_slabs(norms, X.numblocks[1], k + 1)
    with one_blas_thread():
        width = slab_width(X.shape[0])
        slices = _slices(X.shape[1], width)
        P = sum(slab_projections(X[:, s], frame.mean[s], frame.Ft[:, s]) for s in slices)
        C = coordinates_from_projections(P, frame)
        return sum(
            slab_residual_norms(X[:, s], frame.mean[s], frame.Ft[:, s], C, frame.columns)
            for s in slices
        )


def _aligned(frame, features):
    """The model's mean (d,) and ``F^T`` (q, d) as Dask arrays in the feature chunks
    ``features`` (a Dask array's, or chunk sizes), so each slab meets its own slice of them."""
    import dask.array as da

    if not isinstance(features, tuple):
        features = features.chunks[1]
    mean = da.from_array(frame.mean, chunks=(features,))
    Ft = da.from_array(frame.Ft, chunks=((frame.Ft.shape[0],), features))
    return mean, Ft


def _projections(X, frame):
    """``(X - mean) F`` of a Dask array: one task per block, summed over the feature slabs."""
    import dask.array as da

    mean, Ft = _aligned(frame, X)
    q = frame.Ft.shape[0]
    P = da.blockwise(
        slab_projections, "ij", X, "ij", mean, "j", Ft, "qj",
        adjust_chunks={"j": q}, concatenate=True, dtype=np.float64, meta=np.empty((0, 0)),
    )  # fmt: skip
    return _sum_over_slabs(P, X.numblocks[1], q)


def _sum_over_slabs(parts, n_slabs, width):
    """Sum the per-slab column blocks of ``parts`` (n, n_slabs * width) into (n, width)."""
    if n_slabs == 1:
        return parts
    return parts.reshape(parts.shape[0], n_slabs, width, merge_chunks=False).sum(axis=1)
