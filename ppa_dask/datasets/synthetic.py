"""Synthetic nonlinear data sets for demos, tests and benchmarks.

Two generators are provided:

* :func:`make_helix` -- a noisy helix, a one-dimensional curved manifold;
* :func:`make_curved_manifold` -- a three-dimensional curved manifold in
  ``n_features`` dimensions whose structure Principal Polynomial Analysis
  captures much better than PCA (the main demo data set).

Reproducibility and chunk independence
--------------------------------------
Every random number is derived from an integer seed (``random_state``) in a
way that does not depend on how the rows are requested:

* Rows are produced in fixed *generation blocks* of ``_GEN_BLOCK = 65536``
  rows.  Block ``b`` (rows ``[b * 65536, (b + 1) * 65536)``) is always drawn
  in full from ``numpy.random.default_rng(numpy.random.SeedSequence([seed,
  b]))``, whatever ``n_samples`` is, and is then sliced.  Row ``i`` therefore
  depends only on the seed, ``i``, ``n_features`` and the generator
  parameters -- *not* on ``n_samples``, nor on the chunking of a Dask array,
  nor on whether it was made by :func:`generate_rows`, :func:`make_helix`,
  :func:`make_demo_blocks`, :func:`generated_dask_array` or
  :func:`write_zarr`.  In particular ``make_helix(100, random_state=s)`` equals
  ``make_helix(1000, random_state=s)[:100]``.
* Global parameters (the random rotation) come from a separate stream,
  ``SeedSequence([seed, 2**32 - 1])`` (see :func:`rotation_matrix`).
* Within a block the latent variables are drawn before the noise, so
  changing ``noise`` (or setting it to 0) does not change the latent points.

Streams are stable for a given NumPy version; NumPy does not promise
bit-identical streams across its releases.

``random_state=None`` draws a fresh seed once per call (for the Dask and Zarr
functions: once when the graph is built, so all blocks of one array share it).
A :class:`numpy.random.Generator` is accepted too; one seed is drawn from it.

Because a block is always generated in full, asking for a few rows costs one
65536-row block, and Dask chunks that are not multiples of 65536 rows make
the workers generate some blocks more than once (values are unaffected).
The default chunkings are multiples of the generation block.
"""

from __future__ import annotations

import functools
import json
import numbers
import os
from collections.abc import Iterator

import numpy as np

from ppa_dask.store import write_array
from ppa_dask.utils.files import remove_path, temp_sibling
from ppa_dask.utils.params import Integer, Real, check_param, check_params
from ppa_dask.utils.seeds import resolve_seed

__all__ = [
    "make_helix",
    "make_curved_manifold",
    "curved_manifold_eigenvalues",
    "rotation_matrix",
    "generate_rows",
    "make_demo_blocks",
    "generated_dask_array",
    "write_zarr",
]

#: Rows per generation block.  Fixed: changing it changes every data set.
_GEN_BLOCK = 65536
#: Second SeedSequence word of the stream for global parameters (rotation).
_GLOBAL_STREAM = 2**32 - 1
#: Largest block index; blocks use SeedSequence([seed, b]) with b < this.
_MAX_BLOCKS = _GLOBAL_STREAM

# --------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------


def _block_rng(seed: int, block: int) -> np.random.Generator:
    if block >= _MAX_BLOCKS:  # pragma: no cover - 2.8e14 rows
        raise ValueError("too many rows: block index exceeds 2**32 - 2")
    return np.random.default_rng(np.random.SeedSequence([seed, block]))


# --------------------------------------------------------------------------
# rotation
# --------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _rotation_cached(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(np.random.SeedSequence([seed, _GLOBAL_STREAM]))
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    # Sign fix makes Q Haar-distributed (independent of the QR convention).
    d = np.sign(np.diag(r))
    d[d == 0] = 1.0
    q = q * d
    # Make it a proper rotation (det +1).
    if np.linalg.slogdet(q)[0] < 0:
        q[:, 0] = -q[:, 0]
    q.setflags(write=False)
    return q


