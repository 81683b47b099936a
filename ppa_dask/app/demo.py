"""``ppa-dask demo``: two generated pipelines run by the stages of ``ppa-dask run``.

The table part (:func:`table_demo_config`): a curved 3-D manifold in ``n_features`` dimensions
generated on the cluster into ``<output>/data.zarr`` (reused by a rerun with the same
parameters), fitted with PPA (degrees 1-5 chosen per step by 2-fold cross-validation) and
compared with PCA; its run folder is ``<output>/table``, and the comparison is printed and
copied to ``<output>/reconstruction_error.csv`` and ``.md`` with ``<output>/summary.json``.
The cube part (:func:`cube_demo_config`): a synthetic hyperspectral cube through the same
stages in ``<output>/cube``. Both resume like any pipeline run; nothing is written outside
``<output>``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import sys

import numpy as np

from ppa_dask import store
from ppa_dask.app.demo_defaults import (
    CUBE_DEMO_BANDS,
    CUBE_DEMO_MIN_BANDS,
    CUBE_DEMO_MIN_PIXELS,
    CUBE_DEMO_OUTPUT,
    CUBE_DEMO_PIXELS,
    DEMO_OUTPUT,
)
from ppa_dask.app.pipeline import (
    STAGE_DIRS,
    STAGES,
    Run,
    error_rows,
    format_error_table,
    validate_pipeline,
    write_error_csv,
    write_error_markdown,
)
from ppa_dask.app.session import command_session, read_cluster_option
from ppa_dask.cluster import dashboard_link
from ppa_dask.ppa import first_run, fused
from ppa_dask.utils.files import check_writable, write_json_atomic
from ppa_dask.utils.progress import Reporter

__all__ = [
    "DemoError",
    "run_demo",
    "run_cube_demo",
    "table_demo_config",
    "cube_demo_config",
]

#: Sub-folders of the demo's output holding the run folders of its two parts.
TABLE_DEMO_SUBDIR = "table"
CUBE_DEMO_SUBDIR = "cube"
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
#: Candidate degrees and folds of the demo fits.
DEMO_DEGREES = range(1, 6)
DEMO_CV = 2
#: Components the table part writes and plots (a scatter of the first two).
TABLE_DEMO_COMPONENTS = 2


class DemoError(ValueError):
    """Bad demo options; the CLI reports it on one line with exit code 2."""


def table_demo_config(outdir, n_samples, n_features, seed=0, chunk_rows=131_072):
    """The pipeline configuration of the demo's table part, run in ``<outdir>/table``.

    Parameters
    ----------
    outdir : str
        The demo's output folder: the data set goes to ``<outdir>/data.zarr``.
    n_samples, n_features : int
        Size of the curved-manifold data set (``n_features >= 4``).
    seed : int
        Seed of the data and of the cross-validation folds.
    chunk_rows : int
        Rows per Zarr/Dask chunk of the data set.

    Returns
    -------
    dict
        A validated configuration (:func:`ppa_dask.app.pipeline.validate_pipeline`).

    Examples
    --------
    >>> config = table_demo_config("/tmp/demo", 1000, 5)
    >>> config["data"]["path"], config["output"], config["preprocess"]["scale"]
    ('/tmp/demo/data.zarr', '/tmp/demo/table', 'none')
    """
    outdir = os.path.abspath(outdir)
    return validate_pipeline(
        {
            "name": "demo-table",
            "description": "PPA of a curved manifold generated into Zarr, compared with PCA",
            "output": os.path.join(outdir, TABLE_DEMO_SUBDIR),
            "seed": seed,
            "data": {
                "source": "generated",
                "kind": "curved",
                "n_samples": n_samples,
                "n_features": n_features,
                "params": {"noise": DEMO_NOISE},
                "chunk_rows": chunk_rows,
                "path": os.path.join(outdir, "data.zarr"),
            },
            # the errors are compared in input units, on every sample (none is masked)
            "preprocess": {"scale": "none", "mask": {"nonfinite": "error"}},
            "model": {"degree": list(DEMO_DEGREES), "cv": DEMO_CV},
            "transform": {"components": TABLE_DEMO_COMPONENTS},
            "evaluate": {"pca": True},
            "plots": {"components": TABLE_DEMO_COMPONENTS},
        },
        where="demo",
    )


def cube_demo_config(seed=0, bands=CUBE_DEMO_BANDS, pixels=CUBE_DEMO_PIXELS):
    """The pipeline configuration of the demo's cube part (pipelines/demo.yaml holds the same
    with the default sizes).

    Examples
    --------
    >>> cube_demo_config(bands=8, pixels=16)["data"]["params"]["n_bands"]
    8
    """
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


def _checked_cube_demo_config(args):
    """The cube part's configuration, after checking ``--bands`` and ``--pixels``."""
    if args.bands < CUBE_DEMO_MIN_BANDS:
        raise DemoError(f"--bands must be >= {CUBE_DEMO_MIN_BANDS}, got {args.bands}")
    if args.pixels < CUBE_DEMO_MIN_PIXELS:
        raise DemoError(
            f"--pixels must be >= {CUBE_DEMO_MIN_PIXELS} (enough cloud-free "
            f"pixels for the cross-validated fit), got {args.pixels}"
        )
    return cube_demo_config(args.seed, args.bands, args.pixels)


