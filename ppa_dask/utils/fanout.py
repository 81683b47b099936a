"""Fan independent tasks out over the current Dask cluster, or run them one by one in process.

The ensembles and the stability refits are many small independent fits. With a distributed
Client they become futures (``pure=False``: a refit is never deduplicated with another that
happens to hash the same; ``retries`` survive a lost worker), the shared arrays are scattered
once (a copy on every worker, and again should every copy be lost with its workers), and results
are handed back as they complete (``as_completed``), so a caller can store each one before the
next arrives. Without a Client (or from inside a task, where submitting
more tasks could deadlock a small cluster) the same function runs in process, in order, with
one BLAS thread.

Results come back in completion order; callers that sum them put them back in index order
first, so the answer never depends on which worker finished first.

Each task's key says what it computes (``key``): ``bag-member-0012-<token>``,
``fi-refit-feature-3-<token>``, one ``<token>`` per call, so keys are unique per run while the
dashboard, which groups tasks by the part of the key before its first number or hash
(``distributed.utils.key_split``), shows one progress bar and one task-stream colour per kind:
``bag-member``, ``fi-refit-feature``.
"""

from __future__ import annotations

import uuid

from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.progress import TextProgress

__all__ = ["run_tasks", "task_keys"]


def run_tasks(
    func, items, shared=(), *, client=None, retries=2, label="tasks", key=None, verbose=0
):
    """Call ``func(item, *shared)`` for every item; yield ``(position, result)`` as each finishes.

    Parameters
    ----------
    func : callable
        A module-level function (it is shipped to the workers).
    items : sequence
        One task per item.
    shared : tuple
        Arguments common to every task (arrays, templates); scattered to the cluster once.
    client : distributed.Client or None
        Where to run; None runs in process, in order.
    retries : int
        Retries of a failed task on the cluster (a lost worker, say).
    label : str
        Name shown by the progress bar.
    key : str, callable or None
        What each task computes, the start of its key on the cluster: a callable
        ``key(item) -> str`` (``lambda spec: f"bag-member-{spec.index:04d}"``), or a str to which
        the item's position is appended (``"refit"`` gives ``refit-0000``, ``refit-0001``...);
        None takes the function's name. A token unique to this call is appended. Names must
        differ between items.
    verbose : int
        Show a text progress bar on stderr when > 0.

    Yields
    ------
    (int, object)
        The item's position in ``items`` and ``func``'s result.

    Examples
    --------
    >>> sorted(run_tasks(abs, [-2, 3], key=lambda v: f"abs-of-{v}"))
    [(0, 2), (1, 3)]
    """
    items = list(items)
    progress = TextProgress(len(items), label, enabled=verbose > 0)
    try:
        if client is None:
            with one_blas_thread():
                for position, item in enumerate(items):
                    result = func(item, *shared)
                    progress.update()
                    yield position, result
            return
        from concurrent.futures import CancelledError

        from distributed import as_completed

        def scatter_shared():
            # unique keys (hash=False): a content-hashed key shared with an earlier call could
            # be released by that call while this one still needs it
            remote, seen = [], {}
            for value in shared:
                if not _worth_scattering(value):
                    remote.append(value)
                elif id(value) in seen:
                    remote.append(seen[id(value)])
                else:
                    # a copy on every worker (broadcast): scattered data cannot be recomputed,
                    # so with one copy the loss of its worker would fail every task
                    seen[id(value)] = client.scatter(value, hash=False, broadcast=True)
                    remote.append(seen[id(value)])
            return remote

        def submit(positions):
            keys = task_keys(func, [items[p] for p in positions], key)
            return {
                client.submit(func, items[p], *remote, key=name, pure=False, retries=retries): p
                for p, name in zip(positions, keys)
            }

        remote = scatter_shared()
        pending = submit(range(len(items)))  # future -> position, until its result is handed back
        scatters = 1
        try:
            completed = as_completed(list(pending))
            for future in completed:
                position = pending.pop(future, None)
                if position is None:
                    continue  # replaced after the shared arrays were scattered again
                try:
                    result = future.result()
                except CancelledError:
                    # the shared arrays' every copy was lost with its workers (a broadcast can
                    # leave one copy, on a worker that was busy or joining): the scheduler
                    # forgets them and cancels what needs them. This process still holds them:
                    # scatter them again and resubmit what has not come back, at most `retries`
                    # times
                    if scatters > retries:
                        raise
                    scatters += 1
                    client.cancel(list(pending))
                    remote = scatter_shared()
                    pending = submit(sorted([position, *pending.values()]))
                    completed.update(list(pending))
                    continue
                progress.update()
                yield position, result
                future.release()
        finally:
            # an error, or a consumer that stopped early: nothing left running for us
            client.cancel([f for f in pending if not f.done()])
    finally:
        progress.close()


def task_keys(func, items, key=None, token=None):
    """The cluster keys :func:`run_tasks` gives its tasks: ``<name>-<token>`` per item.

    Parameters
    ----------
    func : callable
        The task function (its name is the default ``key``).
    items : sequence
        One key per item.
    key : str, callable or None
        As in :func:`run_tasks`.
    token : str, optional
        The common suffix; default: a fresh random one, so two calls never share a key.

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        If two items get the same name.

    Examples
    --------
    >>> task_keys(abs, ["a", "b"], key="bag-member", token="1f2e")
    ['bag-member-0000-1f2e', 'bag-member-0001-1f2e']
    """
    token = uuid.uuid4().hex if token is None else token
    if key is None:
        key = getattr(func, "__name__", "task").strip("_").replace("_", "-") or "task"
    if callable(key):
        names = [str(key(item)) for item in items]
    else:
        names = [f"{key}-{position:04d}" for position in range(len(items))]
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"run_tasks: two tasks are named {name!r}; task names must differ")
        seen.add(name)
    return [f"{name}-{token}" for name in names]


def _worth_scattering(value):
    """Arrays (and anything sizeable) travel once; small scalars go inline with each task."""
    return value is not None and not isinstance(value, (int, float, str, bool))
