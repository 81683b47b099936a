"""A command's faults as one line each: what failed, and what was kept.

A command that fails not because of what the user gave but because something around it failed
(the Dask scheduler or the connection to it lost, a worker killed more often than
distributed retries a task, the disk full or a file too large for the process's limit, write
permission lost, a remote store's read interrupted) ends with one line naming the fault, and
what it left behind: the outputs are written to temporary siblings renamed into place when
complete (:mod:`ppa_dask.utils.files`), so a fault leaves none half-written, and a pipeline run
keeps its completed stages for a rerun to resume from.

:func:`fault_line` is what ``ppa-dask``'s entry point calls for an exception no bad-input check
explains; it returns None for anything that is not one of these faults (a bug keeps its
traceback).

Examples
--------
>>> import argparse, errno
>>> args = argparse.Namespace(command="fit", model="/nowhere/m.zarr", scheduler=None)
>>> full = OSError(errno.ENOSPC, "No space left on device", "/nowhere/.m.zarr.tmp-1/c/0")
>>> for part in fault_line(full, args, outputs_present(args)).split("; "):
...     print(part)
no space left on the device writing '/nowhere/.m.zarr.tmp-1/c/0' (ENOSPC: No space left on device)
nothing was written to MODEL '/nowhere/m.zarr'
"""

from __future__ import annotations

import contextlib
import errno
import glob
import logging
import os
import traceback

from ppa_dask.app.pipeline import STAGES

__all__ = ["fault_line", "outputs_present", "quiet_fault_tracebacks"]

#: The outputs of each command: (what the line calls it, the option holding its path).
_OUTPUTS = {
    "fit": (("MODEL", "model"),),
    "transform": (("OUTPUT", "output"),),
    "inverse": (("OUTPUT", "output"),),
    "demo": (("--output", "output"),),
}
#: errno values of a write refused for want of room: a full device, a full quota, a file
#: beyond the process's size limit (RLIMIT_FSIZE).
_NO_ROOM = {
    errno.ENOSPC: "no space left on the device",
    errno.EFBIG: "a file grew beyond the size limit (the process's RLIMIT_FSIZE, or the file "
    "system's)",
}
if hasattr(errno, "EDQUOT"):
    _NO_ROOM[errno.EDQUOT] = "disk quota exceeded"
_DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)
#: Longest excerpt of an exception's own message quoted in the line.
_EXCERPT = 160


def _outputs(args):
    found = []
    for label, option in _OUTPUTS.get(getattr(args, "command", None), ()):
        path = getattr(args, option, None)
        if path and "://" not in str(path):
            found.append((label, os.fspath(path)))
    report = getattr(args, "performance_report", None)
    if report:
        found.append(("--performance-report", os.fspath(report)))
    return found


def outputs_present(args):
    """Which of the command's local outputs exist now (called before the command runs).

    Returns
    -------
    dict
        ``{path: exists}`` for each output path among ``args``'s options.
    """
    return {path: os.path.lexists(path) for _, path in _outputs(args)}


def _excerpt(exc):
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
        text = f"{errno.errorcode.get(exc.errno, exc.errno)}: {exc.strerror}"
    else:
        text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > _EXCERPT:
        text = text[: _EXCERPT - 3].rstrip() + "..."
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, OSError) else text


def _chain(exc):
    """``exc`` and the exceptions it was raised from or during, innermost last."""
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _is(exc, module, name):
    return any(
        cls.__name__ == name and cls.__module__.startswith(module) for cls in type(exc).__mro__
    )


def _scheduler_lost(exc):
    # the client's side of a scheduler that went away: the comm closed under a call, the client
    # closed by its reconnection timeout, or the futures of a computation cancelled with it
    return (
        _is(exc, "distributed", "ClosedClientError")
        or _is(exc, "distributed", "CommClosedError")
        or _is(exc, "distributed", "FutureCancelledError")
        or _is(exc, "concurrent.futures", "CancelledError")
        or _is(exc, "asyncio", "CancelledError")
    )