def _checked_outdir(args, default):
    """The demo's output folder (``--output``, else ``default``), checked once before anything
    is generated: not an empty path, not a file, and writable (it may exist: runs resume)."""
    given = args.output
    if given is not None:
        if not str(given).strip():
            raise DemoError("--output is an empty path; give the folder to write in")
        if os.path.lexists(given) and not os.path.isdir(given):
            raise DemoError(f"--output {given!r} exists and is not a folder")
        try:
            check_writable(os.path.join(given, "x") if os.path.isdir(given) else given, "--output")
        except ValueError as exc:
            raise DemoError(str(exc)) from None
    return os.path.abspath(given or default)


@contextlib.contextmanager
def _scratch_session(args, progress, outdir, cluster):
    """The cluster session (``cluster``: the ``--cluster`` file as read before any work),
    its workers' scratch space inside ``outdir`` (removed after)."""
    scratch = os.path.join(outdir, ".dask-scratch")
    scratch_existed = os.path.lexists(scratch)
    try:
        with command_session(args, progress, local_directory=scratch, cluster=cluster) as client:
            yield client
    finally:
        if not scratch_existed:
            shutil.rmtree(scratch, ignore_errors=True)


def run_demo(args, stream=None):
    """The ``demo`` command; returns the exit code.

    By default the table part (outputs in ``--output``) and then the cube part (its run folder
    ``<output>/cube``), both on one cluster session; ``--no-cube`` stops after the table,
    ``--cube`` runs only the cube part (:func:`run_cube_demo`).

    Examples
    --------
    >>> import argparse, io, tempfile
    >>> args = argparse.Namespace(cube=False, no_cube=True, output=tempfile.mkdtemp(),
    ...     n_samples=500, n_features=4, seed=0, chunk_rows=500, workers=1,
    ...     scheduler="threads", bands=8, pixels=8)
    >>> run_demo(args, stream=io.StringIO())
    0
    """
    stream = sys.stdout if stream is None else stream
    if args.cube:
        return run_cube_demo(args, stream)
    outdir = _checked_outdir(args, DEMO_OUTPUT)
    n, d, seed = args.n_samples, args.n_features, args.seed
    chunk_rows = min(args.chunk_rows, n)
    if d < 4:
        raise DemoError(f"--n-features must be >= 4 for the curved data set, got {d}")
    # checked before anything runs: a bad cube option must not cost the table part first
    cube_config = None if args.no_cube else _checked_cube_demo_config(args)
    table_config = table_demo_config(outdir, n, d, seed, chunk_rows)
    cube_dir = None if cube_config is None else os.path.join(outdir, CUBE_DEMO_SUBDIR)
    # the one read of the cluster file, before anything is written
    cluster = read_cluster_option(getattr(args, "cluster", None), getattr(args, "scheduler", None))

    progress = Reporter(stream)
    progress.say(
        f"ppa-dask demo: n={n:,} d={d} seed={seed} workers={args.workers} "
        f"chunk_rows={chunk_rows:,} output={outdir}"
    )
    cube_plan = _cube_demo_size(args) if cube_dir else "skipped (--no-cube)"
    progress.say(f"then the cube part: {cube_plan}")
    os.makedirs(outdir, exist_ok=True)
    with progress.stage("cluster_start_s", "starting the Dask cluster"):
        stack = contextlib.ExitStack()
        client = stack.enter_context(_scratch_session(args, progress, outdir, cluster))
    with stack:
        link = dashboard_link(client) if client is not None else None
        run = Run(table_config, stream=stream, clock=progress.start)
        run.execute()
        summary = _table_summary(args, outdir, table_config, run, progress, link)
        # written now, so that the table's record survives a failed or interrupted cube
        # part; rewritten when the cube part is complete
        summary["cube"] = (
            None if cube_dir is None else _cube_demo_record(cube_dir, args, complete=False)
        )
        progress.times["table_s"] = progress.total()
        summary["kernels"] = _kernels_record()
        json_path = _write_demo_summary(outdir, summary, progress)
        progress.say(f"wrote {json_path}")
        progress.say(f"table part: done in {progress.times['table_s']:.1f} s")
        progress.say(_fit_line(progress.times["fit_s"], summary["kernels"]))

        if cube_dir is not None:
            progress.plain()
            with progress.stage(
                "cube_s", f"cube part: {_cube_demo_size(args)}, run folder {cube_dir}"
            ):
                Run(cube_config, output=cube_dir, stream=stream, clock=progress.start).execute()
            progress.say(f"cube part: done in {progress.times['cube_s']:.1f} s")
            summary["cube"] = _cube_demo_record(cube_dir, args, complete=True)
            _write_demo_summary(outdir, summary, progress)

    progress.say(f"table part: see {os.path.join(outdir, 'reconstruction_error.md')}")
    if cube_dir is not None:
        _say_cube_outputs(progress, cube_dir)
    progress.say(f"done in {progress.total():.1f} s")
    return 0


