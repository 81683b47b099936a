"""Marginal entropies and the multi-information reduction of a transform (paper section 5.4).

The multi-information (total correlation) of ``x`` is ``I(x) = sum_j h(x_j) - h(x)``. Under an
invertible map ``r = R(x)``, ``h(r) = h(x) + E log|det J|``, so the joint entropies cancel::

    Delta I = I(x) - I(R(x)) = sum_j h(x_j) - sum_j h(r_j) + E log|det J(x)|

and for a volume-preserving map (PPA, PCA, any rotation) the last term is zero: the reduction
needs only univariate (marginal) entropies. :func:`multi_information_reduction` reports it in
bits per dimension, as the paper's Table 3.

Estimator and ties
------------------
Marginal entropies use scipy's m-spacing estimators (:func:`scipy.stats.differential_entropy`,
``method="auto"`` picks Van Es, Ebrahimi or Vasicek by sample size), or an equal-width
histogram with the Miller-Madow correction (``method="histogram"``).

Spacing estimators take logarithms of gaps between order statistics: a value repeated more
often than the window length (integer-valued data such as Sat, Pageblocks, Vehicles,
Segmentation) makes a gap zero and the estimate ``-inf``. Such a column is a discrete variable
sampled on a grid; its *differential* entropy is that of the continuous variable obtained by
spreading each value uniformly over its grid cell (dequantisation, ``h = H_discrete + log q``
for step ``q``). So by default (``dequantize=True``) every column that holds repeated values
gets independent uniform noise on ``[-q/2, q/2)``, with ``q`` its quantisation step, the
smallest positive gap between its distinct values, drawn from a fixed seed
(``numpy.random.default_rng([random_state, j])`` for column ``j``). Columns without repeated
values are left untouched. The same rule is applied to every column of both sides of
``Delta I``. When ``R`` is given as a fitted transformer (``PPA``, ``PCA``...) it is applied to the
dequantised ``X``, so both sides describe the same continuous variable exactly; when ``R`` is an
array computed from the raw ``X``, its columns (continuous combinations of the inputs, tied
only where whole rows repeat) go through the same rule.

Columns whose repeated values are not on a grid (an atom at 0 among continuous values, say)
have no finite differential entropy; their estimate then reflects the resolution of the
data (the smallest gap), and the histogram estimator gives a coarser, bounded alternative.

Kernel density estimate
-----------------------
``method="kde"`` is the resubstitution entropy ``-mean_i log f(x_i)`` of a Gaussian kernel
density estimate with Silverman's bandwidth ``1.06 * std * n**(-1/5)`` (sample standard
deviation, ``ddof=1``). It over-smooths anything far from a Gaussian (spikes, atoms, heavy
tails) and so pulls every marginal entropy towards that of a Gaussian of the same variance;
it is the "paper-like" alternative of the Table 3 pipeline, not a consistent estimator of a
spiky density. The density is evaluated by linear binning on a regular grid of at least 20
points per bandwidth, an FFT convolution with the kernel (zero-padded, truncated at 8
bandwidths) and linear interpolation back to the samples: ``O(n + m log m)`` for ``m`` grid
points, with a relative error of order ``(grid step / bandwidth)**2``.

Rank-deficient input
--------------------
If the columns of ``X`` are exactly linearly dependent (Segmentation's INTENSITY is the mean
of its three RAW colour columns, say), ``x`` lives on a hyperplane: its joint differential
entropy is ``-inf`` and its multi-information ``+inf``. A transform that turns a null
direction into an output coordinate (PCA, PPA) makes that output constant, of entropy
``-inf``, so the true ``Delta I`` is ``+inf``; any finite estimate is the resolution floor
of the estimator (the dequantisation noise, the bin width or the kernel bandwidth), not a
property of the data. :func:`multi_information_reduction` therefore checks the rank of ``X``
(:func:`covariance_rank`: eigenvalues of the correlation matrix below
:data:`RANK_RTOL` ``= 1e-10`` times the largest count as zero) and warns with
:class:`RankDeficientWarning`, raises, or stays silent (``rank_deficient=``).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.stats

from ppa_dask.utils.compute import compute
from ppa_dask.utils.params import Options, Real, check_param
from ppa_dask.utils.seeds import key_rng, resolve_seed
from ppa_dask.utils.warnings import RankDeficientWarning

__all__ = [
    "RANK_RTOL",
    "RankDeficientWarning",
    "covariance_rank",
    "quantisation_steps",
    "dequantize",
    "marginal_entropy",
    "marginal_entropies",
    "multi_information_reduction",
]

_SPACING_METHODS = ("auto", "vasicek", "van es", "ebrahimi", "correa")
_METHODS = _SPACING_METHODS + ("histogram", "kde")

#: Relative threshold of :func:`covariance_rank`: eigenvalues of the correlation matrix below
#: ``RANK_RTOL`` times the largest count as zero. Rounding in a data file leaves an exact
#: dependency at ~1e-14 relative (Segmentation: residuals 3e-5 on values ~100), float64
#: arithmetic at ~1e-16; genuine directions of real data sets stay above 1e-6.
RANK_RTOL = 1e-10

# KDE grid: steps per bandwidth (interpolation error ~ (1/20)**2 of the curvature term),
# kernel truncation in bandwidths (exp(-32) ~ 1e-14), and the largest grid (memory bound for
# a column whose range spans very many bandwidths, e.g. a spike plus far outliers)
_KDE_STEPS_PER_BANDWIDTH = 20
_KDE_TRUNCATE = 8.0
_KDE_MIN_GRID = 512
_KDE_MAX_GRID = 2**22


def _as_2d(X, name):
    X = np.asarray(X)
    one_d = X.ndim == 1
    if one_d:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array of samples, got shape {X.shape}")
    if not (
        np.issubdtype(X.dtype, np.floating)
        or np.issubdtype(X.dtype, np.integer)
        or X.dtype == bool
    ):
        raise TypeError(f"{name} must hold real numbers, got dtype {X.dtype}")
    X = X.astype(np.float64, copy=False)
    if X.shape[0] < 2:
        raise ValueError(f"{name} has {X.shape[0]} sample(s); entropy estimates need at least 2")
    bad = ~np.isfinite(X)
    if bad.any():
        where = "" if one_d else f", in columns {np.flatnonzero(bad.any(axis=0)).tolist()}"
        raise ValueError(
            f"{name} contains {int(np.isnan(X).sum())} NaN and {int(np.isinf(X).sum())} inf "
            f"values{where}; entropies need finite samples."
        )
    constant = np.flatnonzero(X.min(axis=0) == X.max(axis=0)).tolist()
    if constant and one_d:
        raise ValueError(f"{name} is constant: the differential entropy of a constant is -inf.")
    if constant:
        raise ValueError(
            f"{name} has constant columns {constant}: the differential entropy of a constant is "
            "-inf (drop those columns; they carry no information and no redundancy)."
        )
    return X


def covariance_rank(X, rtol=RANK_RTOL):
    """Numerical rank of the covariance of ``X``, scale-free (from its correlation matrix).

    The covariance of the centred columns is scaled to a correlation matrix (so the threshold
    does not depend on the units of the columns); eigenvalues below ``rtol`` times the largest
    count as zero. A constant column contributes a zero eigenvalue. Cost ``O(n d^2)``.

    Parameters
    ----------
    X : array-like or dask.array.Array of shape (n, d)
        A Dask array is reduced chunk-wise (one ``compute`` of its ``d x d`` Gram matrix),
        without materialising ``X``.
    rtol : float in (0, 1), default=RANK_RTOL (1e-10)

    Returns
    -------
    rank : int
        In ``0 .. min(n - 1, d)``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2))
    >>> covariance_rank(np.column_stack([X, X[:, 0] + X[:, 1]]))     # x3 = x1 + x2
    2
    >>> covariance_rank(rng.normal(size=(100, 3)))
    3
    """
    rtol = check_param("rtol", rtol, Real(0, 1, closed="neither"))
    if hasattr(X, "chunks") and hasattr(X, "dask"):
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D array of samples, got shape {X.shape}")
        X = X.astype(np.float64)
        Xc = X - X.mean(axis=0)  # centred before the product: no cancellation in X'X - n m m'
        gram, n = compute(Xc.T @ Xc, X.shape[0])
        cov = np.asarray(gram) / max(int(n) - 1, 1)
    else:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D array of samples, got shape {X.shape}")
        Xc = X - X.mean(axis=0)
        cov = Xc.T @ Xc / max(X.shape[0] - 1, 1)
    sd = np.sqrt(np.diag(cov))
    if not np.isfinite(sd).all():
        raise ValueError("X must be finite to compute its rank")
    # a constant column keeps its zero row and column (a zero eigenvalue), not a 0/0
    scale = np.where(sd > 0, sd, 1.0)
    eig = np.linalg.eigvalsh(cov / np.outer(scale, scale))
    top = eig.max() if eig.size else 0.0
    if top <= 0:
        return 0
    return int((eig > rtol * top).sum())


def quantisation_steps(X):
    """Quantisation step of each column: the smallest positive gap between distinct values.

    Parameters
    ----------
    X : array-like of shape (n,) or (n, d)

    Returns
    -------
    steps : ndarray of shape (d,)
        The step of each column that holds repeated values, 0 for a column without ties.

    Examples
    --------
    >>> quantisation_steps([[0, 0.5], [2, 1.5], [2, 0.25]]).tolist()
    [2.0, 0.0]
    """
    X = _as_2d(X, "X")
    S = np.sort(X, axis=0)
    gaps = np.diff(S, axis=0)
    tied = (gaps == 0).any(axis=0)
    positive = np.where(gaps > 0, gaps, np.inf).min(axis=0)
    return np.where(tied, positive, 0.0)


def dequantize(X, random_state=0):
    """Spread each tied column uniformly over its quantisation cells (fixed seed).

    Column ``j`` with step ``q_j > 0`` (:func:`quantisation_steps`) gets noise
    ``U[-q_j/2, q_j/2)`` from ``numpy.random.default_rng([random_state, j])``; other columns
    are returned unchanged. The input is not modified.

    Parameters
    ----------
    X : array-like of shape (n,) or (n, d)
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState, default=0
        Seed of the noise (see :mod:`ppa_dask.utils.seeds`).

    Returns
    -------
    X_continuous : ndarray of shape (n, d), float64

    Examples
    --------
    >>> import numpy as np
    >>> x = np.repeat([0.0, 1.0, 2.0], 4)[:, None]
    >>> z = dequantize(x, random_state=0)
    >>> bool(np.all(np.abs(z - x) <= 0.5)), len(np.unique(z)) == 12
    (True, True)
    """
    return _dequantize(_as_2d(X, "X"), resolve_seed(random_state))


def _dequantize(X, seed):
    steps = quantisation_steps(X)
    out = X.copy()
    for j in np.flatnonzero(steps):
        rng = key_rng(seed, int(j))
        out[:, j] += (rng.random(X.shape[0]) - 0.5) * steps[j]
    return out


def _check_rank(X, action):
    d = X.shape[1]
    rank = covariance_rank(X)
    if rank >= d:
        return
    message = (
        f"X has rank {rank} of {d}: {d - rank} exact linear dependencies among its columns "
        f"(correlation eigenvalues below {RANK_RTOL:g} x the largest). Its multi-information "
        "is infinite and a transform that makes a null direction an output (PCA, PPA) has "
        "an infinite true reduction; the finite number returned is the entropy estimator's "
        "resolution floor (dequantisation noise, bin width or kernel bandwidth), not a "
        "property of the data. Drop the dependent columns for a finite Delta I."
    )
    if action == "raise":
        raise ValueError(message)
    # stacklevel 3: the caller of multi_information_reduction
    warnings.warn(message, RankDeficientWarning, stacklevel=3)


def _histogram_entropy(x, bins):
    edges = np.histogram_bin_edges(x, bins=bins)
    counts, _ = np.histogram(x, bins=edges)
    widths = np.diff(edges)
    n = x.shape[0]
    nonzero = counts > 0
    p = counts[nonzero] / n
    # plug-in entropy of the density p / width, plus Miller-Madow's bias correction
    return float(-(p * np.log(p / widths[nonzero])).sum() + (nonzero.sum() - 1) / (2 * n))


def _kde_entropy(x):
    """Resubstitution entropy (nats) of a Gaussian KDE with Silverman's bandwidth, binned."""
    n = x.shape[0]
    bandwidth = 1.06 * x.std(ddof=1) * n ** (-0.2)
    lo, hi = float(x.min()), float(x.max())
    m = int(np.ceil((hi - lo) / bandwidth * _KDE_STEPS_PER_BANDWIDTH)) + 1
    m = min(max(m, _KDE_MIN_GRID), _KDE_MAX_GRID)
    step = (hi - lo) / (m - 1)
    # linear binning: each sample splits its unit weight between the two nearest grid points
    pos = (x - lo) / step
    left = np.minimum(np.floor(pos).astype(np.int64), m - 2)
    frac = pos - left
    weights = np.bincount(left, 1.0 - frac, minlength=m) + np.bincount(left + 1, frac, minlength=m)
    half = min(int(np.ceil(_KDE_TRUNCATE * bandwidth / step)), m - 1)
    offsets = np.arange(-half, half + 1) * step
    kernel = np.exp(-0.5 * (offsets / bandwidth) ** 2) / (bandwidth * np.sqrt(2 * np.pi))
    # zero-padded to the full linear-convolution length, so the FFT does not wrap around
    size = m + 2 * half
    fft_size = 1 << int(np.ceil(np.log2(size)))
    conv = np.fft.irfft(np.fft.rfft(weights, fft_size) * np.fft.rfft(kernel, fft_size), fft_size)
    density = conv[half : half + m] / n
    f = np.interp(x, lo + step * np.arange(m), density)
    # f(x_i) >= the sample's own kernel peak, 1 / (n h sqrt(2 pi)); the floor only guards
    # against FFT round-off far below it
    f = np.maximum(f, 0.5 / (n * bandwidth * np.sqrt(2 * np.pi)))
    return float(-np.log(f).mean())


