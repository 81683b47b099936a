"""The timing harness of ``ppa-dask bench``: interleaved repeats, medians, rows and verdicts.

Every section times PPA and its baseline through :func:`interleaved` (A B A B ..., so a change in
the load of a shared machine hits both sides alike), takes the :func:`median` of each side and
builds its result with :func:`make_row`, which judges the ratio against the row's target.

Examples
--------
>>> row = make_row("r", "a figure", "a baseline", 2.0, 4.0, 0.5, "PPA / base", ("<=", 1.0))
>>> row["target"], row["met"]
('<= 1', True)
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import statistics
import time

import numpy as np

from ppa_dask.app.bench.sizes import WORKER_TIMEOUT
from ppa_dask.cluster import local_client


def interleaved(funcs, repeats, counts=None, clock=time.perf_counter):
    """Time zero-argument callables in interleaved rounds: A B A B ...

    Parameters
    ----------
    funcs : dict of str to callable
        What to time, in the order run within a round.
    repeats : int
        Rounds.
    counts : dict of str to int, optional
        Fewer repeats for some (a slow baseline runs only in the first ``counts[name]``
        rounds).
    clock : callable, optional
        Seconds now (``time.perf_counter``; a test passes a clock it controls).

    Returns
    -------
    times : dict of str to list of float
        Wall seconds of every call.
    results : dict
        The last return value of each callable.

    Examples
    --------
    >>> times, results = interleaved({"a": lambda: 1, "b": lambda: 2}, 3, counts={"b": 1})
    >>> len(times["a"]), len(times["b"]), results
    (3, 1, {'a': 1, 'b': 2})
    """
    counts = counts or {}
    times = {name: [] for name in funcs}
    results = {}
    for r in range(repeats):
        for name, fn in funcs.items():
            if r >= counts.get(name, repeats):
                continue
            t0 = clock()
            results[name] = fn()
            times[name].append(clock() - t0)
    return times, results


def log_log_slope(x, y):
    """Slope of ``log y`` against ``log x`` by least squares (the exponent of a power law).

    Examples
    --------
    >>> round(log_log_slope([1, 10, 100], [2.0, 20.0, 200.0]), 6)
    1.0
    """
    x, y = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    if x.size < 2:
        return None
    return float(np.polyfit(x, y, 1)[0])


def median(values):
    return float(statistics.median(values)) if values else None


def verdict(ratio, target):
    if ratio is None or target is None or not math.isfinite(ratio):
        return None
    op, bound = target
    return bool({"<=": ratio <= bound, ">=": ratio >= bound, "<": ratio < bound}[op])


def make_row(
    row_id,
    figure,
    baseline,
    ppa_s=None,
    baseline_s=None,
    ratio=None,
    ratio_label="",
    target=None,
    status="measured",
    passes=None,
    times=None,
    note="",
    **extra,
):
    """One result row; ``target`` is ``(op, bound)`` with op one of ``<=``, ``>=``, ``<``."""
    return {
        "id": row_id,
        "figure": figure,
        "ppa_s": ppa_s,
        "baseline": baseline,
        "baseline_s": baseline_s,
        "ratio": ratio,
        "ratio_label": ratio_label,
        "target": None if target is None else f"{target[0]} {target[1]:g}",
        "met": verdict(ratio, target) if status == "measured" else None,
        "status": status,
        "passes": passes,
        "times": times or {},
        "note": note,
        **extra,
    }


def passes_of(model):
    value = getattr(model, "n_passes_", None)
    return None if value is None else int(value)


def anchor(name):
    """The module ``name``, or None when it cannot be imported (an optional anchor)."""
    try:
        # the top-level package first: an imported submodule stays in sys.modules even when
        # its package is no longer importable
        importlib.import_module(name.split(".")[0])
        return importlib.import_module(name)
    except ImportError:
        return None


def new_pca(**kwargs):
    from sklearn.decomposition import PCA

    return PCA(**kwargs)


@contextlib.contextmanager
def bench_cluster(n_workers, memory_limit, scratch):
    """A LocalCluster's client once its workers are up (a bounded wait); quiet below errors
    (the scheduler's warnings about graphs of the anchors would bury the progress lines)."""
    with local_client(
        n_workers=n_workers,
        memory_limit=memory_limit,
        local_directory=scratch,
        log_level=logging.ERROR,
    ) as client:
        client.wait_for_workers(n_workers, timeout=WORKER_TIMEOUT)
        yield client
