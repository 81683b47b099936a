"""Per-block kernels of Principal Polynomial Analysis.

Every function here takes a block of rows (samples) and small parameter arrays and returns new
arrays (a pass may update a residual it is told it owns). The in-memory driver loops them over
slices of a numpy array, the Dask driver maps them over chunks. The per-row mathematics (the
Chebyshev basis with its continuation, a step's update and its inverse, a step pass's moments)
is written once, compiled, in :mod:`ppa_dask.ppa.fused`; the functions here arrange it per block.
A grouped pass of the Dask driver runs :func:`group_pass_kernel`: many blocks side by side in one
compiled call, each block's moments a row of stacked arrays, bit for bit its own
(docs/design.md section 3.11).

Notation (docs/design.md section 2, kept in the ambient ``d``-dimensional frame of section 3.3):

* ``Y`` is the residual after ``p - 1`` steps; the kernels keep residual blocks feature-major,
  shape ``(d, n)``, so every product is a long one (25-30 % faster here than ``(n, d)``).
* A step holds the leading vector ``e`` (``d``), the regression coefficients ``U`` (``d x (g+1)``,
  already rotated into the ambient frame, ``U = E W``), the affine map to the basis coordinate
  ``t = (alpha - offset) / scale`` and the training range ``[lo, hi]`` of ``t``.
* ``alpha = Y e`` and ``Y_next = Y - alpha e^T - v(t) U^T``.

The polynomial basis is the Chebyshev family on ``t``; ``offset`` and ``scale`` map the range of
``alpha`` (estimated before the pass from a fixed row sample) onto about ``[-1, 1]``, where the
basis is well conditioned for any distribution of ``alpha`` (Hermite polynomials, orthogonal for
Gaussian data, are badly conditioned on compact ones such as a helix's). The basis is continued
linearly (C1) outside the training range, which keeps ``det J = 1`` and the closed-form inverse
while ``transform`` of far-away points stays finite.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import numpy as np

from ppa_dask.ppa import fused as _fused

__all__ = [
    "StepParams",
    "ModelParams",
    "StepSpec",
    "chebyshev_basis",
    "row_hash",
    "basis_with_extension",
    "fold_labels",
    "first_moments",
    "combine_first_moments",
    "step_moments",
    "combine_step_moments",
    "step_forward",
    "step_inverse",
    "centred_block",
    "written_over",
    "pass_kernel",
    "side_by_side",
    "group_pass_kernel",
    "fold_step_stacks",
    "step_moments_of_stack",
    "stack_moments",
    "fold_first_stacks",
    "first_moments_of_stack",
    "fold_objective_stacks",
    "objective_moments_of_stack",
    "transform_block",
    "inverse_block",
    "jacobian_block",
    "residual_norms_block",
    "objective_moments",
    "combine_objective_moments",
    "objective_pass_kernel",
]


class StepParams(NamedTuple):
    """Fitted parameters of one PPA step (small arrays; cheap to ship to workers)."""

    direction: np.ndarray  # (d,) leading vector e_p in the ambient frame
    coef: np.ndarray  # (d, g+1) ambient regression coefficients U_p = E_p W_p
    offset: float  # basis coordinate t = (alpha - offset) / scale
    scale: float
    lo: float  # training range of t; the basis is continued linearly outside it
    hi: float

    def coordinate(self, alpha):
        return (alpha - self.offset) / self.scale


class ModelParams(NamedTuple):
    """Everything the block kernels need to apply a fitted model."""

    mean: np.ndarray  # (d,)
    steps: tuple  # of StepParams
    residual_basis: np.ndarray  # (d, d - k) orthonormal basis of the residual after k steps
    output_scale: np.ndarray | None  # divide outputs by this (whitening) or None


@dataclasses.dataclass(frozen=True)
class StepSpec:
    """The step being fitted, as a pass takes it: all known before the pass.

    The one bundle a step's parameters travel in, from the step loop
    (:mod:`ppa_dask.ppa.steps`) through the drivers to the block kernels (:func:`pass_kernel`,
    :func:`objective_pass_kernel`) and the compiled sweep
    (:func:`ppa_dask.ppa.fused.fused_step_pass`, which unpacks it for the compiled call).

    Attributes
    ----------
    direction : ndarray of shape (f,)
        The leading vector ``e`` (in the frame of the residual the pass reads).
    offset, scale : float
        The basis coordinate ``t = (alpha - offset) / scale``.
    max_degree : int
        The largest candidate degree (a step pass), or the degree (a PPA-GD objective pass).
    seed, n_folds : int
        The fold assignment of the cross-validation (:func:`fold_labels`); one fold: none.
    subspace : ndarray of shape (d, m) or None
        Orthonormal basis of the subspace the residual lies in (the drivers may re-express a
        kept residual in it); the kernels do not read it.
    ahead : tuple of (direction, offset, scale)
        Steps gathered ahead: their moments are taken in the same pass on the hypothesis that
        the steps before each of them are linear (:func:`ppa_dask.ppa.algebra.linear_lookahead`),
        returned as ``moments["ahead"]``.

    Examples
    --------
    >>> spec = StepSpec(np.array([1.0, 0.0]), 0.0, 2.0, 3, seed=7, n_folds=2)
    >>> spec.in_frame(lambda v: v[:1]).direction.shape
    (1,)
    """

    direction: np.ndarray
    offset: float
    scale: float
    max_degree: int
    seed: int = 0
    n_folds: int = 1
    subspace: np.ndarray | None = None
    ahead: tuple = ()

    def in_frame(self, into):
        """The spec a kernel takes: the vectors mapped by ``into`` (a residual frame's
        coordinates, :meth:`ppa_dask.ppa.drivers.ResidualFrame.into`) and no ``subspace``
        (which the kernels do not read, so it is not shipped with every task)."""
        return dataclasses.replace(
            self,
            direction=into(self.direction),
            subspace=None,
            ahead=tuple((into(d), o, s) for d, o, s in self.ahead),
        )


# --------------------------------------------------------------------------------------------
# polynomial basis
# --------------------------------------------------------------------------------------------


def _chebyshev_rows(s, degree, derivatives, out=None):
    """Chebyshev values and derivatives as contiguous rows: shape (derivatives+1, degree+1, n)
    (the compiled recurrence of :mod:`ppa_dask.ppa.fused`, shared with the fit's passes)."""
    return _fused.chebyshev_rows(s, degree, derivatives, out=out)


def chebyshev_basis(s, degree, derivatives=1):
    """Chebyshev polynomials ``T_0 .. T_degree`` of ``s`` and their derivatives.

    Parameters
    ----------
    s : ndarray of shape (n,)
    degree : int
    derivatives : int
        How many derivatives (with respect to ``s``) to return beside the values.

    Returns
    -------
    list of ndarray of shape (n, degree + 1)
        ``[V, V', V'', ...]`` with ``V[:, j] = T_j(s)``.

    Examples
    --------
    >>> import numpy as np
    >>> V, D = chebyshev_basis(np.array([0.0, 0.5]), 2)
    >>> V.tolist(), D.tolist()
    ([[1.0, 0.0, -1.0], [1.0, 0.5, -0.5]], [[0.0, 1.0, 0.0], [0.0, 1.0, 2.0]])
    """
    rows = _chebyshev_rows(np.asarray(s, dtype=np.float64), degree, derivatives)
    return [r.T for r in rows]


def extended_rows(t, degree, lo, hi, derivatives=0, out=None):
    """Rows ``(derivatives+1, degree+1, n)`` of the basis continued linearly outside [lo, hi]."""
    return _fused.chebyshev_rows(t, degree, derivatives, lo, hi, out=out)


def basis_with_extension(t, degree, lo, hi, derivatives=0):
    """Chebyshev basis continued as a C1 straight line outside ``[lo, hi]``.

    Inside the training range this is :func:`chebyshev_basis`. Outside, each basis function is its
    tangent at the nearest end of the range, so values grow linearly (no overflow) and the first
    derivative is continuous. Higher derivatives are zero outside the range.

    Returns ``V`` (shape ``(n, degree + 1)``) alone when ``derivatives == 0``, else the list
    ``[V, V', ...]``.
    """
    rows = extended_rows(np.asarray(t, dtype=np.float64), degree, lo, hi, derivatives)
    return rows[0].T if derivatives == 0 else [r.T for r in rows]


# --------------------------------------------------------------------------------------------
# fold membership: a function of (seed, global row index) only
# --------------------------------------------------------------------------------------------

# row_hash (SplitMix64 of the seed and the global row index) lives in the compiled module, which
# also hashes folds inside the fused pass; this is the same function for everything else
row_hash = _fused.row_hash


def fold_labels(start, stop, seed, n_folds):
    """Cross-validation fold of global rows ``start .. stop-1``.

    The label of a row depends on nothing but ``seed`` and its global index, so folds (and so the
    fitted model) do not change with chunking or the number of workers.

    Examples
    --------
    >>> a = fold_labels(0, 10, seed=3, n_folds=2)
    >>> b = np.concatenate([fold_labels(0, 4, 3, 2), fold_labels(4, 10, 3, 2)])
    >>> bool((a == b).all())
    True
    """
    return (row_hash(start, stop, seed) % np.uint64(n_folds)).astype(np.intp)


# --------------------------------------------------------------------------------------------
# moments
# --------------------------------------------------------------------------------------------


def first_moments(X, sample_rows=None):
    """Count, mean, centred scatter, non-finite counts and chosen rows of a block.

    ``sample_rows`` (block-local indices of a row sample fixed on the client from the seed and
    the row count) are returned with their values, so the client can estimate the range of each
    step's ``alpha`` before that step's pass. Merge the dicts with :func:`combine_first_moments`
    (Chan's parallel update).
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    if sample_rows is None:
        sample_rows = np.empty(0, dtype=np.intp)
    out = dict(
        n=n, sample=X[sample_rows], n_nan=np.zeros(d, np.int64), n_inf=np.zeros(d, np.int64)
    )
    if n == 0:
        return dict(out, mean=np.zeros(d), scatter=np.zeros((d, d)))
    with np.errstate(over="ignore", invalid="ignore"):
        mean, scatter = _fused.centred_moments(np.ascontiguousarray(X))
    if not (np.isfinite(mean).all() and np.isfinite(scatter).all()):
        # rare path: count what is wrong; the fit refuses these data
        out["n_nan"] = np.isnan(X).sum(axis=0)
        out["n_inf"] = np.isinf(X).sum(axis=0)
        if not (out["n_nan"].any() or out["n_inf"].any()):
            with np.errstate(over="ignore", invalid="ignore"):
                Xc = X - mean
                out["n_inf"] = (~np.isfinite(Xc * Xc)).sum(axis=0)  # finite, squares overflow
        return dict(out, mean=np.zeros(d), scatter=np.zeros((d, d)))
    return dict(out, mean=mean, scatter=scatter)


def combine_first_moments(parts):
    """Merge a list of :func:`first_moments` dicts: Chan et al.'s pairwise update, written once,
    in :func:`fold_first_stacks` (here on stacks of one row), the samples concatenated."""
    parts = list(parts)
    out = parts[0]
    for other in parts[1:]:
        a, b = ({key: np.asarray(p[key])[None] for key in FIRST_KEYS} for p in (out, other))
        merged = fold_first_stacks(a, b)
        sample = np.concatenate([out["sample"], other["sample"]])
        out = {key: merged[key][0] for key in FIRST_KEYS}
        out["n"], out["sample"] = int(out["n"]), sample
    return out


@functools.lru_cache(maxsize=64)
def _product_indices(degree):
    i, j = np.indices((degree + 1, degree + 1))
    return i + j, np.abs(i - j)


def gram_from_sums(sums, degree):
    """``sum v v^T`` from ``sums[k] = sum T_k``, k <= 2 degree: ``T_i T_j = (T_{i+j} + T_{|i-j|})/2``.

    Replaces a (g+1) x n x (g+1) product by a few more rows of the recurrence and row sums.
    """
    plus, minus = _product_indices(degree)
    return (sums[..., plus] + sums[..., minus]) / 2


def _moments_dict(sums, yv, zz, counts, tmin, tmax, degree):
    return dict(n=counts, vv=gram_from_sums(sums, degree), yv=yv, zz=zz, tmin=tmin, tmax=tmax)


def step_moments(Yt, start, spec):
    """Moments of one residual block for the regression of a PPA step, per fold.

    ``Yt`` is the residual block in feature-major layout ``(d, n)`` (see :func:`centred_block`),
    ``spec`` the step (:class:`StepSpec`; its ``ahead`` is not read).
    With ``alpha = e^T y``, ``t = (alpha - offset) / scale`` and ``v = T(t)`` (Chebyshev up to
    ``max_degree``, the largest candidate) it returns, for each fold ``f`` (one fold when
    ``n_folds == 1``)::

        n[f]   rows in the fold
        vv[f]  sum v v^T                 (g+1, g+1)
        yv[f]  sum y v^T                 (d, g+1)
        zz[f]  sum ||y||^2 - alpha^2     (squared norm of the part orthogonal to e; only
                                          computed for cross-validation, else 0)

    plus ``tmin``/``tmax``, the range of ``t``. Residuals are centred, so these raw sums are the
    shifted sums of a stable merge. The work is the compiled sweep of
    :func:`ppa_dask.ppa.fused.fused_step_pass` (with no step to apply).
    """
    Yt = np.ascontiguousarray(Yt, dtype=np.float64)
    spec = dataclasses.replace(spec, ahead=())
    return _moments_dict(*_fused.fused_step_pass(Yt, start, None, spec), spec.max_degree)


def _combine_sums(parts, summed):
    """Merge moment dicts: add the ``summed`` entries, keep the min/max of the range of t."""
    parts = list(parts)
    out = dict(parts[0])
    for other in parts[1:]:
        for key in summed:
            out[key] = out[key] + other[key]
        out["tmin"] = min(out["tmin"], other["tmin"])
        out["tmax"] = max(out["tmax"], other["tmax"])
    return out


def combine_step_moments(parts):
    """Merge a list of :func:`step_moments` dicts (sums, and min/max of the range); the
    moments of steps gathered ahead (``"ahead"``, a list of such dicts) are merged alike."""
    parts = list(parts)
    out = _combine_sums(parts, ("n", "vv", "yv", "zz"))
    if "ahead" in out:
        out["ahead"] = [
            _combine_sums([p["ahead"][j] for p in parts], ("n", "vv", "yv", "zz"))
            for j in range(len(out["ahead"]))
        ]
    return out


# --------------------------------------------------------------------------------------------
# applying steps (residual blocks are feature-major: shape (d, n), each row contiguous, which
# makes every product below a long, efficient one)
# --------------------------------------------------------------------------------------------


def centred_block(X, mean, out=None):
    """``(X - mean)^T`` as a feature-major ``(d, n)`` float64 array (one pass, one copy)."""
    X = np.asarray(X)
    if out is None:
        out = np.empty((X.shape[1], X.shape[0]))
    return np.subtract(X.T, mean[:, None], out=out)


def _owned_block(Yt):
    return np.ascontiguousarray(Yt, dtype=np.float64)


def step_forward(Yt, step, out=None):
    """Apply one fitted step to a feature-major residual block: returns ``(alpha, Yt_next)``.

    ``y_next = y - e alpha - U v(t)`` (the compiled update the fit's passes use). ``out`` may be
    ``Yt`` itself (an in-place update) or a view into a larger residual array.
    """
    Y = _owned_block(Yt)
    direct = out is not None and out.dtype == np.float64 and out.flags.c_contiguous
    target = out if direct else np.empty_like(Y)
    alpha = _fused.apply_step(Y, step, target)
    if out is not None and not direct:
        out[...] = target
        target = out
    return alpha, target


def step_inverse(Yt, alpha, step):
    """Undo one step: ``y = y_next + e alpha + U v(t)`` (feature-major, returns a new block)."""
    Y = _owned_block(Yt)
    out = np.empty_like(Y)
    _fused.apply_step(Y, step, out, alpha=alpha)
    return out


# rows per sub-block of a pass: a (d x rows) residual slice and its basis stay in L2 cache
SUB_BLOCK_ROWS = 8192


def written_over(X, rows):
    """The leading ``rows`` rows of the residual ``X`` ``(f, n)``, as the new residual of a
    pass that writes over its input, or None when ``X`` cannot take it (not float64 and
    C-contiguous, read-only, or fewer than ``rows`` rows).

    The sweep reads a chunk's columns before it writes them, so the new residual, in the same
    or a smaller frame, can go where the old one was: no new memory to fault in. A new array
    of a few hundred MB per pass is a fresh mapping whose pages the kernel zeroes, which cost
    a Dask fit on one worker 25-50 % of its time (docs/guide/performance.md). A smaller
    frame keeps the wider array's memory until the residual is released (Dask counts the
    view's ``nbytes``: less by at most the first residual's size).

    Examples
    --------
    >>> X = np.zeros((3, 4))
    >>> np.shares_memory(written_over(X, 2), X), written_over(X, 4)
    (True, None)
    """
    if X.dtype != np.float64 or not (X.flags.c_contiguous and X.flags.writeable):
        return None
    return X[:rows] if rows <= X.shape[0] else None


def pass_kernel(
    X,
    start,
    center,
    steps,
    spec,
    keep=True,
    in_place=False,
    sub_block=SUB_BLOCK_ROWS,
    rotation=None,
    columns=None,
):
    """One fused pass over a block: bring it to the current residual, then take step moments.

    With ``center`` (the mean) ``X`` is a source block ``(n, d)``, centred into a feature-major
    residual; without it ``X`` is already a residual ``(d, n)``. ``steps`` (the fitted steps not
    yet applied to it) bring it to the residual of the step being fitted, ``spec``
    (:class:`StepSpec`, its vectors in the frame of the moments), and the moments of
    :func:`step_moments` are taken on that.

    A float64 C-contiguous block is one compiled sweep
    (:func:`ppa_dask.ppa.fused.fused_step_pass`: centring, every pending step, the change of
    frame and the moments together, chunk by chunk in cache: after steps gathered ahead a pass
    applies up to ``lookahead + 1`` of them, each one a few products per row instead of a sweep
    over memory). Other input (float32, non-contiguous) is converted ``sub_block`` rows at a
    time and each slice swept alike.

    Returns ``(residual, moments)``; ``residual`` is None unless ``keep``. ``in_place`` lets a
    residual input be overwritten (:func:`written_over`: the in-memory driver owns its
    residual, and so does a Dask pass over a checkpoint file it read; source blocks are never
    modified); with a ``rotation`` the new residual is then the leading rows of ``X``.
    ``rotation`` (f, m), when given, re-expresses the updated residual in a smaller orthonormal
    frame (``z = Q^T y``) before the moments are taken; ``spec.direction`` is then given in that
    frame, and so are the cross moments returned.

    ``spec.ahead``, a sequence of ``(direction, offset, scale)`` (in the frame of the moments,
    orthonormal to ``spec.direction`` and to each other), asks for the moments of the steps after
    this one too, on the hypothesis that this step and those before each of them are linear
    (:func:`ppa_dask.ppa.algebra.linear_lookahead`): they are taken on the same residual in the same sweep and
    returned, a list of dicts like the step's own, as ``moments["ahead"]``. Their ``zz`` is
    already orthogonal to every earlier direction; their cross moments are not (the client
    projects them, :func:`ppa_dask.ppa.algebra.deflate_ahead`).

    ``columns`` (with ``center``) makes the samples those columns of ``X``, in that order, read
    where they are (the shared scans of many members give each one its features this way).
    """
    ahead, degree = spec.ahead, spec.max_degree
    if center is not None:
        n, d = X.shape
        d = d if columns is None else len(columns)
    else:
        d, n = X.shape
        columns = None
    rows_out = d if rotation is None else rotation.shape[1]
    if X.dtype == np.float64 and X.flags.c_contiguous:
        residual = written_over(X, rows_out) if keep and in_place and center is None else None
        if keep and residual is None:
            residual = np.empty((rows_out, n))
        parts = _fused.fused_step_pass(
            X, start, steps, spec, out=residual, rotation=rotation, center=center, columns=columns
        )
        return residual, _pass_moments(parts, degree, ahead)
    residual = np.empty((rows_out, n)) if keep else None
    total = None
    for a in range(0, max(n, 1), sub_block):
        b = min(n, a + sub_block)
        block = X[a:b] if center is not None else X[:, a:b]
        part = _fused.fused_step_pass(
            np.ascontiguousarray(block, dtype=np.float64),
            start + a,
            steps,
            spec,
            out=residual,
            out_offset=a,
            rotation=rotation,
            center=center,
            columns=columns,
        )
        part = part if ahead else [part]
        if total is None:
            total = [list(p) for p in part]
        else:
            for acc, p in zip(total, part):
                for i in range(4):
                    acc[i] = acc[i] + p[i]
                acc[4], acc[5] = min(acc[4], p[4]), max(acc[5], p[5])
    return residual, _pass_moments(total if ahead else total[0], degree, ahead)


# --------------------------------------------------------------------------------------------
# a group of blocks in one compiled call (grouped passes, docs/design.md section 3.11): the
# blocks side by side, each block's moments one row of stacked arrays ("a stack"), merged in the
# tree of global block indices by utils.compute.stacked_tree with the folds below, which do
# row by row what the combine_* functions do per dict
# --------------------------------------------------------------------------------------------


def side_by_side(blocks, samples):
    """Blocks as one float64 C-contiguous array for :func:`group_pass_kernel`: blocks of
    samples ``(n_i, d)`` (``samples``) stacked along rows, residual blocks ``(f, n_i)`` along
    columns. Returns ``(X, sizes, whole)``: ``whole[i]`` says whether block ``i`` was float64
    and C-contiguous (:func:`pass_kernel` sweeps such a block in one go, others a sub-block at
    a time). A single such block is not copied.

    Examples
    --------
    >>> X, sizes, whole = side_by_side([np.ones((2, 3)), np.ones((4, 3), np.float32)], True)
    >>> X.shape, sizes, whole
    ((6, 3), [2, 4], [True, False])
    """
    axis = 0 if samples else 1
    blocks = [np.asarray(b) for b in blocks]
    sizes = [int(b.shape[axis]) for b in blocks]
    whole = [bool(b.dtype == np.float64 and b.flags.c_contiguous) for b in blocks]
    if len(blocks) == 1 and whole[0]:
        return blocks[0], sizes, whole
    shape = list(blocks[0].shape)
    shape[axis] = sum(sizes)
    # float64 in C order, what the compiled sweep takes: concatenate alone keeps the inputs'
    # Fortran order when every block has it (a cube's pixels, one block in a batch)
    return np.concatenate(blocks, axis=axis, out=np.empty(shape)), sizes, whole


def group_pass_kernel(
    X,
    sizes,
    starts,
    center,
    steps,
    spec,
    keep=True,
    whole=None,
    sub_block=SUB_BLOCK_ROWS,
    rotation=None,
    out=None,
    out_offset=0,
    in_place=False,
):
    """:func:`pass_kernel` of every block of a group in one compiled call.

    ``X`` holds the blocks side by side (:func:`side_by_side`): blocks of samples ``(n, d)``
    centred with ``center``, or residual blocks ``(f, n)``; ``sizes`` and ``starts`` are their
    row counts and the global indices of their first rows, ``whole`` (default all True) which
    were float64 and C-contiguous. The sweep (:func:`ppa_dask.ppa.fused.fused_step_segments`)
    takes each block with sums of its own, as :func:`pass_kernel` would the block alone (a block
    that was not ``whole``: its sub-blocks of ``sub_block`` rows, added up in order as there).

    Returns ``(residual, stack)``: the blocks' new residuals side by side, ``(f or m, sum of
    sizes)`` (written into ``out`` from column ``out_offset`` when given, or with ``in_place``
    over a residual ``X`` where :func:`written_over` allows; None unless ``keep``),
    and the moments as a stack, row ``b`` block ``b``'s: ``n`` (folds), ``vv``, ``yv``, ``zz``,
    ``tmin``, ``tmax``, each with a direction axis after the block's (the step's, then those of
    ``spec.ahead``). :func:`step_moments_of_stack` turns a row into :func:`pass_kernel`'s dict,
    bit for bit.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> blocks = [rng.normal(size=(3, n)) for n in (100, 50)]
    >>> spec = StepSpec(np.array([1.0, 0.0, 0.0]), 0.0, 3.0, 2)
    >>> X, sizes, whole = side_by_side(blocks, samples=False)
    >>> residual, stack = group_pass_kernel(X, sizes, [0, 100], None, (), spec)
    >>> alone = pass_kernel(blocks[1], 100, None, (), spec)[1]
    >>> bool(np.array_equal(step_moments_of_stack(stack, 1)["yv"], alone["yv"]))
    True
    """
    samples = center is not None
    d = X.shape[1] if samples else X.shape[0]
    rows_out = d if rotation is None else rotation.shape[1]
    if keep and out is None:
        out, out_offset = written_over(X, rows_out) if in_place and not samples else None, 0
        if out is None:
            out = np.empty((rows_out, int(sum(sizes))))
    segments, owner, at = [], [], 0
    for b, (n, start) in enumerate(zip(sizes, starts)):
        if whole is None or whole[b]:
            segments.append((at, n, start, out_offset + at))
            owner.append(b)
        else:
            for a in range(0, max(n, 1), sub_block):
                segments.append(
                    (at + a, min(n, a + sub_block) - a, start + a, out_offset + at + a)
                )
                owner.append(b)
        at += n
    raw = _fused.fused_step_segments(
        X,
        np.array(segments, dtype=np.int64).reshape(-1, 4),
        steps,
        spec,
        out=out if keep else None,
        rotation=rotation,
        center=center,
    )
    if len(owner) > len(sizes):
        raw = _fold_segments(raw, np.array(owner))
    sums, yv, zz, counts, tmin, tmax = raw
    stack = dict(
        n=counts, vv=gram_from_sums(sums, spec.max_degree), yv=yv, zz=zz, tmin=tmin, tmax=tmax
    )
    return (out if keep else None), stack


def _fold_segments(raw, owner):
    """The sweep's values per block from those per segment (``owner[s]``: its block, in
    order): added up in order, the range's extremes kept, as :func:`pass_kernel` does."""
    firsts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    acc = [v[firsts].copy() for v in raw]
    rank = np.arange(len(owner)) - firsts[owner - owner[0]]
    for q in range(1, int(rank.max()) + 1):
        rows = np.flatnonzero(rank == q)
        blocks = owner[rows] - owner[0]
        for i in range(4):
            acc[i][blocks] = acc[i][blocks] + raw[i][rows]
        lo, hi = raw[4][rows], raw[5][rows]
        acc[4][blocks] = np.where(lo < acc[4][blocks], lo, acc[4][blocks])
        acc[5][blocks] = np.where(hi > acc[5][blocks], hi, acc[5][blocks])
    return acc