def marginal_entropies(
    X, *, method="auto", dequantize=True, random_state=0, bins="sqrt", base=None, name="X"
):
    """Differential entropy of every column of ``X`` (nats unless ``base`` is given).

    Parameters
    ----------
    X : array-like of shape (n, d) or (n,)
    method : {"auto", "vasicek", "van es", "ebrahimi", "correa", "histogram", "kde"}, \
default="auto"
        A spacing estimator of :func:`scipy.stats.differential_entropy`, an equal-width
        histogram (``bins``) with the Miller-Madow correction, or the resubstitution entropy
        of a Gaussian kernel density estimate with Silverman's bandwidth
        ``1.06 * std * n**(-1/5)`` (binned FFT evaluation, ``O(n log n)``; see the module
        docstring). The KDE over-smooths spiky columns towards a Gaussian's entropy.
    dequantize : bool, default=True
        Spread tied columns over their quantisation cells first (see the module docstring);
        with False a spacing estimate of a heavily tied column is ``-inf`` and raises.
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState, default=0
        Seed of the dequantisation noise (:func:`ppa_dask.utils.seeds.resolve_seed`; the
        default keeps estimates deterministic).
    bins : int or str, default="sqrt"
        Histogram bins (``numpy.histogram_bin_edges`` rules); only for ``"histogram"``.
    base : float or None
        Logarithm base (2 for bits); None for nats.
    name : str
        Name of the array in error messages.

    Returns
    -------
    h : ndarray of shape (d,)

    Raises
    ------
    ValueError
        NaN or inf values, constant columns, fewer than 2 samples, an unknown method, or a
        non-finite estimate.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(20000, 1))
    >>> h = marginal_entropies(x)
    >>> bool(abs(h[0] - 0.5 * np.log(2 * np.pi * np.e)) < 0.02)
    True
    >>> h_kde = marginal_entropies(x, method="kde", base=2)   # bits
    >>> bool(abs(h_kde[0] - 0.5 * np.log2(2 * np.pi * np.e)) < 0.02)
    True
    """
    check_param("method", method, Options(*_METHODS))
    X = _as_2d(X, name)
    seed = resolve_seed(random_state)
    if dequantize:
        X = _dequantize(X, seed)
    if method == "histogram":
        h = np.array([_histogram_entropy(X[:, j], bins) for j in range(X.shape[1])])
    elif method == "kde":
        h = np.array([_kde_entropy(X[:, j]) for j in range(X.shape[1])])
    else:
        with np.errstate(divide="ignore"):
            h = np.asarray(
                scipy.stats.differential_entropy(X, method=method, axis=0), dtype=np.float64
            )
    if not np.isfinite(h).all():
        cols = np.flatnonzero(~np.isfinite(h)).tolist()
        raise ValueError(
            f"the entropy estimate of {name} is not finite in columns {cols}: repeated values "
            "make spacing estimators return -inf; use dequantize=True or method='histogram'."
        )
    if base is not None:
        h = h / np.log(base)
    return h