def _table_summary(args, outdir, config, run, progress, dashboard):
    """After the table pipeline: the printed table (unless its evaluate stage just printed
    it), the table files in ``outdir`` and the summary record (without ``cube`` and
    ``times_s``)."""
    n, d, seed = args.n_samples, args.n_features, args.seed
    data = config["data"]
    with open(run.path("load", "source.json")) as f:
        source = json.load(f)
    reused = source["reused"] or "load" in run.skipped
    if "load" in run.skipped:  # the data set, like the rest, is reused as it is
        progress.say(f"data: reusing {data['path']} (same parameters)")
    with open(run.path("evaluate", "reconstruction_error.json")) as f:
        part = json.load(f)["train"]
    model = store.load_model(run.path("fit", "model.zarr"))
    ppa_errors = np.array([part["total_variance"], *part["ppa_mse"]])
    pca_errors = np.array([part["pca_total_variance"], *part["pca_mse"]])
    rows = error_rows(pca_errors, ppa_errors, part["k"], rank=part.get("rank", model.rank_))
    total_variance = float(pca_errors[0])
    if "evaluate" in run.skipped:
        progress.plain()
        progress.plain(
            f"Reconstruction error with k components (n={n:,}, d={d}; "
            f"total variance {total_variance:.6g}):"
        )
        progress.plain(format_error_table(rows))
        progress.plain()
    caption = (
        "MSE: mean over samples of the squared Euclidean reconstruction error summed over "
        "features, in input units, on the training data. PCA: " + part["pca_method"] + ". PPA: "
        "PPA.reconstruction_errors (residual norms after k steps, one pass)."
    )
    csv_path = os.path.join(outdir, "reconstruction_error.csv")
    md_path = os.path.join(outdir, "reconstruction_error.md")
    write_error_csv(csv_path, rows)
    write_error_markdown(md_path, rows, total_variance, caption)
    progress.say(f"wrote {csv_path}")
    progress.say(f"wrote {md_path}")

    tails = np.asarray(part["pca_discarded_eigenvalues"])
    eigen_check = float(np.max(np.abs(pca_errors - tails) / np.maximum(tails, 1e-300)))
    training = np.asarray(model.residual_variance_, dtype=float)
    ppa_check = float(np.max(np.abs(ppa_errors - training) / np.maximum(np.abs(training), 1e-300)))
    for stage in STAGES:
        progress.times[f"{stage}_s"] = run.times.get(stage, 0.0)
    return {
        "command": "demo",
        "argv": getattr(args, "argv", None),
        "parameters": {
            "n_samples": n,
            "n_features": d,
            "seed": seed,
            "workers": args.workers,
            "threads_per_worker": 1,
            "chunk_rows": data["chunk_rows"],
            "output": outdir,
        },
        "data": {
            "path": data["path"],
            "reused": bool(reused),
            "kind": "curved",
            "noise": DEMO_NOISE,
            "chunk_rows": data["chunk_rows"],
            "nbytes": int(8 * n * d),
        },
        "cluster": {"workers": args.workers, "threads_per_worker": 1, "dashboard": dashboard},
        "pipeline": {
            "run_folder": run.root,
            "stages": {stage: STAGE_DIRS[stage] for stage in STAGES},
            "skipped_this_run": list(run.skipped),
        },
        "model": {
            "estimator": f"PPA(degree=range(1, 6), cv={DEMO_CV}, random_state={seed})",
            "degrees": [int(g) for g in model.degrees_],
            "cv_scores": None
            if model.cv_scores_ is None
            else np.asarray(model.cv_scores_).tolist(),
            "n_passes": int(model.n_passes_),
            "residual_cache": model.residual_cache_,
            "explained_variance": np.asarray(model.explained_variance_).tolist(),
        },
        "reconstruction_error": {
            "k": list(part["k"]),
            "pca_mse": [r[1] for r in rows],
            "ppa_mse": [r[2] for r in rows],
            "ppa_over_pca_percent": [r[3] for r in rows],
            "total_variance": total_variance,
            "pca_method": part["pca_method"],
            "pca_vs_discarded_eigenvalues_max_rel_diff": eigen_check,
            "ppa_vs_fit_residual_variance_max_rel_diff": ppa_check,
        },
        "versions": _versions(),
    }


