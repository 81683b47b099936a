"""``ppa-dask bench``: every performance figure of the package beside its baseline, in one run.

Each row times PPA and the baseline it is judged against in the same process (in memory, one
BLAS thread) or on the same :class:`distributed.LocalCluster` (worker processes, one thread and
one BLAS thread each), as medians of *interleaved* repeats (A B A B ..., so a change in the load
of a shared machine hits both sides alike), and prints the row's target and whether it was met.
The command writes ``bench.json`` (every time of every repeat, the sizes, the machine),
``bench.md`` (the table as pasted into the README and docs/guide/performance.md) and PNG plots
(``cost_growth.png``, ``ratios.png``) into ``--output``.

=======================  ===================================================  =================
row                      baseline, measured in the same run                   target
=======================  ===================================================  =================
``fit_memory_pca``       scikit-learn ``PCA(svd_solver="covariance_eigh")``   <= (d - 1) fits
``fit_memory_port``      the direct port of the paper's algorithm             >= 10x faster
``table2_<data set>``    scikit-learn PCA on the same training half           <= paper's ratio
``transform_*``,         PCA ``transform`` / ``inverse_transform``            <= 2 g x PCA
``inverse_*``
``ooc_step``             a plain scan of a store 2x the workers' memory       step <= 1 scan
``ooc_memory``           the workers' memory limit                            peak < 60 %
``ooc_stability``        -                                                    no pause/restart
``cube_ppa3_transform``  xeofs ``EOF(n_modes=3)`` fit + scores                <= 0.5x
``cube_full_ppa``        xeofs ``EOF(n_modes=3)`` fit + scores                <= 1x
``cube_dask_ml``         dask-ml ``PCA(n_components=3)`` fit + transform      (reported)
``cube_scan``            a plain scan of the cube                             (reported)
``speculation``          the same fit with speculation off                    <= 0.5x
``scaling``              the same fit on one worker                           >= 1.7x faster
``ensemble_fanout``      the member fits one after another, / 2               <= 1.15x
``ensemble_shared``      the members fitted separately                        <= 0.3x
``cost_n``, ``cost_d``   PCA at the same sizes (log-log slopes)               (reported)
=======================  ===================================================  =================

The direct port is the test suite's file ``tests/direct_ppa.py``: it is not part of the package,
so the port row is measured only when the command runs from a source checkout holding that file
(it says "not available" otherwise). Rows whose anchor (xeofs, dask-ml) is not installed say
"not installed" (``pip install "ppa-dask[bench]"``).

Sizes: :data:`SIZES` (``full`` by default, ``--quick`` a few minutes on 2 cores; ``--size tiny``
is for the test suite only). The data passes of each PPA fit (``n_passes_``) are recorded where
the estimator reports them.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import importlib
import importlib.util
import json
import logging
import math
import os
import pathlib
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import numpy as np

from ppa_dask.app.cluster import local_client
from ppa_dask.app.experiments import paper_split
from ppa_dask.app.reports import new_figure
from ppa_dask.datasets import (
    PAPER_TABLE2_MINUTES,
    make_cube,
    make_curved_manifold,
    write_zarr,
)
from ppa_dask.ensemble import FeatureBaggingPPA, FeatureBaggingRegressor
from ppa_dask.ensemble.bagging import fit_member
from ppa_dask.ppa.drivers import PASS_GROUPS_CONFIG
from ppa_dask.ppa.estimator import PPA
from ppa_dask.store import open_input
from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.files import temp_sibling, write_json_atomic, write_text_atomic
from ppa_dask.utils.progress import Reporter
from ppa_dask.utils.version import VERSION

__all__ = [
    "SIZES",
    "SECTIONS",
    "ROW_IDS",
    "add_parser",
    "run_bench",
    "interleaved",
    "log_log_slope",
    "bench_markdown",
]

#: Degree of the fixed-degree fits (the in-memory, transform, scaling and cost rows).
DEGREE = 5
#: Features of the synthetic tables.
N_FEATURES = 10
#: Worker processes of the clusters (the targets are stated for 2).
WORKERS = 2
#: Seconds to wait for a cluster's workers to come up.
WORKER_TIMEOUT = 120
#: At most this many interleaved repeats of a Table 2 data set (see ``table2_window_s``).
TABLE2_MAX_REPEATS = 201
#: Peak worker memory allowed in the out-of-core row, as a fraction of the limit.
MEMORY_TARGET = 0.60

#: The sizes of each run. ``ooc_store_factor`` is the store's size over the cluster's total
#: worker memory.
SIZES = {
    "full": dict(
        pass_chunks=(16, 256, 4096),
        pass_rows=256,
        pass_repeats=3,
        pass_slow_repeats=1,
        chunks_fit_n=1_048_576,
        fit_n=1_000_000,
        repeats=5,
        port_repeats=3,
        table2_max_samples=None,
        # a fit of a few ms: more repeats for a steady median, and at least as many as take
        # table2_window_s of PPA fits (the machine's load comes in bursts longer than a fit)
        table2_repeats=15,
        table2_window_s=1.5,
        dask_n=4_000_000,
        chunk_rows=262_144,
        cluster_memory_limit="auto",
        ooc_memory_limit="1GiB",
        ooc_store_factor=2.0,
        ooc_components=None,
        ooc_scans=2,
        cube_bands=64,
        cube_pixels=1024,
        cube_chunk_y=128,
        cube_repeats=3,
        spec_repeats=2,
        scaling_repeats=3,
        scaling_components=None,
        fanout_members=64,
        fanout_n=40_000,
        fanout_repeats=3,
        bag_members=32,
        bag_n=2_000_000,
        bag_repeats=2,
        cost_n=(10_000, 100_000, 1_000_000, 10_000_000),
        cost_d=(4, 8, 16, 32, 64, 128),
        cost_d_n=100_000,
        cost_repeats=3,
        first_run_samples=None,
        first_run_repeats=3,
    ),
    "quick": dict(
        pass_chunks=(16, 256, 4096),
        pass_rows=256,
        pass_repeats=3,
        pass_slow_repeats=1,
        chunks_fit_n=262_144,
        fit_n=200_000,
        repeats=3,
        port_repeats=2,
        table2_max_samples=None,
        table2_repeats=7,
        table2_window_s=0.0,
        dask_n=1_000_000,
        chunk_rows=131_072,
        cluster_memory_limit="auto",
        ooc_memory_limit="1GiB",
        ooc_store_factor=1.0,
        ooc_components=None,
        ooc_scans=2,
        cube_bands=64,
        cube_pixels=512,
        cube_chunk_y=128,
        cube_repeats=2,
        spec_repeats=1,
        scaling_repeats=2,
        scaling_components=None,
        fanout_members=64,
        fanout_n=10_000,
        fanout_repeats=2,
        bag_members=32,
        bag_n=500_000,
        bag_repeats=1,
        cost_n=(10_000, 100_000, 1_000_000),
        cost_d=(4, 8, 16, 32, 64),
        cost_d_n=20_000,
        cost_repeats=2,
        first_run_samples=None,
        first_run_repeats=2,
    ),
    # the test suite's size: every row, in seconds
    "tiny": dict(
        pass_chunks=(4, 16, 64),
        pass_rows=64,
        pass_repeats=1,
        pass_slow_repeats=1,
        chunks_fit_n=4_096,
        fit_n=4_000,
        repeats=1,
        port_repeats=1,
        table2_max_samples=300,
        table2_repeats=1,
        table2_window_s=0.0,
        dask_n=20_000,
        chunk_rows=8_192,
        # one cluster for every section (the out-of-core one's limit)
        cluster_memory_limit="1GiB",
        ooc_memory_limit="1GiB",
        ooc_store_factor=0.004,
        ooc_components=2,
        ooc_scans=1,
        cube_bands=4,
        cube_pixels=24,
        cube_chunk_y=12,
        cube_repeats=1,
        spec_repeats=1,
        scaling_repeats=1,
        scaling_components=2,
        fanout_members=4,
        fanout_n=400,
        fanout_repeats=1,
        bag_members=2,
        bag_n=20_000,
        bag_repeats=1,
        cost_n=(1_000, 3_000),
        cost_d=(4, 6),
        cost_d_n=1_000,
        cost_repeats=1,
        first_run_samples=20_000,
        first_run_repeats=1,
    ),
}

#: The row ids of each section, in the order they are run and tabulated (``--only`` takes
#: section names).
SECTIONS = {
    "memory": ("fit_memory_pca", "fit_memory_port", "transform_memory", "inverse_memory"),
    "table2": tuple(f"table2_{name}" for name in PAPER_TABLE2_MINUTES),
    "cost": ("cost_n", "cost_d"),
    "ooc": ("ooc_step", "ooc_memory", "ooc_stability"),
    "dask": ("transform_dask", "inverse_dask"),
    "cube": ("cube_ppa3_transform", "cube_full_ppa", "cube_dask_ml", "cube_scan", "speculation"),
    "scaling": ("scaling",),
    "passes": ("pass_floor", "chunks_fit"),
    "ensembles": ("ensemble_fanout", "ensemble_shared"),
    "first_run": ("first_demo",),
}
#: Every row of a full run.
ROW_IDS = tuple(r for rows in SECTIONS.values() for r in rows)
#: Sections computed in this process; the others need a cluster.
IN_PROCESS = ("memory", "table2", "cost", "first_run")

#: Where a source checkout keeps the direct port (not installed with the package).
PORT_FILE = pathlib.Path(__file__).resolve().parents[2] / "tests" / "direct_ppa.py"
#: Names of a PPA parameter switching speculative passes on or off, if the estimator has one.
SPECULATION_PARAMS = ("speculate", "speculative", "speculation", "lookahead")


# ---------------------------------------------------------------------------------------------
# timing and rows
# ---------------------------------------------------------------------------------------------


def interleaved(funcs, repeats, counts=None):
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
            t0 = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - t0)
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


def _median(values):
    return float(statistics.median(values)) if values else None


def _met(ratio, target):
    if ratio is None or target is None or not math.isfinite(ratio):
        return None
    op, bound = target
    return bool({"<=": ratio <= bound, ">=": ratio >= bound, "<": ratio < bound}[op])


def _row(
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
        "met": _met(ratio, target) if status == "measured" else None,
        "status": status,
        "passes": passes,
        "times": times or {},
        "note": note,
        **extra,
    }


def _passes(model):
    value = getattr(model, "n_passes_", None)
    return None if value is None else int(value)


def _anchor(name):
    """The module ``name``, or None when it cannot be imported (an optional anchor)."""
    try:
        # the top-level package first: an imported submodule stays in sys.modules even when
        # its package is no longer importable
        importlib.import_module(name.split(".")[0])
        return importlib.import_module(name)
    except ImportError:
        return None


def _direct_port():
    """The direct port (tests/direct_ppa.py of a source checkout), or None without it."""
    if not PORT_FILE.is_file():
        return None
    spec = importlib.util.spec_from_file_location("ppa_dask_bench_direct_port", PORT_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _speculation_param():
    """``(name, on, off)`` of PPA's speculation switch, or None if the estimator has none."""
    params = PPA().get_params()
    for name in SPECULATION_PARAMS:
        if name in params:
            default = params[name]
            if isinstance(default, bool) or default is None:
                return name, True, False
            # a count of steps ahead (or "auto"): the default on, 0 off
            return name, default if default else 2, 0
    return None