def _fold_sums(a, b, summed):
    """Row by row what :func:`_combine_sums` does per dict: ``summed`` added, the range kept."""
    out = {key: a[key] + b[key] for key in summed}
    out["tmin"] = np.where(b["tmin"] < a["tmin"], b["tmin"], a["tmin"])
    out["tmax"] = np.where(b["tmax"] > a["tmax"], b["tmax"], a["tmax"])
    return out


def fold_step_stacks(a, b):
    """Two stacks of step moments (:func:`group_pass_kernel`) merged row by row, as
    :func:`combine_step_moments` merges two dicts (the fold of
    :func:`ppa_dask.utils.compute.stacked_tree`)."""
    return _fold_sums(a, b, ("n", "vv", "yv", "zz"))


def step_moments_of_stack(stack, row=0):
    """Row ``row`` of a stack of step moments as :func:`pass_kernel`'s dict (with
    ``"ahead"`` when the stack holds more than one direction)."""

    def one(j, n):
        return dict(
            n=n,
            vv=stack["vv"][row, j],
            yv=stack["yv"][row, j],
            zz=stack["zz"][row, j],
            tmin=float(stack["tmin"][row, j]),
            tmax=float(stack["tmax"][row, j]),
        )

    out = one(0, stack["n"][row])
    if stack["vv"].shape[1] > 1:
        out["ahead"] = [one(j, stack["n"][row].copy()) for j in range(1, stack["vv"].shape[1])]
    return out


