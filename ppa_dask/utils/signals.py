"""SIGINT and SIGTERM as exceptions, whatever an imported library did to their handlers.

A command stops on Ctrl-C (SIGINT) and on SIGTERM (what a batch system sends a job at its time
limit or on ``scancel``) by unwinding its ``with`` blocks, so that batch jobs are cancelled,
temporary folders removed and no half-made result is saved: :func:`raising_signals` makes
SIGINT raise :class:`KeyboardInterrupt` and SIGTERM raise :class:`Terminated`.

Some libraries replace a handler when imported (dask-jobqueue 0.9 installs a SIGINT handler
that calls ``sys.exit()``, which ends the process with status 0 and no word);
:func:`keep_signal_handlers` around such an import puts the previous handlers back.

Examples
--------
>>> import signal
>>> with keep_signal_handlers():
...     signal.signal(signal.SIGINT, signal.SIG_IGN) is not None   # what an import might do
True
>>> signal.getsignal(signal.SIGINT) is signal.default_int_handler
True
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Terminated", "raising_signals", "keep_signal_handlers", "EXIT_STATUS"]

#: The signals handled here.
SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: The shell's exit status of a process ended by a signal: 128 + its number.
EXIT_STATUS = {signal.SIGINT: 128 + signal.SIGINT, signal.SIGTERM: 128 + signal.SIGTERM}


class Terminated(BaseException):
    """Raised by SIGTERM under :func:`raising_signals` (a BaseException, like
    KeyboardInterrupt, so that ``except Exception`` blocks do not swallow it)."""

    signum = signal.SIGTERM


def _raise(signum, frame):
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(f"terminated by signal {signal.Signals(signum).name}")


def _in_main_thread():
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def keep_signal_handlers():
    """Put back the SIGINT and SIGTERM handlers that were set on entry (main thread only;
    elsewhere Python lets no one change them)."""
    if not _in_main_thread():
        yield
        return
    saved = {s: signal.getsignal(s) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in saved.items():
            if handler is not None and signal.getsignal(s) is not handler:
                signal.signal(s, handler)


@contextlib.contextmanager
def raising_signals():
    """SIGINT raises KeyboardInterrupt and SIGTERM raises :class:`Terminated` inside the
    block (main thread only); the previous handlers are restored on exit."""
    if not _in_main_thread():
        yield
        return
    with keep_signal_handlers():
        for s in SIGNALS:
            signal.signal(s, _raise)
        yield
