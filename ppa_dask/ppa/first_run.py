"""The kernels' compile on a machine's first run, in a child process while a command starts.

A child imports :mod:`ppa_dask.ppa.fused` alone (not the package, whose imports would cost it
seconds of the CPU the command and its workers need at the same time) and runs
:func:`ppa_dask.ppa.fused.compile_missing`: kernel by kernel under the cache's file lock, into
numba's on-disk cache, while the package is imported, the cluster starts and the data are read.
Each process that calls a kernel (the command, the workers) waits for that kernel and those
before it, then loads them. In a process of its own the compile, which is mostly Python
(numba's typing), does not take the command's GIL from the scheduler and the client.

The ``ppa-dask`` command starts the child first thing, while the package is still being
imported (:func:`ppa_dask.launch.compile_early`), and calls :func:`compile_in_background` again
before it opens its local cluster; both name the same child
(:func:`ppa_dask.utils.standalone.start` is idempotent per file and function), so this finds
it. :func:`background_record` waits for it.

Examples
--------
>>> compile_in_background() in ("process", "thread", None)
True
>>> record = background_record()  # waits for the child, if one was started
>>> record is None or sorted(record["compiled"] + record["loaded"]) == sorted(fused.SIGNATURES)
True
"""

from __future__ import annotations

from ppa_dask.ppa import fused
from ppa_dask.utils import standalone

__all__ = ["CHILD_FUNCTION", "compile_in_background", "background_record"]

#: what the child runs: a function of :mod:`ppa_dask.ppa.fused`, which imports nothing of the
#: package (the child imports that file alone)
CHILD_FUNCTION = "compile_missing"


def compile_in_background():
    """Start compiling the kernels into numba's on-disk cache in a process of their own, on a
    first run on this machine; return what was started: ``"process"`` (now, or already by the
    command's entry), ``"thread"`` (no on-disk cache: this process compiles them in a thread for
    itself) or None (the cache is complete)."""
    if standalone.started(fused.__file__, CHILD_FUNCTION) is not None:
        return "process"
    if fused.cache_dir() is None:
        fused.compile_kernels(wait=False)
        return "thread"
    if fused.cache_is_complete():
        return None
    standalone.start(fused.__file__, fused.__name__, CHILD_FUNCTION)
    return "process"


def background_record(timeout=fused.COMPILE_LOCK_TIMEOUT):
    """The record of the child :func:`compile_in_background` (or the command's entry) started, as
    :func:`ppa_dask.ppa.fused.compile_kernels` returns it, with ``pid``, waited for at most
    ``timeout`` seconds; None when none was started, when it found the cache complete, or when
    it failed or did not finish in time (every process then compiles what it needs itself, under
    the lock)."""
    proc = standalone.started(fused.__file__, CHILD_FUNCTION)
    record = None if proc is None else standalone.result(proc, timeout)
    if record is not None:
        record["pid"] = proc.pid
    return record