def stack_moments(parts, keys):
    """Moment dicts as a stack: ``{key: array}``, row ``i`` of each from ``parts[i]``."""
    return {key: np.stack([np.asarray(p[key]) for p in parts]) for key in keys}


FIRST_KEYS = ("n", "mean", "scatter", "n_nan", "n_inf")
OBJECTIVE_KEYS = ("n", "vv", "yt", "yyt", "tmin", "tmax")


def fold_first_stacks(a, b):
    """Two stacks of :func:`first_moments` (without their samples) merged row by row, as
    :func:`combine_first_moments` merges two dicts (Chan et al.'s update; the counts' ratios
    taken in Python integers, as there)."""
    na, nb = a["n"], b["n"]
    n = na + nb
    pairs = list(zip(na.tolist(), nb.tolist(), n.tolist()))
    ratio = np.array([y / t if t else 0.0 for _, y, t in pairs], dtype=np.float64)
    factor = np.array([x * y / t if t else 0.0 for x, y, t in pairs], dtype=np.float64)
    delta = b["mean"] - a["mean"]
    mean = a["mean"] + delta * ratio[:, None]
    outer = delta[:, :, None] * delta[:, None, :]
    scatter = a["scatter"] + b["scatter"] + outer * factor[:, None, None]
    empty = n == 0
    if empty.any():
        mean[empty], scatter[empty] = a["mean"][empty], a["scatter"][empty]
    return dict(
        n=n, mean=mean, scatter=scatter, n_nan=a["n_nan"] + b["n_nan"],
        n_inf=a["n_inf"] + b["n_inf"],
    )  # fmt: skip


