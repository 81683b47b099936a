"""Progress of work on a cluster: a bar per PPA step, and a bar of a computation's tasks.

:func:`step_reporter` is the ``progress`` callable :meth:`ppa_dask.PPA.fit` takes (one bar per
fitted step); :func:`compute_with_progress` is ``dask.compute`` with a bar of the tasks, fed by
the scheduler's task counts on a distributed Client and by ``dask.diagnostics`` without one.
"""

from __future__ import annotations

from ppa_dask.utils.progress import bar_line, step_progress

__all__ = ["step_reporter", "compute_with_progress"]


def step_reporter(stream, label="fit", width=20):
    """A ``progress(p, k)`` callable for :meth:`ppa_dask.PPA.fit` printing one bar per step.

    Examples
    --------
    >>> import io, numpy as np
    >>> from ppa_dask import PPA
    >>> out = io.StringIO()
    >>> _ = PPA(degree=2).fit(np.random.default_rng(0).normal(size=(200, 3)),
    ...                       progress=step_reporter(out))
    >>> out.getvalue().splitlines()[-1].split("]")[0]
    '  fit [####################'
    """
    return step_progress(stream, label=label, width=width)


def compute_with_progress(*collections, label="compute", stream=None):
    """``dask.compute(*collections)`` with a progress bar of the fan-out (its tasks).

    On a distributed Client the bar follows the scheduler's task counts (distributed's progress
    plugin); on a non-terminal stream it prints a line per quarter. Without a Client it is
    ``dask.diagnostics.ProgressBar``.
    """
    import sys

    import dask

    stream = sys.stdout if stream is None else stream
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        client = None
    if client is None:
        from dask.diagnostics import ProgressBar

        with ProgressBar(out=stream, minimum=1.0):
            return dask.compute(*collections)
    futures = client.compute(list(collections))
    try:
        _FanoutBar(futures, label, stream, scheduler=client.scheduler.address)
        return tuple(client.gather(futures))
    finally:
        # cancel, not release: Future.release reaches the scheduler only after a graph
        # submitted next (one more hop through the client's event loop), which then meets
        # these tasks still there, fused differently, and distributed warns of a different
        # run_spec (dask/dask#9888); cancel-keys goes out now, ahead of any later graph
        client.cancel(futures)


def _fanout_bar_class():
    from distributed.diagnostics.progressbar import TextProgressBar

    class FanoutBar(TextProgressBar):
        """distributed's text bar, written to a given stream, line by line off a terminal."""

        def __init__(self, futures, label, stream, **kwargs):
            self._label, self._stream = label, stream
            self._tty = bool(getattr(stream, "isatty", lambda: False)())
            self._printed = -1
            super().__init__(futures, interval="250ms", width=20, **kwargs)

        def _draw_bar(self, remaining, all, **kwargs):
            frac = (1 - remaining / all) if all else 1.0
            quarter = int(4 * frac)
            line = bar_line(self._label, all - remaining, all, self.elapsed)
            if self._tty:
                self._stream.write("\r" + line)
                self._stream.flush()
            elif quarter > self._printed:
                self._printed = quarter
                print(line, file=self._stream, flush=True)

        def _draw_stop(self, **kwargs):
            if self._tty:
                self._stream.write("\n")
                self._stream.flush()

    return FanoutBar


def _FanoutBar(futures, label, stream, **kwargs):
    return _fanout_bar_class()(futures, label, stream, **kwargs)