def marginal_entropy(x, *, method="auto", dequantize=True, random_state=0, bins="sqrt", base=None):
    """Differential entropy of one variable (nats unless ``base`` is given).

    See :func:`marginal_entropies` for the parameters; ``x`` is 1-D.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(1).uniform(0, 4, 20000)
    >>> bool(abs(marginal_entropy(x, base=2) - 2.0) < 0.02)   # log2(4) bits
    True
    """
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {x.shape}; use marginal_entropies for 2-D")
    return float(
        marginal_entropies(
            x,
            method=method,
            dequantize=dequantize,
            random_state=random_state,
            bins=bins,
            base=base,
            name="x",
        )[0]
    )


def multi_information_reduction(
    X,
    R,
    *,
    log_det=None,
    method="auto",
    dequantize=True,
    random_state=0,
    bins="sqrt",
    rank_deficient="warn",
):
    """Multi-information reduction ``I(x) - I(R(x))`` in bits per dimension (paper sec. 5.4).

    ``Delta I = sum_j h(x_j) - sum_j h(r_j) + E log|det J|``, divided by ``d log 2``.

    Parameters
    ----------
    X : array-like of shape (n, d)
        Input samples.
    R : array-like of shape (n, d), or a fitted transformer or callable
        The transformed samples (row ``i`` of ``R`` is the transform of row ``i`` of ``X``),
        or an object with a ``transform`` method (``PPA``, ``PCA``, ...) or a function
        ``X -> R``, which is then applied to ``X`` after dequantisation, so both sides
        describe exactly the same continuous variable.
    log_det : float, array-like of shape (n,) or None
        ``log|det J(x)|`` (nats) per sample, or its mean; None (the default) for a
        volume-preserving map, where it is 0.
    method, dequantize, random_state, bins
        The marginal entropy estimator, applied identically to both sides (see
        :func:`marginal_entropies` and the module docstring for ties).
    rank_deficient : {"warn", "raise", "ignore"}, default="warn"
        What to do when the columns of ``X`` are linearly dependent (:func:`covariance_rank`
        below ``d``, checked on ``X`` as given, before dequantisation): warn with
        :class:`RankDeficientWarning`, raise ``ValueError``, or return the estimate silently.
        The true reduction is then infinite (see the module docstring) and the finite number
        returned is the estimator's resolution floor.

    Returns
    -------
    delta : float
        Bits per dimension; positive when the transform removes redundancy.

    Raises
    ------
    ValueError
        Bad input (see :func:`marginal_entropies`), mismatched shapes, or rank-deficient
        ``X`` with ``rank_deficient="raise"``.

    Warns
    -----
    RankDeficientWarning
        Rank-deficient ``X`` with ``rank_deficient="warn"``; the message names the rank and
        the dimension.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.decomposition import PCA
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 2)) @ np.array([[1.0, 0.9], [0.0, 0.44]])
    >>> exact = -0.5 * np.log(np.linalg.det(np.corrcoef(X.T))) / (2 * np.log(2))
    >>> delta = multi_information_reduction(X, PCA().fit(X))
    >>> bool(abs(delta - exact) < 0.02)
    True

    An exactly dependent column (``x3 = x1 + x2``) makes the true reduction infinite:

    >>> import warnings
    >>> X3 = np.column_stack([X, X.sum(axis=1)])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     floor = multi_information_reduction(X3, PCA().fit(X3))
    >>> print(str(caught[0].message).split(":")[0])
    X has rank 2 of 3
    """
    check_param("rank_deficient", rank_deficient, Options("warn", "raise", "ignore"))
    X = _as_2d(X, "X")
    if rank_deficient != "ignore":
        _check_rank(X, rank_deficient)
    # one seed for both sides, also when random_state is None or a generator
    random_state = resolve_seed(random_state)
    X_used = _dequantize(X, random_state) if dequantize else X
    if hasattr(R, "transform"):
        R = R.transform(X_used)
    elif callable(R):
        R = R(X_used)
    R = np.asarray(R)
    if R.ndim != 2 or R.shape != X.shape:
        raise ValueError(
            f"R must have the shape of X, {X.shape} (a d -> d transform of the same samples), "
            f"got {R.shape}"
        )
    if log_det is None:
        mean_log_det = 0.0
    else:
        log_det = np.asarray(log_det, dtype=np.float64)
        if log_det.ndim > 1 or (log_det.ndim == 1 and log_det.shape[0] != X.shape[0]):
            raise ValueError(
                f"log_det must be a number or one value per sample ({X.shape[0]}), got shape "
                f"{log_det.shape}"
            )
        if not np.isfinite(log_det).all():
            raise ValueError("log_det must be finite")
        mean_log_det = float(log_det.mean())
    options = dict(method=method, random_state=random_state, bins=bins)
    h_x = marginal_entropies(X_used, name="X", dequantize=False, **options)  # done above
    h_r = marginal_entropies(R, name="R", dequantize=dequantize, **options)
    d = X.shape[1]
    return float((h_x.sum() - h_r.sum() + mean_log_det) / (d * np.log(2)))