def first_moments_of_stack(stack, sample, row=0):
    """Row ``row`` of a stack of first moments, with the rows ``sample``, as
    :func:`combine_first_moments`'s dict."""
    out = {key: stack[key][row] for key in FIRST_KEYS}
    out["n"] = int(out["n"])
    out["sample"] = sample
    return out


def fold_objective_stacks(a, b):
    """Two stacks of :func:`objective_moments` merged row by row, as
    :func:`combine_objective_moments` merges two dicts."""
    return _fold_sums(a, b, ("n", "vv", "yt", "yyt"))


def objective_moments_of_stack(stack, row=0):
    """Row ``row`` of a stack of objective moments as :func:`objective_pass_kernel`'s dict."""
    out = {key: stack[key][row] for key in OBJECTIVE_KEYS}
    out["n"] = int(out["n"])
    out["tmin"], out["tmax"] = float(out["tmin"]), float(out["tmax"])
    return out


def _pass_moments(parts, degree, ahead):
    """The moments dict of a pass from the sweep's raw sums (a list of them with ``ahead``)."""
    if not ahead:
        return _moments_dict(*parts, degree)
    out = _moments_dict(*parts[0], degree)
    out["ahead"] = [_moments_dict(*p, degree) for p in parts[1:]]
    return out


def _check_block_finite(X, start, what="X"):
    bad = ~np.isfinite(X)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1)) + start
        cols = np.flatnonzero(bad.any(axis=0)).tolist()
        raise ValueError(
            f"{what} contains {int(bad.sum())} NaN or inf values in columns {cols} "
            f"(first bad row {int(rows[0])}); PPA needs finite input."
        )