def _remote_read(exc):
    return (
        _is(exc, "aiohttp", "ClientError")
        or _is(exc, "fsspec", "FSTimeoutError")
        or isinstance(exc, (ConnectionError, TimeoutError))
    )


def _where(args):
    """Where the command computes, for the line about a lost scheduler."""
    scheduler = getattr(args, "scheduler", None)
    if scheduler:
        return f"the Dask scheduler {scheduler}"
    cluster = getattr(args, "cluster", None)
    if cluster:
        return f"the Dask scheduler of the cluster from {cluster}"
    return "the Dask scheduler of the local cluster"


def _writing(args, exc):
    """`` writing <file>``: the file the error names, else the command's output."""
    if exc.filename:
        return f" writing {exc.filename!r}"
    run = getattr(args, "run", None)
    if run is not None:
        return f" writing in the run folder {run.root!r}"
    outputs = _outputs(args)
    return f" writing {outputs[0][0]} {outputs[0][1]!r}" if outputs else ""


def _doing(args):
    run = getattr(args, "run", None)
    if run is not None:
        stage = _current_stage(run)
        return f" in stage {stage}" if stage else ""
    return {"fit": " while fitting", "transform": " while transforming"}.get(
        getattr(args, "command", None), f" while running {getattr(args, 'command', '')}"
    )


def _current_stage(run):
    return next((s for s in STAGES if s not in run.keys), None)


def _kept(args, before):
    """What the fault left: each output untouched (absent, or as it was), or the run folder's
    completed stages."""
    run = getattr(args, "run", None)
    if run is not None:
        done = [s for s in run.keys]
        stage = _current_stage(run)
        return (
            f"the run folder {run.root!r} keeps "
            + (f"the completed stages ({', '.join(done)})" if done else "no completed stage")
            + (
                f"; stage {stage} is unfinished (no completion marker) and is redone"
                if stage
                else ""
            )
            + "; rerun the same command to resume"
        )
    parts = []
    for label, path in _outputs(args):
        now, then = os.path.lexists(path), before.get(path, False)
        leftovers = glob.glob(
            os.path.join(glob.escape(os.path.dirname(path) or "."), "." + glob.escape(
                os.path.basename(path)) + ".tmp-*")
        )  # fmt: skip
        if leftovers:
            parts.append(f"a partial write of {label} {path!r} remains at {leftovers[0]!r}")
        elif not now and not then:
            parts.append(f"nothing was written to {label} {path!r}")
        elif now and then:
            parts.append(f"the existing {label} {path!r} was kept as it was")
        elif now:
            parts.append(f"{label} {path!r} was written before the fault")
        else:
            parts.append(f"{label} {path!r} is gone")
    return "; ".join(parts) or "nothing was written"


