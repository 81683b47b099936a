"""Command line interface: ``ppa-dask COMMAND [options]``.

Commands
--------
demo
    Two parts on one local Dask cluster. The table: generate a curved 3-D manifold in
    ``--n-features`` dimensions as a Zarr array, fit PPA to it and compare its reconstruction
    error with PCA's for every number of components. The cube: a synthetic hyperspectral cube
    read from Zarr with xarray goes through the pipeline stages (component images,
    reconstruction-error table, PNGs) in ``<output>/cube``. ``--no-cube`` runs only the table,
    ``--cube`` only the cube. Everything is written inside ``--output``.
run PIPELINE.yaml
    A batch pipeline (:mod:`ppa_dask.pipeline`), resumed where a killed run stopped.
fit INPUT MODEL / transform MODEL INPUT OUTPUT / inverse MODEL INPUT OUTPUT
    Fit on a Zarr array or cube and save the model; write components / reconstructions to Zarr.
info MODEL
    Summary of a saved model.

The computing commands take ``--cluster FILE`` (cluster/*.yaml), ``--scheduler ADDRESS`` (or
``threads``), ``--workers``, ``--memory-limit`` and ``--performance-report FILE.html``; they
print the dashboard link at start and a log line with the wall time of each stage.

Adding a command: write ``_add_<name>(subparsers)``, which creates the sub-parser and sets
``func`` (a callable taking the parsed namespace and returning an exit code), and append it to
``_COMMANDS``.

Exit codes: 0 on success, 2 on bad arguments or bad input (one line ``ppa-dask: error: ...``
on stderr; the library's ``ValueError`` messages are reported that way), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import sys
import time

import numpy as np

from ppa_dask import datasets, store
from ppa_dask.app.cluster import dashboard_link, open_client, read_cluster_config, step_reporter
from ppa_dask.app.pipeline import (
    Run,
    format_error_table,
    load_pipeline,
    open_zarr_dataset,
    pca_reconstruction_errors,
    validate_pipeline,
    write_error_csv,
    write_error_markdown,
)
from ppa_dask.ppa.estimator import PPA
from ppa_dask.utils.version import VERSION

__all__ = ["main", "build_parser"]

PROG = "ppa-dask"

#: Default output folders of ``demo`` and of ``demo --cube`` (the cube part alone).
DEMO_OUTPUT = "ppa-dask-demo"
CUBE_DEMO_OUTPUT = "ppa-dask-demo-cube"
#: Sub-folder of the demo's output holding the run folder of its cube part.
CUBE_DEMO_SUBDIR = "cube"
#: Size of the demo cube (bands, image side); pipelines/demo.yaml is the same run.
CUBE_DEMO_BANDS = 32
CUBE_DEMO_PIXELS = 256
#: Smallest accepted sizes, checked before anything runs. Fewer than 4 bands leave no curved
#: structure to compare; below 8 x 8 pixels the cloud-free pixels can be too few for 2-fold
#: cross-validation of degrees up to 5 (12 samples), and that would only show after the table.
CUBE_DEMO_MIN_BANDS = 4
CUBE_DEMO_MIN_PIXELS = 8
#: Rows of ``y`` per Dask/Zarr chunk of the demo cube.
CUBE_DEMO_CHUNK_Y = 64
#: The cube part's main outputs, relative to its run folder (printed at the end of the demo).
CUBE_DEMO_OUTPUTS = {
    "reconstruction_error_md": "05-evaluate/reconstruction_error.md",
    "reconstruction_error_csv": "05-evaluate/reconstruction_error.csv",
    "components_png": "06-plots/components.png",
    "components_zarr": "04-transform/components.zarr",
}

#: Noise of the demo data set (``datasets.make_curved_manifold``'s default).
DEMO_NOISE = 0.05
#: Candidate degrees and folds of the demo fit.
DEMO_DEGREES = range(1, 6)
DEMO_CV = 2
#: The PCA comparison loads the data into this process when it takes at most this fraction of
#: the available memory; otherwise it is computed on the cluster from the covariance.
PCA_IN_MEMORY_FRACTION = 0.25


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
        raise argparse.ArgumentTypeError(
            f"expected a non-negative integer, got {text!r}"
        ) from None
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
        help="fit PPA on a generated curved table and a synthetic cube, compare with PCA",
        description=(
            "Two parts on one local Dask cluster. The table: generate a curved 3-D manifold "
            "embedded in D dimensions (Zarr, DIR/data.zarr), fit PPA with degrees 1-5 chosen per "
            "step by 2-fold cross-validation, and tabulate the reconstruction error of PCA and "
            "PPA for k = 1..D-1 components (DIR/reconstruction_error.csv and .md, "
            "DIR/summary.json). The cube: a synthetic hyperspectral cube (make_cube) written to "
            "Zarr and read back with xarray goes through the stages of 'ppa-dask run' in "
            "DIR/cube: component images (04-transform/components.zarr), reconstruction-error "
            "table (05-evaluate), PNGs (06-plots); a rerun resumes it. Writes only inside DIR."
        ),
    )
    p.add_argument(
        "--output",
        "-o",
        metavar="DIR",
        default=None,
        help=f"output directory (default: ./{DEMO_OUTPUT}, with --cube ./{CUBE_DEMO_OUTPUT})",
    )
    parts = p.add_mutually_exclusive_group()
    parts.add_argument(
        "--cube",
        action="store_true",
        help="only the cube part, with DIR itself as its run folder (resumable "
        "like 'ppa-dask run')",
    )
    parts.add_argument("--no-cube", action="store_true", help="only the table part (no DIR/cube)")
    p.add_argument(
        "--bands",
        metavar="B",
        type=_positive_int,
        default=CUBE_DEMO_BANDS,
        help=f"cube part: spectral bands, >= {CUBE_DEMO_MIN_BANDS} (default: {CUBE_DEMO_BANDS})",
    )
    p.add_argument(
        "--pixels",
        metavar="P",
        type=_positive_int,
        default=CUBE_DEMO_PIXELS,
        help=f"cube part: image side in pixels, >= {CUBE_DEMO_MIN_PIXELS} "
        f"(default: {CUBE_DEMO_PIXELS})",
    )
    p.add_argument(
        "--n-samples",
        "-n",
        metavar="N",
        type=_positive_int,
        default=1_000_000,
        help="table part: number of samples (default: 1000000)",
    )
    p.add_argument(
        "--n-features",
        "-d",
        metavar="D",
        type=_positive_int,
        default=10,
        help="table part: number of features, >= 4 (default: 10)",
    )
    p.add_argument(
        "--seed",
        metavar="S",
        type=_non_negative_int,
        default=0,
        help="seed of the data and of the cross-validation folds (default: 0)",
    )
    p.add_argument(
        "--workers",
        "-w",
        metavar="W",
        type=_positive_int,
        default=2,
        help="Dask worker processes, one thread each (default: 2)",
    )
    p.add_argument(
        "--chunk-rows",
        metavar="R",
        type=_positive_int,
        default=131_072,
        help="table part: rows per Zarr/Dask chunk (default: 131072, two generation blocks)",
    )
    _add_cluster_options(p, workers=False)
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
    """PCA reconstruction MSE for k = 0..d-1 on in-memory data (scikit-learn's PCA), the sums
    of discarded eigenvalues as a check, and a description (see
    :func:`ppa_dask.pipeline.pca_reconstruction_errors`)."""
    return pca_reconstruction_errors(np.asarray(X, dtype=np.float64))


def _pca_errors_dask(X):
    """PCA reconstruction MSE for k = 0..d-1 from the covariance computed with Dask."""
    return pca_reconstruction_errors(X, in_memory_bytes=0)


def _format_table(rows):
    return format_error_table(rows)


def _write_csv(path, rows):
    write_error_csv(path, rows)


def _write_markdown(path, rows, total_variance, caption):
    write_error_markdown(path, rows, total_variance, caption)


def _versions():
    out = {"python": platform.python_version()}
    for name in ("ppa_dask", "numpy", "scipy", "sklearn", "dask", "distributed", "zarr"):
        try:
            module = __import__(name)
            out[name] = getattr(module, "VERSION", "?")
        except Exception:  # pragma: no cover
            out[name] = None
    return out


def run_demo(args, stream=None):
    """The ``demo`` command; returns the exit code.

    By default the table part (outputs in ``--output``) and then the cube part (its run folder
    ``<output>/cube``), both on one cluster session; ``--no-cube`` stops after the table,
    ``--cube`` runs only the cube part (:func:`run_cube_demo`).
    """
    stream = sys.stdout if stream is None else stream
    if args.cube:
        return run_cube_demo(args, stream)
    if args.output is None:
        args.output = DEMO_OUTPUT
    n, d, seed = args.n_samples, args.n_features, args.seed
    chunk_rows = min(args.chunk_rows, n)
    if d < 4:
        raise CommandError(f"--n-features must be >= 4 for the curved data set, got {d}")
    # checked before anything runs: a bad cube option must not cost the table part first
    cube_config = None if args.no_cube else _checked_cube_demo_config(args)

    outdir = os.path.abspath(args.output)
    if os.path.lexists(outdir) and not os.path.isdir(outdir):
        raise CommandError(f"--output {args.output!r} exists and is not a directory")
    cube_dir = None if cube_config is None else os.path.join(outdir, CUBE_DEMO_SUBDIR)

    progress = _Progress(stream)
    progress.say(
        f"ppa-dask demo: n={n:,} d={d} seed={seed} workers={args.workers} "
        f"chunk_rows={chunk_rows:,} output={outdir}"
    )
    cube_plan = _cube_demo_size(args) if cube_dir else "skipped (--no-cube)"
    progress.say(f"then the cube part: {cube_plan}")
    os.makedirs(outdir, exist_ok=True)
    scratch = os.path.join(outdir, ".dask-scratch")
    scratch_existed = os.path.lexists(scratch)
    try:
        with progress.stage("cluster_start_s", "starting the Dask cluster"):
            stack = contextlib.ExitStack()
            client = stack.enter_context(_session(args, progress, local_directory=scratch))
        with stack:
            link = dashboard_link(client) if client is not None else None
            summary = _demo_table_part(args, progress, outdir, chunk_rows, link)
            # written now, so that the table's record survives a failed or interrupted cube
            # part; rewritten when the cube part is complete
            summary["cube"] = (
                None if cube_dir is None else _cube_demo_record(cube_dir, args, complete=False)
            )
            progress.times["table_s"] = progress.total()
            json_path = _write_demo_summary(outdir, summary, progress)
            progress.say(f"wrote {json_path}")
            progress.say(f"table part: done in {progress.times['table_s']:.1f} s")

            if cube_dir is not None:
                progress.plain()
                with progress.stage(
                    "cube_s", f"cube part: {_cube_demo_size(args)}, run folder {cube_dir}"
                ):
                    _run_cube_pipeline(cube_config, cube_dir, stream, progress)
                progress.say(f"cube part: done in {progress.times['cube_s']:.1f} s")
                summary["cube"] = _cube_demo_record(cube_dir, args, complete=True)
                _write_demo_summary(outdir, summary, progress)
    finally:
        if not scratch_existed:
            shutil.rmtree(scratch, ignore_errors=True)

    progress.say(f"table part: see {os.path.join(outdir, 'reconstruction_error.md')}")
    if cube_dir is not None:
        _say_cube_outputs(progress, cube_dir)
    progress.say(f"done in {progress.total():.1f} s")
    return 0


def _demo_table_part(args, progress, outdir, chunk_rows, dashboard):
    """The table part of the demo on the current cluster: data (reused when it matches), fit,
    errors of PPA and PCA, the printed table and its CSV and markdown files.

    Returns the summary record without its ``cube`` and ``times_s`` entries.
    """
    import dask.array as da

    stream = progress.stream
    n, d, seed = args.n_samples, args.n_features, args.seed
    data_path = os.path.join(outdir, "data.zarr")
    expected = {
        "kind": "curved",
        "n_samples": n,
        "n_features": d,
        "random_state": seed,
        "dtype": "float64",
        "params": {"noise": DEMO_NOISE},
    }

    # (a) the data set, written on the cluster, reused when its attributes match
    why = _reusable(data_path, expected, (n, d), chunk_rows)
    reused = why is None
    if reused:
        progress.say(f"data: reusing {data_path} (same parameters)")
        progress.times["data_s"] = 0.0
    else:
        note = "" if why == "absent" else f" (existing store: {why}; rewriting)"
        with progress.stage(
            "data_s", f"data: writing {n:,} x {d} curved-manifold samples to {data_path}{note}"
        ):
            datasets.write_zarr(
                data_path,
                n,
                n_features=d,
                kind="curved",
                chunk_rows=chunk_rows,
                random_state=seed,
                overwrite=os.path.lexists(data_path),
                noise=DEMO_NOISE,
            )
        progress.say(f"data: written in {progress.times['data_s']:.1f} s")

    # (c) the fit, on the lazily opened array
    X = da.from_zarr(data_path)
    model = PPA(degree=DEMO_DEGREES, cv=DEMO_CV, random_state=seed)
    with progress.stage(
        "fit_s",
        f"fitting PPA(degree=1..5, cv={DEMO_CV}) on a "
        f"{X.shape[0]:,} x {X.shape[1]} Dask array "
        f"({X.numblocks[0]} chunks)",
    ):
        model.fit(X, progress=step_reporter(stream))
    degrees = [int(g) for g in model.degrees_]
    progress.say(
        f"fit: {progress.times['fit_s']:.1f} s, {model.n_passes_} passes over the "
        f"data, residual cache: {model.residual_cache_}"
    )
    progress.say("fit: degree chosen per step: " + " ".join(map(str, degrees)))

    # (d) PPA reconstruction errors: one pass
    with progress.stage(
        "ppa_errors_s", f"PPA reconstruction errors for k = 0..{d - 1} (one pass)"
    ):
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
    progress.plain(
        f"Reconstruction error with k components (n={n:,}, d={d}; "
        f"total variance {total_variance:.6g}):"
    )
    progress.plain(_format_table(rows))
    progress.plain()

    # (f) files, all inside outdir
    csv_path = os.path.join(outdir, "reconstruction_error.csv")
    md_path = os.path.join(outdir, "reconstruction_error.md")
    _write_csv(csv_path, rows)
    _write_markdown(md_path, rows, total_variance, caption)
    progress.say(f"wrote {csv_path}")
    progress.say(f"wrote {md_path}")

    eigen_check = float(np.max(np.abs(pca_errors - eigen_tails) / np.maximum(eigen_tails, 1e-300)))
    training = np.asarray(model.residual_variance_, dtype=float)
    ppa_check = float(np.max(np.abs(ppa_errors - training) / np.maximum(np.abs(training), 1e-300)))
    return {
        "command": "demo",
        "argv": getattr(args, "argv", None),
        "parameters": {
            "n_samples": n,
            "n_features": d,
            "seed": seed,
            "workers": args.workers,
            "threads_per_worker": 1,
            "chunk_rows": chunk_rows,
            "output": outdir,
        },
        "data": {
            "path": data_path,
            "reused": reused,
            "kind": "curved",
            "noise": DEMO_NOISE,
            "chunk_rows": chunk_rows,
            "nbytes": int(8 * n * d),
        },
        "cluster": {"workers": args.workers, "threads_per_worker": 1, "dashboard": dashboard},
        "model": {
            "estimator": f"PPA(degree=range(1, 6), cv={DEMO_CV}, random_state={seed})",
            "degrees": degrees,
            "cv_scores": None
            if model.cv_scores_ is None
            else np.asarray(model.cv_scores_).tolist(),
            "n_passes": int(model.n_passes_),
            "residual_cache": model.residual_cache_,
            "explained_variance": np.asarray(model.explained_variance_).tolist(),
        },
        "reconstruction_error": {
            "k": ks,
            "pca_mse": [r[1] for r in rows],
            "ppa_mse": [r[2] for r in rows],
            "ppa_over_pca_percent": [r[3] for r in rows],
            "total_variance": total_variance,
            "pca_method": pca_method,
            "pca_vs_discarded_eigenvalues_max_rel_diff": eigen_check,
            "ppa_vs_fit_residual_variance_max_rel_diff": ppa_check,
        },
        "versions": _versions(),
    }


def _write_demo_summary(outdir, summary, progress):
    """Write ``summary.json`` with the stage times so far (``total_s``: the run until now);
    through a temporary file, since it is written twice per run."""
    times = dict(progress.times, total_s=progress.total())
    summary["times_s"] = {k: round(v, 3) for k, v in times.items()}
    json_path = os.path.join(outdir, "summary.json")
    partial = json_path + ".partial"
    with open(partial, "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    os.replace(partial, json_path)
    return json_path


def _cube_demo_size(args):
    return (
        f"{args.bands} bands x {args.pixels} x {args.pixels} pixels (make_cube, seed={args.seed})"
    )


def _cube_demo_record(cube_dir, args, complete):
    """The ``cube`` entry of the demo's summary.json: where the cube part's outputs are."""
    record = {
        "path": cube_dir,
        "complete": complete,
        "bands": args.bands,
        "pixels": args.pixels,
        "seed": args.seed,
        "pipeline_summary": os.path.join(cube_dir, "summary.json"),
    }
    record.update(
        {name: os.path.join(cube_dir, relative) for name, relative in CUBE_DEMO_OUTPUTS.items()}
    )
    return record


def _checked_cube_demo_config(args):
    """The cube part's pipeline configuration, after checking ``--bands`` and ``--pixels``."""
    if args.bands < CUBE_DEMO_MIN_BANDS:
        raise CommandError(f"--bands must be >= {CUBE_DEMO_MIN_BANDS}, got {args.bands}")
    if args.pixels < CUBE_DEMO_MIN_PIXELS:
        raise CommandError(
            f"--pixels must be >= {CUBE_DEMO_MIN_PIXELS} (enough cloud-free "
            f"pixels for the cross-validated fit), got {args.pixels}"
        )
    return cube_demo_config(args.seed, args.bands, args.pixels)


def _run_cube_pipeline(config, run_dir, stream, progress):
    """Run the cube pipeline in ``run_dir`` on the current cluster (resuming complete stages);
    its log lines count time from the demo's start."""
    return Run(config, output=run_dir, stream=stream, clock=progress.start).execute()


def _say_cube_outputs(progress, run_dir):
    for name in ("reconstruction_error_md", "components_png", "components_zarr"):
        progress.say(f"cube part: see {os.path.join(run_dir, CUBE_DEMO_OUTPUTS[name])}")


def cube_demo_config(seed=0, bands=CUBE_DEMO_BANDS, pixels=CUBE_DEMO_PIXELS):
    """The pipeline configuration of the demo's cube part (pipelines/demo.yaml holds the same
    with the default sizes)."""
    return validate_pipeline(
        {
            "name": "demo-cube",
            "description": "PPA of a synthetic hyperspectral cube read from Zarr with xarray",
            "output": CUBE_DEMO_OUTPUT,
            "seed": seed,
            "data": {
                "source": "make_cube",
                "variable": "reflectance",
                "feature_dim": "band",
                "params": {
                    "n_bands": bands,
                    "ny": pixels,
                    "nx": pixels,
                    "chunks": {"y": min(CUBE_DEMO_CHUNK_Y, pixels)},
                },
            },
            "preprocess": {"scale": "minmax", "mask": {"nonfinite": "drop"}},
            "model": {"degree": list(DEMO_DEGREES), "cv": DEMO_CV},
            "transform": {"components": None},
            "evaluate": {"pca": True},
            "plots": {"components": 3},
        },
        where="demo --cube",
    )


def run_cube_demo(args, stream=None):
    """``demo --cube``: only the cube part, with ``--output`` itself as its run folder, on its
    own cluster session; returns the exit code."""
    stream = sys.stdout if stream is None else stream
    config = _checked_cube_demo_config(args)
    outdir = os.path.abspath(args.output or CUBE_DEMO_OUTPUT)
    if os.path.lexists(outdir) and not os.path.isdir(outdir):
        raise CommandError(f"--output {args.output!r} exists and is not a directory")
    progress = _Progress(stream)
    progress.say(f"ppa-dask demo --cube: {_cube_demo_size(args)}, output={outdir}")
    scratch = os.path.join(outdir, ".dask-scratch")
    scratch_existed = os.path.lexists(scratch)
    try:
        with _session(args, progress, local_directory=scratch):
            _run_cube_pipeline(config, outdir, stream, progress)
    finally:
        if not scratch_existed:
            shutil.rmtree(scratch, ignore_errors=True)
    _say_cube_outputs(progress, outdir)
    return 0


# ---------------------------------------------------------------------------------------------
# clusters, dashboard and performance report (shared by the commands below)
# ---------------------------------------------------------------------------------------------


def _add_cluster_options(p, workers=True):
    g = p.add_argument_group("where to compute (default: a local cluster on 127.0.0.1)")
    g.add_argument(
        "--cluster",
        metavar="FILE",
        help="cluster configuration file (cluster/local.yaml, slurm.yaml, pbs.yaml, "
        "kubernetes.yaml; see cluster/README.md)",
    )
    g.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="connect to a running scheduler (tcp://host:8786, tls://...), or "
        "'threads' / 'synchronous' to compute in this process without a cluster",
    )
    if workers:
        g.add_argument(
            "--workers",
            "-w",
            metavar="W",
            type=_positive_int,
            default=2,
            help="worker processes of the local cluster, one thread each (default: 2)",
        )
    g.add_argument(
        "--memory-limit",
        metavar="SIZE",
        default="auto",
        help="memory limit per local worker, e.g. 2GiB (default: auto)",
    )
    g.add_argument(
        "--performance-report",
        metavar="FILE.html",
        help="write distributed's performance report of the run to FILE.html",
    )