def rotation_matrix(n_features: int, random_state=None) -> np.ndarray:
    """Random rotation used by the generators to embed their data.

    The matrix is drawn from the seed's global stream
    ``SeedSequence([seed, 2**32 - 1])`` as the Q factor of the QR
    decomposition of a standard Gaussian ``n_features x n_features`` matrix,
    with the signs of the columns fixed so that ``diag(R) > 0`` (this makes Q
    uniformly distributed) and the first column negated if needed so that
    ``det(Q) = +1``.

    The generators return ``X = Y @ Q.T`` where ``Y`` holds the unrotated
    coordinates described in their docstrings, so ``X @ Q`` recovers ``Y``.
    (:func:`make_helix` with ``n_features == 3`` applies no rotation.)

    Parameters
    ----------
    n_features : int
        Dimension, >= 1.
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
        Seed; use the same value as for the generator.

    Returns
    -------
    Q : ndarray of shape (n_features, n_features)
        Orthogonal matrix with determinant +1 (a fresh, writable copy).

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask.datasets import make_curved_manifold, rotation_matrix
    >>> X, u = make_curved_manifold(500, n_features=6, noise=0.0, random_state=0,
    ...                             return_latent=True)
    >>> Q = rotation_matrix(6, random_state=0)
    >>> Y = X @ Q                    # unrotated coordinates
    >>> bool(np.allclose(Y[:, 0], u[:, 0]))
    True
    >>> bool(np.allclose(Y[:, 1], 0.6 * u[:, 0] ** 2 + u[:, 1]))
    True
    """
    n_features = check_param("n_features", n_features, Integer(1))
    seed = resolve_seed(random_state)
    return np.array(_rotation_cached(seed, n_features))


# --------------------------------------------------------------------------
# the generators' block functions
# --------------------------------------------------------------------------
#
# A "kind" is described by a _Kind record:
#   defaults     -- parameter defaults (also the allowed parameter names)
#   params       -- {name: constraint} of ppa_dask.utils.params, checked by check_params
#   block        -- function(rng, lo, hi, n_features, params) -> (Y, extra)
#                   draws the FULL generation block from rng (always the same
#                   draws in the same order), and returns unrotated
#                   coordinates Y for the in-block rows [lo, hi) and an
#                   optional extra per-row array (latent) for those rows
#   rotate       -- function(n_features) -> bool


class _Kind:
    def __init__(self, name, func_name, min_features, defaults, params, block, rotate):
        self.name = name
        self.func_name = func_name
        self.min_features = min_features
        self.defaults = defaults
        self.params = params
        self.block = block
        self.rotate = rotate


# ---- helix ----------------------------------------------------------------


_HELIX_PARAMS = {
    "a": Real(0, closed="neither"),
    "b": Real(),
    "noise": Real(0),
    "n_turns": Real(0, closed="neither"),
}


def _helix_block(rng, lo, hi, n_features, params):
    t = rng.uniform(0.0, 2.0 * np.pi * params["n_turns"], size=_GEN_BLOCK)[lo:hi]
    y = np.zeros((hi - lo, n_features))
    y[:, 0] = params["a"] * np.cos(t)
    y[:, 1] = params["a"] * np.sin(t)
    y[:, 2] = params["b"] * t
    if params["noise"] > 0:
        y += params["noise"] * rng.standard_normal((_GEN_BLOCK, n_features))[lo:hi]
    return y, t


# ---- curved manifold ------------------------------------------------------

# latent u = v * _CURVED_SCALE with v ~ U(-1, 1)^3
_CURVED_SCALE = np.array([2.0, 1.2, 0.6])
_PAD_SCALE = 0.2
_PAD_DECAY = 0.8


# The first padding polynomials: a quadratic and a cubic in v3, a cubic in
# v2, a quartic in v1 (smooth functions of one latent each, which PPA's
# one-dimensional polynomial steps can capture), then two interactions.
_PAD_HEAD = ((0, 0, 2), (0, 3, 0), (4, 0, 0), (0, 0, 3), (1, 0, 1), (0, 1, 1))


def _pad_allowed(m) -> bool:
    """Is the tensor Legendre index ``m`` absent from y0..y3's expansion?

    y0..y3 only contain indices (a, 0, 0) with a <= 2 or a odd (u1, u1**2,
    sin(pi v1)), (0, b, 0) with b <= 2 or b even (u2, u2**2, cos(pi v2)),
    (1, 1, 0) and (0, 0, 1).
    """
    a, b, c = m
    if a + b + c < 2 or m == (1, 1, 0):
        return False
    if b == 0 and c == 0:
        return a % 2 == 0 and a >= 4
    if a == 0 and c == 0:
        return b % 2 == 1 and b >= 3
    return True


