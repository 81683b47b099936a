"""The ``ensembles`` section: the fan-out of bagged member fits over the workers and
``FeatureBaggingPPA``'s shared scans against separate member fits.
"""

from __future__ import annotations

import os

import numpy as np

from ppa_dask.app.bench.harness import (
    interleaved,
    make_row,
    median,
    passes_of,
)
from ppa_dask.app.bench.sizes import (
    N_FEATURES,
    WORKERS,
)
from ppa_dask.datasets import write_zarr
from ppa_dask.ensemble import FeatureBaggingPPA, FeatureBaggingRegressor
from ppa_dask.ensemble.bagging import fit_member
from ppa_dask.ppa.estimator import PPA
from ppa_dask.utils.blas import one_blas_thread


def section_ensembles(s, say, tmp):
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
    par, seq = median(times["parallel"]), median(times["sequential"])
    rows = [
        make_row(
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
    shared, sep = median(times["shared"]), median(times["separate"])
    say(f"shared scans: {shared:.2f} s, separate fits {sep:.2f} s")
    rows.append(
        make_row(
            "ensemble_shared",
            f"FeatureBaggingPPA: {s['bag_members']} PPA(degree=3, n_components=2) members "
            f"from shared scans of {s['bag_n']:,} x {N_FEATURES} on Zarr",
            f"{s['bag_members']} separate fits",
            shared,
            sep,
            shared / sep,
            "shared / separate",
            ("<=", 0.3),
            passes=passes_of(fitted["shared"]),
            times=times,
        )
    )
    return rows
