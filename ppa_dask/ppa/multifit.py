"""Fit many PPA members from shared scans of one Dask array (FeatureBaggingPPA out of core).

Each member is an ordinary :class:`~ppa_dask.PPA` fit: its own :meth:`PPA.fit_with_driver` runs the
small algebra on the client, asking a driver for a first pass and then one pass per step. Here
every member gets a :class:`_MemberDriver` and runs in its own thread; a driver posts its
member's request (which pass, with which step parameters) to a :class:`_Rendezvous` and waits.
When every member still fitting has posted, one scan of the data serves them all: each chunk is
read once and, for every member, the chunk's rows and columns of that member go through the
same per-block kernels a single fit uses (:func:`kernels.first_moments`,
:func:`kernels.pass_kernel`, :func:`kernels.objective_pass_kernel`), and the moments are merged
per member in one tree reduction. A member on every row of the chunk is not copied: its first
moments are the entries of its columns in the whole chunk's (one :func:`kernels.first_moments`
for all such members) and :func:`kernels.pass_kernel` reads its columns in place. No PPA
mathematics lives here, only the batching.

So a fit of ``B`` members with ``k`` steps reads the data ``1 + k`` times, not ``B (1 + k)``
times. Members re-apply their fitted steps to each chunk in every pass (the residual is never
kept: ``B`` residuals would take ``B`` times the data's memory).

Rows: a member's rows of a chunk are given by its :class:`~ppa_dask.ensemble.MemberSpec`
(a hash membership, a function of the global row index). A member sees its rows in global
order, numbered from 0 across chunks, so the row numbers its cross-validation folds and range
sample are drawn from are those of ``PPA().fit(X[rows][:, features])`` on the same rows: the
member equals that in-memory fit (up to rounding), whatever the chunking.
"""

from __future__ import annotations

import threading

import numpy as np
from sklearn.base import clone

from ppa_dask.ppa import kernels
from ppa_dask.ppa.drivers import Driver, local_rows, task_keys
from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.compute import compute
from ppa_dask.utils.seeds import set_random_state

__all__ = ["fit_members_shared_scans"]


class _Aborted(Exception):
    """Another member failed; this one stops too."""


class _Rendezvous:
    """Collects one request per active member, then runs one scan for all of them."""

    def __init__(self, n_members, scan):
        self.active = n_members
        self.scan = scan
        self.pending = {}
        self.results = {}
        self.error = None
        self.generation = 0
        self.n_scans = 0
        self.cond = threading.Condition()

    def request(self, member, payload):
        with self.cond:
            if self.error is not None:
                raise _Aborted()
            self.pending[member] = payload
            generation = self.generation
            if len(self.pending) == self.active:
                self._scan_locked()
            while self.generation == generation and self.error is None:
                self.cond.wait()
            if self.error is not None:
                raise _Aborted()
            return self.results.pop(member)

    def _scan_locked(self):
        requests, self.pending = self.pending, {}
        try:
            out = self.scan(requests)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            self.error = exc
            self.cond.notify_all()
            return
        self.n_scans += 1
        self.results.update(out)
        self.generation += 1
        self.cond.notify_all()

    def leave(self):
        with self.cond:
            self.active -= 1
            if self.error is None and self.pending and len(self.pending) == self.active:
                self._scan_locked()

    def fail(self, exc):
        with self.cond:
            if self.error is None:
                self.error = exc
            self.cond.notify_all()


class _MemberDriver(Driver):
    """The driver one member's :meth:`PPA.fit_with_driver` talks to; passes are shared scans
    (the residual is recomputed from the source in every scan)."""

    residual_cache = "recompute"

    def __init__(self, rendezvous, position, n_samples, n_features):
        self.rendezvous = rendezvous
        self.position = position
        self.n_samples = int(n_samples)
        self.n_features = int(n_features)
        self.n_passes = 0

    def first_pass(self, sample_index):
        self.n_passes += 1
        return self.rendezvous.request(self.position, ("first", np.asarray(sample_index)))

    def step_pass(self, mean, steps, spec, last=False):
        self.n_passes += 1
        return self.rendezvous.request(self.position, ("step", (mean, tuple(steps), spec)))

    def objective_pass(self, mean, steps, spec):
        self.n_passes += 1
        return self.rendezvous.request(self.position, ("objective", (mean, tuple(steps), spec)))

    def close(self):
        pass


