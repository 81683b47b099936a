"""Local clusters' workers on cores of their own.

When a local cluster's workers have as many threads between them as this machine lets the
command use (or fewer), :func:`ppa_dask.cluster.local_client` starts each worker with this
module as its preload (distributed's ``distributed.worker.preload``): :func:`dask_setup` pins
the worker process to CPUs of its own (:func:`worker_cores`, by the worker's name: a
LocalCluster names them 0, 1, ...), also a worker its nanny restarts; the scheduler and the
client stay where the operating system puts them. The layout reaches the workers in the
environment variable :data:`CORES_VARIABLE`.

Why: the scheduler wakes every worker at the start of each pass, and Linux places a woken
thread near the thread that woke it, so for a few milliseconds two workers' tasks could share
one core while the other idled. On 2 cores, in a pass of 30 ms, one worker's task then ran
20-50 % longer than the other's (docs/guide/performance.md, "Workers on cores of their own").

Examples
--------
>>> worker_cores(1, 1, 2, [0, 1])
[1]
>>> worker_cores(1, 2, 2, [0, 1, 2, 3])
[2, 3]
>>> worker_cores(0, 1, 3, [0, 1]) is None
True
"""

from __future__ import annotations

import contextlib
import json
import os

__all__ = [
    "CORES_VARIABLE",
    "cores_layout",
    "dask_setup",
    "pin_this_process",
    "usable_cpus",
    "worker_cores",
]

#: The environment variable that carries the layout to the workers (JSON: ``cpus``,
#: ``threads_per_worker``, ``n_workers``).
CORES_VARIABLE = "PPA_DASK_WORKER_CORES"


def usable_cpus():
    """The CPUs this process may run on (its affinity), sorted; empty where the platform does
    not say."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def worker_cores(index, threads_per_worker, n_workers, cpus):
    """The CPUs worker ``index`` of ``n_workers`` is pinned to: ``threads_per_worker`` of
    ``cpus`` of its own, or None when the workers' threads do not fit in ``cpus`` (the cores
    are then shared, and the operating system places everything)."""
    cpus = sorted(cpus)
    if n_workers * threads_per_worker > len(cpus) or not 0 <= index < n_workers:
        return None
    return cpus[index * threads_per_worker : (index + 1) * threads_per_worker]


def cores_layout(n_workers, threads_per_worker, cpus=None):
    """The value of :data:`CORES_VARIABLE` for a cluster of this shape, or None when its
    workers' threads do not fit in ``cpus`` (default: :func:`usable_cpus`)."""
    cpus = usable_cpus() if cpus is None else sorted(int(c) for c in cpus)
    if (
        not hasattr(os, "sched_setaffinity")
        or worker_cores(0, threads_per_worker, n_workers, cpus) is None
    ):
        return None
    return json.dumps(
        {"cpus": cpus, "threads_per_worker": int(threads_per_worker), "n_workers": int(n_workers)}
    )


def pin_this_process(cpus):
    """Set the CPU affinity of every thread of this process (Linux's affinity is per thread;
    a thread started later inherits its creator's) and return the process's affinity."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that has just ended
            os.sched_setaffinity(int(tid), cpus)
    return sorted(os.sched_getaffinity(0))


def dask_setup(worker):
    """Distributed's preload hook, run in each worker process as it starts: pin it to its
    cores when :data:`CORES_VARIABLE` describes its cluster and the worker's name is its
    index there; anything else is left alone."""
    text = os.environ.get(CORES_VARIABLE)
    if not text or not isinstance(worker.name, int):
        return
    layout = json.loads(text)
    cores = worker_cores(
        worker.name, layout["threads_per_worker"], layout["n_workers"], layout["cpus"]
    )
    if cores is not None:
        pin_this_process(cores)