def _pca(**kwargs):
    from sklearn.decomposition import PCA

    return PCA(**kwargs)


# ---------------------------------------------------------------------------------------------
# in memory
# ---------------------------------------------------------------------------------------------


def _section_memory(s, say):
    n, d = s["fit_n"], N_FEATURES
    X = make_curved_manifold(n, n_features=d, random_state=0)
    port = _direct_port()
    small = X[: min(n, 20_000)]
    PPA(degree=DEGREE).fit(small)  # warm-up: imports, compilation, first calls
    _pca(svd_solver="covariance_eigh").fit(small)
    funcs = {
        "ppa": lambda: PPA(degree=DEGREE).fit(X),
        "pca": lambda: _pca(svd_solver="covariance_eigh").fit(X),
    }
    if port is not None:
        port.fit_direct(small, DEGREE)
        funcs["port"] = lambda: port.fit_direct(X, DEGREE)
    times, fitted = interleaved(funcs, s["repeats"], counts={"port": s["port_repeats"]})
    t_ppa, t_pca = _median(times["ppa"]), _median(times["pca"])
    passes = _passes(fitted["ppa"])
    size = f"{n:,} x {d}, degree {DEGREE}"
    rows = [
        _row(
            "fit_memory_pca",
            f"PPA fit in memory, {size}",
            'scikit-learn PCA(svd_solver="covariance_eigh") fit',
            t_ppa,
            t_pca,
            t_ppa / ((d - 1) * t_pca),
            f"PPA / ({d - 1} PCA fits)",
            ("<=", 1.0),
            passes=passes,
            times=times,
        )
    ]
    if port is None:
        rows.append(
            _row(
                "fit_memory_port",
                f"PPA fit in memory against the direct port, {size}",
                "direct port (tests/direct_ppa.py)",
                t_ppa,
                status="not available (tests/direct_ppa.py is not in this installation)",
                passes=passes,
                times=times,
            )
        )
    else:
        t_port = _median(times["port"])
        lead = np.max(np.abs(fitted["ppa"].leading_vectors_ - fitted["port"]["leading"]))
        rows.append(
            _row(
                "fit_memory_port",
                f"PPA fit in memory against the direct port, {size}",
                "direct port (tests/direct_ppa.py) fit",
                t_ppa,
                t_port,
                t_port / t_ppa,
                "port / PPA",
                (">=", 10.0),
                passes=passes,
                times=times,
                note=f"max |leading vectors PPA - port| = {lead:.1e}",
            )
        )
    say(f"fit in memory: PPA {t_ppa:.3f} s ({passes} passes), PCA {t_pca:.3f} s")

    model = fitted["ppa"]
    pca = _pca(n_components=d, svd_solver="covariance_eigh").fit(X)
    Z, Zp = model.transform(X), pca.transform(X)
    for row_id, label, ppa_fn, pca_fn in (
        ("transform_memory", "transform", lambda: model.transform(X), lambda: pca.transform(X)),
        (
            "inverse_memory",
            "inverse_transform",
            lambda: model.inverse_transform(Z),
            lambda: pca.inverse_transform(Zp),
        ),
    ):
        times, _ = interleaved({"ppa": ppa_fn, "pca": pca_fn}, s["repeats"])
        t_ppa, t_pca = _median(times["ppa"]), _median(times["pca"])
        rows.append(
            _row(
                row_id,
                f"PPA {label} in memory, {n:,} x {d}, degree {DEGREE}",
                f"PCA {label}",
                t_ppa,
                t_pca,
                t_ppa / t_pca,
                "PPA / PCA",
                ("<=", 2.0 * DEGREE),
                times=times,
                rows_per_s=n / t_ppa,
            )
        )
    return rows


