"""The one text progress reporter of the package (no tqdm): ``label [#####.....] 12/64``."""

from __future__ import annotations

import sys
import time

__all__ = ["TextProgress"]


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
            filled = int(self.width * min(self.done, self.total) / self.total)
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}")
            if self.done >= self.total:
                self.stream.write("\n")
            self.stream.flush()

    def close(self):
        """End the line if the bar stopped short of its total."""
        if self.enabled and self.done < self.total:
            self.stream.write("\n")
            self.stream.flush()
