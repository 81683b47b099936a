"""Two drivers for the same per-block kernels: numpy blocks in memory, and Dask chunks.

A driver answers three questions, each with exactly one pass over the data:

* ``first_pass()``: count, mean, scatter and non-finite counts (:func:`kernels.first_moments`);
* ``step_pass(spec)``: bring every block to the residual of the step being fitted (applying the
  previous step, fused into the same pass) and return the merged step moments
  (:func:`kernels.pass_kernel`);
* ``objective_pass(spec)`` (PPA-GD): the moments of a step's objective and its gradient at a
  trial leading vector, on the current residual, which it does not change
  (:func:`kernels.objective_pass_kernel`).

The Dask driver maps the kernels over chunks and merges their results with a tree reduction in
the chunk/combine/aggregate manner of ``dask.array.reductions`` (aggregation is the small algebra
in :mod:`ppa_dask._algebra`, done on the client). Between passes it keeps the residual persisted
on the workers, or recomputes it from the source by re-applying the fitted steps.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from . import kernels

RESIDUAL_CACHES = ("auto", "persist", "recompute")


@dataclass
class StepSpec:
    """What a pass needs to know about the step being fitted (all known before the pass)."""

    direction: np.ndarray
    offset: float
    scale: float
    max_degree: int
    seed: int
    n_folds: int
    subspace: np.ndarray | None = None  # (d, m) orthonormal basis the residual lies in


# a kept residual is re-expressed in a smaller orthonormal frame once the subspace it lies in has
# shrunk below this fraction of the frame: later passes then read, write and multiply fewer rows
COMPACT_BELOW = 0.7


class ResidualFrame:
    """Coordinates of the kept residual: ``y = F z`` with ``F`` (d, f) orthonormal (None: F = I).

    Steps are fitted in the input frame; a driver that keeps the residual in a compact frame
    converts each step's vectors into it (``F^T e``, ``F^T U``) and the pass's cross moments back
    (``F S_zv``). Both are exact because the residual, the steps' vectors and the next leading
    vector all lie in the span of ``F``.
    """

    def __init__(self, basis=None):
        self.basis = basis

    def size(self, d):
        return d if self.basis is None else self.basis.shape[1]

    def into(self, vectors):
        return vectors if self.basis is None else self.basis.T @ vectors

    def out_of(self, moments):
        if self.basis is None:
            return moments
        return dict(moments, yv=self.basis @ moments["yv"])

    def steps_into(self, steps):
        return tuple(s._replace(direction=self.into(s.direction), coef=self.into(s.coef))
                     for s in steps)

    def plan(self, spec, keep, d):
        """The frame after this pass and the rotation into it (None when unchanged)."""
        sub = spec.subspace
        if not keep or sub is None or sub.shape[1] > COMPACT_BELOW * self.size(d):
            return self, None
        return ResidualFrame(sub), self.into(sub)


def _objective_in_ambient(frame, moments):
    """Objective moments taken in a compact residual frame, expressed in the input frame."""
    F = frame.basis
    if F is None:
        return moments
    yyt = np.einsum("ia,mab,jb->mij", F, moments["yyt"], F)
    return dict(moments, yt=F @ moments["yt"], yyt=yyt)


def local_rows(sorted_index, start, stop):
    """The entries of a sorted global row index that fall in ``[start, stop)``, made local."""
    lo, hi = np.searchsorted(sorted_index, [start, stop])
    return sorted_index[lo:hi] - start


def single_blas_thread():
    """Limit BLAS to one thread: much faster than threaded BLAS on block-sized products."""
    return threadpool_limits(limits=1, user_api="blas")


class NumpyDriver:
    """In-memory driver: the kernels run on the whole array, which they walk in cache-sized
    sub-blocks; the residual is one float64 array updated in place from pass to pass."""

    def __init__(self, X, block_rows=kernels.SUB_BLOCK_ROWS):
        self.X = X
        self.n_samples, self.n_features = X.shape
        self.block_rows = int(block_rows)
        self._residual = None  # feature-major (f, n), made by the first step pass
        self._frame = ResidualFrame()  # the residual's coordinates (shrinks as steps are fitted)
        self._applied = 0  # number of fitted steps already applied to the residual
        self.n_passes = 0

    def first_pass(self, sample_index):
        self.n_passes += 1
        rows = range(0, self.n_samples, self.block_rows)
        with single_blas_thread():
            parts = [
                kernels.first_moments(
                    self.X[a : a + self.block_rows], local_rows(sample_index, a, a + self.block_rows)
                )
                for a in rows
            ]
        return kernels.combine_first_moments(parts)

    def step_pass(self, mean, steps, spec, last=False):
        self.n_passes += 1
        if self._residual is None:
            source, center = self.X, mean
        else:
            source, center = self._residual, None
        frame, rotation = self._frame.plan(spec, not last, self.n_features)
        with single_blas_thread():
            residual, moments = kernels.pass_kernel(
                source, 0, center, self._frame.steps_into(steps[self._applied :]),
                frame.into(spec.direction), spec.offset, spec.scale, spec.max_degree, spec.seed,
                spec.n_folds, keep=not last, in_place=True, sub_block=self.block_rows,
                rotation=rotation,
            )
        self._residual, self._applied, self._frame = residual, len(steps), frame
        return frame.out_of(moments)

    def objective_pass(self, mean, steps, spec):
        """PPA-GD: one pass for the objective moments at ``spec.direction`` (degree
        ``spec.max_degree``) on the current residual, which is read, never modified."""
        self.n_passes += 1
        if self._residual is None:
            source, center, frame, pending = self.X, mean, ResidualFrame(), steps
        else:
            source, center, frame = self._residual, None, self._frame
            pending = steps[self._applied :]
        with single_blas_thread():
            moments = kernels.objective_pass_kernel(
                source, center, frame.steps_into(pending), frame.into(spec.direction),
                spec.offset, spec.scale, spec.max_degree, sub_block=self.block_rows,
            )
        return _objective_in_ambient(frame, moments)

    def close(self):
        self._residual = None


def _tree_reduce(parts, combine, split_every):
    """Combine a list of delayed partial results in a tree of fan-in ``split_every``."""
    import dask

    combine_task = dask.delayed(combine, pure=True)
    while len(parts) > 1:
        parts = [
            combine_task(parts[i : i + split_every]) for i in range(0, len(parts), split_every)
        ]
    return parts[0]


def _cluster_memory_bytes():
    """Total worker memory of the current distributed Client, or available RAM without one."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        client = None
    if client is not None:
        workers = client.scheduler_info(n_workers=-1).get("workers", {})
        limits = [w.get("memory_limit") or 0 for w in workers.values()]
        if limits and all(limits):
            return float(sum(limits))
    import psutil

    return float(psutil.virtual_memory().available)


