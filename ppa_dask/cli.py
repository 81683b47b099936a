"""Command line interface: ``ppa-dask COMMAND [options]``.

Commands
--------
demo
    Generate a curved 3-D manifold in ``--n-features`` dimensions as a Zarr array, fit PPA to
    it on a local Dask cluster, and compare its reconstruction error with PCA's for every
    number of components. Everything is written inside ``--output``.

Adding a command: write ``_add_<name>(subparsers)``, which creates the sub-parser and sets
``func`` (a callable taking the parsed namespace and returning an exit code), and append it to
``_COMMANDS``.

Exit codes: 0 on success, 2 on bad arguments or bad input (one line ``ppa-dask: error: ...``
on stderr; the library's ``ValueError`` messages are reported that way), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import platform
import shutil
import sys
import time

import numpy as np

__all__ = ["main", "build_parser"]

PROG = "ppa-dask"

#: Noise of the demo data set (``datasets.make_curved_manifold``'s default).
DEMO_NOISE = 0.05
#: Candidate degrees and folds of the demo fit.
DEMO_DEGREES = range(1, 6)
DEMO_CV = 2
#: The PCA comparison loads the data into this process when it takes at most this fraction of
#: the available memory; otherwise it is computed on the cluster from the covariance.
PCA_IN_MEMORY_FRACTION = 0.25
#: Rows per block when computing PCA reconstruction errors in memory.
PCA_ERROR_BLOCK_ROWS = 131072


class CommandError(Exception):
    """Bad input detected by a command; reported as one line with exit code 2."""


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are raised (and reported by ``main`` on one line)."""

    def error(self, message):
        raise _UsageError(message)