@contextlib.contextmanager
def _session(args, progress, local_directory=None, cluster_file=None):
    """Open the cluster the options ask for, print its dashboard, record a performance report."""
    cluster = getattr(args, "cluster", None) or cluster_file
    scheduler = getattr(args, "scheduler", None)
    report = getattr(args, "performance_report", None)
    if cluster is not None and scheduler is not None:
        raise CommandError("give either --cluster or --scheduler, not both")
    if report is not None:
        parent = os.path.dirname(os.path.abspath(report))
        if not os.path.isdir(parent):
            raise CommandError(f"--performance-report: folder {parent!r} does not exist")
        if scheduler in ("threads", "synchronous", "sync", "single-threaded"):
            raise CommandError(
                f"--performance-report needs a distributed scheduler, not --scheduler {scheduler}"
            )
    what = (
        f"cluster from {cluster}"
        if cluster
        else f"scheduler {scheduler}"
        if scheduler
        else f"local cluster ({args.workers} worker process(es), 1 thread each)"
    )
    progress.say(f"connecting: {what}")
    with open_client(
        cluster=cluster,
        scheduler=scheduler,
        n_workers=getattr(args, "workers", 2),
        memory_limit=getattr(args, "memory_limit", "auto"),
        local_directory=local_directory,
    ) as client:
        if client is None:
            progress.say(f"computing in this process (dask scheduler {scheduler!r}); no dashboard")
            yield None
            return
        n = len(client.scheduler_info(n_workers=-1).get("workers", {}))
        progress.say(f"scheduler {client.scheduler.address}, {n} worker(s)")
        progress.say(f"dashboard: {dashboard_link(client) or '(not available)'}")
        if report is None:
            yield client
        else:
            from distributed import performance_report

            with performance_report(filename=report):
                yield client
            progress.say(f"performance report: {os.path.abspath(report)}")