# --------------------------------------------------------------------------------------------
# chunk tasks (module level: shipped to the workers)
# --------------------------------------------------------------------------------------------


def _member_rows(spec, start, stop):
    mask = spec.row_mask(start, stop)
    return None if mask is None else np.flatnonzero(mask)


def _count_chunk(start, stop, specs):
    """Rows of each member in global rows ``start .. stop-1`` (no data read)."""
    counts = np.empty(len(specs), dtype=np.int64)
    for b, spec in enumerate(specs):
        rows = _member_rows(spec, start, stop)
        counts[b] = stop - start if rows is None else rows.size
    return counts


def _first_moments_of_columns(whole, block, features, sample_rows):
    """A member's :func:`kernels.first_moments` on all rows of ``block`` and its ``features``,
    taken from those of the whole block: the same sums of the same products (a count, a mean and
    a scatter of the selected columns are those entries of the whole block's)."""
    index = np.ix_(features, features)
    return dict(
        n=whole["n"],
        sample=block[np.asarray(sample_rows, dtype=np.intp)][:, features],
        n_nan=whole["n_nan"][features],
        n_inf=whole["n_inf"][features],
        mean=whole["mean"][features],
        scatter=whole["scatter"][index],
    )


def _scan_chunk(block, start, work, block_rows, with_totals):
    """One chunk, every member's request: ``{member: moments}`` (plus the chunk's column sums).

    A member on every row of the chunk reads its features where they are: its first moments are
    entries of the whole chunk's (one sweep for all such members), its step passes read the
    chunk's columns in place (no copy of its selection). A member on some rows gets a copy of
    its rows and features."""
    block = np.asarray(block)
    stop = start + block.shape[0]
    out = {}
    whole = None
    with one_blas_thread():
        for member, (spec, member_start, kind, payload) in work.items():
            rows = _member_rows(spec, start, stop)
            if kind == "first" and rows is None:
                if whole is None:
                    whole = kernels.first_moments(block)
                if not (whole["n_nan"].any() or whole["n_inf"].any()):
                    out[member] = _first_moments_of_columns(whole, block, spec.features, payload)
                    continue
            if kind == "step" and rows is None:
                # (a float32 or strided block is converted sub-block by sub-block, still in place)
                sub, columns = block, spec.features
            elif rows is None:
                sub, columns = block[:, spec.features], None
            else:
                sub, columns = block[np.ix_(rows, spec.features)], None
            if kind == "first":
                # also where the chunk holds non-finite values: they are counted per member
                out[member] = kernels.first_moments(sub, payload)
            elif kind == "step":
                mean, steps, step = payload
                _, out[member] = kernels.pass_kernel(
                    sub,
                    member_start,
                    mean,
                    steps,
                    step,
                    keep=False,
                    sub_block=block_rows,
                    columns=columns,
                )
            else:
                mean, steps, step = payload
                out[member] = kernels.objective_pass_kernel(
                    sub, mean, steps, step, sub_block=block_rows
                )
        if with_totals:
            out["__totals__"] = (block.shape[0], block.sum(axis=0, dtype=np.float64))
    return out


_COMBINE = {
    "first": "combine_first_moments",
    "step": "combine_step_moments",
    "objective": "combine_objective_moments",
}


def _combine_chunks(parts, kinds):
    out = {}
    for member, kind in kinds.items():
        out[member] = getattr(kernels, _COMBINE[kind])([p[member] for p in parts])
    if "__totals__" in parts[0]:
        out["__totals__"] = (
            sum(p["__totals__"][0] for p in parts),
            sum(p["__totals__"][1] for p in parts),
        )
    return out


# --------------------------------------------------------------------------------------------
# the driver of the whole fit
# --------------------------------------------------------------------------------------------