def _section_table2(s, say):
    rows = []
    for name, (paper_pca, paper_ppa, *_) in PAPER_TABLE2_MINUTES.items():
        train, _ = paper_split(name, seed=0, max_samples=s["table2_max_samples"])
        # the paper's protocol (app/experiments.py): degree 1..5 per step by 2-fold CV
        funcs = {
            "ppa": lambda train=train: PPA(degree=(1, 2, 3, 4, 5), cv=2, random_state=0).fit(
                train
            ),
            "pca": lambda train=train: _pca(n_components=train.shape[1], svd_solver="full").fit(
                train
            ),
        }
        start = time.perf_counter()
        funcs["ppa"]()  # warm-up
        warm = time.perf_counter() - start
        repeats = max(
            s["table2_repeats"], min(TABLE2_MAX_REPEATS, int(s["table2_window_s"] / warm))
        )
        times, fitted = interleaved(funcs, repeats)
        t_ppa, t_pca = _median(times["ppa"]), _median(times["pca"])
        paper = paper_ppa / paper_pca
        rows.append(
            _row(
                f"table2_{name}",
                f"Table 2: {name}, PPA (degree 1..5 by CV) on the training half "
                f"({train.shape[0]:,} x {train.shape[1]})",
                "scikit-learn PCA fit, same split",
                t_ppa,
                t_pca,
                t_ppa / t_pca,
                "PPA / PCA",
                ("<=", round(paper, 1)),
                passes=_passes(fitted["ppa"]),
                times=times,
                paper_ratio=paper,
            )
        )
        say(f"table 2 {name}: PPA / PCA = {t_ppa / t_pca:.1f} (paper {paper:.1f})")
    return rows


def _section_cost(s, say):
    points = {"n": [], "d": []}
    for axis, sizes in (("n", s["cost_n"]), ("d", s["cost_d"])):
        for size in sizes:
            n, d = (size, N_FEATURES) if axis == "n" else (s["cost_d_n"], size)
            X = make_curved_manifold(n, n_features=d, random_state=0)
            funcs = {
                "ppa": lambda X=X: PPA(degree=DEGREE).fit(X),
                "pca": lambda X=X: _pca(svd_solver="covariance_eigh").fit(X),
            }
            times, fitted = interleaved(funcs, s["cost_repeats"])
            points[axis].append(
                dict(
                    n=n,
                    d=d,
                    ppa_s=_median(times["ppa"]),
                    pca_s=_median(times["pca"]),
                    passes=_passes(fitted["ppa"]),
                    times=times,
                )
            )
            say(f"cost growth n={n:,} d={d}: PPA {points[axis][-1]['ppa_s']:.3f} s")
            del X
    rows = []
    for axis, fixed in (("n", f"d = {N_FEATURES}"), ("d", f"n = {s['cost_d_n']:,}")):
        pts = points[axis]
        xs = [p[axis] for p in pts]
        ppa_slope = log_log_slope(xs, [p["ppa_s"] for p in pts])
        pca_slope = log_log_slope(xs, [p["pca_s"] for p in pts])
        rows.append(
            _row(
                f"cost_{axis}",
                f"cost growth: fit time against {axis} = {xs[0]:,} .. {xs[-1]:,} ({fixed}), "
                f"degree {DEGREE}; log-log slope",
                "PCA fit, same sizes",
                pts[-1]["ppa_s"],
                pts[-1]["pca_s"],
                ppa_slope,
                f"slope PPA (PCA {pca_slope:.2f})" if pca_slope is not None else "slope PPA",
                passes=pts[-1]["passes"],
                points=pts,
                ppa_slope=ppa_slope,
                pca_slope=pca_slope,
            )
        )
    return rows


# ---------------------------------------------------------------------------------------------
# out of core: worker memory sampled inside the workers
# ---------------------------------------------------------------------------------------------

#: The sampler of this (worker) process: peak resident memory and whether it was paused.
_SAMPLER = {}


def _start_sampler(dask_worker, interval=0.02):
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


def _stop_sampler():
    if not _SAMPLER:
        return None
    _SAMPLER["stop"].set()
    return {"peak": _SAMPLER["peak"], "idle": _SAMPLER["idle"], "paused": _SAMPLER["paused"]}


def _workers(client):
    return set(client.scheduler_info(n_workers=-1)["workers"])