@functools.cache
def _pad_indices(n_pads: int) -> tuple:
    """Multi-indices (a, b, c) of the padding polynomials.

    Tensor Legendre polynomials ``P_a(v1) P_b(v2) P_c(v3)``: first
    ``_PAD_HEAD``, then all other allowed indices by total degree 2, 3, ...
    They are orthonormal under v ~ U(-1, 1)^3 and orthogonal to (hence
    uncorrelated with) the first four coordinates.
    """
    out = list(_PAD_HEAD[:n_pads])
    seen = set(out)
    degree = 2
    while len(out) < n_pads:
        cands = [(a, b, degree - a - b) for a in range(degree + 1) for b in range(degree + 1 - a)]
        cands.sort(key=lambda m: (-m[2], -m[0]))
        for m in cands:
            if _pad_allowed(m) and m not in seen:
                out.append(m)
                seen.add(m)
        degree += 1
    return tuple(out[:n_pads])


def _legendre_table(x: np.ndarray, degree: int) -> np.ndarray:
    """``sqrt(2n+1) P_n(x)`` for n = 0..degree (unit variance on U(-1, 1))."""
    p = np.empty((degree + 1,) + x.shape)
    p[0] = 1.0
    if degree >= 1:
        p[1] = x
    for n in range(1, degree):
        p[n + 1] = ((2 * n + 1) * x * p[n] - n * p[n - 1]) / (n + 1)
    p *= np.sqrt(2 * np.arange(degree + 1) + 1.0).reshape((-1,) + (1,) * x.ndim)
    return p


def _curved_main(v: np.ndarray) -> np.ndarray:
    """The four main (unrotated, noiseless) coordinates from v in [-1, 1]^3."""
    u1, u2, u3 = (v * _CURVED_SCALE).T
    c = np.empty((v.shape[0], 4), order="F")
    c[:, 0] = u1
    c[:, 1] = 0.6 * u1**2 + u2
    c[:, 2] = 0.8 * u2**2 + 0.15 * u1 * u2 + u3
    c[:, 3] = 0.45 * np.cos(np.pi * v[:, 1]) + 0.2 * np.sin(np.pi * v[:, 0])
    return c


def _curved_noiseless(v: np.ndarray, n_features: int) -> np.ndarray:
    y = np.empty((v.shape[0], n_features), order="F")
    y[:, :4] = _curved_main(v)
    n_pads = n_features - 4
    if n_pads:
        idx = _pad_indices(n_pads)
        deg = max(max(m) for m in idx)
        tables = [_legendre_table(v[:, j], deg) for j in range(3)]
        for k, (a, b, c) in enumerate(idx):
            y[:, 4 + k] = _PAD_SCALE * _PAD_DECAY**k * tables[0][a] * tables[1][b] * tables[2][c]
    return y


_CURVED_PARAMS = {"noise": Real(0)}


def _curved_block(rng, lo, hi, n_features, params):
    v = rng.uniform(-1.0, 1.0, size=(_GEN_BLOCK, 3))[lo:hi]
    y = _curved_noiseless(v, n_features)
    if params["noise"] > 0:
        y += params["noise"] * rng.standard_normal((_GEN_BLOCK, n_features))[lo:hi]
    return y, v * _CURVED_SCALE


_KINDS = {
    "helix": _Kind(
        "helix",
        "make_helix",
        3,
        {"a": 2.0, "b": 0.8, "noise": 0.1, "n_turns": 1.5},
        _HELIX_PARAMS,
        _helix_block,
        lambda n_features: n_features > 3,
    ),
    "curved": _Kind(
        "curved",
        "make_curved_manifold",
        4,
        {"noise": 0.05},
        _CURVED_PARAMS,
        _curved_block,
        lambda n_features: True,
    ),
}
_ALIASES = {
    "helix": "helix",
    "make_helix": "helix",
    "curved": "curved",
    "curved_manifold": "curved",
    "make_curved_manifold": "curved",
}


def _get_kind(kind, name="kind") -> _Kind:
    if not isinstance(kind, str) or kind not in _ALIASES:
        raise ValueError(f"{name} must be one of {sorted(set(_ALIASES))}, got {kind!r}")
    return _KINDS[_ALIASES[kind]]


def _prepare(kind, n_samples, n_features, params, kind_name="kind"):
    """Validate everything; return (_Kind, n_samples, n_features, params)."""
    spec = _get_kind(kind, kind_name)
    n_samples = check_param("n_samples", n_samples, Integer(1))
    n_features = check_param("n_features", n_features, Integer(spec.min_features))
    unknown = set(params) - set(spec.defaults)
    if unknown:
        raise TypeError(
            f"unexpected parameter(s) {sorted(unknown)} for kind {spec.name!r}; "
            f"allowed: {sorted(spec.defaults)}"
        )
    full = dict(spec.defaults)
    full.update(params)
    return spec, n_samples, n_features, check_params(spec.params, full)