class _FaultTracebacks(logging.Filter):
    """Drops distributed's log records carrying the traceback of a lost scheduler."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:  # the reconnection loop's last word, said again by the fault's line
            return not str(record.msg).startswith("Failed to reconnect to scheduler")
        return not any(_scheduler_lost(e) for e in _chain(exc))


@contextlib.contextmanager
def quiet_fault_tracebacks():
    """While a command runs, distributed's loggers do not print the tracebacks of a lost
    scheduler (its client's reconnection loop logs one as it gives up): the command reports
    the fault on one line (:func:`fault_line`). Every other record passes.

    Examples
    --------
    >>> with quiet_fault_tracebacks():
    ...     pass
    """
    flt = _FaultTracebacks()
    # on the loggers (records logged there, also when distributed is imported later and adds
    # its handlers then) and on the handlers already there (records of their child loggers)
    names = {"distributed", "distributed.client", "distributed.utils", "distributed.core"}
    names.update(n for n in logging.Logger.manager.loggerDict if n.startswith("distributed."))
    loggers = [logging.getLogger(n) for n in sorted(names)]
    handlers = {h for lg in loggers for h in lg.handlers}
    for obj in (*loggers, *handlers):
        obj.addFilter(flt)
    try:
        yield
    finally:
        for obj in (*loggers, *handlers):
            obj.removeFilter(flt)


def fault_line(exc, args, before):
    """One line for a fault of the machine or the cluster, or None.

    Parameters
    ----------
    exc : BaseException
        What the command raised.
    args : argparse.Namespace
        The command's options (its outputs, scheduler; ``run``: the pipeline run, if any).
    before : dict
        :func:`outputs_present` taken before the command ran.

    Returns
    -------
    str or None
        ``"<what failed> (<the exception's words>); <what was kept>"``, or None when ``exc`` is
        none of the faults (the caller lets it propagate).
    """
    chain = _chain(exc)
    kept = _kept(args, before)
    for e in chain:
        if _is(e, "distributed", "KilledWorker"):
            task = str(getattr(e, "task", "") or "")
            task = task if len(task) <= 80 else task[:77] + "..."
            allowed = getattr(e, "allowed_failures", None)
            limit = f" = {allowed}" if isinstance(allowed, int) else ""
            return (
                f"Dask workers kept dying{_doing(args)}: distributed gave up on a task "
                + (f"({task}) " if task else "")
                + f"after the workers running it died beyond "
                f"distributed.scheduler.allowed-failures{limit} (out of memory, or their host "
                f"gone?); {kept}"
            )
    for e in chain:
        if _scheduler_lost(e):
            return f"lost {_where(args)}{_doing(args)} ({_excerpt(e)}); {kept}"
    for e in chain:
        if isinstance(e, OSError) and e.errno in _NO_ROOM:
            return f"{_NO_ROOM[e.errno]}{_writing(args, e)} ({_excerpt(e)}); {kept}"
    # innermost first: the write that was denied, not the clean-up denied after it
    for e in reversed(chain):
        if isinstance(e, PermissionError) or (isinstance(e, OSError) and e.errno in _DENIED):
            where = f" on {e.filename!r}" if e.filename else ""
            return f"permission denied{where} ({_excerpt(e)}); {kept}"
    inputs = [getattr(args, n, None) for n in ("input", "pipeline")]
    remote = [p for p in inputs if p and "://" in str(p)]
    run = getattr(args, "run", None)
    if run is not None:
        path = run.config.get("data", {}).get("path")
        if isinstance(path, str) and "://" in path:
            remote.append(path)
    if remote:
        for e in chain:
            if _remote_read(e):
                return f"reading {remote[0]} was interrupted ({_excerpt(e)}); {kept}"
    if any(_damaged_read(e) for e in chain):
        # rasterio's outer error only says "see previous exception"; the next names the file
        said = next((e for e in chain if "previous exception" not in str(e)), chain[-1])
        return (
            f"reading the input failed ({_excerpt(said)}): a file, or a chunk of a Zarr store, "
            f"is truncated or damaged; {kept}"
        )
    return None


#: Modules whose errors are the decoding of a file's bytes: an error raised in one of them is a
#: damaged input (a Zarr chunk's codec, numcodecs' compressors).
_DECODERS = ("zarr.codecs", "numcodecs")


def _damaged_read(exc):
    """Whether ``exc`` is a read of damaged data: rasterio's read error (a truncated GeoTIFF),
    or an error raised while decoding a Zarr chunk (zarr's codecs read through zarr; ppa-dask's
    own chunk reader names the chunk itself, :class:`ppa_dask.store.zarr_chunks.ChunkError`)."""
    if _is(exc, "rasterio", "RasterioIOError"):
        return True
    frames = traceback.walk_tb(exc.__traceback__)
    return any(f.f_globals.get("__name__", "").startswith(_DECODERS) for f, _ in frames)
