"""Computing Dask collections: tree reductions, the current Client, one BLAS thread locally.

Dask reductions in the package follow the chunk / combine / aggregate pattern of
``dask.array.reductions``: a pure per-chunk function, partial results merged in a tree of fan-in
``split_every`` (:func:`tree_reduce`), one ``compute`` at the end (:func:`compute`).
"""

from __future__ import annotations

import contextlib

import numpy as np

from ppa_dask.utils.blas import one_blas_thread

__all__ = [
    "compute",
    "current_client",
    "finish_tree",
    "merge_as_tree",
    "partial_tree",
    "persist",
    "stacked_tree",
    "tree_reduce",
    "uses_local_scheduler",
]


def tree_reduce(parts, combine, split_every, name=None):
    """Combine a list of delayed partial results in a tree of fan-in ``split_every``.

    Parameters
    ----------
    parts : list of dask.delayed.Delayed
    combine : callable
        Takes a list of partial results, returns one (pure: its task is content-keyed).
    split_every : int
        Fan-in of each combine task.
    name : str, optional
        Prefix of the combine tasks' keys, ``f"{name}-{token}"`` with a token of what each
        merges (so the dashboard names them, e.g. ``ppa-step-07-merge``); by default dask's
        ``f"{combine.__name__}-{token}"``.

    Returns
    -------
    dask.delayed.Delayed
        The single merged result (``parts[0]`` itself when there is only one part).

    Examples
    --------
    >>> import dask
    >>> parts = [dask.delayed(i) for i in range(10)]
    >>> tree_reduce(parts, sum, 4).compute()
    45
    >>> tree_reduce(parts, sum, 4, name="total").key.startswith("total-")
    True
    """
    import dask
    from dask.base import tokenize

    combine_task = dask.delayed(combine, pure=True)

    def merge(group):
        if name is None:
            return combine_task(group)
        return combine_task(group, dask_key_name=f"{name}-{tokenize(combine, group)}")

    while len(parts) > 1:
        parts = [merge(parts[i : i + split_every]) for i in range(0, len(parts), split_every)]
    return parts[0]


def merge_as_tree(parts, combine, split_every):
    """Combine a list of partial results here, in the tree :func:`tree_reduce` would build.

    The same groups of ``split_every`` in the same order at every level, so the floating-point
    result is bit for bit what :func:`tree_reduce` computes on the cluster from the same parts:
    a pass whose tasks each handle several blocks returns every block's partial result and the
    client merges them by global block index, whatever the grouping.

    Examples
    --------
    >>> import dask
    >>> parts = [0.1 * i for i in range(20)]
    >>> merge_as_tree(parts, sum, 8) == tree_reduce(
    ...     [dask.delayed(p) for p in parts], sum, 8).compute()
    True
    """
    parts = list(parts)
    while len(parts) > 1:
        parts = [combine(parts[i : i + split_every]) for i in range(0, len(parts), split_every)]
    return parts[0]


