"""Fan independent tasks out over the current Dask cluster, or run them one by one in process.

The ensembles and the stability refits are many small independent fits. With a distributed
Client they become futures (``pure=False``: a refit is never deduplicated with another that
happens to hash the same; ``retries`` survive a lost worker), the shared arrays are scattered
once, and results are handed back as they complete (``as_completed``), so a caller can store
each one before the next arrives. Without a Client (or from inside a task, where submitting
more tasks could deadlock a small cluster) the same function runs in process, in order, with
one BLAS thread.

Results come back in completion order; callers that sum them put them back in index order
first, so the answer never depends on which worker finished first.
"""

from __future__ import annotations

from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.progress import TextProgress

__all__ = ["run_tasks"]


def run_tasks(func, items, shared=(), *, client=None, retries=2, label="tasks", verbose=0):
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
    verbose : int
        Show a text progress bar on stderr when > 0.

    Yields
    ------
    (int, object)
        The item's position in ``items`` and ``func``'s result.
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
        from distributed import as_completed

        # unique keys (hash=False): a content-hashed key shared with an earlier call could be
        # released by that call while this one still needs it
        remote, seen = [], {}
        for value in shared:
            if not _worth_scattering(value):
                remote.append(value)
            elif id(value) in seen:
                remote.append(seen[id(value)])
            else:
                seen[id(value)] = client.scatter(value, hash=False)
                remote.append(seen[id(value)])
        futures = [
            client.submit(func, item, *remote, pure=False, retries=retries) for item in items
        ]
        where = {future.key: position for position, future in enumerate(futures)}
        try:
            for future in as_completed(futures):
                result = future.result()
                progress.update()
                yield where[future.key], result
                future.release()
        finally:
            # an error, or a consumer that stopped early: nothing left running for us
            client.cancel([f for f in futures if not f.done()])
    finally:
        progress.close()


def _worth_scattering(value):
    """Arrays (and anything sizeable) travel once; small scalars go inline with each task."""
    return value is not None and not isinstance(value, (int, float, str, bool))