# ---------------------------------------------------------------------------------------------
# run: a YAML pipeline
# ---------------------------------------------------------------------------------------------


def _add_run(subparsers):
    p = subparsers.add_parser(
        "run",
        help="run a YAML pipeline (resumes a killed run)",
        description=(
            "Run the pipeline described by PIPELINE.yaml (see pipelines/): load, preprocess, "
            "fit, transform, evaluate against PCA, plots. Each stage writes under the run "
            "folder; stages already complete for the same configuration and inputs are "
            "skipped, so rerunning a killed run resumes it. The file is validated before "
            "anything runs."
        ),
    )
    p.add_argument("pipeline", metavar="PIPELINE.yaml", help="the pipeline file")
    p.add_argument(
        "--output",
        "-o",
        metavar="DIR",
        help="run folder (default: the file's 'output', else runs/<name>)",
    )
    p.add_argument("--force", action="store_true", help="rerun every stage")
    p.add_argument(
        "--check",
        action="store_true",
        help="only validate the file (and its cluster file) and print the "
        "configuration with every default filled in",
    )
    _add_cluster_options(p)
    p.set_defaults(func=run_run)
    return p


def run_run(args, stream=None):
    """The ``run`` command; returns the exit code."""
    stream = sys.stdout if stream is None else stream

    config = load_pipeline(args.pipeline)
    cluster_file = None if (args.cluster or args.scheduler) else config.get("cluster")
    if args.cluster or cluster_file:
        read_cluster_config(args.cluster or cluster_file)  # validated before anything runs
    if args.check:
        import yaml

        print(yaml.safe_dump(config, sort_keys=False), end="", file=stream)
        print(f"{args.pipeline}: valid", file=stream)
        return 0
    progress = _Progress(stream)
    progress.say(f"ppa-dask run {args.pipeline}")
    with _session(args, progress, cluster_file=cluster_file):
        root = Run(
            config, output=args.output, stream=stream, force=args.force, clock=progress.start
        ).execute()
    progress.say(f"results in {root}")
    return 0


