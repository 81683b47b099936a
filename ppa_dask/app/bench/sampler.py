"""Worker memory sampled inside the workers, for the out-of-core rows of ``ppa-dask bench``.

:func:`start_sampler` runs on every worker (``client.run``): a thread records the peak resident
memory of the worker process every 20 ms and whether the worker was ever paused;
:func:`stop_sampler` stops it and returns what it saw. The sampler lives in the worker process,
so its state is a module global of that process.

Examples
--------
>>> stop_sampler() is None  # nothing started in this process
True
"""

from __future__ import annotations

import threading

#: The sampler of this (worker) process: peak resident memory and whether it was paused.
_SAMPLER = {}


def start_sampler(dask_worker, interval=0.02):
    import psutil
    from distributed.core import Status

    proc = psutil.Process()
    state = {"peak": proc.memory_info().rss, "idle": proc.memory_info().rss, "paused": False}
    state["stop"] = threading.Event()

    def sample():
        while not state["stop"].wait(interval):
            state["peak"] = max(state["peak"], proc.memory_info().rss)
            if dask_worker.status == Status.paused:
                state["paused"] = True

    _SAMPLER.clear()
    _SAMPLER.update(state)
    threading.Thread(target=sample, daemon=True, name="ppa-bench-memory").start()
    return state["idle"]


def stop_sampler():
    if not _SAMPLER:
        return None
    _SAMPLER["stop"].set()
    return {"peak": _SAMPLER["peak"], "idle": _SAMPLER["idle"], "paused": _SAMPLER["paused"]}
