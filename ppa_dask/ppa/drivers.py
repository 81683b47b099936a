"""Two drivers for the same per-block kernels: numpy blocks in memory, and Dask chunks.

A driver (the interface is :class:`Driver`) runs each pass of a fit where the data live and
returns only small moment dicts; every pass is one read of the data:

* ``first_pass(sample_index)``: count, mean, scatter and non-finite counts, and the rows of the
  range sample (:func:`kernels.first_moments`, merged by :func:`kernels.combine_first_moments`);
* ``step_pass(mean, steps, spec, last=False)``: bring every block to the residual of the step
  being fitted (applying the fitted ``steps`` not yet applied, fused into the same pass) and
  return the merged moments of the step ``spec`` (a :class:`~ppa_dask.ppa.kernels.StepSpec`,
  with the steps it gathers ahead) (:func:`kernels.pass_kernel`);
* ``objective_pass(mean, steps, spec)`` (PPA-GD): the moments of a step's objective and its
  gradient at the trial leading vector ``spec.direction``, on the current residual, which it
  does not change (:func:`kernels.objective_pass_kernel`).

The in-memory and Dask drivers also do the fit's whole-array work, so the estimator tests the
array type once: ``max_abs()`` (one reduction) and ``rescaled(exponent)``, a driver of the same
options over the data times ``2**exponent``, which :meth:`ppa_dask.PPA.fit` asks for when the
data's moments are more than float64 can hold (the policy: :mod:`ppa_dask.ppa.magnitude`).
The passes are requested by the step loop, :func:`ppa_dask.ppa.steps.fit_steps`.

The Dask driver maps the kernels over chunks (or groups of chunks, one task per group) and
merges their results with a tree reduction in the chunk/combine/aggregate manner of
``dask.array.reductions`` (aggregation is the small algebra in :mod:`ppa_dask.ppa.algebra`,
done on the client). Between passes it keeps the residual persisted on the workers,
checkpoints it to disk (one ``.npy`` file per chunk), or recomputes it from the source by
re-applying the fitted steps (docs/design.md section 7.4).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import weakref
from dataclasses import dataclass

import numpy as np

from ppa_dask.ppa import kernels
from ppa_dask.ppa.kernels import StepSpec as StepSpec  # the bundle a pass takes (re-exported)
from ppa_dask.store.zarr_chunks import read_direct
from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.compute import (
    compute,
    current_client,
    persist,
    stacked_tree,
    tree_reduce,
)
from ppa_dask.utils.params import RESIDUAL_CACHES as RESIDUAL_CACHES  # (re-exported)

#: Steps gathered ahead per pass with ``lookahead="auto"`` where passes read the data: one pass
#: then fits up to 8 linear steps; gathering one step ahead costs about 0.18 of a plain step
#: pass's arithmetic (64 features, degrees up to 5, cv=2), less of a pass that reading dominates.
AUTO_LOOKAHEAD = 7
#: ... and after a run of ``r`` linear steps, ``max(AUTO_LOOKAHEAD, r)`` up to this many: the
#: late steps of spectra are long linear runs, and a pass saved costs its reads and writes
AUTO_LOOKAHEAD_MAX = 32


# a kept residual is re-expressed in a smaller orthonormal frame once the subspace it lies in has
# shrunk below this fraction of the frame: later passes then read, write and multiply fewer rows
COMPACT_BELOW = 0.7
# the bytes a checkpoint pass writes bound it (4 GiB of checkpoint took as long as the whole
# step on the development machine's disk): while a checkpointed residual's frame is at most
# this wide it is compacted whenever a pass writes it and its subspace is narrower. A
# compaction costs a (frame x subspace) rotation per row, so wider frames keep COMPACT_BELOW
# (compacting a 64-band cube's checkpoint at every write made its fit 1.3x slower)
CHECKPOINT_COMPACT_WIDTH = 16
# ... and for the same reason a checkpoint is read by this many passes before the next is
# written: the passes in between re-apply the steps fitted since (a rotation and a polynomial
# per row, in memory) instead of writing the residual out. The first pass (mean and scatter)
# writes the first checkpoint, a copy of the source blocks as read (their layout and dtype), so
# the source (perhaps remote, always decoded) is read once: a read costs a decode, a copy's
# read only the disk or the page cache. The copy serves one pass more (step 1's, which would
# otherwise read the source), so no more checkpoints are written than with two source reads
CHECKPOINT_EVERY = 2
#: Data in a source's graph up to this size (bytes) is copied into each group's task that needs
#: it rather than shared as a key (docs/design.md section 3.11)
SHARED_COPY_BYTES = 1 << 20
#: Tasks of a grouped pass per thread of the cluster (docs/design.md section 3.11): a pass is
#: then O(threads) tasks whatever the number of chunks
GROUPS_PER_THREAD = 1
#: Bytes of blocks a grouped pass over the source or over checkpoint files puts side by side
#: for one compiled call, and reads in one call where they are slices of one array (Zarr chunks:
#: 2,048 chunks of 20 KiB read in 1.1 s one by one, 0.48 s in 4 MiB runs, 0.7 s in 32 MiB ones;
#: docs/design.md section 3.11). A task holds one such batch at a time (or one larger block)
GROUP_BATCH_BYTES = 1 << 22
#: The Dask configuration key a DaskDriver built without ``groups`` reads it from (default
#: ``"auto"``): ``dask.config.set({"ppa-dask.pass-groups": None})`` runs a fit's passes one
#: task per block, as before grouped passes existed
PASS_GROUPS_CONFIG = "ppa-dask.pass-groups"
_CONFIGURED = object()


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
        out = dict(moments, yv=self.basis @ moments["yv"])
        if "ahead" in moments:
            out["ahead"] = [self.out_of(m) for m in moments["ahead"]]
        return out

    def steps_into(self, steps):
        return tuple(
            s._replace(direction=self.into(s.direction), coef=self.into(s.coef)) for s in steps
        )

    def plan(self, spec, keep, d, every_shrink_up_to=0):
        """The frame after this pass and the rotation into it (None when unchanged): the
        residual moves to the subspace of ``spec`` once that is at most ``COMPACT_BELOW`` times
        as wide as the current frame, or as soon as it is narrower while the frame is at most
        ``every_shrink_up_to`` wide."""
        sub = spec.subspace
        if not keep or sub is None:
            return self, None
        size, width = self.size(d), sub.shape[1]
        if width >= size or (width > COMPACT_BELOW * size and size > every_shrink_up_to):
            return self, None
        return ResidualFrame(sub), self.into(sub)


def _objective_in_ambient(frame, moments):
    """Objective moments taken in a compact residual frame, expressed in the input frame."""
    F = frame.basis
    if F is None:
        return moments
    yyt = np.einsum("ia,mab,jb->mij", F, moments["yyt"], F)
    return dict(moments, yt=F @ moments["yt"], yyt=yyt)


def task_keys(what, n, *token_parts):
    """Keys of a pass's ``n`` chunk tasks, named by what they compute: ``(f"{what}-{token}", i)``.

    The dashboard's task stream and progress bars then read as the algorithm (``ppa-moments``,
    ``ppa-step-07-pass``, ``ppa-step-07-objective``); the token is a hash of what the pass
    depends on (the data, the fitted steps, the step's spec), so keys are deterministic and
    differ between fits and passes.

    Examples
    --------
    >>> keys = task_keys("ppa-step-07-pass", 2, "data", 1.5)
    >>> keys[1][0].startswith("ppa-step-07-pass-"), keys[1][1], keys == task_keys(
    ...     "ppa-step-07-pass", 2, "data", 1.5)
    (True, 1, True)
    """
    from dask.base import tokenize

    name = f"{what}-{tokenize(*token_parts)}"
    return [(name, i) for i in range(n)]


def local_rows(sorted_index, start, stop):
    """The entries of a sorted global row index that fall in ``[start, stop)``, made local."""
    lo, hi = np.searchsorted(sorted_index, [start, stop])
    return sorted_index[lo:hi] - start


class Driver:
    """The interface between :meth:`ppa_dask.PPA.fit_with_driver` and the data.

    The fit is a sequence of passes over the samples; a driver runs each pass wherever the
    data live (a numpy array in this process: :class:`NumpyDriver`; a Dask array on the
    current scheduler: :class:`DaskDriver`; many models' passes folded into shared scans of
    one array: :mod:`ppa_dask.ppa.multifit`) and returns only small moment dicts. The step
    algebra between passes runs on the client and is the same for every driver, so any
    driver that returns the same moments gives the same model.

    Attributes
    ----------
    n_samples, n_features : int
        Shape of the data the driver passes over.
    n_passes : int
        Passes run so far (the fit reports it as ``n_passes_``).
    residual_cache : str
        How the residual is kept between passes (the fit reports it as ``residual_cache_``).
    """

    n_samples: int
    n_features: int
    n_passes: int = 0
    residual_cache: str = "memory"

    def auto_lookahead(self):
        """Steps a pass gathers ahead under ``lookahead="auto"``: :data:`AUTO_LOOKAHEAD` where
        a pass reads the data (its cost is the reading, which gathering ahead saves)."""
        return AUTO_LOOKAHEAD

    def first_pass(self, sample_index):
        """Count, mean, scatter and NaN/inf counts of the samples, and the rows
        ``sample_index`` (sorted global indices) gathered feature-major for the range sample:
        the dict :func:`ppa_dask.ppa.kernels.combine_first_moments` returns."""
        raise NotImplementedError

    def step_pass(self, mean, steps, spec, last=False):
        """Apply the fitted ``steps`` to the centred samples and accumulate the fold moments of
        the step described by ``spec`` (:class:`StepSpec`); ``last`` says that no later pass
        needs the residual. Returns :func:`ppa_dask.ppa.kernels.combine_step_moments`'s dict."""
        raise NotImplementedError

    def objective_pass(self, mean, steps, spec):
        """The PPA-GD objective's moments at ``spec.direction`` (same residual as
        :meth:`step_pass`), :func:`ppa_dask.ppa.kernels.combine_objective_moments`'s dict."""
        raise NotImplementedError

    def close(self):
        """Release what the driver holds (persisted blocks, checkpoint files)."""

    def max_abs(self):
        """Largest ``|x|`` of the data (NaN if they hold a NaN): one reduction, no copy.

        :meth:`ppa_dask.PPA.fit` asks for it only when the first pass finds moments that float64
        cannot hold, to rescale the data (:meth:`rescaled`; :mod:`ppa_dask.ppa.magnitude`)."""
        raise NotImplementedError

    def rescaled(self, exponent):
        """A new driver of the same kind and options over the data times ``2**exponent``
        (exact in float64; lazily for Dask), for a fit on rescaled data."""
        raise NotImplementedError


class NumpyDriver(Driver):
    """In-memory driver: the kernels run on the whole array, which they walk in cache-sized
    sub-blocks; the residual is one float64 array updated in place from pass to pass.

    Each pass runs under :func:`ppa_dask.utils.blas.one_blas_thread` unless ``limit_blas`` is
    False: a caller that holds that limit for the whole fit (:meth:`ppa_dask.PPA.fit` does)
    saves setting and restoring it at every pass, a cost that matters on small data.
    """

    def __init__(self, X, block_rows=kernels.SUB_BLOCK_ROWS, limit_blas=True):
        self.X = X
        self.n_samples, self.n_features = X.shape
        self.block_rows = int(block_rows)
        self._limit_blas = limit_blas
        self._blas = one_blas_thread if limit_blas else contextlib.nullcontext
        self._residual = None  # feature-major (f, n), made by the first step pass
        self._frame = ResidualFrame()  # the residual's coordinates (shrinks as steps are fitted)
        self._applied = 0  # number of fitted steps already applied to the residual
        self.n_passes = 0

    def auto_lookahead(self):
        """In memory a pass is arithmetic only, and each step gathered ahead costs an
        eigendecomposition on the client besides its share of the pass: that pays with many
        features (long linear runs) and many rows per feature squared, not on small tables
        (measured, docs/design.md section 3.10)."""
        d = self.n_features
        return AUTO_LOOKAHEAD if d >= 16 and self.n_samples >= 32 * d * d else 0

    def first_pass(self, sample_index):
        self.n_passes += 1
        rows = range(0, self.n_samples, self.block_rows)
        with self._blas():
            parts = [
                kernels.first_moments(
                    self.X[a : a + self.block_rows],
                    local_rows(sample_index, a, a + self.block_rows),
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
        with self._blas():
            residual, moments = kernels.pass_kernel(
                source,
                0,
                center,
                self._frame.steps_into(steps[self._applied :]),
                spec.in_frame(frame.into),
                keep=not last,
                in_place=True,
                sub_block=self.block_rows,
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
        with self._blas():
            moments = kernels.objective_pass_kernel(
                source,
                center,
                frame.steps_into(pending),
                spec.in_frame(frame.into),
                sub_block=self.block_rows,
            )
        return _objective_in_ambient(frame, moments)

    def close(self):
        self._residual = None

    def max_abs(self):
        return float(max(self.X.max(), -self.X.min()))

    def rescaled(self, exponent):
        X = np.ldexp(self.X, exponent, dtype=np.float64)
        return NumpyDriver(X, block_rows=self.block_rows, limit_blas=self._limit_blas)


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


def _workers_share_local_disk():
    """True when every worker runs on this machine (or there is no distributed Client), so a
    temporary directory made here is readable and writable by all of them."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return True
    from distributed.utils import get_ip

    here = {"127.0.0.1", "localhost", "::1", socket.gethostname()}
    with contextlib.suppress(Exception):
        here.add(get_ip())
    for address in client.scheduler_info(n_workers=-1).get("workers", {}):
        scheme, _, rest = address.partition("://")
        if scheme == "inproc":
            continue
        host = rest.rsplit(":", 1)[0].strip("[]")
        if host not in here:
            return False
    return True


# --------------------------------------------------------------------------------------------
# residual checkpoints: one .npy file per block and pass (numpy's own array format, read without
# pickle). A scratch file written by one task and read by one task of the next pass needs no
# chunked container; reading it back with np.load measured 2.5x faster than a one-chunk
# uncompressed Zarr array (8 vs 20 ms per 20 MiB block, medians of 25).
# --------------------------------------------------------------------------------------------


def _write_checkpoint(path, block):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        np.save(f, np.ascontiguousarray(block), allow_pickle=False)


def _read_checkpoint(path):
    return np.load(path, allow_pickle=False)


def _first_moments_kept(block, sample_rows, target):
    """:func:`kernels.first_moments` of a source block, which is also written to ``target`` as
    it was read (the first checkpoint: later passes read the copy, not the source)."""
    _write_checkpoint(target, block)
    return kernels.first_moments(block, sample_rows)


def _checkpointed_pass(source, target, start, center, steps, spec, keep, sub_block, rotation):
    """:func:`kernels.pass_kernel` between checkpoints: ``source`` is the path of this block's
    last checkpoint, a residual or (with ``center``) the first pass's copy of the source block;
    the new residual goes to the path ``target`` (when ``keep``). Returns the moments alone, so
    a task holds no more than one block."""
    owned = isinstance(source, str)
    block = _read_checkpoint(source) if owned else source
    residual, moments = kernels.pass_kernel(
        block,
        start,
        center,
        steps,
        spec,
        keep=keep,
        in_place=owned,
        sub_block=sub_block,
        rotation=rotation,
    )
    if keep:
        _write_checkpoint(target, residual)
    return moments


def _pass_on_result(result, *args, **kwargs):
    """:func:`kernels.pass_kernel` on the residual of a persisted ``(residual, moments)``."""
    return kernels.pass_kernel(result[0], *args, **kwargs)


def _objective_on_result(result, *args, **kwargs):
    """:func:`kernels.objective_pass_kernel` on a persisted ``(residual, moments)``."""
    return kernels.objective_pass_kernel(result[0], *args, **kwargs)


# --------------------------------------------------------------------------------------------
# grouped passes (docs/design.md section 3.11): one task runs the kernel over a group of blocks
# (one compiled call for many blocks, kernels.group_pass_kernel) and keeps every block's
# moments, stacked; they are merged in the tree of global block indices that the
# one-task-per-block pass builds (utils.compute.stacked_tree), in the group as far as it can
# and then on the client, so the model does not depend on the grouping
# --------------------------------------------------------------------------------------------


def block_groups(n_blocks, n_groups, owners=None, threads=None):
    """Split block indices ``0 .. n_blocks - 1`` into groups, each a list in ascending order.

    Without ``owners``: ``n_groups`` runs of consecutive blocks (as equal as they divide).
    With ``owners`` (the worker holding each block) and ``threads`` (worker -> threads): each
    worker's blocks, in ascending order, split into ``threads * GROUPS_PER_THREAD`` runs, so a
    group's blocks all live on one worker. Groups are returned ordered by their first block.

    Examples
    --------
    >>> block_groups(5, 2)
    [[0, 1, 2], [3, 4]]
    >>> block_groups(5, 9, owners=["a", "b", "a", "b", "a"], threads={"a": 1, "b": 1})
    [[0, 2, 4], [1, 3]]
    """
    if owners is None:
        pieces = np.array_split(np.arange(n_blocks), max(1, min(n_blocks, int(n_groups))))
    else:
        pieces = []
        for worker in sorted(set(owners)):
            mine = np.flatnonzero(np.asarray(owners, dtype=object) == worker)
            count = max(1, min(len(mine), int(threads.get(worker, 1)) * GROUPS_PER_THREAD))
            pieces.extend(np.array_split(mine, count))
    groups = [p.tolist() for p in pieces if len(p)]
    return sorted(groups, key=lambda g: g[0])


class SourceReader:
    """The part of a Dask array's graph that makes some of its blocks, run inside one task.

    A grouped pass over the source (the first pass; every pass of ``"recompute"``) then costs
    one task per group, not one per block plus the reads: each group's task carries the
    tasks that make its blocks and runs them itself, one block at a time (a block's tasks in
    dependency order, nothing kept between blocks; runs of blocks that are slices of one array
    read in one call, :meth:`blocks`), so a group holds one source block, or one batch of
    :data:`GROUP_BATCH_BYTES`, at a time. What several groups share (a Zarr array's handle,
    an in-memory array's one key) or what is already in worker memory (a persisted array's
    blocks) stays a key of the graph: the task depends on it and receives it (``externals``),
    so a lost worker's group is recomputed from the source like any task.

    Built on the client with :meth:`for_groups`; None when the graph holds something this
    does not run (the pass then keeps one task per block).
    """

    def __init__(self, blocks, nodes, external_keys):
        self._blocks = blocks  # per block: its key, and its own tasks in dependency order
        self._nodes = nodes
        self.external_keys = external_keys

    @classmethod
    def for_groups(cls, X, plan):
        """One reader per group of ``plan`` (block indices) of the row-chunked array ``X``,
        or None."""
        from dask.task_spec import Alias, DataNode, GraphNode

        try:
            from distributed import Future
        except ImportError:  # pragma: no cover - distributed is a dependency
            Future = ()
        from dask.sizeof import sizeof

        sliced = ArraySliceReader.for_groups(X, plan)
        if sliced is not None:
            return sliced
        graph = dict(X.__dask_graph__())
        keys = [k[0] for k in X.__dask_keys__()]
        nodes, external, copied = {}, set(), set()
        for key, value in graph.items():
            if isinstance(value, Future):
                external.add(key)  # in worker memory already
                continue
            if isinstance(value, tuple) and value and callable(value[0]):
                return None  # an old-style task tuple
            if not isinstance(value, GraphNode):
                # an old-style value naming another key is an alias of it (a concatenated
                # series of files has these), anything else is data
                value = Alias(key, value) if _is_key_of(value, graph) else DataNode(key, value)
            nodes[key] = value
            if isinstance(value, DataNode) and sizeof(value.value) <= SHARED_COPY_BYTES:
                # small data (a Zarr array's handle) is copied into every group that needs
                # it: as a key of its own it would draw every group to the worker holding it
                copied.add(key)
        owner = {}  # which group first needed a key; needed by two: external
        orders = []
        for g, group in enumerate(plan):
            per_block = []
            for i in group:
                order, seen, stack = [], set(), [(keys[i], False)]
                while stack:  # depth first, a key after its dependencies
                    key, expanded = stack.pop()
                    if expanded:
                        order.append(key)
                        continue
                    if key in seen or key in external:
                        continue
                    seen.add(key)
                    if key not in copied and owner.setdefault(key, g) != g:
                        external.add(key)
                        continue
                    stack.append((key, True))
                    stack.extend((d, False) for d in nodes[key].dependencies)
                per_block.append((keys[i], order))
            orders.append(per_block)
        readers = []
        for per_block in orders:
            blocks = [(key, [k for k in order if k not in external]) for key, order in per_block]
            mine = {k for _, order in blocks for k in order}
            needed = set()
            for key, order in per_block:
                if key in external:
                    needed.add(key)
                for k in order:
                    if k in mine:
                        needed.update(d for d in nodes[k].dependencies if d in external)
            readers.append(cls(blocks, {k: nodes[k] for k in mine}, sorted(needed, key=str)))
        return readers

    def blocks(self, externals, batch_bytes=0):
        """This group's blocks, one at a time, given the values of :attr:`external_keys`.

        With ``batch_bytes``, consecutive blocks that are plain slices of one array (a Zarr
        array's chunks, ``dask.array.core.getter`` of contiguous row ranges) are read in one
        call of about that many bytes and handed out as views of it: a Zarr chunk read alone
        costs about 0.4 ms of Python and event-loop overhead, a range of them a fraction of
        that per chunk. The values are the same as read one at a time."""
        given = dict(zip(self.external_keys, externals))
        i = 0
        while i < len(self._blocks):
            stop = self._run(i, given, batch_bytes)
            if stop > i + 1:
                yield from self._read_run(i, stop, given)
                i = stop
                continue
            key, order = self._blocks[i]
            i += 1
            if key in given:
                yield given[key]
                continue
            values = dict(given)
            for k in order:
                values[k] = self._nodes[k](values)
            yield values[key]

    def _slice_of(self, i, given):
        """``(array key, row range, other slices)`` of block ``i`` when it is read by
        ``getter`` from an array that is given or plain data, else None."""
        from dask.array.core import getter
        from dask.task_spec import DataNode, Task, TaskRef

        key, order = self._blocks[i]
        if key in given or not order or order[-1] != key:
            return None
        node = self._nodes[key]
        if not isinstance(node, Task) or node.func is not getter or node.kwargs:
            return None
        if len(node.args) != 2 or not isinstance(node.args[0], TaskRef):
            return None
        array, index = node.args[0].key, node.args[1]
        index = index.value if isinstance(index, DataNode) else index
        if set(order[:-1]) - {array}:
            return None
        if array not in given and not isinstance(self._nodes.get(array), DataNode):
            return None
        if not (isinstance(index, tuple) and index) or not all(
            isinstance(s, slice) and s.step in (None, 1)
            and isinstance(s.start, int) and isinstance(s.stop, int)
            for s in index
        ):  # fmt: skip
            return None
        return array, (index[0].start, index[0].stop), index[1:]

    def _run(self, i, given, batch_bytes):
        """The end of the run of blocks from ``i`` that one read can make (``i + 1``: none)."""
        first = self._slice_of(i, given) if batch_bytes else None
        if first is None:
            return i + 1
        array, (_, stop), rest = first
        width = int(np.prod([s.stop - s.start for s in rest]))
        size, j = (stop - first[1][0]) * width * 8, i + 1
        while j < len(self._blocks) and size < batch_bytes:
            nxt = self._slice_of(j, given)
            if nxt is None or nxt[0] != array or nxt[2] != rest or nxt[1][0] != stop:
                break
            size += (nxt[1][1] - nxt[1][0]) * width * 8
            stop, j = nxt[1][1], j + 1
        return j

    def _read_run(self, i, stop, given):
        """Blocks ``i .. stop - 1`` (a run of :meth:`_run`) read in one call, as views."""
        array, (a, _), rest = self._slice_of(i, given)
        b = self._slice_of(stop - 1, given)[1][1]
        source = given[array] if array in given else self._nodes[array]({})
        values = _read_slice(source, (slice(a, b), *rest))
        for j in range(i, stop):
            lo, hi = self._slice_of(j, given)[1]
            yield values[lo - a : hi - a]


def _read_slice(source, index):
    """``source[index]`` as ``dask.array.core.getter`` reads it, a local Zarr array's chunk
    files read here: zarr's own read of a chunk costs about ten times the file's read and
    decoding (:mod:`ppa_dask.store.zarr_chunks`)."""
    values = read_direct(source, index)
    if values is None:
        from dask.array.core import getter

        values = getter(source, index)
    return values


class ArraySliceReader(SourceReader):
    """A group's blocks when every block of the source is a row range of one array, read by
    ``getter`` (what ``dask.array.from_zarr`` makes): the reader carries the array's handle
    and the group's row ranges, so building it does not materialise the source's graph (about
    85 us a block, 0.35 s at 4,096 blocks) and a task does not carry a task per block.
    Consecutive ranges are read in calls of about ``batch_bytes``, as :meth:`SourceReader.blocks`
    does."""

    def __init__(self, array, bounds, rest):
        self._array, self._bounds, self._rest = array, bounds, rest
        self.external_keys = []

    @classmethod
    def for_groups(cls, X, plan):
        """One reader per group of ``plan``, or None when ``X`` is not such an array (then
        :meth:`SourceReader.for_groups` reads its graph)."""
        array = cls._sliced_array(X)
        if array is None:
            return None
        stops = np.cumsum(X.chunks[0]).tolist()
        starts = [0, *stops[:-1]]
        rest = tuple(slice(0, n) for n in X.shape[1:])
        return [cls(array, [(starts[i], stops[i]) for i in g], rest) for g in plan]

    @staticmethod
    def _sliced_array(X):
        """The array ``X`` reads its blocks from, when its graph is exactly a small array's
        handle and one layer of ``getter`` over the row ranges of ``X.chunks`` (one chunk
        across the other dimensions), else None. Anything else, or another Dask's layout of
        the same thing, takes the general path."""
        from dask.array.core import getter
        from dask.sizeof import sizeof
        from dask.task_spec import DataNode, Task, TaskRef

        try:
            from dask.blockwise import Blockwise
            from dask.layers import ArraySliceDep

            layers = X.__dask_graph__().layers
            layer = layers.get(X.name)
            if len(layers) != 2 or not isinstance(layer, Blockwise) or X.ndim < 1:
                return None
            if any(len(c) != 1 for c in X.chunks[1:]):
                return None
            task = layer.task
            if not isinstance(task, Task) or task.func is not getter or task.kwargs:
                return None
            if len(task.args) != 2 or len(layer.indices) != 2:
                return None
            (handle, none), (dep, _) = layer.indices
            if not isinstance(handle, TaskRef) or none is not None:
                return None
            slices = layer.io_deps.get(dep)
            if not isinstance(slices, ArraySliceDep) or tuple(slices.chunks) != X.chunks:
                return None
            if [a.key for a in task.args] != [
                f"__dask_blockwise__{i}" for i in range(2)
            ]:  # the task is getter(handle, slice of the block)
                return None
            mapping = layers[next(n for n in layers if n != X.name)]
            value = dict(mapping)[handle.key]
        except Exception:  # another Dask's layout: the general path
            return None
        value = value.value if isinstance(value, DataNode) else value
        if tuple(getattr(value, "shape", ())) != X.shape or sizeof(value) > SHARED_COPY_BYTES:
            return None
        return value

    def blocks(self, externals, batch_bytes=0):
        width = int(np.prod([s.stop for s in self._rest]))
        itemsize = np.dtype(getattr(self._array, "dtype", np.float64)).itemsize
        i = 0
        while i < len(self._bounds):
            a, stop = self._bounds[i]
            j = i + 1
            while (
                j < len(self._bounds)
                and self._bounds[j][0] == stop
                and (stop - a) * width * itemsize < batch_bytes
            ):
                stop, j = self._bounds[j][1], j + 1
            values = _read_slice(self._array, (slice(a, stop), *self._rest))
            for lo, hi in self._bounds[i:j]:
                yield values[lo - a : hi - a]
            i = j


def _is_key_of(value, graph):
    """Whether ``value`` is a key of ``graph`` (an alias, in an old-style graph)."""
    try:
        return value in graph
    except TypeError:  # unhashable: a list or an array, data
        return False


@dataclass(frozen=True)
class CheckpointFiles:
    """A group's checkpoint files (one ``.npy`` per block, in block order)."""

    paths: tuple


def _group_blocks(source, externals):
    """A group's blocks, one at a time: read by its :class:`SourceReader`, read from its
    :class:`CheckpointFiles`, or held as read (the first pass's kept blocks, a tuple)."""
    if isinstance(source, SourceReader):
        return source.blocks(externals, GROUP_BATCH_BYTES)
    if isinstance(source, CheckpointFiles):
        return (_read_checkpoint(p) for p in source.paths)
    return source


def _held(residual):
    """A step pass's kept residual as its group holds it: the array (its blocks side by side)
    and a flag the next pass sets before it writes over the array."""
    return {"residual": residual, "written_over": np.zeros(1, dtype=bool)}


def _held_residual(source):
    """The residual of a held group (its blocks side by side, a 2-D array), or None when
    ``source`` is something else (a reader, files, the source blocks as read)."""
    if isinstance(source, dict):
        return source["residual"]
    return None


class Handover:
    """What a grouped pass's task returns when its group keeps something: the small ``value``
    (its moments) for the client, and on the worker the ``kept`` part (the blocks read, the new
    residual) for the task that holds it (:func:`_take_over`). Pickled (sent to the client, to
    another worker, or spilled) it is the value alone.

    So a kept pass costs one task the client waits for and one that runs beside it: the client
    gathers the moments as soon as they are made, where a task returning ``(kept, moments)``
    took a second task on the worker, after the first, to split the moments off (6-7 ms a pass
    on this project's 2-core machine).

    Examples
    --------
    >>> import pickle
    >>> made = Handover({"n": 3}, kept=np.zeros((2, 3)))
    >>> sent = pickle.loads(pickle.dumps(made))
    >>> sent.value, sent.kept, made.kept.shape
    ({'n': 3}, None, (2, 3))
    """

    __slots__ = ("kept", "value")

    def __init__(self, value, kept=None):
        self.value, self.kept = value, kept

    def __reduce__(self):
        return (Handover, (self.value,))


def _hand_over(func, *args, **kwargs):
    """``func``'s ``(kept, value)`` as a :class:`Handover`."""
    kept, value = func(*args, **kwargs)
    return Handover(value, kept)


def _take_over(func, handover, *args, **kwargs):
    """The kept part of ``handover`` (made by ``_hand_over(func, *args, **kwargs)``), or, when
    it is not here (that task ran on another worker, or its result was spilled), ``func``'s
    again: a pure function of the same inputs, which refuses an input written over since."""
    kept, handover.kept = handover.kept, None
    if kept is None:
        kept, _ = func(*args, **kwargs)
    return kept


def _value_of(func, *args, **kwargs):
    """The value of ``func``'s ``(kept, value)`` when nothing is kept."""
    return func(*args, **kwargs)[1]


def _batches(blocks, limit=GROUP_BATCH_BYTES):
    """Consecutive blocks in lists of about ``limit`` bytes (at least one block each)."""
    batch, size = [], 0
    for block in blocks:
        block = np.asarray(block)
        batch.append(block)
        size += block.nbytes
        if size >= limit:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _concat_stacks(stacks):
    return {key: np.concatenate([s[key] for s in stacks]) for key in stacks[0]}


def _group_tree(stack, tree):
    """A group's per-block moments (a stack, row ``i`` the group's ``i``-th block) merged as
    far as the moment tree allows within the group (:func:`utils.compute.stacked_tree`):
    ``(node ids, stack of the nodes)``, a few arrays on the wire."""
    indices, fold, split_every, n = tree
    return stacked_tree([(0, i) for i in indices], stack, fold, split_every, n)


def _group_first(source, externals, *, rows, targets, keep, tree):
    """:func:`kernels.first_moments` over a group's source blocks, one at a time; each block
    is written to its checkpoint path (``targets``) or kept (``keep``, the held group).
    ``rows``: the blocks' sample rows, :func:`_side_by_side`. Returns ``(kept blocks or None,
    (merged moments, the blocks' sample rows side by side))``."""
    kept, parts = [], []
    rows = _one_by_one(rows)
    for i, block in enumerate(_group_blocks(source, externals)):
        parts.append(kernels.first_moments(block, rows[i]))
        if targets is not None:
            _write_checkpoint(targets[i], block)
        if keep:
            kept.append(block)
    stack = kernels.stack_moments(parts, kernels.FIRST_KEYS)
    samples = _side_by_side([p["sample"] for p in parts])
    return (tuple(kept) if keep else None), (_group_tree(stack, tree), samples)


def _side_by_side(arrays):
    """Per-block arrays as one array and their lengths: a task's argument or result of one
    buffer, not one per block (each costs ~35 us to serialise, 0.15 s at 4,096 blocks)."""
    return np.concatenate(arrays), [len(a) for a in arrays]


def _one_by_one(joined):
    """The per-block arrays of :func:`_side_by_side`'s result, as views."""
    values, counts = joined
    return np.split(values, np.cumsum(counts)[:-1])


def _group_pass(
    source, externals, center, steps, spec, *, sizes, starts, keep, tree, sub_block, rotation
):
    """:func:`kernels.group_pass_kernel` over a group's blocks: a held residual in one call,
    blocks of the source (held as read, or read by a :class:`SourceReader`) in batches of
    :data:`GROUP_BATCH_BYTES` side by side. Returns ``(the residual side by side or None,
    merged moments)``."""
    options = dict(keep=keep, sub_block=sub_block, rotation=rotation)
    held = _held_residual(source)
    if held is not None:
        if keep:
            # written over: a held residual is read by the step pass after the one that made
            # it and by nothing later (PPA-GD's objective passes, before it, copy what they
            # read); one received from another worker may be read-only, and then gets a new
            # array. Marked first, so that a copy taken from here on says so
            if source["written_over"][0]:
                raise RuntimeError(
                    "a held residual was written over by its step's pass and is asked for "
                    "again: it cannot be recomputed from itself"
                )
            source["written_over"][0] = True
        residual, stack = kernels.group_pass_kernel(
            held, sizes, starts, center, steps, spec, in_place=True, **options
        )
        return (_held(residual) if keep else None), _group_tree(stack, tree)
    rows_out = len(center) if rotation is None else rotation.shape[1]
    residual = np.empty((rows_out, int(sum(sizes)))) if keep else None
    stacks, at, i = [], 0, 0
    for batch in _batches(_group_blocks(source, externals)):
        X, batch_sizes, whole = kernels.side_by_side(batch, samples=center is not None)
        k = len(batch)
        _, stack = kernels.group_pass_kernel(
            X, batch_sizes, starts[i : i + k], center, steps, spec, whole=whole,
            out=residual, out_offset=at, **options,
        )  # fmt: skip
        stacks.append(stack)
        at, i = at + sum(batch_sizes), i + k
    return (_held(residual) if keep else None), _group_tree(_concat_stacks(stacks), tree)


def _group_checkpointed_pass(
    files, externals, center, steps, spec, *, targets, sizes, starts, tree, keep, **options
):
    """The pass over a group's checkpoint files (each the residual of one block, or the first
    pass's copy of its source block) in batches of :data:`GROUP_BATCH_BYTES` (a task holds one
    batch); with ``keep`` each block's new residual goes to its file of ``targets``. Returns
    the merged moments."""
    stacks, i = [], 0
    for batch in _batches(_read_checkpoint(p) for p in files.paths):
        X, batch_sizes, whole = kernels.side_by_side(batch, samples=center is not None)
        k = len(batch)
        residual, stack = kernels.group_pass_kernel(
            X, batch_sizes, starts[i : i + k], center, steps, spec, keep=keep, whole=whole,
            **options,
        )  # fmt: skip
        if keep:
            at = 0
            for target, n in zip(targets[i : i + k], batch_sizes):
                _write_checkpoint(target, residual[:, at : at + n])
                at += n
        stacks.append(stack)
        i += k
    return _group_tree(_concat_stacks(stacks), tree)


def _group_objective(source, externals, center, *args, sizes, tree, **kwargs):
    """:func:`kernels.objective_pass_kernel` over a group's blocks (held, read from the
    source, or from checkpoint files), one at a time: the merged moments."""
    held = _held_residual(source)
    if held is not None:
        ends = np.cumsum(sizes).tolist()
        blocks = (np.ascontiguousarray(held[:, b - n : b]) for n, b in zip(sizes, ends))
    else:
        blocks = _group_blocks(source, externals)
    parts = [kernels.objective_pass_kernel(b, center, *args, **kwargs) for b in blocks]
    return _group_tree(kernels.stack_moments(parts, kernels.OBJECTIVE_KEYS), tree)


def _futures_in(X):
    """The futures in ``X``'s graph (a persisted array's blocks), found without materialising
    its blockwise layers (tasks over other layers' keys, ~85 us a block to materialise)."""
    from dask.blockwise import Blockwise
    from distributed import futures_of

    layers = X.__dask_graph__().layers.values()
    return [
        f for layer in layers if not isinstance(layer, Blockwise) for f in futures_of(dict(layer))
    ]


def _source_dependencies(sources, X):
    """The collections a grouped pass's graph must include: ``X`` when a group's reader needs
    keys of its graph (a persisted block, a shared array), else none (a pass over a Zarr
    array then does not carry, or cull, the source's graph of one task per block)."""
    if sources is not None and any(
        isinstance(s, SourceReader) and s.external_keys for s in sources
    ):
        return [X]
    return ()


def _group_layer(name, func, sources, per_group, *args, dependencies=(), kept=None, **kwargs):
    """One task per group, ``func(sources[g], externals, *args, **per_group[g], **kwargs)``,
    built as one graph layer (a Delayed per group): with one ``dask.delayed`` call per group
    taking block-sized lists of Delayed objects, building a 4,096-block pass's graph took a
    second on the client, most of it culling each block's graph again.

    A source is a :class:`SourceReader` (its external keys become the task's dependencies), a
    Delayed (a held group: the task receives its value) or plain data (checkpoint paths).

    ``kept``: None, ``func`` returns the task's value; False, ``func`` returns ``(None,
    value)`` and the task the value; True, ``func`` returns ``(kept, value)`` and each group
    has a second task, ``f"{name}-kept"``, that holds the kept part where it was made
    (:class:`Handover`). Returns ``(kept per group or None, value per group)``, Delayed; with
    ``kept`` a value is a :class:`Handover`, its ``.value`` the value."""
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph
    from dask.task_spec import List, Task, TaskRef

    keys = [(name, g) for g in range(len(sources))]
    kept_keys = [(f"{name}-kept", g) for g in range(len(sources))] if kept else None
    layer, deps = {}, list(dependencies)
    for g, (key, source, extra) in enumerate(zip(keys, sources, per_group)):
        externals = List()
        if isinstance(source, SourceReader):
            externals = List(*[TaskRef(k) for k in source.external_keys])
        elif isinstance(source, Delayed):
            deps.append(source)
            source = TaskRef(source.key)
        call = (source, externals, *args)
        if kept is None:
            layer[key] = Task(key, func, *call, **extra, **kwargs)
        elif not kept:
            layer[key] = Task(key, _value_of, func, *call, **extra, **kwargs)
        else:
            layer[key] = Task(key, _hand_over, func, *call, **extra, **kwargs)
            layer[kept_keys[g]] = Task(
                kept_keys[g], _take_over, func, TaskRef(key), *call, **extra, **kwargs
            )
    graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
    values = [Delayed(key, graph, layer=name) for key in keys]
    if not kept:
        return None, values
    return [Delayed(key, graph, layer=name) for key in kept_keys], values


class DaskDriver(Driver):
    """Dask driver: kernels mapped over row chunks, moments tree-reduced.

    Parameters
    ----------
    X : dask.array.Array
        Chunked along rows; feature chunks are merged here.
    residual_cache : {"auto", "persist", "checkpoint", "recompute"}
        Where the residual lives between passes. ``"persist"``: in worker memory (one read of the
        source in all, then one read and write of the residual in memory per step).
        ``"checkpoint"``: on disk, one ``.npy`` file per chunk under ``checkpoint_dir`` (the first
        pass writes a copy of the source blocks as read, so the source is read once; then every
        ``CHECKPOINT_EVERY``-th pass reads the last checkpoint and writes the next, the passes
        between re-applying the steps fitted since; at most two are on disk, removed when the
        fit ends). ``"recompute"``: the source is read every pass and every
        fitted step re-applied per block (no storage, but step ``p`` does ``p`` steps' work). ``"auto"``:
        persist when the float64 residual takes at most half of the cluster's memory (the
        machine's available memory without a Client), else checkpoint when ``checkpoint_dir`` is
        given or every worker runs on this machine, else recompute.
    split_every : int
        Fan-in of the moment tree reduction.
    block_rows : int
        Rows per sub-block inside each chunk's kernel call.
    checkpoint_dir : str or None
        Parent directory of the checkpoints; it must be readable and writable by every worker
        (shared storage on a multi-machine cluster). None: the system's temporary directory.
    groups : "auto", int or None, optional
        (Default: the Dask configuration value ``PASS_GROUPS_CONFIG``, else ``"auto"``.)
        Blocks per task of a pass (docs/design.md section 3.11). ``"auto"``: the passes over a
        kept residual (persisted or checkpointed) run one task per group of blocks,
        ``GROUPS_PER_THREAD`` groups per thread of the cluster (of this machine without a
        Client), each group the blocks one worker holds when the source is already in worker
        memory; so a pass costs O(threads) tasks whatever the number of chunks. An int: that
        many groups of consecutive blocks. None: one task per block in every pass. The model
        is the same bit for bit: every block's moments come back and are merged in the tree of
        global block indices that ``split_every`` defines.
    """

    def __init__(
        self,
        X,
        residual_cache="auto",
        split_every=8,
        block_rows=kernels.SUB_BLOCK_ROWS,
        checkpoint_dir=None,
        groups=_CONFIGURED,
    ):
        if groups is _CONFIGURED:
            import dask

            groups = dask.config.get(PASS_GROUPS_CONFIG, "auto")
        if not (groups is None or groups == "auto" or (isinstance(groups, int) and groups > 0)):
            raise ValueError(f"groups must be 'auto', a positive int or None, got {groups!r}")
        # what rescaled() passes on to the driver of the rescaled data
        self._given = dict(
            X=X, residual_cache=residual_cache, split_every=split_every,
            block_rows=block_rows, checkpoint_dir=checkpoint_dir, groups=groups,
        )  # fmt: skip
        if X.numblocks[1] != 1:
            X = X.rechunk({1: -1})
        self.X = X
        self.n_samples, self.n_features = X.shape
        self.split_every = int(split_every)
        self.block_rows = int(block_rows)
        row_chunks = X.chunks[0]
        self.starts = np.concatenate([[0], np.cumsum(row_chunks)[:-1]]).astype(int).tolist()
        self.sizes = [int(c) for c in row_chunks]
        # the source's blocks as Delayed objects, made when a pass runs one task per block (for
        # 4,096 chunks, 0.1-0.3 s of graph work on the client that grouped passes do not need)
        self._source_list = None
        self._kept_source = None  # persist mode, one task per block: the first pass's blocks
        if residual_cache == "auto":
            needed = 8.0 * self.n_samples * self.n_features
            if needed <= 0.5 * _cluster_memory_bytes():
                residual_cache = "persist"
            elif checkpoint_dir is not None or _workers_share_local_disk():
                residual_cache = "checkpoint"
            else:
                residual_cache = "recompute"
        self.residual_cache = residual_cache
        self.checkpoint_dir = checkpoint_dir
        self._checkpoint_root = None
        self._residual = None  # persisted blocks (delayed) or checkpoint paths (str), per chunk
        self._source_copy = False  # the checkpoint is the first pass's copy of the source
        self._reads = 0  # passes (step or objective) that have read the current residual
        self._frame = ResidualFrame()
        self._applied = 0
        self.n_passes = 0
        self.groups = groups
        self._plan = None  # the groups of a grouped pass, fixed at the first one
        # persisted groups (blocks, moments) of a grouped pass: the blocks as read (with
        # _held_source) or the residual
        self._held = None
        self._held_source = False
        # the previous grouped pass's futures, released once the next pass's graph is sent
        self._retiring = None
        self._source_readers = None  # SourceReader per group, or False: none can be built

    @property
    def source_blocks(self):
        """The blocks a pass over the source reads: the source's own (Delayed, one per row
        chunk) or, in persist mode with one task per block, the first pass's kept blocks."""
        if self._kept_source is not None:
            return self._kept_source
        if self._source_list is None:
            self._source_list = list(self.X.to_delayed().ravel())
        return self._source_list

    def group_plan(self):
        """The groups of block indices of this driver's grouped passes (fixed once made), or
        None when every pass runs one task per block (``groups=None``)."""
        if self.groups is None:
            return None
        if self._plan is None:
            n = len(self.starts)
            if self.groups != "auto":
                self._plan = block_groups(n, self.groups)
            else:
                self._plan = self._auto_plan(n)
        return self._plan

    def _auto_plan(self, n):
        client = current_client()
        if client is None:
            import dask
            from dask.system import CPU_COUNT

            threads = dask.config.get("num_workers", None) or CPU_COUNT
            return block_groups(n, threads * GROUPS_PER_THREAD)
        workers = client.scheduler_info(n_workers=-1).get("workers", {})
        threads = {w: int(info.get("nthreads", 1) or 1) for w, info in workers.items()}
        owners = None
        with contextlib.suppress(Exception):  # a source not in worker memory has no owners
            # a persisted source: each group the blocks one worker holds, so none moves
            futures = _futures_in(self.X)
            if futures:
                where = client.who_has(futures)
                keys = [k[0] for k in self.X.__dask_keys__()]
                located = [sorted(where.get(k) or ()) for k in keys]
                if located and all(located):
                    owners = [w[0] for w in located]
        total = max(1, sum(threads.values()))
        return block_groups(n, total * GROUPS_PER_THREAD, owners, threads)

    def _readers(self):
        """The :class:`SourceReader` of each group (None: the passes over the source keep one
        task per block)."""
        if self.groups is None:
            return None
        if self._source_readers is None:
            readers = SourceReader.for_groups(self.X, self.group_plan())
            self._source_readers = False if readers is None else readers
        return self._source_readers or None

    def _trees(self, fold):
        """Each group's part of the moment tree: ``(its block indices, fold, split_every,
        blocks)``."""
        n = len(self.starts)
        return [(g, fold, self.split_every, n) for g in self.group_plan()]

    def _merge_groups(self, results, fold):
        """The groups' merged moments (:func:`_group_tree`) completed into the tree of global
        block indices: the root's stack, bit for bit the one-task-per-block pass's result."""
        ids = [i for group_ids, _ in results for i in group_ids]
        stack = _concat_stacks([nodes for _, nodes in results])
        ids, root = stacked_tree(ids, stack, fold, self.split_every, len(self.starts))
        if len(ids) != 1:  # a block in no group: a bug, not bad input
            raise RuntimeError(f"the groups' moments do not complete the tree: {ids[:4]}")
        return root

    def _run_groups(self, kept, values):
        """Compute a grouped pass's tasks (:func:`_group_layer`'s pair): the kept parts stay
        where they were made, the values are gathered. Returns ``(held groups or None, value
        per group)``."""
        n = 0 if kept is None else len(kept)
        client = current_client()
        if client is None:
            done = persist(*(kept or ()), *values) if n else values
            results = compute(*done[n:])
        else:
            from distributed import futures_of

            done = persist(*(kept or ()), *values)
            # the previous pass's futures are let go only now that this pass's graph is
            # queued: released just before it, they would hold it back for the client's
            # batching interval (10 ms in distributed's BatchedSend), a third of a pass with
            # no work here
            self._retiring = None
            # the values' futures gathered directly: no second graph per pass
            results = client.gather([futures_of(v)[0] for v in done[n:]])
            self._retiring = (self._held, done)
        if not n:
            return None, list(results)
        return list(done[:n]), [r.value for r in results]

    def _grouped_first_pass(self, readers, rows, sample_index):
        """:meth:`first_pass` with one task per group, each reading its own source blocks."""
        plan = self.group_plan()
        mode = self.residual_cache
        targets = self._checkpoint_paths() if mode == "checkpoint" else None
        name = task_keys("ppa-moments", 1, self.X.name, sample_index, targets, plan)[0][0]
        per_group = [
            dict(
                rows=_side_by_side([rows[i] for i in g]),
                targets=None if targets is None else [targets[i] for i in g],
                keep=mode == "persist",
                tree=tree,
            )
            for g, tree in zip(plan, self._trees(kernels.fold_first_stacks))
        ]
        tasks = _group_layer(
            name,
            _group_first,
            readers,
            per_group,
            dependencies=_source_dependencies(readers, self.X),
            kept=mode == "persist",
        )
        # persist: the blocks read stay in worker memory, held by their group, for step 1's
        # pass (the source is read once in all)
        held, results = self._run_groups(*tasks)
        if held is not None:
            self._held, self._held_source = held, True
        if targets is not None:
            self._residual, self._source_copy, self._reads = targets, True, 0
        root = self._merge_groups([tree for tree, _ in results], kernels.fold_first_stacks)
        # the sample rows in global block order, as the tree's merges concatenate them
        samples = [None] * len(self.starts)
        for g, (_, group_samples) in zip(plan, results):
            for i, sample in zip(g, _one_by_one(group_samples)):
                samples[i] = sample
        return kernels.first_moments_of_stack(root, np.concatenate(samples))

    def first_pass(self, sample_index):
        import dask

        self.n_passes += 1
        stops = self.starts[1:] + [self.n_samples]
        rows = [local_rows(sample_index, a, b) for a, b in zip(self.starts, stops)]
        readers = self._readers()
        if readers is not None:
            return self._grouped_first_pass(readers, rows, sample_index)
        if self.residual_cache == "checkpoint":
            # the blocks read go to disk as the first checkpoint, which step 1's pass reads (a
            # task with side effects: its key names the file it writes)
            targets = self._checkpoint_paths()
            chunk, extra = dask.delayed(_first_moments_kept, pure=False), [(t,) for t in targets]
        else:
            targets, extra = None, [()] * len(rows)
            chunk = dask.delayed(kernels.first_moments, pure=True)
        keys = task_keys("ppa-moments", len(rows), self.X.name, sample_index, targets)
        parts = [
            chunk(block, r, *more, dask_key_name=key)
            for block, r, more, key in zip(self.source_blocks, rows, extra, keys)
        ]
        merged = tree_reduce(
            parts, kernels.combine_first_moments, self.split_every, name="ppa-moments-merge"
        )
        if self.residual_cache == "persist":
            # the blocks this pass reads stay in worker memory for step 1's pass, so the
            # source is read once in all: a read (decoding a Zarr chunk) costs several times
            # the arithmetic of a pass; the residual step 1 keeps takes their place
            self._kept_source, merged = persist(self.source_blocks, merged)
        (total,) = compute(merged)
        if targets is not None:
            self._residual, self._source_copy, self._reads = targets, True, 0
        return total

    def _checkpoint_paths(self):
        """Fresh paths for the next checkpoint (the directory is made on first use)."""
        if self._checkpoint_root is None:
            if self.checkpoint_dir is not None:
                os.makedirs(self.checkpoint_dir, exist_ok=True)
            self._checkpoint_root = tempfile.mkdtemp(
                prefix="ppa-residual-", dir=self.checkpoint_dir
            )
            # removed by close(); also when the driver is dropped without it
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._checkpoint_root, True)
        folder = os.path.join(self._checkpoint_root, f"pass-{self.n_passes:03d}")
        return [os.path.join(folder, f"{i:06d}.npy") for i in range(len(self.starts))]

    def _current(self, mean, steps):
        """The blocks to read (source blocks, persisted blocks or checkpoint paths), the mean to
        centre them by (source only), their frame and the fitted steps not yet applied."""
        if self._held is not None:  # persisted groups
            if self._held_source:
                return self._held, mean, ResidualFrame(), steps
            return self._held, None, self._frame, steps[self._applied :]
        if self._residual is None:
            # a grouped pass reads the source through its groups' readers: only the count
            grouped = self._kept_source is None and self._readers() is not None
            blocks = [None] * len(self.starts) if grouped else self.source_blocks
            return blocks, mean, ResidualFrame(), steps
        if self._source_copy:  # the first checkpoint: the source blocks as read
            return self._residual, mean, ResidualFrame(), steps
        return self._residual, None, self._frame, steps[self._applied :]

    def _group_sources(self, blocks):
        """What each group of a grouped pass reads (held groups, :class:`CheckpointFiles`, or
        :class:`SourceReader` of the source), or None: one task per block. ``blocks`` are the
        pass's blocks from :meth:`_current`."""
        if self._held is not None:
            return self._held
        if self.groups is None:
            return None
        if self._residual is not None and self.residual_cache == "checkpoint":
            return [CheckpointFiles(tuple(blocks[i] for i in g)) for g in self.group_plan()]
        if self._residual is None and self._kept_source is None:
            return self._readers()
        return None

    def step_pass(self, mean, steps, spec, last=False):
        import dask

        self.n_passes += 1
        mode = self.residual_cache
        keep = mode in ("persist", "checkpoint") and not last
        if mode == "checkpoint":
            # a checkpoint serves CHECKPOINT_EVERY passes, the passes between re-applying the
            # steps fitted since it was written; the first pass's copy of the source serves one
            # more (step 1's pass reads it where it would read the source): the residuals are
            # written at the passes they would be if step 1 read the source and wrote one
            serves = CHECKPOINT_EVERY + (1 if self._source_copy else 0)
            keep = keep and self._reads + 1 >= serves
        blocks, center, current, pending = self._current(mean, steps)
        every_shrink = CHECKPOINT_COMPACT_WIDTH if mode == "checkpoint" else 0
        frame, rotation = current.plan(spec, keep, self.n_features, every_shrink)
        args = (current.steps_into(pending), spec.in_frame(frame.into))
        previous = self._residual if mode == "checkpoint" else None
        targets = [None] * len(blocks)
        if mode == "checkpoint" and keep:
            targets = self._checkpoint_paths()
        # the blocks read (source or the previous pass's residual) and the files written are
        # part of the token: a checkpoint pass has side effects, so its keys must not repeat
        merge_name = f"ppa-step-{len(steps) + 1:02d}-merge"  # the tree reduction's tasks
        keys = task_keys(
            f"ppa-step-{len(steps) + 1:02d}-pass",
            len(blocks),
            self.X.name,
            mean,
            steps,
            spec,
            mode,
            keep,
            self.n_passes,
            self._checkpoint_root,
            targets,
            previous,
        )
        sources = self._group_sources(blocks)
        dependencies = _source_dependencies(sources, self.X)
        if sources is not None:
            name = task_keys(f"ppa-step-{len(steps) + 1:02d}-pass", 1, keys[0][0])[0][0]
            options = dict(sub_block=self.block_rows, rotation=rotation, keep=keep)
            plan, trees = self.group_plan(), self._trees(kernels.fold_step_stacks)
            starts = [[self.starts[i] for i in g] for g in plan]
            sizes = [[self.sizes[i] for i in g] for g in plan]
            if mode == "checkpoint" and self._residual is not None:
                per_group = [
                    dict(targets=[targets[i] for i in g], starts=s, sizes=z, tree=t)
                    for g, s, z, t in zip(plan, starts, sizes, trees)
                ]
                _, results = self._run_groups(
                    *_group_layer(
                        name,
                        _group_checkpointed_pass,
                        sources,
                        per_group,
                        center,
                        *args,
                        **options,
                    )  # fmt: skip
                )
                if keep:
                    self._residual = targets
            else:
                per_group = [
                    dict(starts=s, sizes=z, tree=t) for s, z, t in zip(starts, sizes, trees)
                ]
                tasks = _group_layer(
                    name,
                    _group_pass,
                    sources,
                    per_group,
                    center,
                    *args,
                    dependencies=dependencies,
                    kept=keep,
                    **options,
                )
                # with keep, each group's residual stays where it was computed, beside its
                # input; only the moments go to the client
                self._held, results = self._run_groups(*tasks)
                self._held_source = False
            total = kernels.step_moments_of_stack(
                self._merge_groups(results, kernels.fold_step_stacks)
            )
        elif mode == "checkpoint":
            chunk = dask.delayed(_checkpointed_pass, pure=False)
            parts = [
                chunk(
                    block,
                    target,
                    start,
                    center,
                    *args,
                    keep=keep,
                    sub_block=self.block_rows,
                    rotation=rotation,
                    dask_key_name=key,
                )
                for block, target, start, key in zip(blocks, targets, self.starts, keys)
            ]
            moments = tree_reduce(
                parts, kernels.combine_step_moments, self.split_every, name=merge_name
            )
            (total,) = compute(moments)
            if keep:
                self._residual = targets
        else:
            # one task per block returns its (residual, moments) pair, persisted as one key
            # that the next pass reads where it lies; only the moments are split off (a merge
            # reading the pairs would move residual blocks between workers), so a block costs
            # two tasks per pass, not three: on a small cluster the scheduler's time per task
            # is taken from the workers' cores
            kernel = kernels.pass_kernel if center is not None else _pass_on_result
            chunk = dask.delayed(kernel, pure=True)
            outs = [
                chunk(
                    block,
                    start,
                    center,
                    *args,
                    keep=keep,
                    sub_block=self.block_rows,
                    rotation=rotation,
                    dask_key_name=key,
                )
                for block, start, key in zip(blocks, self.starts, keys)
            ]
            moments = tree_reduce(
                [o[1] for o in outs],
                kernels.combine_step_moments,
                self.split_every,
                name=merge_name,
            )
            if keep:
                residual, moments = persist(outs, moments)
                self._residual = residual
            else:
                self._residual = None
            (total,) = compute(moments)
        if previous and keep:  # the checkpoint this pass read is no longer needed
            shutil.rmtree(os.path.dirname(previous[0]), ignore_errors=True)
        self._reads += 1
        if keep:
            self._applied, self._frame, self._reads = len(steps), frame, 0
            self._source_copy = False
            self._kept_source = None  # the source's own blocks: nothing kept in memory
        return frame.out_of(total)

    def objective_pass(self, mean, steps, spec):
        """PPA-GD: one pass for the objective moments at ``spec.direction`` (degree
        ``spec.max_degree``), tree-reduced; the kept residual (or, without one, the source with
        every fitted step re-applied) is read, never modified."""
        import dask

        self.n_passes += 1
        # a read like a step pass's: a step of many objective passes then writes its checkpoint
        self._reads += 1
        blocks, center, frame, pending = self._current(mean, steps)
        sources = self._group_sources(blocks)
        if sources is not None:
            return self._grouped_objective(sources, center, frame, pending, mean, steps, spec)
        kernel = kernels.objective_pass_kernel
        if self._residual is not None and self.residual_cache == "checkpoint":
            read = dask.delayed(_read_checkpoint, pure=False)
            blocks = [read(path) for path in blocks]
        elif self._residual is not None:
            kernel = _objective_on_result
        chunk = dask.delayed(kernel, pure=True)
        pending, framed = frame.steps_into(pending), spec.in_frame(frame.into)
        keys = task_keys(
            f"ppa-step-{len(steps) + 1:02d}-objective",
            len(blocks),
            self.X.name,
            mean,
            steps,
            spec,
            self.n_passes,
            self._checkpoint_root,
        )
        parts = [
            chunk(
                block,
                center,
                pending,
                framed,
                sub_block=self.block_rows,
                dask_key_name=key,
            )
            for block, key in zip(blocks, keys)
        ]
        merged = tree_reduce(
            parts,
            kernels.combine_objective_moments,
            self.split_every,
            name=f"ppa-step-{len(steps) + 1:02d}-objective-merge",
        )
        (total,) = compute(merged)
        return _objective_in_ambient(frame, total)

    def _grouped_objective(self, sources, center, frame, pending, mean, steps, spec):
        """:meth:`objective_pass` with one task per group (:meth:`_group_sources`)."""
        name = task_keys(
            f"ppa-step-{len(steps) + 1:02d}-objective",
            1,
            self.X.name,
            mean,
            steps,
            spec,
            self.n_passes,
            self._checkpoint_root,
            self.group_plan(),
        )[0][0]
        dependencies = _source_dependencies(sources, self.X)
        pending, framed = frame.steps_into(pending), spec.in_frame(frame.into)
        trees = self._trees(kernels.fold_objective_stacks)
        sizes = [[self.sizes[i] for i in g] for g in self.group_plan()]
        per_group = [dict(tree=t, sizes=z) for t, z in zip(trees, sizes)]
        _, results = self._run_groups(
            *_group_layer(
                name,
                _group_objective,
                sources,
                per_group,
                center,
                pending,
                framed,
                sub_block=self.block_rows,
                dependencies=dependencies,
            )
        )
        total = kernels.objective_moments_of_stack(
            self._merge_groups(results, kernels.fold_objective_stacks)
        )
        return _objective_in_ambient(frame, total)

    def max_abs(self):
        import dask.array as da

        (largest,) = compute(da.maximum(self.X.max(), -self.X.min()))
        return float(largest)

    def rescaled(self, exponent):
        # the input as given (before the feature chunks were merged), as fit() built it
        given = dict(self._given)
        given["X"] = given["X"].map_blocks(np.ldexp, exponent, dtype=np.float64)
        return DaskDriver(**given)

    def close(self):
        self._held, self._held_source = None, False
        self._retiring = None
        self._residual, self._source_copy = None, False
        self._kept_source = None
        if self._checkpoint_root is not None:
            self._cleanup()
            self._checkpoint_root = None