def _uses_local_scheduler():
    try:
        from distributed import default_client

        default_client()
        return False
    except (ImportError, ValueError):
        return True


class DaskDriver:
    """Dask driver: kernels mapped over row chunks, moments tree-reduced.

    Parameters
    ----------
    X : dask.array.Array
        Chunked along rows; feature chunks are merged here.
    residual_cache : {"auto", "persist", "recompute"}
        ``"persist"`` keeps the current residual in worker memory between passes (one read of
        the source in all, one read and write of the residual per step); ``"recompute"`` reads
        the source every pass and re-applies the fitted steps per block (no memory beyond a
        block). ``"auto"`` persists when the float64 residual takes at most half of the
        cluster's memory (the local machine's available memory without a Client).
    split_every : int
        Fan-in of the moment tree reduction.
    block_rows : int
        Rows per sub-block inside each chunk's kernel call.
    """

    def __init__(self, X, residual_cache="auto", split_every=8, block_rows=kernels.SUB_BLOCK_ROWS):
        if X.numblocks[1] != 1:
            X = X.rechunk({1: -1})
        self.X = X
        self.n_samples, self.n_features = X.shape
        self.split_every = int(split_every)
        self.block_rows = int(block_rows)
        row_chunks = X.chunks[0]
        self.starts = np.concatenate([[0], np.cumsum(row_chunks)[:-1]]).astype(int).tolist()
        self.source_blocks = list(X.to_delayed().ravel())
        if residual_cache == "auto":
            needed = 8.0 * self.n_samples * self.n_features
            residual_cache = "persist" if needed <= 0.5 * _cluster_memory_bytes() else "recompute"
        self.residual_cache = residual_cache
        self._residual = None
        self._frame = ResidualFrame()
        self._applied = 0
        self.n_passes = 0

    def _compute(self, *objs):
        import dask

        guard = single_blas_thread() if _uses_local_scheduler() else contextlib.nullcontext()
        with guard:
            return dask.compute(*objs)

    def first_pass(self, sample_index):
        import dask

        self.n_passes += 1
        chunk = dask.delayed(kernels.first_moments, pure=True)
        stops = self.starts[1:] + [self.n_samples]
        parts = [
            chunk(block, local_rows(sample_index, start, stop))
            for block, start, stop in zip(self.source_blocks, self.starts, stops)
        ]
        (total,) = self._compute(_tree_reduce(parts, kernels.combine_first_moments, self.split_every))
        return total

    def step_pass(self, mean, steps, spec, last=False):
        import dask

        self.n_passes += 1
        keep = self.residual_cache == "persist" and not last
        if self._residual is not None:
            blocks, center, current = self._residual, None, self._frame
            pending = steps[self._applied :]
        else:
            blocks, center, current, pending = self.source_blocks, mean, ResidualFrame(), steps
        frame, rotation = current.plan(spec, keep, self.n_features)
        chunk = dask.delayed(kernels.pass_kernel, pure=True, nout=2)
        outs = [
            chunk(block, start, center, current.steps_into(pending), frame.into(spec.direction),
                  spec.offset, spec.scale, spec.max_degree, spec.seed, spec.n_folds, keep=keep,
                  sub_block=self.block_rows, rotation=rotation)
            for block, start in zip(blocks, self.starts)
        ]
        moments = _tree_reduce([o[1] for o in outs], kernels.combine_step_moments, self.split_every)
        if keep:
            guard = single_blas_thread() if _uses_local_scheduler() else contextlib.nullcontext()
            with guard:
                residual, moments = dask.persist([o[0] for o in outs], moments)
            self._residual, self._applied, self._frame = residual, len(steps), frame
        else:
            self._residual = None
        (total,) = self._compute(moments)
        return frame.out_of(total)

    def objective_pass(self, mean, steps, spec):
        """PPA-GD: one pass for the objective moments at ``spec.direction`` (degree
        ``spec.max_degree``), tree-reduced; the kept residual (or, without one, the source with
        every fitted step re-applied) is read, never modified."""
        import dask

        self.n_passes += 1
        if self._residual is not None:
            blocks, center, frame = self._residual, None, self._frame
            pending = steps[self._applied :]
        else:
            blocks, center, frame, pending = self.source_blocks, mean, ResidualFrame(), steps
        chunk = dask.delayed(kernels.objective_pass_kernel, pure=True)
        pending, direction = frame.steps_into(pending), frame.into(spec.direction)
        parts = [
            chunk(block, center, pending, direction, spec.offset, spec.scale, spec.max_degree,
                  sub_block=self.block_rows)
            for block in blocks
        ]
        (total,) = self._compute(
            _tree_reduce(parts, kernels.combine_objective_moments, self.split_every)
        )
        return _objective_in_ambient(frame, total)

    def close(self):
        self._residual = None