# ---------------------------------------------------------------------------------------------
# fit / transform / inverse / info
# ---------------------------------------------------------------------------------------------


def _degree_spec(text):
    """argparse type: ``3``, ``1-5`` or ``1,2,4``."""
    try:
        if "-" in text:
            lo, hi = (int(t) for t in text.split("-"))
            values = list(range(lo, hi + 1))
        else:
            values = [int(t) for t in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected a degree >= 1, a range such as 1-5 or a list such as 1,2,4; got {text!r}"
        )
    return values[0] if len(values) == 1 else values


def _add_input_options(p):
    p.add_argument(
        "--variable", metavar="NAME", help="the array (or xarray variable) inside a Zarr group"
    )


def _open_data(path, variable=None, feature_dim=None):
    """A Zarr input as a Dask array, or as a DataArray when ``feature_dim`` is given."""
    if feature_dim is None:
        return store.open_input(path, variable=variable)

    ds = open_zarr_dataset(path)
    names = list(ds.data_vars)
    if variable is None:
        if len(names) != 1:
            raise CommandError(f"{path!r} holds the variables {names}; choose one with --variable")
        variable = names[0]
    if variable not in ds.data_vars:
        raise CommandError(f"{path!r} has no variable {variable!r} (variables: {names})")
    cube = ds[variable]
    if feature_dim not in cube.dims:
        raise CommandError(
            f"--feature-dim {feature_dim!r} is not a dimension of {variable!r} "
            f"(dimensions: {', '.join(cube.dims)})"
        )
    return cube