def _rows(spec, start, stop, n_features, seed, params, want_extra=False):
    """Rows [start, stop) of the data set (float64), plus the extra array."""
    n = stop - start
    out = np.empty((n, n_features))
    extras = [] if want_extra else None
    first, last = start // _GEN_BLOCK, (stop - 1) // _GEN_BLOCK
    for b in range(first, last + 1):
        b0 = b * _GEN_BLOCK
        lo, hi = max(start, b0) - b0, min(stop, b0 + _GEN_BLOCK) - b0
        y, extra = spec.block(_block_rng(seed, b), lo, hi, n_features, params)
        out[b0 + lo - start : b0 + hi - start] = y
        if want_extra:
            extras.append(extra)
    if spec.rotate(n_features):
        out = out @ _rotation_cached(seed, n_features).T
    if want_extra:
        return out, np.concatenate(extras)
    return out


# --------------------------------------------------------------------------
# public numpy generators
# --------------------------------------------------------------------------


def make_helix(
    n_samples=1000,
    a=2.0,
    b=0.8,
    noise=0.1,
    n_turns=1.5,
    n_features=3,
    random_state=None,
    return_t=False,
):
    """Noisy helix, a one-dimensional curved manifold.

    Points are ``(a cos t, a sin t, b t)`` with ``t ~ Uniform[0, 2 pi n_turns)``,
    plus independent Gaussian noise of standard deviation ``noise`` in every
    one of the ``n_features`` coordinates.  If ``n_features > 3`` the helix
    is padded with zero coordinates, the noise is added, and the result is
    rotated by :func:`rotation_matrix` ``(n_features, random_state)``:
    ``X = Y @ Q.T``.  With ``n_features == 3`` there is no rotation.

    The default 1.5 turns is chosen so that the projection of the noiseless
    helix on its first principal axis is strictly monotone in ``t`` (so the
    curve is a graph over that axis, which is what PPA needs), while still
    being a genuine helix (eigenvalues about 4.8, 2.0, 1.8 for the defaults).
    A polynomial of degree 5 in that projection leaves about 4% of the
    noiseless variance unexplained, degree 7 about 1% (PCA with one
    component: about 44%).  Between about 0.6 and 1.25 turns the projection
    folds back and a single polynomial cannot follow the curve.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of rows, >= 1.
    a : float, default=2.0
        Radius, > 0.
    b : float, default=0.8
        Rise per radian of ``t`` (any finite value; 0 gives a circle arc).
    noise : float, default=0.1
        Standard deviation of the Gaussian noise, >= 0.
    n_turns : float, default=1.5
        Number of turns, > 0: ``t`` ranges over ``[0, 2 pi n_turns)``.
    n_features : int, default=3
        Output dimension, >= 3.
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
        Seed.  See the module docstring for the chunk-independent scheme.
    return_t : bool, default=False
        Also return the curve parameter ``t`` of every row.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    t : ndarray of shape (n_samples,), float64
        Only if ``return_t``.

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask.datasets import make_helix
    >>> X, t = make_helix(200, noise=0.0, random_state=0, return_t=True)
    >>> X.shape
    (200, 3)
    >>> bool(np.allclose(X[:, 0] ** 2 + X[:, 1] ** 2, 4.0))
    True
    >>> bool(np.allclose(X[:, 2], 0.8 * t))
    True
    """
    spec, n_samples, n_features, params = _prepare(
        "helix", n_samples, n_features, {"a": a, "b": b, "noise": noise, "n_turns": n_turns}
    )
    seed = resolve_seed(random_state)
    X, t = _rows(spec, 0, n_samples, n_features, seed, params, want_extra=True)
    return (X, t) if return_t else X