def fit_members_shared_scans(X, specs, template, split_every=8):
    """Fit one PPA per member spec on a Dask array, all from shared scans.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Chunked along rows (feature chunks are merged).
    specs : list of :class:`~ppa_dask.ensemble.MemberSpec`
    template : PPA
        Cloned per member; ``random_state`` is set from each spec's seed.
    split_every : int
        Fan-in of the moment tree reduction.

    Returns
    -------
    members : list of PPA
        In the order of ``specs``.
    info : dict
        ``n_scans`` (scans of the data, ``1 + k`` for ``k``-step members),
        ``feature_mean`` (every column's mean, from the first scan) and ``member_rows``.
    """
    import dask

    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    n_total, d = X.shape
    chunks = X.chunks[0]
    starts = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(np.int64)
    stops = starts + np.asarray(chunks, dtype=np.int64)
    blocks = list(X.to_delayed().ravel())
    block_rows = int(getattr(template, "block_rows", kernels.SUB_BLOCK_ROWS))

    if not specs:
        (mean,) = compute(X.mean(axis=0, dtype=np.float64))
        return [], dict(n_scans=1, feature_mean=np.asarray(mean), member_rows=np.empty(0, int))

    # rows of each member per chunk: index arithmetic only, no data read
    if any(spec.row_mask(0, 1) is not None for spec in specs):
        count = dask.delayed(_count_chunk, pure=True)
        (counts,) = compute([count(int(a), int(b), specs) for a, b in zip(starts, stops)])
        counts = np.array(counts, dtype=np.int64).reshape(len(blocks), len(specs))
    else:
        counts = np.repeat(np.asarray(chunks, dtype=np.int64)[:, None], len(specs), axis=1)
    member_starts = np.vstack([np.zeros((1, len(specs)), np.int64), np.cumsum(counts, axis=0)])
    member_rows = member_starts[-1]
    totals = {}

    def scan(requests):
        kinds = {member: kind for member, (kind, _) in requests.items()}
        with_totals = not totals and any(kind == "first" for kind in kinds.values())
        scan_task = dask.delayed(_scan_chunk, pure=True)
        parts = []
        keys = task_keys(
            f"ppa-shared-scan-{rendezvous.n_scans + 1:02d}", len(blocks), X.name, specs, requests
        )
        for c, (block, start) in enumerate(zip(blocks, starts)):
            work = {}
            for member, (kind, payload) in requests.items():
                lo = int(member_starts[c, member])
                if kind == "first":
                    payload = local_rows(payload, lo, lo + int(counts[c, member]))
                work[member] = (specs[member], lo, kind, payload)
            parts.append(
                scan_task(block, int(start), work, block_rows, with_totals, dask_key_name=keys[c])
            )
        (merged,) = compute(_reduce(parts, kinds, split_every))
        if with_totals:
            n_rows, sums = merged.pop("__totals__")
            totals["mean"] = sums / n_rows
        return merged

    rendezvous = _Rendezvous(len(specs), scan)
    members = [None] * len(specs)
    errors = [None] * len(specs)

    def work(position):
        spec = specs[position]
        try:
            ppa = clone(template)
            if spec.seed is not None:
                set_random_state(ppa, spec.seed)
            driver = _MemberDriver(rendezvous, position, member_rows[position], len(spec.features))
            members[position] = ppa.fit_with_driver(driver)
        except _Aborted:
            pass
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors[position] = exc
            rendezvous.fail(exc)
        finally:
            rendezvous.leave()

    threads = [threading.Thread(target=work, args=(p,), daemon=True) for p in range(len(specs))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException as exc:  # Ctrl-C: release the waiting members, then stop
        rendezvous.fail(exc)
        raise
    for position, exc in enumerate(errors):
        if exc is not None:
            spec = specs[position]
            where = (
                f"member {spec.index} ({int(member_rows[position])} rows, features "
                f"{spec.features.tolist()})"
            )
            try:
                wrapped = type(exc)(f"{where}: {exc}")
            except Exception:  # an exception type with another constructor
                raise exc from None
            raise wrapped from exc
    if rendezvous.error is not None:
        raise rendezvous.error
    return members, dict(
        n_scans=rendezvous.n_scans, feature_mean=totals["mean"], member_rows=member_rows
    )


def _reduce(parts, kinds, split_every):
    """Tree-merge the chunks' ``{member: moments}`` dicts, per member with its kind's merge."""
    import dask

    combine = dask.delayed(_combine_chunks, pure=True)
    if len(parts) == 1:
        return combine(parts, kinds)
    while len(parts) > 1:
        parts = [
            combine(parts[i : i + split_every], kinds) for i in range(0, len(parts), split_every)
        ]
    return parts[0]
