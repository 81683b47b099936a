#!/usr/bin/env python
"""Benchmark of the ensembles' fan-out and of FeatureBaggingPPA's shared scans.

    python pipelines/benchmark_ensemble.py [--members 64] [--zarr-samples 2000000]
        [--ppa-members 32] [--repeats 3] [--skip-fanout] [--skip-zarr]

1. Fan-out (issue target: parallel <= 1.25 x sequential / 2). ``--members`` members of a
   ``FeatureBaggingRegressor(DecisionTreeRegressor(max_depth=12), max_features=0.5)`` on
   ``n = 40000, d = 20``: the same member fits one after another in this process (one BLAS
   thread), against ``fit`` on a 2-worker LocalCluster (one thread and one BLAS thread per
   worker; the cluster is started before the clock). Medians of ``--repeats`` interleaved runs.
2. Shared scans (issue target: shared <= 0.5 x separate). A ``--zarr-samples x 10`` curved
   manifold in a Zarr store (temporary directory, 131072-row chunks) opened with
   ``da.from_zarr``; on the same 2-worker cluster, ``FeatureBaggingPPA(PPA(degree=3),
   n_components=2, n_estimators=--ppa-members, max_features=0.5).fit(x)`` (all members from
   ``1 + k`` scans) against the same members fitted separately out of core, one after another,
   each ``PPA(degree=3, n_components=2, random_state=<member seed>).fit(x[:, features])``.

Temporary files are removed on exit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

import numpy as np


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=64)
    p.add_argument("--zarr-samples", type=int, default=2_000_000)
    p.add_argument("--ppa-members", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--skip-fanout", action="store_true")
    p.add_argument("--skip-zarr", action="store_true")
    return p.parse_args(argv)


def fanout(args, client):
    from sklearn.tree import DecisionTreeRegressor

    from ppa_dask.ensemble import FeatureBaggingRegressor, fit_member
    from ppa_dask.utils.blas import one_blas_thread

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40_000, 20))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=40_000)
    model = FeatureBaggingRegressor(
        DecisionTreeRegressor(max_depth=12),
        n_estimators=args.members,
        max_features=0.5,
        random_state=0,
    )
    specs = model.bag_plan(*X.shape).members()
    template = model.member_template()
    sequential, parallel = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        with one_blas_thread():
            for spec in specs:
                fit_member(spec, X, y, template)
        sequential.append(time.perf_counter() - start)
        start = time.perf_counter()
        model.fit(X, y)  # the current Client: one task per member
        parallel.append(time.perf_counter() - start)
    seq, par = statistics.median(sequential), statistics.median(parallel)
    ratio = par / (seq / 2)
    print(
        f"fan-out: {args.members} members, sequential {seq:.2f} s, 2 workers {par:.2f} s; "
        f"parallel / (sequential / 2) = {ratio:.2f} (target <= 1.25)"
    )
    return ratio


def shared_scans(args, client, folder):
    import dask.array as da

    from ppa_dask import PPA, FeatureBaggingPPA
    from ppa_dask.datasets import write_zarr

    path = os.path.join(folder, "bench.zarr")
    write_zarr(
        path, args.zarr_samples, n_features=10, kind="curved", random_state=0, chunk_rows=131072
    )
    x = da.from_zarr(path)
    template = PPA(degree=3)
    model = FeatureBaggingPPA(
        template, n_components=2, n_estimators=args.ppa_members, max_features=0.5, random_state=0
    )
    specs = model.bag_plan(*x.shape).members()
    shared, separate = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        model.fit(x)
        shared.append(time.perf_counter() - start)
        start = time.perf_counter()
        for spec in specs:
            PPA(degree=3, n_components=2, random_state=spec.seed).fit(x[:, spec.features])
        separate.append(time.perf_counter() - start)
    sh, se = statistics.median(shared), statistics.median(separate)
    print(
        f"shared scans: {args.ppa_members} PPA members on {args.zarr_samples} x 10 from Zarr, "
        f"shared {sh:.2f} s ({model.n_passes_} scans), separate {se:.2f} s; shared / separate "
        f"= {sh / se:.2f} (target <= 0.5)"
    )
    return sh / se


def main(argv=None):
    args = parse_args(argv)
    from ppa_dask.app.cluster import local_client

    folder = tempfile.mkdtemp(prefix="ppa-bench-ensemble-")
    try:
        with local_client(n_workers=2) as client:
            client.wait_for_workers(2)
            out = {}
            if not args.skip_fanout:
                out["fanout_ratio"] = fanout(args, client)
            if not args.skip_zarr:
                out["shared_ratio"] = shared_scans(args, client, folder)
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