def make_curved_manifold(
    n_samples=1000, n_features=10, noise=0.05, random_state=None, return_latent=False
):
    """Three-dimensional curved manifold in ``n_features`` dimensions.

    The main demo data set: PPA explains it much better than PCA with the
    same number of components.  With ``v ~ Uniform(-1, 1)^3`` and latent
    ``u = (2 v1, 1.2 v2, 0.6 v3)``, the unrotated coordinates are::

        y0 = u1
        y1 = 0.6 u1**2 + u2
        y2 = 0.8 u2**2 + 0.15 u1 u2 + u3
        y3 = 0.45 cos(pi v2) + 0.2 sin(pi v1)          (a curved piece)
        y(4+k) = 0.2 * 0.8**k * L_k(v),   k = 0 .. n_features - 5

    where ``L_k`` are products of normalised Legendre polynomials
    ``sqrt((2a+1)(2b+1)(2c+1)) P_a(v1) P_b(v2) P_c(v3)`` (unit variance),
    chosen orthogonal to ``y0..y3`` and to each other: first ``P_2(v3)``,
    ``P_3(v2)``, ``P_4(v1)``, ``P_3(v3)`` (smooth functions of one latent,
    which PPA's one-dimensional polynomial steps can capture), then
    ``P_1(v1) P_1(v3)``, ``P_1(v2) P_1(v3)`` and further products by total
    degree.  Independent Gaussian noise of
    standard deviation ``noise`` is added to every coordinate, and the result
    is rotated: ``X = Y @ Q.T`` with ``Q = rotation_matrix(n_features,
    random_state)``.

    Covariance spectrum.  The population covariance is block diagonal
    before the rotation: the 4x4 block of ``y0..y3`` has eigenvalues of
    about 1.347, 0.992, 0.307 and 0.053, and padding coordinate ``k`` has
    variance exactly ``0.04 * 0.64**k``; ``noise**2`` is added to all.
    Hence the eigenvalues are distinct (no ties): with the default noise,
    consecutive eigenvalues differ by at least 23% for ``n_features <= 12``
    and 5% for ``n_features <= 16``; for larger ``n_features`` the trailing
    padding variances fall far below ``noise**2`` and those eigenvalues,
    though distinct, crowd just above it.
    :func:`curved_manifold_eigenvalues` computes the spectrum.

    PPA vs PCA (default noise, 10 features).  Fraction of variance left
    unexplained with 1, 2, 3 components: PCA about 52%, 17%, 6.2%;
    sequential one-dimensional polynomial fits of degree 4 (the PPA scheme)
    about 34%, 8.3%, 2.4%.  The noise floor is about 1%.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of rows, >= 1.
    n_features : int, default=10
        Output dimension, >= 4.
    noise : float, default=0.05
        Standard deviation of the Gaussian noise, >= 0.
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
        Seed.  See the module docstring for the chunk-independent scheme.
    return_latent : bool, default=False
        Also return the latent ``u`` (n_samples, 3).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    u : ndarray of shape (n_samples, 3), float64
        Only if ``return_latent``.

    Examples
    --------
    >>> from ppa_dask.datasets import make_curved_manifold
    >>> X = make_curved_manifold(1000, n_features=10, random_state=0)
    >>> X.shape
    (1000, 10)
    >>> bool((X == make_curved_manifold(5000, random_state=0)[:1000]).all())
    True
    """
    spec, n_samples, n_features, params = _prepare(
        "curved", n_samples, n_features, {"noise": noise}
    )
    seed = resolve_seed(random_state)
    X, u = _rows(spec, 0, n_samples, n_features, seed, params, want_extra=True)
    return (X, u) if return_latent else X


@functools.lru_cache(maxsize=1)
def _curved_main_cov() -> np.ndarray:
    # Gauss-Legendre product rule on [-1, 1]^3 (uniform density 1/8); the
    # polynomial entries are exact, the trigonometric ones accurate to ~1e-15.
    x, w = np.polynomial.legendre.leggauss(40)
    w = w / 2.0
    g = np.stack(np.meshgrid(x, x, x, indexing="ij"), axis=-1).reshape(-1, 3)
    wt = np.einsum("i,j,k->ijk", w, w, w).reshape(-1)
    c = _curved_main(g)
    mean = wt @ c
    d = c - mean
    return (d * wt[:, None]).T @ d


def curved_manifold_eigenvalues(n_features=10, noise=0.05):
    """Population covariance eigenvalues of :func:`make_curved_manifold`.

    Parameters
    ----------
    n_features : int, default=10
        Dimension, >= 4.
    noise : float, default=0.05
        Noise standard deviation, >= 0.

    Returns
    -------
    eigenvalues : ndarray of shape (n_features,)
        In decreasing order.

    Examples
    --------
    >>> from ppa_dask.datasets import curved_manifold_eigenvalues
    >>> curved_manifold_eigenvalues(6, noise=0.0).round(3)
    array([1.347, 0.992, 0.307, 0.053, 0.04 , 0.026])
    """
    _, _, n_features, params = _prepare("curved", 1, n_features, {"noise": noise})
    main = np.linalg.eigvalsh(_curved_main_cov())
    pads = _PAD_SCALE**2 * (_PAD_DECAY**2) ** np.arange(n_features - 4)
    ev = np.concatenate([main, pads]) + params["noise"] ** 2
    return np.sort(ev)[::-1]