def _check_new_output(path, overwrite, what):
    if os.path.lexists(path) and not overwrite:
        raise CommandError(f"{what} {path!r} already exists; pass --overwrite to replace it")


def _add_fit(subparsers):
    p = subparsers.add_parser(
        "fit",
        help="fit PPA on a Zarr array or cube and save the model",
        description=(
            "Fit PPA on INPUT (a Zarr array of samples x features, a variable of a Zarr group, "
            "or with --feature-dim an xarray cube whose other dimensions are samples) and save "
            "the model to MODEL (a Zarr group of arrays and JSON; never pickle)."
        ),
    )
    p.add_argument("input", metavar="INPUT", help="Zarr store (local path or fsspec URL)")
    p.add_argument("model", metavar="MODEL", help="where to save the model (a .zarr folder)")
    _add_input_options(p)
    p.add_argument(
        "--feature-dim",
        metavar="DIM",
        help="read INPUT with xarray; DIM holds the features (e.g. band)",
    )
    p.add_argument(
        "--nan-policy",
        choices=("raise", "drop_samples"),
        default="raise",
        help="xarray input: samples with NaN in some features (default: raise)",
    )
    p.add_argument(
        "--degree",
        type=_degree_spec,
        default=[1, 2, 3, 4, 5],
        metavar="G",
        help="degree, or candidates chosen per step by cross-validation: 3, 1-5, "
        "1,2,4 (default: 1-5)",
    )
    p.add_argument(
        "--cv",
        type=_positive_int,
        default=2,
        metavar="K",
        help="cross-validation folds for the degree choice (default: 2)",
    )
    p.add_argument(
        "--n-components",
        type=_positive_int,
        default=None,
        metavar="K",
        help="steps to fit (default: all, d - 1)",
    )
    p.add_argument(
        "--seed",
        type=_non_negative_int,
        default=0,
        metavar="S",
        help="seed of the cross-validation folds (default: 0)",
    )
    p.add_argument(
        "--residual-cache",
        choices=("auto", "persist", "checkpoint", "recompute"),
        default="auto",
        help="keep the residual on the workers between passes, checkpoint it to "
        "disk, or recompute it (default: auto, from the data size and the "
        "cluster memory)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing MODEL")
    _add_cluster_options(p)
    p.set_defaults(func=run_fit)
    return p


