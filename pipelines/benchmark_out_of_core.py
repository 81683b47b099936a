#!/usr/bin/env python
"""Out-of-core benchmark: fit PPA on a Zarr store about twice the cluster's total worker memory.

    python pipelines/benchmark_out_of_core.py            # 4 GiB store, 2 workers x 1 GiB
    python pipelines/benchmark_out_of_core.py --store-gib 8 --memory-limit 2GiB --keep

What it does, on a LocalCluster of ``--workers`` single-threaded worker processes (one BLAS
thread each) with a memory limit of ``--memory-limit`` each, everything bound to 127.0.0.1:

1. checks the free disk space (the store plus 10 % must fit) and writes a seeded
   ``curved``-manifold table of ``--store-gib`` GiB (``--n-features`` float64 columns, chunks of
   ``--chunk-rows`` rows, Zarr v3 with the default zstd compression) into a temporary folder,
   generated chunk by chunk on the workers;
2. times plain scans of the store (``X.sum()`` over ``ppa_dask.store.open_input``: read and
   decompress every chunk once), ``--scan-repeats`` before and as many after the fit; the
   reference is the median of all of them (on a shared machine the load changes; the load
   average is printed with every step);
3. fits ``PPA(degree=range(1, 6), cv=2)`` (all d - 1 steps, the degree of each chosen by
   cross-validation) on the store. The residual cannot be held in worker memory, so
   ``residual_cache="auto"`` must choose ``"checkpoint"`` (the workers share this machine's
   disk): each step pass reads the previous residual checkpoint and writes the next
   (``--residual-cache recompute`` measures the alternative, which re-applies every fitted step
   to the source in every pass). Checkpoints go to the benchmark's temporary folder. Each
   step's time comes from the fit's progress callback (the time between the ends of
   consecutive steps; the first includes the mean and covariance pass);
4. while it runs, samples the resident memory of every worker process every 20 ms and watches
   for paused workers and worker restarts (a killed worker comes back with a new address).

Reported: peak worker memory against the limit (target: below 80 %, the point at which Dask
pauses a worker; no worker paused or killed), time per PPA step against one plain scan
(target: <= 2x) and the throughput. Temporary files are removed unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MEMORY_TARGET = 0.80
STEP_TARGET = 2.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--store-gib",
        type=float,
        default=4.0,
        help="size of the float64 store in GiB (default: 4)",
    )
    p.add_argument("--workers", type=int, default=2, help="worker processes (default: 2)")
    p.add_argument(
        "--memory-limit", default="1GiB", help="memory limit per worker (default: 1GiB)"
    )
    p.add_argument("--n-features", type=int, default=10, help="columns (default: 10)")
    p.add_argument(
        "--chunk-rows",
        type=int,
        default=262_144,
        help="rows per Zarr chunk (default: 262144, 20 MiB of float64 x 10)",
    )
    p.add_argument(
        "--scan-repeats",
        type=int,
        default=2,
        help="plain scans timed (median reported; default: 2)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tmpdir", default=None, help="parent of the temporary folder")
    p.add_argument("--keep", action="store_true", help="keep the store (path printed)")
    p.add_argument(
        "--residual-cache",
        default="auto",
        choices=("auto", "checkpoint", "recompute", "persist"),
        help="PPA's residual_cache (default: auto, which should checkpoint)",
    )
    return p.parse_args(argv)


def say(message=""):
    print(message, flush=True)


# ---------------------------------------------------------------------------------------------
# worker memory and status sampling (runs inside the worker processes)
# ---------------------------------------------------------------------------------------------


def _start_sampler(dask_worker, interval=0.02):
    import psutil
    from distributed.core import Status

    proc = psutil.Process()
    state = {"peak": proc.memory_info().rss, "paused": False, "stop": False}

    def sample():
        while not state["stop"]:
            state["peak"] = max(state["peak"], proc.memory_info().rss)
            if dask_worker.status == Status.paused:
                state["paused"] = True
            time.sleep(interval)

    dask_worker._ppa_benchmark = state
    threading.Thread(target=sample, daemon=True, name="ppa-memory-sampler").start()
    return state["peak"]


def _stop_sampler(dask_worker):
    state = getattr(dask_worker, "_ppa_benchmark", None)
    if state is None:
        return None
    state["stop"] = True
    return {"peak": state["peak"], "paused": state["paused"]}


def _rss(dask_worker):
    import psutil

    return psutil.Process().memory_info().rss


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------


def main(argv=None):
    args = parse_args(argv)
    from dask.utils import format_bytes, parse_bytes
    from threadpoolctl import threadpool_limits

    from ppa_dask import PPA, __version__
    from ppa_dask.app.cluster import dashboard_link, local_client
    from ppa_dask.datasets import write_zarr
    from ppa_dask.store import open_input

    d = args.n_features
    limit = parse_bytes(args.memory_limit)
    n = int(args.store_gib * 2**30 // (8 * d))
    nbytes = 8 * n * d
    total_memory = args.workers * limit
    parent = args.tmpdir or tempfile.gettempdir()
    free = shutil.disk_usage(parent).free
    say(f"ppa-dask {__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
    say(
        f"store: {n:,} x {d} float64 = {format_bytes(nbytes)} "
        f"({nbytes / total_memory:.1f}x the cluster's {args.workers} x "
        f"{format_bytes(limit)} worker memory); free disk in {parent}: {format_bytes(free)}"
    )
    # the store, and up to two uncompressed residual checkpoints of at most its size
    need = 3.1 * nbytes
    if free < need:
        say(
            f"not enough free disk space for the store and two residual checkpoints in "
            f"{parent} (need {format_bytes(need)}); use --tmpdir or a smaller --store-gib"
        )
        return 2

    folder = tempfile.mkdtemp(prefix="ppa-ooc-", dir=parent)
    path = os.path.join(folder, "data.zarr")

    def cleanup(*_):
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)

    signal.signal(signal.SIGTERM, lambda *a: (cleanup(), sys.exit(143)))
    results = {}
    try:
        with (
            threadpool_limits(1),
            local_client(
                n_workers=args.workers,
                threads_per_worker=1,
                memory_limit=limit,
                local_directory=os.path.join(folder, "scratch"),
            ) as client,
        ):
            say(
                f"cluster: {args.workers} worker process(es) x 1 thread, memory limit "
                f"{format_bytes(limit)} each; dashboard {dashboard_link(client)}"
            )
            t0 = time.perf_counter()
            write_zarr(
                path,
                n,
                n_features=d,
                kind="curved",
                chunk_rows=args.chunk_rows,
                random_state=args.seed,
            )
            t_write = time.perf_counter() - t0
            stored = sum(
                os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs
            )
            say(
                f"wrote {path} in {t_write:.0f} s ({format_bytes(stored)} on disk, chunks of "
                f"{args.chunk_rows:,} rows)"
            )

            X = open_input(path)
            baseline = client.run(_rss)
            client.run(_start_sampler)
            workers_before = set(client.scheduler_info(n_workers=-1)["workers"])

            scans = []
            for _ in range(args.scan_repeats):
                t0 = time.perf_counter()
                X.sum().compute()
                scans.append(time.perf_counter() - t0)
            scan = statistics.median(scans)
            say(
                f"plain scan (X.sum()): {', '.join(f'{s:.1f}' for s in scans)} s; median "
                f"{scan:.1f} s ({nbytes / scan / 2**20:.0f} MiB/s)"
            )

            marks = []
            model = PPA(
                degree=range(1, 6),
                cv=2,
                random_state=args.seed,
                residual_cache=args.residual_cache,
                checkpoint_dir=os.path.join(folder, "checkpoints"),
            )

            def progress(p, k):
                marks.append(time.perf_counter())
                step = marks[-1] - (marks[-2] if len(marks) > 1 else t_fit)
                load = os.getloadavg()[0]
                say(
                    f"  step {p} of {k}: {step:.1f} s ({step / scan:.2f} x scan; load average "
                    f"{load:.1f})"
                )

            say(f"fitting {model!r} ...")
            t_fit = time.perf_counter()
            model.fit(X, progress=progress)
            fit_time = time.perf_counter() - t_fit
            samples = client.run(_stop_sampler)
            workers_after = set(client.scheduler_info(n_workers=-1)["workers"])
            steps = np.diff([t_fit] + marks)
            scans_after = []
            for _ in range(args.scan_repeats):
                t0 = time.perf_counter()
                X.sum().compute()
                scans_after.append(time.perf_counter() - t0)
            scan_after = statistics.median(scans_after)
            say(f"plain scan after the fit: {', '.join(f'{s:.1f}' for s in scans_after)} s")
            # the reference: the median of all scans, before and after (the load drifts)
            scan = statistics.median(scans + scans_after)
            results = dict(
                scan=scan,
                scan_before=statistics.median(scans),
                scan_after=scan_after,
                steps=steps,
                fit=fit_time,
                samples=samples,
                baseline=baseline,
                restarted=workers_before != workers_after,
                cache=model.residual_cache_,
                passes=model.n_passes_,
                degrees=model.degrees_.tolist(),
            )
    finally:
        cleanup()
        if args.keep:
            say(f"kept {path}")

    # ---- report ---------------------------------------------------------------------------
    peaks = {w: s["peak"] for w, s in results["samples"].items()}
    paused = any(s["paused"] for s in results["samples"].values())
    worst = max(peaks.values())
    steps = results["steps"]
    later = steps[1:]  # the first step also includes the mean/covariance pass
    say("")
    say("Out-of-core PPA fit")
    say("-------------------")
    say(
        f"  store                 {format_bytes(nbytes)} = {nbytes / total_memory:.2f} x total "
        f"worker memory ({args.workers} x {format_bytes(limit)})"
    )
    chosen = "chosen automatically" if args.residual_cache == "auto" else "forced"
    say(f"  residual cache        {results['cache']} ({chosen})")
    say(f"  passes                {results['passes']} (degrees {results['degrees']})")
    say(f"  fit                   {results['fit']:.0f} s")
    say(
        f"  plain scan            {results['scan']:.1f} s (median of all; "
        f"{results['scan_before']:.1f} s before the fit, {results['scan_after']:.1f} s after)"
    )
    say(
        f"  step 1 (+ moments)    {steps[0]:.1f} s = {steps[0] / results['scan']:.2f} x scan "
        "(two passes)"
    )
    if len(later):
        say(
            f"  steps 2..{len(steps)}            median {np.median(later):.1f} s, max "
            f"{later.max():.1f} s = {np.median(later) / results['scan']:.2f} / "
            f"{later.max() / results['scan']:.2f} x scan   target <= {STEP_TARGET:.0f}x: "
            f"{'OK' if later.max() <= STEP_TARGET * results['scan'] else 'MISSED'}"
        )
    for w in sorted(peaks):
        say(
            f"  worker {w.split(':')[-1]:>6}         peak RSS {format_bytes(peaks[w])} = "
            f"{peaks[w] / limit:.0%} of the limit (idle: "
            f"{format_bytes(results['baseline'][w])})"
        )
    say(
        f"  peak / limit          {worst / limit:.0%}   target < {MEMORY_TARGET:.0%}: "
        f"{'OK' if worst < MEMORY_TARGET * limit else 'MISSED'}"
    )
    say(
        f"  paused / restarted    {'yes' if paused else 'no'} / "
        f"{'yes' if results['restarted'] else 'no'}"
    )
    expected = "checkpoint" if args.residual_cache == "auto" else args.residual_cache
    ok = (
        results["cache"] == expected
        and worst < MEMORY_TARGET * limit
        and not paused
        and not results["restarted"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
