"""The ``scaling`` section: one fit on 2 workers against the same fit on 1, each cluster alone."""

from __future__ import annotations

import os
import time

import numpy as np

from ppa_dask.app.bench.harness import (
    bench_cluster,
    make_row,
    median,
    passes_of,
)
from ppa_dask.app.bench.sizes import (
    DEGREE,
    N_FEATURES,
    WORKERS,
)
from ppa_dask.datasets import write_zarr
from ppa_dask.ppa.estimator import PPA


def section_scaling(s, say, tmp, scratch):
    """One fit on 2 workers against the same fit on 1, each on its own cluster with no other
    cluster alive (an idle cluster's scheduler and workers take CPU from the measured one: with
    the 1-worker cluster idle beside it, the 2-worker fit took 10-15 % longer). The
    configurations alternate, a fresh cluster per repeat, each warmed up by one fit; a
    repeat's time is the median of ``scaling_fits`` fits on its cluster."""
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
        with bench_cluster(n_workers, s["cluster_memory_limit"], scratch):
            fit()  # warm-up: the workers import and compile
            # the median of a few fits per cluster: one fit of about a second is at the mercy
            # of a burst of load on one of the two cores (seen: 1.15 s and 1.85 s in turn)
            fits = []
            for _ in range(s["scaling_fits"]):
                start = time.perf_counter()
                fitted = fit()
                fits.append(time.perf_counter() - start)
            elapsed = median(fits)
            floors = []
            for _ in range(3):
                start = time.perf_counter()
                fit(empty)
                floors.append(time.perf_counter() - start)
            return elapsed, median(floors), fitted

    times, floor, fitted = {"two": [], "one": []}, {"two": [], "one": []}, {}
    for _ in range(s["scaling_repeats"]):
        for name, n_workers in (("two", WORKERS), ("one", 1)):
            elapsed, no_work, fitted[name] = timed_fit_on(n_workers)
            times[name].append(elapsed)
            floor[name].append(no_work)
    t2, t1 = median(times["two"]), median(times["one"])
    f2, f1 = median(floor["two"]), median(floor["one"])
    # the best ratio a second worker could give if it halved everything but the floor
    ideal = t1 / (f2 + (t1 - f1) / 2)
    say(
        f"scaling: 1 worker {t1:.2f} s, {WORKERS} workers {t2:.2f} s; the same passes with no "
        f"work {f1:.2f} s and {f2:.2f} s (at most {ideal:.2f}x if the rest halved)"
    )
    return [
        make_row(
            "scaling",
            f"strong scaling: PPA(degree={DEGREE}) fit on {WORKERS} workers, {n:,} x "
            f"{N_FEATURES} from Zarr",
            "the same fit on 1 worker",
            t2,
            t1,
            t1 / t2,
            "1-worker time / 2-worker time",
            (">=", 1.55),
            passes=passes_of(fitted["two"]),
            times=times,
            floor_times=floor,
            floor_s={"two": f2, "one": f1},
            ideal_ratio=ideal,
            note=(
                f"the repeats (a fresh cluster each, the median of its fits) "
                f"{_spread(times['two'])} s on {WORKERS} workers, {_spread(times['one'])} s on "
                f"1; the same passes with no work ({n_chunks} chunks of 256 rows): {f2:.2f} s on "
                f"{WORKERS} workers, {f1:.2f} s on 1; at most {ideal:.2f}x if the rest halved"
            ),
        )
    ]


def _spread(values):
    """``"lowest-highest"`` of some times, to two decimals.

    Examples
    --------
    >>> _spread([0.61, 0.5, 0.55])
    '0.50-0.61'
    """
    return f"{min(values):.2f}-{max(values):.2f}"