def run_fit(args, stream=None):
    """The ``fit`` command."""
    stream = sys.stdout if stream is None else stream

    _check_new_output(args.model, args.overwrite, "MODEL")
    X = _open_data(args.input, args.variable, args.feature_dim)
    model = PPA(
        degree=args.degree,
        cv=args.cv,
        n_components=args.n_components,
        random_state=args.seed,
        residual_cache=args.residual_cache,
    )
    progress = _Progress(stream)
    shape = dict(X.sizes) if args.feature_dim else f"{X.shape[0]:,} x {X.shape[1]}"
    progress.say(f"ppa-dask fit {args.input} ({shape}) -> {args.model}")
    with _session(args, progress):
        with progress.stage("fit_s", f"fitting {model!r}"):
            kwargs = (
                {"feature_dim": args.feature_dim, "nan_policy": args.nan_policy}
                if args.feature_dim
                else {}
            )
            model.fit(X, progress=step_reporter(stream), **kwargs)
        progress.say(
            f"fit: {progress.times['fit_s']:.1f} s, {model.n_passes_} passes, residual "
            f"cache {model.residual_cache_}, degrees "
            f"{' '.join(str(int(g)) for g in model.degrees_)}"
        )
    store.save_model(model, args.model, overwrite=args.overwrite)
    progress.say(f"saved {os.path.abspath(args.model)}")
    return 0