def _positive_int(text):
    """argparse type: an int >= 1, accepting ``1_000_000`` and ``1e6`` spellings."""
    value = None
    try:
        value = int(text.replace("_", ""), 10)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            pass
        else:
            if math.isfinite(as_float) and as_float.is_integer():
                value = int(as_float)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _non_negative_int(text):
    try:
        value = int(text.replace("_", ""), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value


# ---------------------------------------------------------------------------------------------
# progress output
# ---------------------------------------------------------------------------------------------


class _Progress:
    """Prints progress lines with the elapsed wall time, and records stage times."""

    def __init__(self, stream):
        self.stream = stream
        self.start = time.perf_counter()
        self.times = {}

    def say(self, message):
        elapsed = time.perf_counter() - self.start
        print(f"[{elapsed:7.1f} s] {message}", file=self.stream, flush=True)

    def plain(self, message=""):
        print(message, file=self.stream, flush=True)

    @contextlib.contextmanager
    def stage(self, key, message):
        self.say(f"{message} ...")
        t0 = time.perf_counter()
        yield
        self.times[key] = time.perf_counter() - t0

    def total(self):
        return time.perf_counter() - self.start


# ---------------------------------------------------------------------------------------------
# demo
# ---------------------------------------------------------------------------------------------


def _add_demo(subparsers):
    p = subparsers.add_parser(
        "demo",
        help="fit PPA on a generated curved data set and compare it with PCA",
        description=(
            "Generate a curved 3-D manifold embedded in D dimensions (Zarr, DIR/data.zarr), fit "
            "PPA with degrees 1-5 chosen per step by 2-fold cross-validation on a local Dask "
            "cluster, and tabulate the reconstruction error of PCA and PPA for k = 1..D-1 "
            "components. Writes only inside DIR: data.zarr, reconstruction_error.csv, "
            "reconstruction_error.md and summary.json."
        ),
    )
    p.add_argument("--output", "-o", metavar="DIR", default="ppa-dask-demo",
                   help="output directory (default: ./ppa-dask-demo)")
    p.add_argument("--n-samples", "-n", metavar="N", type=_positive_int, default=1_000_000,
                   help="number of samples (default: 1000000)")
    p.add_argument("--n-features", "-d", metavar="D", type=_positive_int, default=10,
                   help="number of features, >= 4 (default: 10)")
    p.add_argument("--seed", metavar="S", type=_non_negative_int, default=0,
                   help="seed of the data and of the cross-validation folds (default: 0)")
    p.add_argument("--workers", "-w", metavar="W", type=_positive_int, default=2,
                   help="Dask worker processes, one thread each (default: 2)")
    p.add_argument("--chunk-rows", metavar="R", type=_positive_int, default=131_072,
                   help="rows per Zarr/Dask chunk (default: 131072, two generation blocks)")
    p.set_defaults(func=run_demo)
    return p


def _dataset_record(path):
    """The generator record stored in a Zarr array's attributes, its shape and chunk rows."""
    import zarr

    z = zarr.open_array(path, mode="r")
    record = dict(z.attrs.get("ppa_dask.datasets") or {})
    return record, tuple(z.shape), int(z.chunks[0])


def _reusable(path, expected, shape, chunk_rows):
    """Why the data set at ``path`` cannot be reused (a string), or None if it can."""
    if not os.path.lexists(path):
        return "absent"
    try:
        record, stored_shape, stored_chunk_rows = _dataset_record(path)
    except Exception as exc:  # not a readable Zarr array: let write_zarr decide
        return f"unreadable ({type(exc).__name__})"
    for key, value in expected.items():
        if key == "params":
            stored = record.get("params") or {}
            for name, v in value.items():
                if stored.get(name) != v:
                    return f"params.{name} is {stored.get(name)!r}, not {v!r}"
        elif record.get(key) != value:
            return f"{key} is {record.get(key)!r}, not {value!r}"
    if stored_shape != shape:
        return f"shape is {stored_shape}, not {shape}"
    if stored_chunk_rows != chunk_rows:
        return f"chunk rows are {stored_chunk_rows}, not {chunk_rows}"
    return None


def _available_memory():
    try:
        import psutil

        return float(psutil.virtual_memory().available)
    except Exception:  # pragma: no cover - psutil is a distributed dependency
        return 0.0


def _pca_errors_in_memory(X):
    """PCA reconstruction MSE for k = 0..d-1 on in-memory data, and the eigenvalue check.

    One ``PCA(svd_solver="covariance_eigh")`` with all components is fitted. For each k the
    reconstruction is scikit-learn's ``inverse_transform`` of the ``transform`` output with the
    coefficients of components k+1..d set to zero, which is exactly what a PCA fitted with
    ``n_components=k`` returns (same mean, same leading eigenvectors). The error is the mean
    over samples of the squared Euclidean norm of ``x - x_hat``.
    """
    from sklearn.decomposition import PCA

    n, d = X.shape
    pca = PCA(svd_solver="covariance_eigh").fit(X)
    sums = np.zeros(d)
    for start in range(0, n, PCA_ERROR_BLOCK_ROWS):
        block = X[start : start + PCA_ERROR_BLOCK_ROWS]
        Z = pca.transform(block)
        for k in range(d):
            Zk = Z.copy()
            Zk[:, k:] = 0.0
            R = block - pca.inverse_transform(Zk)
            sums[k] += float(np.einsum("ij,ij->", R, R))
    errors = sums / n
    # the same errors as sums of discarded eigenvalues of the (ddof=0) covariance
    eigen = pca.explained_variance_ * ((n - 1) / n)
    tails = np.array([eigen[k:].sum() for k in range(d)])
    method = (
        "sklearn PCA(svd_solver='covariance_eigh') fitted on all rows in memory; MSE_k = "
        "mean ||x - inverse_transform(transform(x) with components k+1..d zeroed)||^2"
    )
    return errors, tails, method


def _pca_errors_dask(X):
    """PCA reconstruction MSE for k = 0..d-1 from the covariance, for data too big to load.

    MSE_k of PCA on its training data is exactly the sum of the discarded eigenvalues of the
    covariance normalised by n (ddof=0). Mean, then centred scatter: two passes on the cluster.
    """
    import dask.array as da

    n = X.shape[0]
    X = X.astype(np.float64)
    mean = X.mean(axis=0).compute()
    Xc = X - mean
    scatter = da.dot(Xc.T, Xc).compute()
    eigen = np.linalg.eigvalsh(scatter / n)[::-1]
    eigen = np.maximum(eigen, 0.0)
    tails = np.array([eigen[k:].sum() for k in range(len(eigen))])
    method = (
        "data too large to load: PCA from the covariance computed with Dask (ddof=0); "
        "MSE_k = sum of the discarded eigenvalues (identical to sklearn PCA's "
        "inverse_transform(transform) error on the training data)"
    )
    return tails, tails, method


def _format_table(rows):
    """Plain-text table of (k, pca, ppa, percent) rows."""
    header = ("k", "PCA MSE", "PPA MSE", "PPA/PCA %")
    body = [(str(k), f"{pca:.6g}", f"{ppa:.6g}", f"{pct:.1f}") for k, pca, ppa, pct in rows]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(4)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in body)])


def _write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["k", "pca_mse", "ppa_mse", "ppa_over_pca_percent"])
        for k, pca, ppa, pct in rows:
            w.writerow([k, repr(float(pca)), repr(float(ppa)), repr(float(pct))])