def transform_block(X, model, n_out, start=0):
    """PPA coefficients of a block of samples: ``(n, n_out)``.

    Columns are ``alpha_1 .. alpha_k`` followed, when ``n_out > k``, by the residual after ``k``
    steps in ``model.residual_basis`` coordinates; divided by ``model.output_scale`` when set.
    """
    X = np.asarray(X, dtype=np.float64)
    _check_block_finite(X, start)
    k = len(model.steps)
    out = np.empty((n_out, X.shape[0]))
    for a in range(0, X.shape[0], SUB_BLOCK_ROWS):  # cache-sized slices, as in the fit's passes
        b = min(X.shape[0], a + SUB_BLOCK_ROWS)
        Yt = centred_block(X[a:b], model.mean)
        for p, step in enumerate(model.steps[:n_out]):
            out[p, a:b], Yt = step_forward(Yt, step, out=Yt if p else None)
        if n_out > k:
            out[k:, a:b] = model.residual_basis.T @ Yt
    if model.output_scale is not None:
        out /= model.output_scale[:n_out, None]
    return np.ascontiguousarray(out.T)


def inverse_block(R, model, start=0):
    """Samples from PPA coefficients (closed-form inverse), ``(n, d)``.

    ``R`` may have fewer columns than the model outputs: with ``m`` columns the residual after
    step ``m`` is taken as zero and steps ``m .. 1`` are undone, so the error of this
    reconstruction is exactly the residual the model leaves after ``m`` steps (paper, eq. 7).
    """
    R = np.asarray(R, dtype=np.float64)
    _check_block_finite(R, start, what="R")
    m = R.shape[1]
    Rt = R.T
    if model.output_scale is not None:
        Rt = Rt * model.output_scale[:m, None]
    k = len(model.steps)
    Yt = model.residual_basis @ Rt[k:] if m > k else np.zeros((model.mean.shape[0], R.shape[0]))
    for p in range(min(m, k) - 1, -1, -1):
        Yt = step_inverse(Yt, np.ascontiguousarray(Rt[p]), model.steps[p])
    Yt += model.mean[:, None]
    return np.ascontiguousarray(Yt.T)