def generate_rows(kind, start, stop, n_features=10, random_state=None, **params):
    """Rows ``[start, stop)`` of a generated data set.

    Exactly equal to ``make_<kind>(n, ...)[start:stop]`` for any
    ``n >= stop`` with the same seed, parameters and ``n_features``; only
    the generation blocks that overlap ``[start, stop)`` are drawn.

    Parameters
    ----------
    kind : {'curved', 'helix'}
        Generator (aliases ``'make_curved_manifold'``, ``'make_helix'``).
    start, stop : int
        Row range, ``0 <= start < stop``.
    n_features : int, default=10
        Output dimension (>= 4 for 'curved', >= 3 for 'helix').
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
        Seed.  ``None`` gives a fresh seed, so separate calls do not fit
        together; pass an int when assembling a data set from pieces.
    **params
        Generator parameters: ``noise`` for 'curved'; ``a``, ``b``,
        ``noise``, ``n_turns`` for 'helix'.  Defaults as in the generators.

    Returns
    -------
    X : ndarray of shape (stop - start, n_features), float64

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask.datasets import generate_rows, make_curved_manifold
    >>> part = generate_rows("curved", 100, 200, n_features=5, random_state=1)
    >>> full = make_curved_manifold(300, n_features=5, random_state=1)
    >>> bool(np.array_equal(part, full[100:200]))
    True
    """
    start = check_param("start", start, Integer(0))
    stop = check_param("stop", stop, Integer(start + 1))
    spec, _, n_features, params = _prepare(kind, stop, n_features, params)
    seed = resolve_seed(random_state)
    return _rows(spec, start, stop, n_features, seed, params)


def make_demo_blocks(
    n_samples, n_features=10, random_state=None, kind="curved", block_rows=None, **params
) -> Iterator[np.ndarray]:
    """Iterate over a generated data set in consecutive row blocks.

    Handy for feeding an in-process streaming fit, or for writing a data set
    that does not fit in memory, without Dask.  Concatenating the blocks
    gives exactly the array the corresponding generator returns.  The seed
    is resolved once, when this function is called.

    Parameters
    ----------
    n_samples : int
        Total number of rows, >= 1.
    n_features : int, default=10
        Output dimension.
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
        Seed.
    kind : {'curved', 'helix'}, default='curved'
        Generator.
    block_rows : int, optional
        Rows per yielded block (the last one may be shorter).  Defaults to
        the generation block, 65536 rows, which is also the most efficient.
    **params
        Generator parameters (see :func:`generate_rows`).

    Yields
    ------
    block : ndarray of shape (<= block_rows, n_features), float64

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask.datasets import make_demo_blocks, make_curved_manifold
    >>> blocks = list(make_demo_blocks(1000, random_state=0, block_rows=300))
    >>> [len(b) for b in blocks]
    [300, 300, 300, 100]
    >>> bool(np.array_equal(np.vstack(blocks), make_curved_manifold(1000, random_state=0)))
    True
    """
    spec, n_samples, n_features, params = _prepare(kind, n_samples, n_features, params)
    block_rows = (
        _GEN_BLOCK if block_rows is None else check_param("block_rows", block_rows, Integer(1))
    )
    seed = resolve_seed(random_state)

    def _iter():
        for s in range(0, n_samples, block_rows):
            yield _rows(spec, s, min(s + block_rows, n_samples), n_features, seed, params)

    return _iter()


# --------------------------------------------------------------------------
# Dask and Zarr
# --------------------------------------------------------------------------


