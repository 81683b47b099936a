#!/usr/bin/env python
"""Benchmark of PPA's fit: against PCA and the direct port in memory, and per step on Dask.

    python pipelines/benchmark_fit.py [--n-samples 1000000] [--repeats 5] [--skip-cluster]

In memory (one BLAS thread, ``threadpoolctl.threadpool_limits(1)``), on the same
``make_curved_manifold(n, 10)`` data, interleaved repeats, medians reported:

* ``PPA(degree=5).fit(X)`` (d - 1 = 9 steps of fixed degree 5, no cross-validation);
* ``sklearn.decomposition.PCA(svd_solver="covariance_eigh").fit(X)``;
* ``fit_direct(X, 5)``, the literal port of the paper's algorithm (tests/direct_ppa.py), run
  fewer times since it is slow.

Targets: PPA / ((d - 1) * PCA) <= 1.5 (each PPA step costs about one covariance-type pass) and
direct / PPA >= 10.

On a LocalCluster (unless ``--skip-cluster``; 2 worker processes, one thread and one BLAS thread
each): a ``--cluster-samples`` x 10 array (default 10^7) written to a Zarr store in a temporary
directory (chunks of 262144 rows), opened with ``da.from_zarr``. Timed, interleaved, medians:
a plain scan ``x.sum().compute()``, and ``PPA(degree=5, n_components=k).fit(x)`` for k = 1 and
k = 3. The time per PPA step is ``(t3 - t1) / 2`` (also shown: ``t3 / (3 + 1)``, the fit time
per pass); target: per step / scan <= 2.

Temporary files are removed on exit, also on errors, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import signal
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS = os.path.join(ROOT, "tests")
# the one sys.path edit left in pipelines/: this benchmark compares the package with the test
# suite's independent direct port of the paper's algorithm (tests/direct_ppa.py), which is not
# part of the package
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

N_FEATURES = 10
DEGREE = 5
CLUSTER_CHUNK_ROWS = 262_144  # 4 generation blocks of 65536 rows, ~2 MiB per chunk


def _positive_int(text):
    """An int >= 1; accepts 1_000_000 and 1e6."""
    text = text.replace("_", "")
    try:
        value = int(text)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not as_float.is_integer():
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        value = int(as_float)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--n-samples",
        type=_positive_int,
        default=1_000_000,
        help="rows of the in-memory data (default: 10^6)",
    )
    p.add_argument(
        "--repeats",
        type=_positive_int,
        default=5,
        help="repeats of the PPA and PCA fits (default: 5)",
    )
    p.add_argument(
        "--direct-repeats",
        type=_positive_int,
        default=3,
        help="repeats of the direct port's fit (default: 3)",
    )
    p.add_argument("--skip-cluster", action="store_true", help="skip the Dask cluster part")
    p.add_argument(
        "--cluster-samples",
        type=_positive_int,
        default=10_000_000,
        help="rows of the Zarr array for the cluster part (default: 10^7)",
    )
    p.add_argument(
        "--cluster-repeats",
        type=_positive_int,
        default=3,
        help="repeats of the scan and of each cluster fit (default: 3)",
    )
    p.add_argument(
        "--workers",
        type=_positive_int,
        default=2,
        help="cluster worker processes, one thread each (default: 2)",
    )
    p.add_argument("--seed", type=int, default=0, help="data seed (default: 0)")
    p.add_argument(
        "--tmpdir", default=None, help="parent of the temporary directory (default: the system's)"
    )
    return p.parse_args(argv)


def _timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def _median(values):
    return statistics.median(values)


def _fmt_times(values):
    return ", ".join(f"{v:.3f}" for v in values)


def _say(message):
    print(message, flush=True)


def _print_table(title, rows):
    """rows: (label, value, note) with value a preformatted string."""
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    _say("")
    _say(title)
    _say("-" * len(title))
    for label, value, note in rows:
        _say(f"  {label.ljust(w0)}  {value.rjust(w1)}  {note}")


def _verdict(ok):
    return "OK" if ok else "MISSED"


def bench_memory(args):
    from direct_ppa import fit_direct
    from sklearn.decomposition import PCA

    from ppa_dask import PPA
    from ppa_dask.datasets import make_curved_manifold

    n, d = args.n_samples, N_FEATURES
    _say(
        f"\n[memory] generating make_curved_manifold({n:,}, n_features={d}, "
        f"random_state={args.seed}) ..."
    )
    X = make_curved_manifold(n, n_features=d, random_state=args.seed)

    # warm-up on a slice: imports, first-call overheads
    small = X[: min(n, 20_000)]
    PPA(degree=DEGREE).fit(small)
    PCA(svd_solver="covariance_eigh").fit(small)
    fit_direct(small, DEGREE)

    t_ppa, t_pca, t_direct = [], [], []
    ppa_model = direct_model = None
    for r in range(args.repeats):
        t, ppa_model = _timed(lambda: PPA(degree=DEGREE).fit(X))
        t_ppa.append(t)
        t, _ = _timed(lambda: PCA(svd_solver="covariance_eigh").fit(X))
        t_pca.append(t)
        line = f"[memory] repeat {r + 1}/{args.repeats}: PPA {t_ppa[-1]:.3f} s, PCA {t:.3f} s"
        if r < args.direct_repeats:
            t, direct_model = _timed(lambda: fit_direct(X, DEGREE))
            t_direct.append(t)
            line += f", direct {t:.3f} s"
        _say(line)
    for _ in range(len(t_direct), args.direct_repeats):  # more direct repeats than repeats
        t, direct_model = _timed(lambda: fit_direct(X, DEGREE))
        t_direct.append(t)
        _say(f"[memory] extra direct repeat: {t:.3f} s")

    # the two implementations fit the same model (a sanity check, not timed)
    lead_diff = float(np.max(np.abs(ppa_model.leading_vectors_ - direct_model["leading"])))
    m_ppa, m_pca, m_direct = _median(t_ppa), _median(t_pca), _median(t_direct)
    ratio_pca = m_ppa / ((d - 1) * m_pca)
    ratio_direct = m_direct / m_ppa
    rows = [
        (
            f"PPA(degree={DEGREE}).fit",
            f"{m_ppa:.3f} s",
            f"[{_fmt_times(t_ppa)}]  {ppa_model.n_passes_} passes",
        ),
        ('PCA(svd_solver="covariance_eigh").fit', f"{m_pca:.3f} s", f"[{_fmt_times(t_pca)}]"),
        (
            f"fit_direct(X, {DEGREE}) (direct port)",
            f"{m_direct:.3f} s",
            f"[{_fmt_times(t_direct)}]",
        ),
        (
            "PPA / ((d-1) * PCA)",
            f"{ratio_pca:.2f}",
            f"target <= 1.5: {_verdict(ratio_pca <= 1.5)}",
        ),
        ("direct / PPA", f"{ratio_direct:.1f}", f"target >= 10: {_verdict(ratio_direct >= 10)}"),
        ("max |leading vectors PPA - direct|", f"{lead_diff:.1e}", "(sanity check)"),
    ]
    _print_table(f"In memory: n={n:,}, d={d}, one BLAS thread, medians (all runs in [])", rows)
    return {"ppa": m_ppa, "pca": m_pca, "direct": m_direct}


def bench_cluster(args, tmp):
    import dask.array as da

    from ppa_dask import PPA
    from ppa_dask.app.cluster import dashboard_link, local_client
    from ppa_dask.datasets import write_zarr

    n, d = args.cluster_samples, N_FEATURES
    with local_client(
        n_workers=args.workers,
        threads_per_worker=1,
        local_directory=os.path.join(tmp, "dask-scratch"),
    ) as client:
        _say(f"\n[cluster] {args.workers} workers x 1 thread; dashboard: {dashboard_link(client)}")
        path = os.path.join(tmp, "curved.zarr")
        _say(f"[cluster] writing {n:,} x {d} to {path} ({CLUSTER_CHUNK_ROWS:,}-row chunks) ...")
        t_write, _ = _timed(
            lambda: write_zarr(
                path,
                n,
                n_features=d,
                kind="curved",
                chunk_rows=CLUSTER_CHUNK_ROWS,
                random_state=args.seed,
            )
        )
        _say(f"[cluster] written in {t_write:.1f} s")
        x = da.from_zarr(path)
        # warm-up: page cache, imports and first calls on the workers
        x.sum().compute()
        PPA(degree=DEGREE, n_components=1).fit(x[: 2 * CLUSTER_CHUNK_ROWS])

        scans, t1s, t3s, caches = [], [], [], set()
        for r in range(args.cluster_repeats):
            t, _ = _timed(lambda: x.sum().compute())
            scans.append(t)
            t, m1 = _timed(lambda: PPA(degree=DEGREE, n_components=1).fit(x))
            t1s.append(t)
            t, m3 = _timed(lambda: PPA(degree=DEGREE, n_components=3).fit(x))
            t3s.append(t)
            caches.update({m1.residual_cache_, m3.residual_cache_})
            _say(
                f"[cluster] repeat {r + 1}/{args.cluster_repeats}: scan {scans[-1]:.3f} s, "
                f"fit k=1 {t1s[-1]:.3f} s, fit k=3 {t3s[-1]:.3f} s"
            )

    scan, t1, t3 = _median(scans), _median(t1s), _median(t3s)
    per_step = (t3 - t1) / 2
    per_pass = t3 / (3 + 1)
    ratio = per_step / scan
    rows = [
        ("write_zarr (once)", f"{t_write:.2f} s", ""),
        ("scan x.sum().compute()", f"{scan:.3f} s", f"[{_fmt_times(scans)}]"),
        (
            f"PPA(degree={DEGREE}, n_components=1).fit",
            f"{t1:.3f} s",
            f"[{_fmt_times(t1s)}]  2 passes",
        ),
        (
            f"PPA(degree={DEGREE}, n_components=3).fit",
            f"{t3:.3f} s",
            f"[{_fmt_times(t3s)}]  4 passes",
        ),
        ("per step (t3 - t1) / 2", f"{per_step:.3f} s", ""),
        ("per pass t3 / 4", f"{per_pass:.3f} s", ""),
        ("per step / scan", f"{ratio:.2f}", f"target <= 2: {_verdict(ratio <= 2)}"),
        ("per pass / scan", f"{per_pass / scan:.2f}", ""),
        ("residual cache", ", ".join(sorted(caches)), ""),
    ]
    _print_table(
        f"Dask LocalCluster: {args.workers} workers x 1 thread, n={n:,}, d={d}, Zarr "
        f"chunks of {CLUSTER_CHUNK_ROWS:,} rows ({-(-n // CLUSTER_CHUNK_ROWS)} chunks), medians",
        rows,
    )
    return {"scan": scan, "t1": t1, "t3": t3}


def main(argv=None):
    args = parse_args(argv)
    shown = [sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv))
    _say("$ python " + shlex.join(shown))

    import dask
    import sklearn
    from threadpoolctl import threadpool_info, threadpool_limits

    import ppa_dask

    _say(
        f"python {platform.python_version()}, numpy {np.__version__}, scikit-learn "
        f"{sklearn.__version__}, dask {dask.__version__}, ppa_dask {ppa_dask.__version__}; "
        f"{os.cpu_count()} CPUs; {platform.platform()}"
    )
    blas = sorted(
        {
            f"{i.get('internal_api')} ({i.get('num_threads')} threads)"
            for i in threadpool_info()
            if i.get("user_api") == "blas"
        }
    )
    _say(f"BLAS: {', '.join(blas) or 'unknown'}; limited to 1 thread for the whole run")

    # SIGTERM -> SystemExit, so the temporary directory is removed on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.perf_counter()
    with threadpool_limits(limits=1):
        bench_memory(args)
        if not args.skip_cluster:
            with tempfile.TemporaryDirectory(
                prefix="ppa-bench-", dir=args.tmpdir, ignore_cleanup_errors=True
            ) as tmp:
                bench_cluster(args, tmp)
    _say(f"\ntotal wall time {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