def _write_markdown(path, rows, total_variance, caption):
    lines = [
        "| k | PCA MSE | PPA MSE | PPA/PCA % |",
        "|---:|---:|---:|---:|",
        *(f"| {k} | {pca:.6g} | {ppa:.6g} | {pct:.1f} |" for k, pca, ppa, pct in rows),
        "",
        f"Total variance (k = 0): {total_variance:.6g}. {caption}",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def _versions():
    out = {"python": platform.python_version()}
    for name in ("ppa_dask", "numpy", "scipy", "sklearn", "dask", "distributed", "zarr"):
        try:
            module = __import__(name)
            out[name] = getattr(module, "__version__", "?")
        except Exception:  # pragma: no cover
            out[name] = None
    return out


def run_demo(args, stream=None):
    """The ``demo`` command; returns the exit code."""
    stream = sys.stdout if stream is None else stream
    n, d, seed = args.n_samples, args.n_features, args.seed
    chunk_rows = min(args.chunk_rows, n)
    if d < 4:
        raise CommandError(f"--n-features must be >= 4 for the curved data set, got {d}")

    outdir = os.path.abspath(args.output)
    if os.path.lexists(outdir) and not os.path.isdir(outdir):
        raise CommandError(f"--output {args.output!r} exists and is not a directory")

    import dask.array as da

    from . import datasets
    from .cluster import dashboard_link, local_client
    from .ppa import PPA

    progress = _Progress(stream)
    progress.say(
        f"ppa-dask demo: n={n:,} d={d} seed={seed} workers={args.workers} "
        f"chunk_rows={chunk_rows:,} output={outdir}"
    )
    os.makedirs(outdir, exist_ok=True)
    data_path = os.path.join(outdir, "data.zarr")
    scratch = os.path.join(outdir, ".dask-scratch")
    scratch_existed = os.path.lexists(scratch)

    expected = {
        "kind": "curved",
        "n_samples": n,
        "n_features": d,
        "random_state": seed,
        "dtype": "float64",
        "params": {"noise": DEMO_NOISE},
    }
    summary = {
        "command": "demo",
        "argv": getattr(args, "argv", None),
        "parameters": {
            "n_samples": n, "n_features": d, "seed": seed, "workers": args.workers,
            "threads_per_worker": 1, "chunk_rows": chunk_rows, "output": outdir,
        },
    }
    try:
        with progress.stage("cluster_start_s", f"starting a local Dask cluster ({args.workers} "
                            "worker process(es), 1 thread each)"):
            stack = contextlib.ExitStack()
            client = stack.enter_context(
                local_client(n_workers=args.workers, threads_per_worker=1,
                             local_directory=scratch)
            )
        with stack:
            link = dashboard_link(client)
            progress.say(f"dashboard: {link or '(not available)'}")

            # (a) the data set, written on the cluster, reused when its attributes match
            why = _reusable(data_path, expected, (n, d), chunk_rows)
            reused = why is None
            if reused:
                progress.say(f"data: reusing {data_path} (same parameters)")
                progress.times["data_s"] = 0.0
            else:
                note = "" if why == "absent" else f" (existing store: {why}; rewriting)"
                with progress.stage("data_s", f"data: writing {n:,} x {d} curved-manifold "
                                    f"samples to {data_path}{note}"):
                    datasets.write_zarr(
                        data_path, n, n_features=d, kind="curved", chunk_rows=chunk_rows,
                        random_state=seed, overwrite=os.path.lexists(data_path),
                        noise=DEMO_NOISE,
                    )
                progress.say(f"data: written in {progress.times['data_s']:.1f} s")

            # (c) the fit, on the lazily opened array
            X = da.from_zarr(data_path)
            model = PPA(degree=DEMO_DEGREES, cv=DEMO_CV, random_state=seed)
            with progress.stage("fit_s", f"fitting PPA(degree=1..5, cv={DEMO_CV}) on a "
                                f"{X.shape[0]:,} x {X.shape[1]} Dask array "
                                f"({X.numblocks[0]} chunks)"):
                model.fit(X)
            degrees = [int(g) for g in model.degrees_]
            progress.say(
                f"fit: {progress.times['fit_s']:.1f} s, {model.n_passes_} passes over the "
                f"data, residual cache: {model.residual_cache_}"
            )
            progress.say("fit: degree chosen per step: " + " ".join(map(str, degrees)))

            # (d) PPA reconstruction errors: one pass
            with progress.stage("ppa_errors_s", "PPA reconstruction errors for k = 0.."
                                f"{d - 1} (one pass)"):
                ppa_errors = np.asarray(model.reconstruction_errors(X), dtype=float)
            progress.say(f"PPA errors: {progress.times['ppa_errors_s']:.1f} s")

            # PCA on the same data
            nbytes = 8.0 * n * d
            in_memory = nbytes <= PCA_IN_MEMORY_FRACTION * _available_memory()
            where = "in memory" if in_memory else "on the cluster (too large to load)"
            with progress.stage("pca_s", f"PCA on the same data, {where}"):
                if in_memory:
                    import zarr

                    Xn = np.asarray(zarr.open_array(data_path, mode="r")[...], dtype=np.float64)
                    pca_errors, eigen_tails, pca_method = _pca_errors_in_memory(Xn)
                    del Xn
                else:
                    pca_errors, eigen_tails, pca_method = _pca_errors_dask(X)
            progress.say(f"PCA: {progress.times['pca_s']:.1f} s")
    finally:
        if not scratch_existed:
            shutil.rmtree(scratch, ignore_errors=True)

    # (e) the table, k = 1..d-1
    ks = list(range(1, d))
    rows = []
    for k in ks:
        pca, ppa = float(pca_errors[k]), float(ppa_errors[k])
        pct = 100.0 * ppa / pca if pca > 0 else float("nan")
        rows.append((k, pca, ppa, pct))
    total_variance = float(pca_errors[0])
    caption = (
        "MSE: mean over samples of the squared Euclidean reconstruction error summed over "
        "features, in input units, on the training data. PCA: " + pca_method + ". PPA: "
        "PPA.reconstruction_errors (residual norms after k steps, one pass)."
    )
    progress.plain()
    progress.plain(f"Reconstruction error with k components (n={n:,}, d={d}; "
                   f"total variance {total_variance:.6g}):")
    progress.plain(_format_table(rows))
    progress.plain()

    # (f) files, all inside outdir
    csv_path = os.path.join(outdir, "reconstruction_error.csv")
    md_path = os.path.join(outdir, "reconstruction_error.md")
    json_path = os.path.join(outdir, "summary.json")
    _write_csv(csv_path, rows)
    _write_markdown(md_path, rows, total_variance, caption)

    eigen_check = float(np.max(np.abs(pca_errors - eigen_tails) / np.maximum(eigen_tails, 1e-300)))
    training = np.asarray(model.residual_variance_, dtype=float)
    ppa_check = float(np.max(np.abs(ppa_errors - training) / np.maximum(np.abs(training), 1e-300)))
    summary.update(
        data={
            "path": data_path, "reused": reused, "kind": "curved", "noise": DEMO_NOISE,
            "chunk_rows": chunk_rows, "nbytes": int(8 * n * d),
        },
        cluster={"workers": args.workers, "threads_per_worker": 1, "dashboard": link},
        model={
            "estimator": f"PPA(degree=range(1, 6), cv={DEMO_CV}, random_state={seed})",
            "degrees": degrees,
            "cv_scores": None if model.cv_scores_ is None else np.asarray(model.cv_scores_).tolist(),
            "n_passes": int(model.n_passes_),
            "residual_cache": model.residual_cache_,
            "explained_variance": np.asarray(model.explained_variance_).tolist(),
        },
        reconstruction_error={
            "k": ks,
            "pca_mse": [r[1] for r in rows],
            "ppa_mse": [r[2] for r in rows],
            "ppa_over_pca_percent": [r[3] for r in rows],
            "total_variance": total_variance,
            "pca_method": pca_method,
            "pca_vs_discarded_eigenvalues_max_rel_diff": eigen_check,
            "ppa_vs_fit_residual_variance_max_rel_diff": ppa_check,
        },
        versions=_versions(),
    )
    progress.times["total_s"] = progress.total()
    summary["times_s"] = {k: round(v, 3) for k, v in progress.times.items()}
    with open(json_path, "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    progress.say(f"wrote {csv_path}")
    progress.say(f"wrote {md_path}")
    progress.say(f"wrote {json_path}")
    progress.say(f"done in {progress.total():.1f} s")
    return 0


# ---------------------------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------------------------

#: Functions adding one sub-command each to the sub-parsers.
_COMMANDS = (_add_demo,)


def build_parser():
    """The argument parser with all sub-commands."""
    from . import __version__

    parser = _Parser(
        prog=PROG,
        description="Principal Polynomial Analysis (PPA) fitted blockwise on Dask.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _COMMANDS:
        add(subparsers)
    return parser


def _error(message):
    one_line = " ".join(str(message).split())
    print(f"{PROG}: error: {one_line}", file=sys.stderr, flush=True)
    return 2


def main(argv=None) -> int:
    """Run the command line; returns the exit code (0 success, 2 bad arguments/input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        return _error(exc)
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    args.argv = [PROG, *argv]
    try:
        return int(args.func(args) or 0)
    except (CommandError, ValueError) as exc:
        return _error(exc)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