def _default_chunk_rows(n_features: int) -> int:
    """Default rows per chunk.

    Up to 16 features: the largest multiple of the generation block with at
    most 2**20 values (4-8 MiB of float64; 65536 rows for 10 features).  Up
    to 128 features: one generation block (<= 64 MiB).  Wider: a power-of-two
    fraction of a block with at most 2**23 values (<= 64 MiB).
    """
    per_block = _GEN_BLOCK * n_features
    if per_block <= 2**20:
        return _GEN_BLOCK * (2**20 // per_block)
    if per_block <= 2**23:
        return _GEN_BLOCK
    rows = _GEN_BLOCK
    while rows > 1 and rows * n_features > 2**23:
        rows //= 2
    return rows


def _chunk_from_info(kind_name, n_features, seed, params, dtype, block_info=None):
    (r0, r1), (c0, c1) = block_info[None]["array-location"]
    x = _rows(_KINDS[kind_name], r0, r1, n_features, seed, params)
    if (c0, c1) != (0, n_features):
        x = x[:, c0:c1]
    return x.astype(dtype, copy=False)


def generated_dask_array(
    generator_name,
    n_samples,
    n_features=10,
    chunks=None,
    random_state=None,
    dtype="float64",
    **params,
):
    """Lazy Dask array whose chunks are generated on the workers.

    Each chunk computes its own rows with :func:`generate_rows` from the
    seed, so the graph is tiny, nothing passes through the client's memory,
    and the values do not depend on ``chunks``: the result equals the
    corresponding NumPy generator's output for any chunking.

    Parameters
    ----------
    generator_name : {'curved', 'helix'}
        Generator (aliases ``'make_curved_manifold'``, ``'make_helix'``).
    n_samples : int
        Number of rows, >= 1.
    n_features : int, default=10
        Output dimension.
    chunks : int, tuple or None
        An int is the number of rows per chunk, with all features in one
        chunk; anything else is passed to :func:`dask.array.core.normalize_chunks`
        with the array's shape.  ``None`` (default) uses multiples of the
        65536-row generation block (65536 rows for 10 features).  Chunk
        boundaries that are not multiples of 65536 cost some repeated
        generation work but give the same values.
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
        Seed.  ``None`` draws one seed now, shared by all chunks.
    dtype : str or numpy.dtype, default='float64'
        Output dtype; values are generated in float64 and cast.
    **params
        Generator parameters (see :func:`generate_rows`).

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features)

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask.datasets import generated_dask_array, make_helix
    >>> X = generated_dask_array("helix", 1000, 3, chunks=300, random_state=0)
    >>> X.chunks[0]
    (300, 300, 300, 100)
    >>> bool(np.array_equal(X.compute(), make_helix(1000, random_state=0)))
    True
    """
    import dask.array as da
    from dask.array.core import normalize_chunks
    from dask.base import tokenize

    spec, n_samples, n_features, params = _prepare(
        generator_name, n_samples, n_features, params, kind_name="generator_name"
    )
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise ValueError(f"dtype must be a floating-point dtype, got {dtype}")
    seed = resolve_seed(random_state)
    shape = (n_samples, n_features)
    if chunks is None:
        chunks = (min(_default_chunk_rows(n_features), n_samples), n_features)
    elif isinstance(chunks, numbers.Integral) and not isinstance(chunks, bool):
        chunks = (check_param("chunks", chunks, Integer(1)), n_features)
    try:
        chunks = normalize_chunks(chunks, shape=shape, dtype=dtype)
    except Exception as exc:
        raise ValueError(f"invalid chunks {chunks!r}: {exc}") from exc
    name = f"generated-{spec.name}-" + tokenize(
        spec.name, n_samples, n_features, chunks, seed, sorted(params.items()), dtype.str
    )
    return da.map_blocks(
        _chunk_from_info,
        spec.name,
        n_features,
        seed,
        params,
        dtype,
        chunks=chunks,
        dtype=dtype,
        meta=np.empty((0, 0), dtype=dtype),
        name=name,
    )


def _looks_like_zarr(path: str) -> bool:
    if os.path.isfile(path):
        return False
    names = set(os.listdir(path))
    return not names or bool(names & {"zarr.json", ".zarray", ".zgroup"})


def write_zarr(
    path,
    n_samples,
    n_features=10,
    kind="curved",
    chunk_rows=None,
    random_state=None,
    overwrite=False,
    dtype="float64",
    **params,
) -> str:
    """Generate a data set and write it to a local Zarr v3 array.

    The data are produced chunk by chunk by :func:`generated_dask_array` and
    stored with :func:`dask.array.store` (one Dask task per Zarr chunk, no
    locks), so memory use is a few chunks per worker thread whatever
    ``n_samples`` is, and the work runs on the current ``distributed.Client``
    if one exists (otherwise on Dask's default scheduler).  The workers must
    see the same file system as the caller.

    The array is written by :func:`ppa_dask.store.write_array` to a hidden
    temporary sibling, ``<parent>/.<name>.tmp-<random>``, its completion marker
    set once every chunk is stored, and renamed to ``path`` only then, so an
    interrupted write never leaves a store at ``path``; on error the temporary
    directory is removed.  :func:`ppa_dask.store.open_array` and
    :func:`ppa_dask.store.open_input` both open the result.

    The array's attributes hold, under the key ``"ppa_dask.datasets"``, a
    JSON record: ``generator`` (function name), ``kind``, ``params`` (all
    generator parameters, defaults filled in), ``random_state`` (the integer
    seed actually used, also when ``None`` was passed), ``n_samples``,
    ``n_features``, ``dtype``, ``gen_block`` (65536) and ``rotation``
    (how the rotation is drawn).

    Parameters
    ----------
    path : str or os.PathLike
        Destination directory (a local path).  Parent directories are created.
    n_samples : int
        Number of rows, >= 1.
    n_features : int, default=10
        Output dimension (>= 4 for 'curved', >= 3 for 'helix').
    kind : {'curved', 'helix'}, default='curved'
        Generator.
    chunk_rows : int, optional
        Rows per Zarr chunk; all features are in one chunk.  Default: a
        multiple of the 65536-row generation block giving 4-8 MiB float64
        chunks for narrow data (65536 rows for 10 features).
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
        Seed; ``None`` draws one and records it in the attributes.
    overwrite : bool, default=False
        Replace an existing store at ``path``.  Without it an existing
        ``path`` raises ValueError.  Even with it, a non-empty directory that
        does not look like a Zarr store is never deleted.
    dtype : {'float64', 'float32'}, default='float64'
        Stored dtype (values are generated in float64).
    **params
        Generator parameters (see :func:`generate_rows`).

    Returns
    -------
    path : str
        Absolute path of the written array.

    Examples
    --------
    >>> import os, tempfile, zarr
    >>> from ppa_dask.datasets import write_zarr
    >>> d = tempfile.mkdtemp()
    >>> p = write_zarr(os.path.join(d, "curved.zarr"), 1000, random_state=0)
    >>> z = zarr.open_array(p, mode="r")
    >>> z.shape, z.chunks
    ((1000, 10), (1000, 10))
    >>> z.attrs["ppa_dask.datasets"]["random_state"]
    0
    """
    spec, n_samples, n_features, full_params = _prepare(kind, n_samples, n_features, params)
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype("float64"), np.dtype("float32")):
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype}")
    if chunk_rows is None:
        chunk_rows = _default_chunk_rows(n_features)
    else:
        chunk_rows = check_param("chunk_rows", chunk_rows, Integer(1))
    chunk_rows = min(chunk_rows, n_samples)
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a str or os.PathLike, got {path!r}")
    path = os.path.abspath(os.fspath(path))
    parent, base = os.path.split(path)
    if not base:
        raise ValueError(f"path {path!r} has no final component")
    if os.path.lexists(path):
        if not overwrite:
            raise ValueError(f"path {path!r} already exists; pass overwrite=True to replace it")
        if not _looks_like_zarr(path):
            raise ValueError(
                f"path {path!r} exists and does not look like a Zarr store; "
                "refusing to replace it even with overwrite=True"
            )
    seed = resolve_seed(random_state)

    attrs = {
        "generator": spec.func_name,
        "kind": spec.name,
        "params": full_params,
        "random_state": seed,
        "n_samples": n_samples,
        "n_features": n_features,
        "dtype": dtype.name,
        "gen_block": _GEN_BLOCK,
        "rotation": (
            "X = Y @ Q.T, Q = rotation_matrix(n_features, random_state)"
            if spec.rotate(n_features)
            else "none"
        ),
    }
    json.dumps(attrs)  # fail early if anything is not JSON-serialisable

    os.makedirs(parent, exist_ok=True)
    x = generated_dask_array(
        spec.name,
        n_samples,
        n_features,
        chunks=chunk_rows,
        random_state=seed,
        dtype=dtype,
        **full_params,
    )
    # store.write_array stores the chunks (Zarr chunks = Dask chunks, no locks) and sets the
    # completion marker store.open_array looks for; it writes to a fresh hidden sibling here
    # and this function swaps it in, because overwrite=True may replace any Zarr store (also
    # one written before the marker existed), which write_array itself never does.
    tmp = temp_sibling(path)
    try:
        write_array(x, tmp, attrs={"ppa_dask.datasets": attrs})
        if os.path.lexists(path):
            if not overwrite:  # appeared while we were writing
                raise ValueError(
                    f"path {path!r} already exists; pass overwrite=True to replace it"
                )
            old = temp_sibling(path, "old")
            os.rename(path, old)
            os.rename(tmp, path)
            remove_path(old)
        else:
            os.rename(tmp, path)
    except BaseException:
        remove_path(tmp)
        raise
    return path