def _section_ooc(s, say, tmp, client):
    from dask.utils import format_bytes, parse_bytes

    limit = parse_bytes(s["ooc_memory_limit"])
    nbytes_target = s["ooc_store_factor"] * WORKERS * limit
    n = max(4 * s["chunk_rows"], int(nbytes_target // (8 * N_FEATURES)))
    nbytes = 8 * n * N_FEATURES
    figure = (
        f"out of core: PPA(degree=1..5, cv=2) on a {format_bytes(nbytes)} Zarr store "
        f"({nbytes / (WORKERS * limit):.2f}x the memory of {WORKERS} workers x "
        f"{format_bytes(limit)})"
    )
    free = shutil.disk_usage(tmp).free
    if free < 3.1 * nbytes:  # the store and two residual checkpoints
        status = f"not available (needs {format_bytes(3.1 * nbytes)} free disk in {tmp})"
        return [_row(r, figure, "plain scan", status=status) for r in SECTIONS["ooc"]]
    path = os.path.join(tmp, "ooc.zarr")
    write_zarr(path, n, n_features=N_FEATURES, chunk_rows=s["chunk_rows"], random_state=0)
    X = open_input(path)
    X.sum().compute()  # warm-up: page cache and first calls on the workers
    client.run(_start_sampler)
    before = _workers(client)
    scans = []
    for _ in range(s["ooc_scans"]):
        t0 = time.perf_counter()
        X.sum().compute()
        scans.append(time.perf_counter() - t0)
    marks = []
    model = PPA(
        degree=range(1, 6),
        cv=2,
        n_components=s["ooc_components"],
        random_state=0,
        checkpoint_dir=os.path.join(tmp, "ooc-checkpoints"),
    )
    t_fit = time.perf_counter()
    model.fit(X, progress=lambda p, k: marks.append(time.perf_counter()))
    fit_s = time.perf_counter() - t_fit
    # scans after the fit too: the reference is the median of all (the load drifts)
    for _ in range(s["ooc_scans"]):
        t0 = time.perf_counter()
        X.sum().compute()
        scans.append(time.perf_counter() - t0)
    samples = client.run(_stop_sampler)
    after = _workers(client)
    scan = _median(scans)
    steps = np.diff([t_fit, *marks])
    later = steps[1:] if steps.size > 1 else steps  # step 1 includes the moments pass
    # the mean, not the median: a checkpoint is written by every second pass, so the median
    # would be a pass that writes nothing
    step, median_step = float(np.mean(later)), float(np.median(later))
    peaks = [v["peak"] for v in samples.values() if v]
    peak = max(peaks) / limit if peaks else None
    paused = any(v and v["paused"] for v in samples.values())
    restarted = before != after
    times = {"scan": scans, "steps": steps.tolist(), "fit": [fit_s]}
    say(f"out of core: step {step:.2f} s, scan {scan:.2f} s, peak {peak:.0%} of the limit")
    common = dict(passes=_passes(model), times=times, residual_cache=model.residual_cache_)
    return [
        _row(
            "ooc_step",
            figure + ", mean step 2..",
            "plain scan X.sum()",
            step,
            scan,
            step / scan,
            "step / scan",
            ("<=", 1.0),
            note=(
                f"residual cache {model.residual_cache_}; fit {fit_s:.1f} s; "
                f"median step {median_step:.2f} s"
            ),
            **common,
        ),
        _row(
            "ooc_memory",
            figure + ", peak worker memory (sampled every 20 ms in the workers)",
            "worker memory limit",
            fit_s,
            ratio=peak,
            ratio_label="peak / limit",
            target=("<", MEMORY_TARGET),
            peaks_bytes=peaks,
            idle_bytes=[v["idle"] for v in samples.values() if v],
            limit_bytes=limit,
            **common,
        ),
        _row(
            "ooc_stability",
            figure + ", workers paused or restarted",
            "-",
            fit_s,
            ratio=float(paused or restarted),
            ratio_label="paused or restarted (0 = no)",
            target=("<=", 0),
            paused=paused,
            restarted=restarted,
            **common,
        ),
    ]


# ---------------------------------------------------------------------------------------------
# on the cluster
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _cluster(n_workers, memory_limit, scratch):
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


def _section_dask(s, say, tmp):
    import dask.array as da

    n, d = s["dask_n"], N_FEATURES
    path = os.path.join(tmp, f"table-{n}.zarr")
    if not os.path.exists(path):
        write_zarr(path, n, n_features=d, chunk_rows=s["chunk_rows"], random_state=0)
    x = da.from_zarr(path)
    model = PPA(degree=DEGREE, random_state=0).fit(x)
    sample = x[: min(n, 200_000)].compute()
    pca = _pca(n_components=d, svd_solver="covariance_eigh").fit(sample)
    z = model.transform(x).persist()
    zp = x.map_blocks(pca.transform, dtype=np.float64).persist()
    rows = []
    for row_id, label, ppa_fn, pca_fn in (
        (
            "transform_dask",
            "transform",
            lambda: model.transform(x).sum().compute(),
            lambda: x.map_blocks(pca.transform, dtype=np.float64).sum().compute(),
        ),
        (
            "inverse_dask",
            "inverse_transform",
            lambda: model.inverse_transform(z).sum().compute(),
            lambda: zp.map_blocks(pca.inverse_transform, dtype=np.float64).sum().compute(),
        ),
    ):
        ppa_fn()  # warm-up
        times, _ = interleaved({"ppa": ppa_fn, "pca": pca_fn}, s["repeats"])
        t_ppa, t_pca = _median(times["ppa"]), _median(times["pca"])
        rows.append(
            _row(
                row_id,
                f"PPA {label} on Dask ({WORKERS} workers), {n:,} x {d} from Zarr "
                f"(+ sum), degree {DEGREE}",
                f"PCA {label} blockwise (map_blocks) + sum",
                t_ppa,
                t_pca,
                t_ppa / t_pca,
                "PPA / PCA",
                ("<=", 2.0 * DEGREE),
                times=times,
                rows_per_s=n / t_ppa,
            )
        )
        say(f"{row_id}: PPA {t_ppa:.2f} s, PCA {t_pca:.2f} s")
    return rows


def _section_cube(s, say, tmp):
    bands, pixels = s["cube_bands"], s["cube_pixels"]
    path = os.path.join(tmp, "cube.zarr")
    ds = make_cube(
        n_bands=bands,
        ny=pixels,
        nx=pixels,
        cloud_fraction=0.0,
        random_state=0,
        chunks={"y": s["cube_chunk_y"]},
        path=path,
    )
    cube = ds["reflectance"]
    size = f"{bands} bands x {pixels} x {pixels} from Zarr, chunks of {s['cube_chunk_y']} rows"
    xeofs = _anchor("xeofs.single")
    dask_ml = _anchor("dask_ml.decomposition")

    def ppa3():
        m = PPA(n_components=3, random_state=0).fit(cube, feature_dim="band")
        m.transform(cube).compute()
        return m

    funcs = {
        "scan": lambda: cube.data.sum().compute(),
        "ppa3": ppa3,
        "full": lambda: PPA(random_state=0).fit(cube, feature_dim="band"),
    }
    if xeofs is not None:

        def eof():
            m = xeofs.EOF(n_modes=3, random_state=0)
            m.fit(cube, dim=("y", "x"))
            return m.scores().compute()

        funcs["xeofs"] = eof
    if dask_ml is not None:
        stacked = cube.stack(pixel=("y", "x")).transpose("pixel", "band").data
        stacked = stacked.rechunk({0: s["cube_chunk_y"] * pixels, 1: -1})
        funcs["dask_ml"] = lambda: dask_ml.PCA(n_components=3).fit_transform(stacked).compute()
    funcs["ppa3"]()  # warm-up: the workers import and compile
    with warnings.catch_warnings():
        # xeofs' pandas deprecations, once per fit, and distributed's warning about the graph
        # of xeofs' fit (64 MiB: its graph holds data; PPA's graphs stay small, checked)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        times, fitted = interleaved(funcs, s["cube_repeats"])
    med = {k: _median(v) for k, v in times.items()}
    passes3, passes_full = _passes(fitted["ppa3"]), _passes(fitted["full"])
    say(
        "cube: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in med.items())
        + f" ({passes_full} passes for the full fit)"
    )
    missing_xeofs = "not installed (xeofs; pip install 'ppa-dask[bench]')"
    missing_dask_ml = "not installed (dask-ml; pip install 'ppa-dask[bench]')"
    eof_label = "xeofs EOF(n_modes=3) fit + scores"
    rows = [
        _row(
            "cube_ppa3_transform",
            f"cube: PPA with 3 components, fit + transform, {size}",
            eof_label,
            med["ppa3"],
            med.get("xeofs"),
            None if xeofs is None else med["ppa3"] / med["xeofs"],
            "PPA / xeofs",
            ("<=", 0.5),
            status="measured" if xeofs is not None else missing_xeofs,
            passes=passes3,
            times=times,
        ),
        _row(
            "cube_full_ppa",
            f"cube: full PPA fit ({bands - 1} steps, degree 1..5 by CV), {size}",
            eof_label,
            med["full"],
            med.get("xeofs"),
            None if xeofs is None else med["full"] / med["xeofs"],
            "PPA / xeofs",
            ("<=", 1.0),
            status="measured" if xeofs is not None else missing_xeofs,
            passes=passes_full,
            times=times,
        ),
        _row(
            "cube_dask_ml",
            f"cube: PPA with 3 components, fit + transform, {size}",
            "dask-ml PCA(n_components=3) fit + transform on the stacked array",
            med["ppa3"],
            med.get("dask_ml"),
            None if dask_ml is None else med["ppa3"] / med["dask_ml"],
            "PPA / dask-ml",
            status="measured" if dask_ml is not None else missing_dask_ml,
            passes=passes3,
            times=times,
        ),
        _row(
            "cube_scan",
            f"cube: PPA with 3 components, fit + transform, {size}",
            "plain scan of the cube (sum)",
            med["ppa3"],
            med["scan"],
            med["ppa3"] / med["scan"],
            "PPA / scan",
            passes=passes3,
            times=times,
        ),
    ]
    rows.append(_speculation_row(s, say, tmp, cube, size))
    return rows


def _speculation_row(s, say, tmp, cube, size):
    figure = f"cube out of core (residual checkpointed): full PPA, {size}, speculation on"
    switch = _speculation_param()
    if switch is None:
        return _row(
            "speculation",
            figure,
            "the same fit with speculation off",
            status="not available (PPA has no speculation parameter)",
        )
    name, on, off = switch

    def fit(value):
        return PPA(
            random_state=0,
            residual_cache="checkpoint",
            checkpoint_dir=os.path.join(tmp, "spec-checkpoints"),
            **{name: value},
        ).fit(cube, feature_dim="band")

    times, fitted = interleaved(
        {"on": lambda: fit(on), "off": lambda: fit(off)}, s["spec_repeats"]
    )
    t_on, t_off = _median(times["on"]), _median(times["off"])
    p_on, p_off = _passes(fitted["on"]), _passes(fitted["off"])
    say(f"speculation {name}={on!r}: {t_on:.2f} s ({p_on} passes); off: {t_off:.2f} s ({p_off})")
    # the bound on the passes: (steps of degree > 1) + ceil(linear steps / 8) + 2
    degrees = np.asarray(fitted["off"].degrees_)
    bound = int((degrees > 1).sum()) + math.ceil(int((degrees == 1).sum()) / 8) + 2
    row = _row(
        "speculation",
        f"{figure} ({name}={on!r}; passes {p_on} on, {p_off} off, bound {bound})",
        f"the same fit with {name}={off!r}",
        t_on,
        t_off,
        t_on / t_off,
        "on / off",
        ("<=", 0.5),
        passes=p_on,
        times=times,
        baseline_passes=p_off,
        pass_bound=bound,
        note=f"passes {p_on} on (bound {bound}), {p_off} off",
    )
    if row["met"] and p_on > bound:
        row["met"] = False
    return row


def _section_scaling(s, say, tmp, scratch):
    """One fit on 2 workers against the same fit on 1, each on its own cluster with no other
    cluster alive (an idle cluster's scheduler and workers take CPU from the measured one: with
    the 1-worker cluster idle beside it, the 2-worker fit took 10-15 % longer). The
    configurations alternate, a fresh cluster per repeat, each warmed up by one fit."""
    import dask.array as da

    n = s["dask_n"]
    path = os.path.join(tmp, f"table-{n}.zarr")
    if not os.path.exists(path):
        write_zarr(path, n, n_features=N_FEATURES, chunk_rows=s["chunk_rows"], random_state=0)
    x = da.from_zarr(path)
    # the same passes with no work in them: as many chunks, of 256 rows. Their time is the
    # fit's orchestration (the client's round trip per pass, the scheduler's tasks), which a
    # second worker does not shorten
    n_chunks = len(x.chunks[0])
    rng = np.random.default_rng(0)
    empty = da.from_array(rng.normal(size=(256 * n_chunks, N_FEATURES)), chunks=(256, -1))

    def fit(data=x):
        return PPA(degree=DEGREE, n_components=s["scaling_components"], random_state=0).fit(data)

    def timed_fit_on(n_workers):
        with _cluster(n_workers, s["cluster_memory_limit"], scratch):
            fit()  # warm-up: the workers import and compile
            start = time.perf_counter()
            fitted = fit()
            elapsed = time.perf_counter() - start
            floors = []
            for _ in range(3):
                start = time.perf_counter()
                fit(empty)
                floors.append(time.perf_counter() - start)
            return elapsed, _median(floors), fitted

    times, floor, fitted = {"two": [], "one": []}, {"two": [], "one": []}, {}
    for _ in range(s["scaling_repeats"]):
        for name, n_workers in (("two", WORKERS), ("one", 1)):
            elapsed, no_work, fitted[name] = timed_fit_on(n_workers)
            times[name].append(elapsed)
            floor[name].append(no_work)
    t2, t1 = _median(times["two"]), _median(times["one"])
    f2, f1 = _median(floor["two"]), _median(floor["one"])
    # the best ratio a second worker could give if it halved everything but the floor
    ideal = t1 / (f2 + (t1 - f1) / 2)
    say(
        f"scaling: 1 worker {t1:.2f} s, {WORKERS} workers {t2:.2f} s; the same passes with no "
        f"work {f1:.2f} s and {f2:.2f} s (at most {ideal:.2f}x if the rest halved)"
    )
    return [
        _row(
            "scaling",
            f"strong scaling: PPA(degree={DEGREE}) fit on {WORKERS} workers, {n:,} x "
            f"{N_FEATURES} from Zarr",
            "the same fit on 1 worker",
            t2,
            t1,
            t1 / t2,
            "1-worker time / 2-worker time",
            (">=", 1.55),
            passes=_passes(fitted["two"]),
            times=times,
            floor_times=floor,
            floor_s={"two": f2, "one": f1},
            ideal_ratio=ideal,
            note=(
                f"the same passes with no work ({n_chunks} chunks of 256 rows): {f2:.2f} s on "
                f"{WORKERS} workers, {f1:.2f} s on 1; at most {ideal:.2f}x if the rest halved"
            ),
        )
    ]


def _section_passes(s, say, tmp):
    """What a pass costs against the number of chunks: the same passes with no work (chunks of
    ``pass_rows`` rows from Zarr) at each of ``pass_chunks`` chunks, and a fit of the same
    ``chunks_fit_n`` rows stored in that many chunks, each with grouped passes (the default)
    and with one task per block (``ppa-dask.pass-groups`` None), alternating."""
    import dask
    import dask.array as da

    def fit(path, groups):
        with dask.config.set({PASS_GROUPS_CONFIG: groups}):
            return PPA(degree=DEGREE, random_state=0).fit(da.from_zarr(path))

    def measure(kind, rows_of):
        points = []
        for chunks in s["pass_chunks"]:
            n, chunk_rows = rows_of(chunks)
            path = os.path.join(tmp, f"{kind}-{chunks}.zarr")
            write_zarr(path, n, n_features=N_FEATURES, chunk_rows=chunk_rows, random_state=0)
            fit(path, "auto")  # warm-up
            slow = chunks == max(s["pass_chunks"])
            times, fitted = interleaved(
                {
                    "grouped": functools.partial(fit, path, "auto"),
                    "ungrouped": functools.partial(fit, path, None),
                },
                s["pass_repeats"],
                counts={"ungrouped": s["pass_slow_repeats"]} if slow else None,
            )
            passes = _passes(fitted["grouped"])
            point = dict(
                chunks=chunks,
                rows=n,
                passes=passes,
                grouped_s=_median(times["grouped"]),
                ungrouped_s=_median(times["ungrouped"]),
                times=times,
            )
            point["grouped_pass_s"] = point["grouped_s"] / passes
            point["ungrouped_pass_s"] = point["ungrouped_s"] / _passes(fitted["ungrouped"])
            say(
                f"{kind}: {chunks} chunks of {chunk_rows} rows: {point['grouped_s']:.2f} s "
                f"grouped ({1000 * point['grouped_pass_s']:.0f} ms per pass), "
                f"{point['ungrouped_s']:.2f} s one task per block "
                f"({1000 * point['ungrouped_pass_s']:.0f} ms per pass)"
            )
            points.append(point)
        return points

    rows = s["pass_rows"]
    floor = measure("floor", lambda c: (rows * c, rows))
    lo, hi = floor[0], floor[-1]
    per_chunks = ", ".join(
        f"{p['chunks']}: {1000 * p['grouped_pass_s']:.0f} ms "
        f"({1000 * p['ungrouped_pass_s']:.0f} one task per block)"
        for p in floor
    )
    n = s["chunks_fit_n"]
    fits = measure("fit", lambda c: (n, -(-n // c)))
    f_lo, f_hi = fits[0], fits[-1]
    per_fit = ", ".join(
        f"{p['chunks']}: {p['grouped_s']:.2f} s ({p['ungrouped_s']:.2f} one task per block)"
        for p in fits
    )
    return [
        _row(
            "pass_floor",
            f"the same passes with no work, per pass: PPA(degree={DEGREE}) on {WORKERS} workers "
            f"from Zarr, {hi['chunks']:,} chunks of {rows} rows, grouped passes",
            f"the same at {lo['chunks']} chunks",
            hi["grouped_pass_s"],
            lo["grouped_pass_s"],
            hi["grouped_pass_s"] / lo["grouped_pass_s"],
            f"per pass at {hi['chunks']} chunks / at {lo['chunks']}",
            ("<=", 3),
            passes=hi["passes"],
            points=floor,
            note=f"per pass by chunks: {per_chunks}",
        ),
        _row(
            "chunks_fit",
            f"PPA(degree={DEGREE}) fit on {WORKERS} workers, {n:,} x {N_FEATURES} from Zarr in "
            f"{f_hi['chunks']:,} chunks, grouped passes",
            f"the same data in {f_lo['chunks']} chunks",
            f_hi["grouped_s"],
            f_lo["grouped_s"],
            f_hi["grouped_s"] / f_lo["grouped_s"],
            f"fit in {f_hi['chunks']} chunks / in {f_lo['chunks']}",
            passes=f_hi["passes"],
            points=fits,
            note=f"fit by chunks: {per_fit}",
        ),
    ]


def _demo_once(cache, output, samples):
    """One ``ppa-dask demo --no-cube`` in a fresh process with ``NUMBA_CACHE_DIR=cache``; its
    wall time and the kernels' record of its summary."""
    argv = [sys.executable, "-m", "ppa_dask", "demo", "--no-cube", "--output", output]
    if samples is not None:
        argv += ["--n-samples", str(samples)]
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    env.pop("NUMBA_DISABLE_JIT", None)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise RuntimeError(f"ppa-dask demo exited {done.returncode}: {' '.join(tail)}")
    with open(os.path.join(output, "summary.json")) as f:
        kernels = json.load(f)["kernels"]
    shutil.rmtree(output, ignore_errors=True)
    return seconds, kernels


def _section_first_run(s, say):
    """The first ``ppa-dask demo`` on a machine (an empty numba cache: every kernel compiled)
    against a warm one (the cache filled by an earlier run), each a fresh process as a user
    runs it, alternating cold and warm, ``first_run_repeats`` rounds."""
    tmp = tempfile.mkdtemp(prefix="ppa-bench-first-")
    try:
        return _first_run_rows(s, say, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _first_run_rows(s, say, tmp):
    samples = s["first_run_samples"]
    warm = os.path.join(tmp, "numba-warm")
    os.makedirs(warm, exist_ok=True)
    _demo_once(warm, os.path.join(tmp, "demo-prime"), samples)  # fills the warm cache
    times = {"first": [], "warm": []}
    compiled = []
    for r in range(s["first_run_repeats"]):
        cold = tempfile.mkdtemp(prefix="numba-cold-", dir=tmp)
        seconds, kernels = _demo_once(cold, os.path.join(tmp, f"demo-cold-{r}"), samples)
        shutil.rmtree(cold, ignore_errors=True)
        times["first"].append(seconds)
        compiled.append(kernels["first_run"])
        seconds, kernels = _demo_once(warm, os.path.join(tmp, f"demo-warm-{r}"), samples)
        times["warm"].append(seconds)
        if kernels["first_run"]:
            raise RuntimeError("the warm demo compiled kernels: its cache was not used")
        say(f"first_run: round {r + 1}: first {times['first'][-1]:.1f} s, warm {seconds:.1f} s")
    if not all(compiled):
        raise RuntimeError("a first-run demo compiled no kernel: its empty cache was not used")
    first, again = _median(times["first"]), _median(times["warm"])
    size = "defaults" if samples is None else f"--n-samples {samples:,}"
    return [
        _row(
            "first_demo",
            f"first ppa-dask demo --no-cube on a machine ({size}; empty numba cache: every "
            "kernel compiled)",
            "the same demo with the cache warm",
            first,
            again,
            first / again,
            "first / warm",
            ("<=", 1.3),
            times=times,
            note=f"wall time of the command, {len(times['first'])} alternating rounds, medians",
        )
    ]


def _section_ensembles(s, say, tmp):
    import dask.array as da
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(0)
    n = s["fanout_n"]
    X = rng.normal(size=(n, 20))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=n)
    bagger = FeatureBaggingRegressor(
        DecisionTreeRegressor(max_depth=12),
        n_estimators=s["fanout_members"],
        max_features=0.5,
        random_state=0,
    )
    specs = bagger.bag_plan(*X.shape).members()
    template = bagger.member_template()

    def sequential():
        with one_blas_thread():
            for spec in specs:
                fit_member(spec, X, y, template)

    bagger.fit(X, y)  # warm-up
    times, _ = interleaved(
        {"parallel": lambda: bagger.fit(X, y), "sequential": sequential}, s["fanout_repeats"]
    )
    par, seq = _median(times["parallel"]), _median(times["sequential"])
    rows = [
        _row(
            "ensemble_fanout",
            f"ensemble fan-out: {s['fanout_members']} FeatureBaggingRegressor member fits "
            f"(trees of depth 12, {n:,} x 20) on {WORKERS} workers",
            f"the same member fits one after another, / {WORKERS}",
            par,
            seq / WORKERS,
            par / (seq / WORKERS),
            f"parallel / (sequential / {WORKERS})",
            ("<=", 1.15),
            times=times,
        )
    ]
    say(f"fan-out: parallel {par:.2f} s, sequential {seq:.2f} s")

    path = os.path.join(tmp, "bag.zarr")
    write_zarr(path, s["bag_n"], n_features=N_FEATURES, chunk_rows=s["chunk_rows"], random_state=0)
    x = da.from_zarr(path)
    bag = FeatureBaggingPPA(
        PPA(degree=3),
        n_components=2,
        n_estimators=s["bag_members"],
        max_features=0.5,
        random_state=0,
    )
    bag_specs = bag.bag_plan(*x.shape).members()

    def separate():
        for spec in bag_specs:
            PPA(degree=3, n_components=2, random_state=spec.seed).fit(x[:, spec.features])

    times, fitted = interleaved(
        {"shared": lambda: bag.fit(x), "separate": separate}, s["bag_repeats"]
    )
    shared, sep = _median(times["shared"]), _median(times["separate"])
    say(f"shared scans: {shared:.2f} s, separate fits {sep:.2f} s")
    rows.append(
        _row(
            "ensemble_shared",
            f"FeatureBaggingPPA: {s['bag_members']} PPA(degree=3, n_components=2) members "
            f"from shared scans of {s['bag_n']:,} x {N_FEATURES} on Zarr",
            f"{s['bag_members']} separate fits",
            shared,
            sep,
            shared / sep,
            "shared / separate",
            ("<=", 0.3),
            passes=_passes(fitted["shared"]),
            times=times,
        )
    )
    return rows


# ---------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------


def _cell(value, digits=3):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def bench_markdown(result):
    """The markdown of a bench result (``bench.md``): one paragraph and the table.

    The same text is pasted into the README's Performance section and
    docs/guide/performance.md, so a rerun regenerates both.

    Examples
    --------
    >>> result = {"command": "ppa-dask bench", "machine": "m", "date": "2026-01-01",
    ...           "size": "full", "elapsed_s": 1.0, "rows": []}
    >>> bench_markdown(result).splitlines()[0][:32]
    '`ppa-dask bench` on m, 2026-01-0'
    """
    lines = [
        f"`{result['command']}` on {result['machine']}, {result['date']} "
        f"(sizes: {result['size']}; {result['elapsed_s']:.0f} s in all; load average "
        f"{result.get('load_average', [float('nan')])[0]:.1f} at the end). Times are medians of "
        "interleaved repeats in seconds; passes are PPA's data passes per fit.",
        "",
        "| figure | PPA (s) | baseline | baseline (s) | ratio | target | met | passes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        if r["status"] != "measured":
            met = r["status"]
        elif r["met"] is None:
            met = "(reported)"
        else:
            met = "met" if r["met"] else "not met"
        ratio = "-" if r["ratio"] is None else f"{r['ratio_label']} = {_cell(r['ratio'])}"
        lines.append(
            f"| {r['figure']} | {_cell(r['ppa_s'])} | {r['baseline']} | {_cell(r['baseline_s'])} "
            f"| {ratio} | {r['target'] or '-'} | {met} | {_cell(r['passes'])} |"
        )
    return "\n".join(lines) + "\n"


def _save_png(fig, path):
    tmp = temp_sibling(path)
    try:
        fig.savefig(tmp, format="png", dpi=110)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def _plots(rows, output):
    written = []
    by_id = {r["id"]: r for r in rows}
    cost = [by_id[k] for k in ("cost_n", "cost_d") if by_id.get(k, {}).get("points")]
    if cost:
        fig, axes = new_figure(1, len(cost), figsize=(5.5 * len(cost), 4))
        for ax, r in zip(axes[0], cost):
            axis = r["id"].split("_")[1]
            xs = [p[axis] for p in r["points"]]
            ax.loglog(xs, [p["ppa_s"] for p in r["points"]], "o-", label="PPA")
            ax.loglog(xs, [p["pca_s"] for p in r["points"]], "s--", label="PCA")
            ax.set_xlabel(axis)
            ax.set_ylabel("fit time (s)")
            ax.set_title(
                f"slope PPA {_cell(r['ppa_slope'])}, PCA {_cell(r['pca_slope'])}", fontsize=10
            )
            ax.legend()
        written.append(_save_png(fig, os.path.join(output, "cost_growth.png")))
    passes = [by_id[k] for k in ("pass_floor", "chunks_fit") if by_id.get(k, {}).get("points")]
    if passes:
        fig, axes = new_figure(1, len(passes), figsize=(5.5 * len(passes), 4))
        for ax, r in zip(axes[0], passes):
            xs = [p["chunks"] for p in r["points"]]
            key = "pass_s" if r["id"] == "pass_floor" else "s"
            ax.loglog(xs, [p[f"grouped_{key}"] for p in r["points"]], "o-", label="grouped")
            ax.loglog(
                xs, [p[f"ungrouped_{key}"] for p in r["points"]], "s--", label="task per block"
            )
            ax.set_xlabel("chunks")
            ax.set_ylabel("seconds per pass, no work" if key == "pass_s" else "fit (s)")
            ax.legend()
        written.append(_save_png(fig, os.path.join(output, "pass_cost.png")))
    judged = [r for r in rows if r["target"] and r["ratio"] is not None and r["ratio"] > 0]
    if judged:
        fig, axes = new_figure(figsize=(8, 0.35 * len(judged) + 1.5))
        ax = axes[0, 0]
        bounds = [float(r["target"].split()[1]) or 1.0 for r in judged]
        scaled = [r["ratio"] / b if b else r["ratio"] for r, b in zip(judged, bounds)]
        colors = ["tab:green" if r["met"] else "tab:red" for r in judged]
        ax.barh(range(len(judged)), scaled, color=colors)
        ax.axvline(1.0, color="k", lw=1)
        ax.set_yticks(range(len(judged)), [r["id"] for r in judged], fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("ratio / target bound (green: met)")
        ax.invert_yaxis()
        written.append(_save_png(fig, os.path.join(output, "ratios.png")))
    return [os.path.basename(p) for p in written]


def _machine():
    import psutil

    mem = psutil.virtual_memory().total / 2**30
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    cpus = f"{os.cpu_count()} CPUs" + (f" {cpu}" if cpu else "")
    return f"{platform.node() or 'this machine'} ({cpus}, {mem:.0f} GiB, {platform.system()})"


def _versions():
    out = {"python": platform.python_version(), "ppa_dask": VERSION}
    for name in ("numpy", "sklearn", "dask", "distributed", "xeofs", "dask_ml"):
        module = _anchor(name)
        out[name] = None if module is None else getattr(module, "__version__", "?")
    return out


# ---------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------


def add_parser(subparsers):
    """Add the ``bench`` sub-command to the CLI's sub-parsers; return its parser.

    Examples
    --------
    >>> import argparse
    >>> sub = argparse.ArgumentParser().add_subparsers()
    >>> add_parser(sub).parse_args(["--quick"]).quick
    True
    """
    p = subparsers.add_parser(
        "bench",
        help="time PPA against its baselines (PCA, the direct port, xeofs, dask-ml, scans)",
        description=(
            "Time every performance figure of ppa-dask beside its baseline in the same process "
            "or on the same local cluster (2 worker processes, one thread and one BLAS thread "
            "each), as medians of interleaved repeats, and print each row's target and whether "
            "it was met. Writes DIR/bench.json, DIR/bench.md and PNG plots. The full run takes "
            "about 10-25 minutes on 2 cores; --quick a few."
        ),
    )
    p.add_argument("--quick", action="store_true", help="smaller sizes: a few minutes on 2 cores")
    p.add_argument("--output", "-o", metavar="DIR", default="bench", help="output folder")
    p.add_argument(
        "--only",
        metavar="SECTIONS",
        default=None,
        help="comma-separated sections to run: " + ", ".join(SECTIONS) + " (default: all)",
    )
    p.add_argument(
        "--tmpdir", metavar="DIR", default=None, help="parent of the scratch folder (stores)"
    )
    # the test suite's sizes (every row in seconds); not for measurements
    p.add_argument("--size", choices=tuple(SIZES), default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=run_bench)
    return p


def _selected(only):
    if only is None:
        return list(SECTIONS)
    names = [t.strip() for t in only.split(",") if t.strip()]
    unknown = [t for t in names if t not in SECTIONS]
    if unknown or not names:
        raise ValueError(
            f"--only: unknown section(s) {', '.join(unknown) or repr(only)}; "
            f"choose from {', '.join(SECTIONS)}"
        )
    return [name for name in SECTIONS if name in names]


def _command(args):
    """The command as run, less the options that only say where files go."""
    argv = list(getattr(args, "argv", None) or ["ppa-dask", "bench"] + ["--quick"] * args.quick)
    shown, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in ("--output", "-o", "--tmpdir"):
            skip = True
        elif not word.startswith(("--output=", "--tmpdir=")):
            shown.append(word)
    return shlex.join(shown)


def run_bench(args, stream=None):
    """The ``bench`` command: run the selected sections, write bench.json, bench.md, PNGs.

    Parameters
    ----------
    args : argparse.Namespace
        ``quick``, ``output``, ``only``, ``tmpdir`` and ``size`` (see :func:`add_parser`).
    stream : file-like, optional
        Where progress lines and the table go (default ``sys.stdout``).

    Returns
    -------
    int
        0 (a target not met is a result, not an error).

    Raises
    ------
    ValueError
        For an unknown ``--only`` section or an output path that is not a folder, before
        anything runs.

    Examples
    --------
    >>> import argparse
    >>> run_bench(argparse.Namespace(quick=True, output=".", only="nothing", tmpdir=None,
    ...                              size=None))
    Traceback (most recent call last):
    ...
    ValueError: --only: unknown section(s) nothing; choose from memory, table2, cost, ooc, ...
    """
    stream = sys.stdout if stream is None else stream
    sections = _selected(args.only)
    size = args.size or ("quick" if args.quick else "full")
    s = SIZES[size]
    output = os.path.abspath(args.output)
    if os.path.exists(output) and not os.path.isdir(output):
        raise ValueError(f"--output {args.output!r} exists and is not a folder")
    if args.tmpdir is not None and not os.path.isdir(args.tmpdir):
        raise ValueError(f"--tmpdir {args.tmpdir!r} is not a folder")
    os.makedirs(output, exist_ok=True)
    progress = Reporter(stream)
    say = progress.say
    say(f"{_command(args)}: sizes {size!r}, sections {', '.join(sections)}")

    rows = {}
    tmp = tempfile.mkdtemp(prefix="ppa-bench-", dir=args.tmpdir)
    try:
        with one_blas_thread():
            for name, section in (
                ("memory", _section_memory),
                ("table2", _section_table2),
                ("cost", _section_cost),
                ("first_run", _section_first_run),
            ):
                if name in sections:
                    with progress.stage(f"{name}_s", f"section {name}"):
                        rows.update({r["id"]: r for r in section(s, say)})
        scratch = os.path.join(tmp, "scratch")
        # the out-of-core row has its cluster to itself unless the limits agree (tiny sizes)
        shared = s["ooc_memory_limit"] == s["cluster_memory_limit"]
        if "ooc" in sections and not shared:
            with _cluster(WORKERS, s["ooc_memory_limit"], scratch) as client:
                with progress.stage("ooc_s", "section ooc"):
                    rows.update({r["id"]: r for r in _section_ooc(s, say, tmp, client)})
        # the scaling row brings its own clusters, one at a time
        if "scaling" in sections:
            with progress.stage("scaling_s", "section scaling"):
                rows.update({r["id"]: r for r in _section_scaling(s, say, tmp, scratch)})
        on_cluster = [
            n
            for n in sections
            if n not in IN_PROCESS and n != "scaling" and (n != "ooc" or shared)
        ]
        if on_cluster:
            with contextlib.ExitStack() as stack:
                client = stack.enter_context(_cluster(WORKERS, s["cluster_memory_limit"], scratch))
                for name in on_cluster:
                    with progress.stage(f"{name}_s", f"section {name}"), client.as_current():
                        if name == "ooc":
                            found = _section_ooc(s, say, tmp, client)
                        elif name == "dask":
                            found = _section_dask(s, say, tmp)
                        elif name == "cube":
                            found = _section_cube(s, say, tmp)
                        elif name == "passes":
                            found = _section_passes(s, say, tmp)
                        else:
                            found = _section_ensembles(s, say, tmp)
                        rows.update({r["id"]: r for r in found})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ordered = [rows[r] for name in sections for r in SECTIONS[name] if r in rows]
    result = {
        "command": _command(args),
        "machine": _machine(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "size": size,
        "sizes": s,
        "sections": sections,
        "versions": _versions(),
        "load_average": list(os.getloadavg()),
        "elapsed_s": progress.total(),
        "stage_s": dict(progress.times),
        "rows": ordered,
    }
    result["figures"] = _plots(ordered, output)
    write_json_atomic(os.path.join(output, "bench.json"), result, default=_json_default)
    text = bench_markdown(result)
    write_text_atomic(os.path.join(output, "bench.md"), text)
    progress.plain()
    progress.plain(text)
    say(f"wrote {output}/bench.json, bench.md, {', '.join(result['figures']) or 'no plots'}")
    return 0


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (range, tuple, set)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
