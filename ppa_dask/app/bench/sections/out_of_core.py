"""The ``ooc`` section: PPA on a Zarr store larger than the workers' memory, its step time
against a plain scan, the workers' peak memory and whether they were paused or restarted.
"""

from __future__ import annotations

import os
import shutil
import time

import numpy as np

from ppa_dask.app.bench.harness import (
    make_row,
    median,
    passes_of,
)
from ppa_dask.app.bench.sampler import start_sampler, stop_sampler
from ppa_dask.app.bench.sizes import (
    MEMORY_TARGET,
    N_FEATURES,
    SECTIONS,
    WORKERS,
)
from ppa_dask.datasets import write_zarr
from ppa_dask.ppa.estimator import PPA
from ppa_dask.store import open_input


def _workers(client):
    return set(client.scheduler_info(n_workers=-1)["workers"])


def section_ooc(s, say, tmp, client):
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
        return [make_row(r, figure, "plain scan", status=status) for r in SECTIONS["ooc"]]
    path = os.path.join(tmp, "ooc.zarr")
    write_zarr(path, n, n_features=N_FEATURES, chunk_rows=s["chunk_rows"], random_state=0)
    X = open_input(path)
    X.sum().compute()  # warm-up: page cache and first calls on the workers
    client.run(start_sampler)
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
    samples = client.run(stop_sampler)
    after = _workers(client)
    scan = median(scans)
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
    common = dict(passes=passes_of(model), times=times, residual_cache=model.residual_cache_)
    return [
        make_row(
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
        make_row(
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
        make_row(
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