def _kernels_record():
    """What the compiled kernels cost this run: ``client`` (this process: compiled, loaded from
    numba's on-disk cache or waited for) and ``background`` (the process the command started to
    compile them on a first run on this machine, or None), and ``first_run``: whether any
    kernel was compiled rather than loaded."""
    client = fused.compile_kernels()
    background = first_run.background_record(timeout=fused.COMPILE_LOCK_TIMEOUT)
    first = bool(client["compiled"]) or bool(background and background["compiled"])
    return {"first_run": first, "client": client, "background": background}


def _fit_line(fit_s, kernels):
    """The fit stage's time beside what the compiled kernels cost this run: compiled (the first
    run on this machine, or after an upgrade) or loaded from numba's on-disk cache."""
    client, background = kernels["client"], kernels["background"]
    if background and background["compiled"]:
        how = (
            f"first run on this machine: compiled kernels {background['work_s']:.1f} s in a "
            "process of its own while the cluster started and the data were read; a rerun "
            "loads them from the cache"
        )
    elif client["compiled"]:
        how = (
            f"first run on this machine: compiled kernels {client['work_s']:.1f} s in this "
            "process; a rerun loads them from the cache"
        )
    else:
        how = f"kernels loaded from the on-disk cache in {client['work_s']:.1f} s"
    return f"fit stage {fit_s:.1f} s ({how})"


def _versions():
    out = {"python": platform.python_version()}
    for name in ("ppa_dask", "numpy", "scipy", "sklearn", "dask", "distributed", "zarr"):
        try:
            module = __import__(name)
            out[name] = getattr(module, "VERSION", "?")
        except Exception:  # pragma: no cover
            out[name] = None
    return out


def _write_demo_summary(outdir, summary, progress):
    """Write ``summary.json`` with the stage times so far (``total_s``: the run until now),
    atomically, since it is written twice per run."""
    times = dict(progress.times, total_s=progress.total())
    summary["times_s"] = {k: round(v, 3) for k, v in times.items()}
    json_path = os.path.join(outdir, "summary.json")
    write_json_atomic(json_path, summary)
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


def _say_cube_outputs(progress, run_dir):
    for name in ("reconstruction_error_md", "components_png", "components_zarr"):
        progress.say(f"cube part: see {os.path.join(run_dir, CUBE_DEMO_OUTPUTS[name])}")


def run_cube_demo(args, stream=None):
    """``demo --cube``: only the cube part, with ``--output`` itself as its run folder, on its
    own cluster session; returns the exit code."""
    stream = sys.stdout if stream is None else stream
    outdir = _checked_outdir(args, CUBE_DEMO_OUTPUT)
    config = _checked_cube_demo_config(args)
    # the one read of the cluster file, before anything is written
    cluster = read_cluster_option(getattr(args, "cluster", None), getattr(args, "scheduler", None))
    progress = Reporter(stream)
    progress.say(f"ppa-dask demo --cube: {_cube_demo_size(args)}, output={outdir}")
    with _scratch_session(args, progress, outdir, cluster):
        Run(config, output=outdir, stream=stream, clock=progress.start).execute()
    _say_cube_outputs(progress, outdir)
    return 0