def jacobian_block(X, model):
    """Analytic Jacobian ``dR/dx`` of the (unwhitened) map, shape ``(n, d, d)``.

    Rows are ``alpha_1 .. alpha_k`` and then the residual in ``residual_basis`` coordinates. Each
    step multiplies the running derivative of the residual by the shear
    ``I - (e + u) e^T`` with ``u = U v'(t) / scale`` (paper eq. 13-14 in the ambient frame),
    so the determinant is 1.
    """
    X = np.asarray(X, dtype=np.float64)
    _check_block_finite(X, 0)
    n, d = X.shape
    Yt = centred_block(X, model.mean)
    G = np.broadcast_to(np.eye(d), (n, d, d)).copy()  # d(residual)/dx per sample
    J = np.empty((n, d, d))
    for p, step in enumerate(model.steps):
        e = step.direction
        degree = step.coef.shape[1] - 1
        alpha = e @ Yt
        _, D = extended_rows(step.coordinate(alpha), degree, step.lo, step.hi, 1)
        dalpha = np.einsum("j,njk->nk", e, G)
        J[:, p, :] = dalpha
        slope = e[None, :] + (D.T @ step.coef.T) / step.scale  # d(e alpha + U v)/d alpha
        G -= slope[:, :, None] * dalpha[:, None, :]
        _, Yt = step_forward(Yt, step)
    k = len(model.steps)
    J[:, k:, :] = np.einsum("jm,njk->nmk", model.residual_basis, G)
    return J


