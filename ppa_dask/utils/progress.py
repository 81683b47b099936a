"""The package's text progress output (no tqdm), in one place.

* :class:`Reporter` -- log lines ``[   12.3 s] message`` with the wall time since a start,
  optionally appended to a log file, and the wall time of named stages (the commands of the
  CLI and the pipeline runs);
* :func:`step_progress` -- a ``progress(p, k)`` callable printing ``  fit [####    ] step p of
  k (1.2 s)`` per fitted step (``PPA.fit(progress=...)``);
* :func:`bar_line` -- the ``  label [####    ] done of total tasks (1.2 s)`` line of a task
  fan-out (the cluster's progress plugin draws it);
* :class:`TextProgress` -- a redrawn bar ``label [#####.....] 12/64`` for the in-process and
  futures fan-outs (:func:`ppa_dask.utils.fanout.run_tasks`).

This module imports nothing of ppa_dask: every layer may report progress.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import time

__all__ = ["Reporter", "TextProgress", "bar_line", "step_progress"]


def _bar(fraction, width, empty):
    """``#`` for the done fraction of ``width`` characters, ``empty`` for the rest."""
    filled = int(width * min(max(fraction, 0.0), 1.0))
    return "#" * filled + empty * (width - filled)


class Reporter:
    """Progress lines with the elapsed wall time, and the wall times of named stages.

    Parameters
    ----------
    stream : file-like, optional
        Where lines go (default ``sys.stdout``).
    logfile : str, optional
        A file each timed line is also appended to, prefixed by the local date and time.
    start : float, optional
        ``time.perf_counter()`` value the times count from (default: now), so that nested
        runs (the demo's pipelines) keep one clock.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> log = Reporter(out)
    >>> with log.stage("work_s", "working"):
    ...     pass
    >>> out.getvalue().split("] ")[1].strip()
    'working ...'
    >>> sorted(log.times)
    ['work_s']
    """

    def __init__(self, stream=None, logfile=None, start=None):
        self.stream = sys.stdout if stream is None else stream
        self.logfile = logfile
        self.start = time.perf_counter() if start is None else start
        self.times = {}

    def say(self, message):
        """Print ``[elapsed s] message`` (and append it to the log file)."""
        line = f"[{self.total():7.1f} s] {message}"
        print(line, file=self.stream, flush=True)
        if self.logfile is not None:
            # O_NOFOLLOW: a log is never appended through a symbolic link to a file elsewhere
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
            with open(os.open(self.logfile, flags, 0o644), "a") as f:
                f.write(f"{datetime.datetime.now().isoformat(timespec='seconds')} {line}\n")

    __call__ = say

    def plain(self, message=""):
        """Print a line without the time (tables, blank lines); not logged."""
        print(message, file=self.stream, flush=True)

    @contextlib.contextmanager
    def stage(self, key, message):
        """Say ``message ...`` and record the wall time of the block under ``times[key]``."""
        self.say(f"{message} ...")
        t0 = time.perf_counter()
        yield
        self.times[key] = time.perf_counter() - t0

    def total(self):
        """Seconds since the start."""
        return time.perf_counter() - self.start


def step_progress(stream, label="fit", width=20):
    """A ``progress(p, k)`` callable printing one bar line per finished step.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> report = step_progress(out, width=4)
    >>> report(1, 2)
    >>> out.getvalue().split(" (")[0]
    '  fit [##  ] step 1 of 2'
    """
    start = time.perf_counter()

    def report(p, k):
        filled = int(round(width * p / k)) if k else width
        elapsed = time.perf_counter() - start
        print(
            f"  {label} [{'#' * filled:<{width}}] step {p} of {k} ({elapsed:.1f} s)",
            file=stream,
            flush=True,
        )

    return report


def bar_line(label, done, total, elapsed, width=20):
    """The line of a fan-out of ``total`` tasks, ``done`` finished after ``elapsed`` seconds.

    Examples
    --------
    >>> bar_line("scan", 1, 4, 0.5, width=8)
    '  scan [##      ] 1 of 4 tasks (0.5 s)'
    """
    frac = done / total if total else 1.0
    return f"  {label} [{_bar(frac, width, ' ')}] {done} of {total} tasks ({elapsed:.1f} s)"


class TextProgress:
    """A plain-text progress bar, redrawn at most every ``interval`` seconds and once at the end.

    Parameters
    ----------
    total : int
        Number of units of work.
    label : str
        Shown before the bar.
    enabled : bool
        Silent when false (or when ``total`` is 0).
    stream : file-like, optional
        Where to draw (default ``sys.stderr``).
    width : int
        Characters of the bar.
    interval : float
        Seconds between redraws.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> bar = TextProgress(2, "fits", stream=out, width=4, interval=0)
    >>> bar.update(); bar.update()
    >>> out.getvalue().splitlines()[-1].strip()
    'fits [####] 2/2'
    """

    def __init__(self, total, label="tasks", enabled=True, stream=None, width=30, interval=0.2):
        self.total = max(int(total), 0)
        self.label = label
        self.enabled = bool(enabled) and self.total > 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.interval = interval
        self.done = 0
        self._last = 0.0

    def update(self, n=1):
        """Count ``n`` more units done and redraw if due."""
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last >= self.interval or self.done >= self.total:
            self._last = now
            bar = _bar(self.done / self.total, self.width, ".")
            self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}")
            if self.done >= self.total:
                self.stream.write("\n")
            self.stream.flush()

    def close(self):
        """End the line if the bar stopped short of its total."""
        if self.enabled and self.done < self.total:
            self.stream.write("\n")
            self.stream.flush()