def _add_apply(subparsers, name, help_, description, func):
    p = subparsers.add_parser(name, help=help_, description=description)
    p.add_argument("model", metavar="MODEL", help="a model saved by 'ppa-dask fit'")
    p.add_argument("input", metavar="INPUT", help="Zarr store (local path or fsspec URL)")
    p.add_argument("output", metavar="OUTPUT", help="Zarr array (or xarray group) to write")
    _add_input_options(p)
    if name == "transform":
        p.add_argument(
            "--components",
            type=_positive_int,
            default=None,
            metavar="K",
            help="write the first K components (default: all)",
        )
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    _add_cluster_options(p)
    p.set_defaults(func=func)
    return p


def _add_transform(subparsers):
    return _add_apply(
        subparsers,
        "transform",
        "PPA components of a Zarr array or cube, written to Zarr",
        "Apply MODEL to INPUT and write the components to OUTPUT, chunked like the input. A "
        "model fitted on an xarray cube reads INPUT with xarray and writes a group with a "
        "'components' variable (masked samples NaN, coordinates kept). The write goes to a "
        "temporary sibling renamed into place when complete.",
        run_transform,
    )


def _add_inverse(subparsers):
    return _add_apply(
        subparsers,
        "inverse",
        "map PPA components back to the input space",
        "Apply MODEL's closed-form inverse to the components in INPUT (as written by "
        "'ppa-dask transform'; with m < all components the residual after step m is taken as "
        "zero) and write the reconstruction to OUTPUT.",
        run_inverse,
    )


def _load_model_file(path):
    return store.load_model(path)


def _layout_dim(model):
    layout = getattr(model, "xarray_layout_", None)
    if layout is None:
        return None
    return layout.get("feature_dim") or "variable"