def residual_norms_block(X, model):
    """Sum over the block of ``||residual after k steps||^2`` for k = 0..len(steps).

    By the structure of the inverse this is exactly the squared reconstruction error of the
    k-component reconstruction (see :func:`inverse_block`), in input units.
    """
    X = np.asarray(X, dtype=np.float64)
    _check_block_finite(X, 0)
    sums = np.zeros(len(model.steps) + 1)
    for a in range(0, X.shape[0], SUB_BLOCK_ROWS):  # cache-sized slices, as in the fit's passes
        Yt = centred_block(X[a : a + SUB_BLOCK_ROWS], model.mean)
        sums[0] += np.vdot(Yt, Yt)
        for p, step in enumerate(model.steps):
            _, Yt = step_forward(Yt, step, out=Yt)
            sums[p + 1] += np.vdot(Yt, Yt)
    return sums


# --------------------------------------------------------------------------------------------
# PPA-GD: moments of the reconstruction objective of one step and of its gradient
# --------------------------------------------------------------------------------------------


def objective_moments(Yt, spec):
    """Moments of a residual block from which a step's objective and its gradient follow.

    For a candidate leading vector ``e`` (``spec.direction``, a :class:`StepSpec` whose
    ``max_degree`` is the step's degree ``g``) with ``alpha = e^T y``,
    ``t = (alpha - offset) / scale`` and the Chebyshev polynomials ``T_m(t)``, returns::

        n      rows
        vv     sum v v^T, v = T_0..T_g(t)          (g+1, g+1)
        yt     sum y T_m(t),  m = 0..2g            (d, 2g+1)
        yyt    sum y y^T T_m(t),  m = 0..g-1       (g, d, d)

    plus ``tmin``/``tmax``, the range of ``t``. ``yt`` holds the regression's cross moments
    (its first ``g + 1`` columns) and, through ``T_i T_j = (T_{i+j} + T_{|i-j|}) / 2``, the sums
    of ``y v_j v'_k``; ``yyt`` gives the sums of ``y y^T v'_k`` (``v'_k`` has degree ``k - 1``).
    These are all the data the objective ``f(e)`` and its gradient need
    (:func:`ppa_dask.ppa.algebra.gd_objective`), so one pass evaluates both. The ``yyt`` products
    cost ``O(n d^2 g)``, ``d`` times a plain step pass.
    """
    d, n = Yt.shape
    degree = spec.max_degree
    alpha = spec.direction @ Yt
    t = (alpha - spec.offset) / spec.scale
    T = _chebyshev_rows(t, 2 * degree, 0)[0]  # (2g+1, n)
    yyt = np.empty((degree, d, d))
    for m in range(degree):
        # T_0 = 1: the first is the plain second moment
        yyt[m] = (Yt if m == 0 else Yt * T[m]) @ Yt.T
    return dict(
        n=n,
        vv=gram_from_sums(T.sum(axis=1), degree),
        yt=Yt @ T.T,
        yyt=yyt,
        tmin=float(t.min()) if n else np.inf,
        tmax=float(t.max()) if n else -np.inf,
    )


def combine_objective_moments(parts):
    """Merge a list of :func:`objective_moments` dicts (sums, and min/max of the range)."""
    return _combine_sums(parts, ("n", "vv", "yt", "yyt"))


def objective_pass_kernel(X, center, steps, spec, sub_block=SUB_BLOCK_ROWS):
    """One pass over a block for the PPA-GD objective at ``spec.direction``; nothing is written.

    As in :func:`pass_kernel`, ``X`` is a source block ``(n, d)`` centred with ``center``, or a
    residual block ``(d, n)`` when ``center`` is None, and ``steps`` bring it to the current
    residual (the block is never modified). Returns the merged :func:`objective_moments` of
    ``spec`` (:class:`StepSpec`; degree ``spec.max_degree``).
    """
    n = X.shape[0] if center is not None else X.shape[1]
    parts = []
    for a in range(0, max(n, 1), sub_block):
        b = min(n, a + sub_block)
        Yt = centred_block(X[a:b], center) if center is not None else X[:, a:b]
        for step in steps:
            _, Yt = step_forward(Yt, step)
        parts.append(objective_moments(Yt, spec))
    return combine_objective_moments(parts)