def _tree_counts(n, split_every):
    """Nodes per level of :func:`merge_as_tree`'s tree over ``n`` parts (leaves first)."""
    counts = [n]
    while counts[-1] > 1:
        counts.append(-(-counts[-1] // split_every))
    return counts


def partial_tree(indices, parts, combine, split_every, n):
    """The nodes of :func:`merge_as_tree`'s tree over ``n`` parts that some of the parts
    complete: ``{(level, j): value}``, each node as high as ``parts`` (the parts of global
    indices ``indices``) reach, combined with the same children in the same order as the tree.

    A task holding many parts merges them here, so it returns a few nodes instead of every
    part; :func:`finish_tree` then completes the tree from every task's nodes, bit for bit
    :func:`merge_as_tree` of all the parts, whichever parts each task held.

    Examples
    --------
    >>> parts = [0.1 * i for i in range(20)]
    >>> left = partial_tree(range(0, 11), parts[:11], sum, 8, 20)
    >>> sorted(left)
    [(0, 8), (0, 9), (0, 10), (1, 0)]
    >>> right = partial_tree(range(11, 20), parts[11:], sum, 8, 20)
    >>> finish_tree({**left, **right}, sum, 8, 20) == merge_as_tree(parts, sum, 8)
    True
    """
    counts = _tree_counts(n, split_every)
    level, done, k = dict(zip(indices, parts)), {}, 0
    while level and k + 1 < len(counts):
        above = {}
        for j in sorted({i // split_every for i in level}):
            children = range(j * split_every, min((j + 1) * split_every, counts[k]))
            if all(c in level for c in children):
                above[j] = combine([level.pop(c) for c in children])
        done.update(((k, i), value) for i, value in level.items())
        level, k = above, k + 1
    done.update(((k, i), value) for i, value in level.items())
    return done


def finish_tree(nodes, combine, split_every, n):
    """The root of :func:`merge_as_tree`'s tree over ``n`` parts from the nodes
    :func:`partial_tree` returned (merged into one dict); see there for an example."""
    counts = _tree_counts(n, split_every)

    def node(k, j):
        if (k, j) in nodes:
            return nodes[(k, j)]
        if k == 0:
            raise KeyError(f"part {j} of {n} is in no group")
        stop = min((j + 1) * split_every, counts[k - 1])
        return combine([node(k - 1, c) for c in range(j * split_every, stop)])

    return node(len(counts) - 1, 0)


def stacked_tree(ids, stack, fold, split_every, n):
    """:func:`partial_tree` and :func:`finish_tree` on stacked values: one numpy operation per
    child position and level, not one Python merge per node.

    ``stack`` is a dict of arrays whose leading axis runs over the nodes ``ids`` (each
    ``(level, j)`` of :func:`merge_as_tree`'s tree over ``n`` parts; the parts are level 0), and
    ``fold(acc, other)`` merges two equally long stacks row by row, as ``combine([a, b])`` would
    merge two values. Every node whose children are all present is made, with the same
    children folded in the same order as the tree (``acc = fold(fold(c0, c1), c2) ...``), as
    high as they reach. Returns ``(ids, stack)`` of the nodes left unmerged, ordered by
    ``(level, j)``: a task holding some parts returns these, and the same call on the union of
    every task's nodes ends at the root ``(levels, 0)``. When ``fold`` does elementwise what
    ``combine`` does per value, the result is bit for bit :func:`merge_as_tree`'s.

    Examples
    --------
    >>> import numpy as np
    >>> def fold(a, b):
    ...     return {"x": a["x"] + b["x"]}
    >>> parts = 0.1 * np.arange(20.0)
    >>> left = stacked_tree([(0, i) for i in range(11)], {"x": parts[:11]}, fold, 8, 20)
    >>> left[0]
    [(0, 8), (0, 9), (0, 10), (1, 0)]
    >>> right = stacked_tree([(0, i) for i in range(11, 20)], {"x": parts[11:]}, fold, 8, 20)
    >>> ids, root = stacked_tree(left[0] + right[0], {"x": np.concatenate(
    ...     [left[1]["x"], right[1]["x"]])}, fold, 8, 20)
    >>> ids, bool(root["x"][0] == merge_as_tree(list(parts), sum, 8))
    ([(2, 0)], True)
    """
    counts = _tree_counts(n, split_every)
    top = len(counts) - 1
    rows_at = {}
    for r, (k, j) in enumerate(ids):
        rows_at.setdefault(k, []).append((j, r))

    def take(values, rows):
        return {key: v[rows] for key, v in values.items()}

    done_ids, done = [], []
    made_js, made = [], None  # the nodes made from the level below
    for k in range(top + 1):
        given = sorted(rows_at.get(k, ()))
        js = [j for j, _ in given] + made_js
        if not js:
            continue
        here = take(stack, [r for _, r in given])
        if made is not None:
            here = {key: np.concatenate([here[key], made[key]]) for key in here}
        where = {j: r for r, j in enumerate(js)}
        width = counts[k]
        parents = []
        if k < top:
            for p in sorted({j // split_every for j in js}):
                children = range(p * split_every, min((p + 1) * split_every, width))
                if all(c in where for c in children):
                    parents.append(p)
        made_js, made = parents, None
        if parents:
            made = take(here, [where[p * split_every] for p in parents])
            for q in range(1, split_every):
                # only the level's last parent can have fewer children than split_every
                with_q = [p for p in parents if p * split_every + q < width]
                if not with_q:
                    break
                rows = [where[p * split_every + q] for p in with_q]
                m = len(with_q)
                if m == len(parents):
                    made = fold(made, take(here, rows))
                else:
                    head = fold(take(made, slice(0, m)), take(here, rows))
                    made = {key: np.concatenate([head[key], made[key][m:]]) for key in made}
        used = {c for p in parents for c in range(p * split_every, (p + 1) * split_every)}
        left = [r for r, j in enumerate(js) if j not in used]
        if left:
            done_ids.extend((k, js[r]) for r in left)
            done.append(take(here, left))
    order = sorted(range(len(done_ids)), key=done_ids.__getitem__)
    merged = {key: np.concatenate([d[key] for d in done]) for key in stack}
    return [done_ids[i] for i in order], take(merged, order)


def uses_local_scheduler():
    """True when there is no default distributed Client (Dask runs in this process)."""
    try:
        from distributed import default_client

        default_client()
        return False
    except (ImportError, ValueError):
        return True


def current_client():
    """The default distributed Client, or None (also None inside a running task, where
    submitting more tasks could deadlock a small cluster)."""
    try:
        from distributed import default_client, get_worker
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        get_worker()
        return None
    except ValueError:
        pass
    try:
        return default_client()
    except ValueError:
        return None


def _blas_limit():
    """One BLAS thread while Dask runs tasks in this process (its threads would each start a
    multithreaded BLAS on block-sized work); nothing under a distributed Client, whose workers
    set their own."""
    return one_blas_thread() if uses_local_scheduler() else contextlib.nullcontext()


def compute(*collections):
    """``dask.compute(*collections)``, with one BLAS thread when Dask runs in this process.

    Examples
    --------
    >>> import dask.array as da
    >>> (total,) = compute(da.ones(10, chunks=5).sum())
    >>> float(total)
    10.0
    """
    import dask

    with _blas_limit():
        return dask.compute(*collections)


def persist(*collections):
    """``dask.persist(*collections)``, with one BLAS thread when Dask runs in this process.

    Examples
    --------
    >>> import dask.array as da
    >>> (kept,) = persist(da.ones(10, chunks=5))
    >>> float(kept.sum().compute())
    10.0
    """
    import dask

    with _blas_limit():
        return dask.persist(*collections)