def _apply(args, stream, what):
    stream = sys.stdout if stream is None else stream

    _check_new_output(args.output, args.overwrite, "OUTPUT")
    model = _load_model_file(args.model)
    progress = _Progress(stream)
    progress.say(f"ppa-dask {what} {args.input} with {args.model} -> {args.output}")
    cube_dim = _layout_dim(model)
    with _session(args, progress):
        with progress.stage(f"{what}_s", f"{what}: computing and writing"):
            if cube_dim is None:
                X = store.open_input(args.input, variable=args.variable)
                if what == "transform":
                    k = (
                        model.n_components_
                        if args.components is None
                        else min(args.components, model.n_components_)
                    )
                    out = model.transform(X)[:, :k]
                else:
                    out = model.inverse_transform(X)
                store.write_array(
                    out,
                    args.output,
                    overwrite=args.overwrite,
                    attrs={"ppa_dask_command": what, "model": os.path.abspath(args.model)},
                )
                shape = out.shape
            else:
                if what == "transform":
                    data = _open_data(args.input, args.variable, cube_dim)
                    out = model.transform(data)
                    if args.components is not None:
                        out = out.isel(component=slice(0, args.components))
                else:
                    data = _open_data(args.input, args.variable or "components", "component")
                    out = model.inverse_transform(data)
                store.write_dataset(out, args.output, overwrite=args.overwrite)
                shape = dict(out.sizes) if hasattr(out, "sizes") else "?"
    progress.say(
        f"wrote {os.path.abspath(args.output)} ({shape}) in {progress.times[f'{what}_s']:.1f} s"
    )
    return 0


def run_transform(args, stream=None):
    """The ``transform`` command."""
    return _apply(args, stream, "transform")


def run_inverse(args, stream=None):
    """The ``inverse`` command."""
    return _apply(args, stream, "inverse")


def _add_info(subparsers):
    p = subparsers.add_parser(
        "info",
        help="summary of a saved model",
        description="Check MODEL (format version, checksums) and print a summary of it; "
        "nothing in the file is executed.",
    )
    p.add_argument("model", metavar="MODEL", help="a model saved by 'ppa-dask fit'")
    p.add_argument("--json", action="store_true", help="print the full summary as JSON")
    p.set_defaults(func=run_info)
    return p


def run_info(args, stream=None):
    """The ``info`` command."""
    stream = sys.stdout if stream is None else stream

    info = store.model_info(args.model)
    if args.json:
        json.dump(info, stream, indent=2, default=str)
        stream.write("\n")
        return 0
    fitted = info.get("fitted", {})

    def value(name):
        v = fitted.get(name)
        return v if not isinstance(v, dict) else f"array {v.get('shape')}"

    lines = [
        f"model:            {info['path']}",
        f"estimator:        {info['estimator']}",
        f"format version:   {info['format_version']} (written by ppa-dask "
        f"{info.get('library_version')})",
        "parameters:       " + ", ".join(f"{k}={v!r}" for k, v in info["params"].items()),
    ]
    for name in ("n_features_in_", "n_samples_", "n_components_", "n_passes_", "residual_cache_"):
        if name in fitted:
            lines.append(f"{name + ':':<18}{value(name)}")
    model = None
    if info["estimator"] == "PPA":
        model = store.load_model(args.model)
        lines.append(f"{'degrees_:':<18}{' '.join(str(int(g)) for g in model.degrees_)}")
        ev = np.asarray(model.explained_variance_)
        share = ev / ev.sum() if ev.sum() > 0 else ev
        lines.append(
            f"{'explained share:':<18}"
            + " ".join(f"{s:.3g}" for s in share[:10])
            + (" ..." if ev.size > 10 else "")
        )
        rv = np.asarray(model.residual_variance_)
        lines.append(
            f"{'training MSE(k):':<18}"
            + " ".join(f"{v:.3g}" for v in rv[:11])
            + (" ..." if rv.size > 11 else "")
        )
        layout = getattr(model, "xarray_layout_", None)
        if layout:
            lines.append(
                f"{'xarray layout:':<18}features along "
                f"{layout.get('feature_dim') or 'the Dataset variables'}"
            )
    lines.append(f"arrays:           {len(info['arrays'])} (SHA-256 checked)")
    print("\n".join(lines), file=stream)
    return 0


# ---------------------------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------------------------

#: Functions adding one sub-command each to the sub-parsers.
_COMMANDS = (_add_demo, _add_run, _add_fit, _add_transform, _add_inverse, _add_info)


def build_parser():
    """The argument parser with all sub-commands."""
    parser = _Parser(
        prog=PROG,
        description="Principal Polynomial Analysis (PPA) fitted blockwise on Dask.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
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
        # includes the pipeline, cluster-file and model-file errors (ValueError subclasses)
        return _error(exc)
    except (
        FileNotFoundError,
        FileExistsError,
        IsADirectoryError,
        NotADirectoryError,
        PermissionError,
    ) as exc:
        return _error(exc)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
