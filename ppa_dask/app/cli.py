"""Command line interface: ``ppa-dask COMMAND [options]``.

Commands
--------
demo
    Two generated pipelines (:mod:`ppa_dask.app.demo`) on one local Dask cluster, run by the
    stages of ``run``. The table: generate a curved 3-D manifold in ``--n-features``
    dimensions as a Zarr array, fit PPA to it and compare its reconstruction error with PCA's
    for every number of components (run folder ``<output>/table``). The cube: a synthetic hyperspectral cube
    read from Zarr with xarray goes through the pipeline stages (component images,
    reconstruction-error table, PNGs) in ``<output>/cube``. ``--no-cube`` runs only the table,
    ``--cube`` only the cube. Everything is written inside ``--output``.
run PIPELINE.yaml
    A batch pipeline (:mod:`ppa_dask.app.pipeline`), resumed where a killed run stopped.
fit INPUT MODEL / transform MODEL INPUT OUTPUT / inverse MODEL INPUT OUTPUT
    Fit on a table or cube (Zarr, NetCDF, GeoTIFF, Parquet, CSV) and save the model; write
    components / reconstructions in the format OUTPUT's suffix names (Zarr without one).
info MODEL
    Summary of a saved model.
bench [--quick] [--output DIR]
    Every performance figure beside its baseline (:mod:`ppa_dask.app.bench`).

The computing commands take ``--cluster FILE`` (cluster/*.yaml), ``--scheduler ADDRESS`` (or
``threads``), ``--workers``, ``--memory-limit`` and ``--performance-report FILE.html``; they
print the dashboard link at start and a log line with the wall time of each stage.

Adding a command: write ``_add_<name>(subparsers)``, which creates the sub-parser and sets
``func`` (a callable taking the parsed namespace and returning an exit code), and append it to
``_COMMANDS``.

Exit codes: 0 on success, 2 on bad arguments or bad input (one line ``ppa-dask: error: ...``
on stderr; the library's ``ValueError`` messages are reported that way) and on a fault around
the command (scheduler lost, disk full, ...: one line of what failed and what was kept,
:mod:`ppa_dask.app.faults`), 130 when interrupted (SIGINT, Ctrl-C) and 143 when terminated
(SIGTERM), each with one line, after the command's batch jobs were cancelled and its
temporaries removed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings

import numpy as np

# only what the parser and the argument checks need is imported here, none of it importing
# Dask, distributed, xarray, scikit-learn or numba (seconds): --help, --version, a bad argument
# or a missing input answer at once. The packages store, cluster and bench load their names on
# first use, and the modules below through load() on the first call into them.
from ppa_dask import cluster, store
from ppa_dask.app import bench, placement
from ppa_dask.app.demo_defaults import (
    CUBE_DEMO_BANDS,
    CUBE_DEMO_MIN_BANDS,
    CUBE_DEMO_MIN_PIXELS,
    CUBE_DEMO_OUTPUT,
    CUBE_DEMO_PIXELS,
    DEMO_OUTPUT,
)
from ppa_dask.cluster.files import DEFAULT_CONNECT_TIMEOUT, DEFAULT_WORKER_TIMEOUT, check_seconds
from ppa_dask.store.results import is_remote, is_replaceable_result, local_path
from ppa_dask.store.sources import NAN_POLICIES
from ppa_dask.utils.files import check_writable
from ppa_dask.utils.lazy import load
from ppa_dask.utils.params import (
    RESIDUAL_CACHES,
    SOLVERS,
    parse_degree_text,
    too_many_components,
)
from ppa_dask.utils.progress import Reporter
from ppa_dask.utils.signals import EXIT_STATUS, Terminated, raising_signals
from ppa_dask.utils.version import VERSION
from ppa_dask.utils.warnings import MissingSamplesWarning, NoDataWarning, RankDeficientWarning

demo = load("ppa_dask.app.demo")
faults = load("ppa_dask.app.faults")
pipeline = load("ppa_dask.app.pipeline")
session = load("ppa_dask.app.session")
ppa = load("ppa_dask.ppa")

__all__ = ["main", "build_parser"]

PROG = "ppa-dask"


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


def _workers(text):
    """argparse type: a positive number of local worker processes that this machine's memory
    can start (:func:`ppa_dask.app.placement.check_local_workers`)."""
    value = _positive_int(text)
    try:
        placement.check_local_workers(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _memory_limit(text):
    """argparse type: ``auto`` or a size a worker can run under
    (:func:`ppa_dask.app.placement.check_memory_limit`)."""
    try:
        return placement.check_memory_limit(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text):
    """argparse type: a positive number of seconds."""
    try:
        return check_seconds("seconds", float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive number of seconds, got {text!r}"
        ) from None


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
# demo
# ---------------------------------------------------------------------------------------------


#: ``--overwrite`` of the commands whose only file output outside their folder is the report.
_REPORT_OVERWRITE = "replace an existing --performance-report file that ppa-dask wrote"


def _add_demo(subparsers):
    p = subparsers.add_parser(
        "demo",
        help="fit PPA on a generated curved table and a synthetic cube, compare with PCA",
        description=(
            "Two parts on one local Dask cluster. The table: generate a curved 3-D manifold "
            "embedded in D dimensions (Zarr, DIR/data.zarr), fit PPA with degrees 1-5 chosen per "
            "step by 2-fold cross-validation, and tabulate the reconstruction error of PCA and "
            "PPA for k = 1..D-1 components (DIR/reconstruction_error.csv and .md, "
            "DIR/summary.json), through the stages of 'ppa-dask run' in DIR/table. "
            "The cube: a synthetic hyperspectral cube (make_cube) written to "
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
        type=_workers,
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
    p.add_argument("--overwrite", action="store_true", help=_REPORT_OVERWRITE)
    _add_cluster_options(p, workers=False)
    p.set_defaults(func=run_demo)
    return p


def run_demo(args, stream=None):
    """The ``demo`` command: :func:`ppa_dask.app.demo.run_demo`, which checks its output folder
    before anything is generated."""
    output = args.output or (CUBE_DEMO_OUTPUT if args.cube else DEMO_OUTPUT)
    _check_report(args, {"--output": output})
    return demo.run_demo(args, stream)


# ---------------------------------------------------------------------------------------------
# clusters, dashboard and performance report (shared by the commands below)
# ---------------------------------------------------------------------------------------------


def _add_cluster_options(p, workers=True):
    limit = placement.IN_PROCESS_MAX_BYTES / 2**30
    g = p.add_argument_group(
        "where to compute (default: in this process for an input under "
        f"{limit:g} GiB or a tenth of the memory, else a local cluster on 127.0.0.1)"
        if workers
        else "where to compute (default: a local cluster on 127.0.0.1)"
    )
    g.add_argument(
        "--cluster",
        metavar="FILE",
        help="cluster configuration file (cluster/local.yaml, slurm.yaml, pbs.yaml, "
        "kubernetes.yaml; see cluster/README.md), or 'local' for the default local cluster",
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
            type=_workers,
            default=None,
            help="start a local cluster of W worker processes, one thread each (default: "
            f"{placement.DEFAULT_WORKERS} when a local cluster starts)",
        )
    g.add_argument(
        "--memory-limit",
        metavar="SIZE",
        type=_memory_limit,
        default="auto",
        help="memory limit per local worker, e.g. 2GiB (default: auto)",
    )
    g.add_argument(
        "--connect-timeout",
        metavar="SECONDS",
        type=_seconds,
        default=None,
        help="give up connecting to a scheduler after SECONDS (connection and Dask's "
        "handshake; default: a 'type: scheduler' file's connect_timeout, else "
        f"{DEFAULT_CONNECT_TIMEOUT:g})",
    )
    g.add_argument(
        "--worker-timeout",
        metavar="SECONDS",
        type=_seconds,
        default=None,
        help="SLURM/PBS cluster files: fail when no worker has joined SECONDS after the jobs "
        f"were submitted (default: the file's worker_timeout, else {DEFAULT_WORKER_TIMEOUT:g})",
    )
    g.add_argument(
        "--performance-report",
        metavar="FILE.html",
        help="write distributed's performance report of the run to FILE.html",
    )


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
    p.add_argument("--overwrite", action="store_true", help=_REPORT_OVERWRITE)
    _add_cluster_options(p)
    p.set_defaults(func=run_run)
    return p


def run_run(args, stream=None):
    """The ``run`` command; returns the exit code.

    One entry checks everything before anything runs (:func:`ppa_dask.app.pipeline.prepare_run`:
    the file, its cluster file, the data's metadata, the run folder); then the run executes in
    the session the options ask for.
    """
    stream = sys.stdout if stream is None else stream

    run = pipeline.prepare_run(
        args.pipeline,
        output=args.output,
        force=args.force,
        stream=stream,
        cluster=args.cluster,
        scheduler=args.scheduler,
        check_only=args.check,
    )
    if args.check:
        import yaml

        print(yaml.safe_dump(run.config, sort_keys=False), end="", file=stream)
        for warning in run.data_warnings:
            print(f"{args.pipeline}: warning: {warning}", file=stream)
        print(f"{args.pipeline}: valid", file=stream)
        return 0
    _check_report(args, {"PIPELINE.yaml": args.pipeline})
    progress = Reporter(stream)
    run.clock = progress.start
    args.run = run  # a fault's line names the stages it kept (faults.fault_line)
    nbytes, what = placement.pipeline_data_nbytes(run.config["data"])
    _say_where(args, progress, nbytes, what, run.cluster_file)
    progress.say(f"ppa-dask run {args.pipeline}")
    with session.command_session(args, progress, cluster=run.cluster_config):
        root = run.execute()
    progress.say(f"results in {root}")
    return 0


# ---------------------------------------------------------------------------------------------
# fit / transform / inverse / info
# ---------------------------------------------------------------------------------------------


def _degree_spec(text):
    """argparse type: ``3``, ``1-5`` or ``1,2,4`` (:func:`ppa_dask.utils.params.parse_degree_text`)."""
    try:
        return parse_degree_text(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _nodata(text):
    try:
        return store.sources.parse_nodata(text, "--nodata")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--nodata ")) from None


def _feature_dims(text):
    try:
        return store.sources.parse_feature_dim(text, "--feature-dim")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--feature-dim ")) from None


#: The formats INPUT and OUTPUT may be in, for the help lines (the one vocabulary)
_FORMAT_NAMES = ", ".join(["Zarr", *(f.label for f in store.sources.FORMATS.values())])


def _sfx(fmt):
    """The suffix of a format, from the one vocabulary (ppa_dask.store.sources)."""
    return store.sources.suffix(fmt)


def _add_input_options(p):
    p.add_argument(
        "--variable",
        metavar="NAME",
        help="the array (or xarray variable) inside a Zarr group, or the NetCDF variable; "
        "a,b,c or 'all': variables sharing their dimensions stacked as the features (bands as "
        "variables); transform: default the variable(s) the model was fitted on",
    )
    p.add_argument(
        "--columns",
        metavar="A,B,C",
        help="Parquet / CSV input: the feature columns (default: all; transform: the model's)",
    )
    p.add_argument(
        "--nodata",
        type=_nodata,
        default=None,
        metavar="VALUE|none",
        help="cube input: the value marking missing pixels (a pixel any of whose bands equals "
        "it is left out of the fit and NaN in every output band); 'none': no value, whatever "
        "the file's tag says (default: the file's tag; transform: else the model's)",
    )


def _check_writable(path, what):
    """:func:`ppa_dask.utils.files.check_writable`, refusing as a command does."""
    try:
        check_writable(path, what)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _same_or_nested(a, b):
    a, b = os.path.realpath(a), os.path.realpath(b)
    return (
        a == b
        or a.startswith(b.rstrip(os.sep) + os.sep)
        or b.startswith(a.rstrip(os.sep) + os.sep)
    )


def _check_not_an_input(path, what, inputs):
    """Refuse an output ``path`` that is one of ``inputs`` (a mapping of option name to a path
    or a list of paths), inside one or holding one."""
    local = local_path(path)
    for name, others in (inputs or {}).items():
        for other in others if isinstance(others, list) else [others]:
            if other and not is_remote(other) and _same_or_nested(local, local_path(other)):
                raise CommandError(
                    f"{what} {path!r} is {name} {other!r}, inside it or holding it; write the "
                    "result to another path"
                )


def _check_new_output(path, overwrite, what, inputs=None, replaceable=None):
    """Check an output path before any work: not empty, not one of ``inputs`` (a mapping of
    option name to path) nor inside one, absent unless ``overwrite``, and writable.

    ``replaceable``, a check ``(path) -> None`` raising ``FileExistsError``, refuses an
    existing path ``overwrite`` may not replace (one ppa-dask did not write)."""
    if not str(path).strip():
        raise CommandError(f"{what} is an empty path; give the path to write")
    if is_remote(path):
        return
    local = local_path(path)
    _check_not_an_input(path, what, inputs)
    if os.path.lexists(local):
        # refused here, before any work, in the words of the writer that would refuse it after
        # the computing (store.sinks.write_table, write_cube)
        fmt = store.sources.file_format(path)
        if fmt == "csv":
            raise CommandError(
                f"{what} {path!r} already exists; a CSV file carries no record of who wrote it, "
                "so ppa-dask never replaces one, even with --overwrite: remove it or choose "
                "another name"
            )
        if not overwrite:
            raise CommandError(f"{what} {path!r} already exists; pass --overwrite to replace it")
        if fmt is not None and not store.sinks.written_by_ppa_dask(local):
            label = store.sources.FORMATS[fmt].label
            raise CommandError(
                f"{what} {path!r} exists and is not a {label} file written by ppa-dask; "
                "refusing to replace it even with --overwrite"
            )
        if fmt is None and what == "OUTPUT" and not is_replaceable_result(local):
            raise CommandError(
                f"{what} {path!r} exists and is not a Zarr result written by ppa-dask; "
                "refusing to replace it even with --overwrite"
            )
        if replaceable is not None:
            try:
                replaceable(local)
            except FileExistsError:
                raise CommandError(
                    f"{what} {path!r} exists and was not written by ppa-dask; --overwrite "
                    "replaces only what ppa-dask wrote: remove it or choose another name"
                ) from None
    _check_writable(local, what)


def _say_where(args, progress, nbytes, what="input", cluster_file=None):
    """Computing in this process or on a local cluster (ppa_dask.app.placement): the
    command's first line says which and why, unless its options chose."""
    line = placement.choose(args, nbytes, what, cluster_file=cluster_file)
    if line is not None:
        progress.say(line)
        args.where_said = True  # command_session then does not say it again


def _check_report(args, inputs):
    """Check ``--performance-report`` before any work, as an output of the command: a file
    path that is none of ``inputs`` (option name to path: INPUT, MODEL, OUTPUT, the pipeline
    file) nor inside one, absent unless ``--overwrite`` replaces a report ppa-dask wrote
    (:func:`ppa_dask.store.sinks.check_report_target`), and writable."""
    report = getattr(args, "performance_report", None)
    if report is None:
        return
    what = "--performance-report"
    if not str(report).strip():
        raise CommandError(f"{what} is an empty path")
    if is_remote(report):
        raise CommandError(f"{what} {report!r}: the report is written to a local file")
    _check_not_an_input(report, what, inputs)  # first: the most specific words
    if os.path.isdir(report):
        raise CommandError(f"{what} {report!r} is a folder; name the HTML file to write")
    overwrite = bool(getattr(args, "overwrite", False))
    _check_new_output(report, overwrite, what, inputs, replaceable=store.sinks.check_report_target)


#: Hidden positional collecting what follows the usual two: ``fit A B C MODEL``.
_MORE = "more"


def _add_more(p):
    # several input files: the positionals after the usual ones, the last of all being the
    # output; the usage line says so (argparse would list this as a second MODEL)
    # (default=[]: argparse would count it as required and name it in "the following
    # arguments are required: MODEL, more")
    p.add_argument(_MORE, nargs="*", default=[], help=argparse.SUPPRESS)


def _several_inputs(args, last):
    """``fit A B C MODEL`` / ``transform MODEL A B C OUTPUT``: the last positional is the
    output (``last``: its attribute), those from INPUT to it the input files, a list of NetCDF
    or GeoTIFF files (one cube: one band per file, or a series). One INPUT is left as it is."""
    more = getattr(args, _MORE, None) or []
    out_name = "MODEL" if last == "model" else "OUTPUT"
    if more:
        args.input = [args.input, getattr(args, last), *more[:-1]]
        setattr(args, last, more[-1])
        setattr(args, _MORE, [])  # done once (main does it before the outputs are noted)
        fmt = store.sources.file_format(args.input)
        if fmt not in store.sources.CUBE_FORMATS:
            listed = ", ".join(map(repr, args.input))
            raise CommandError(
                f"several INPUT files ({listed}) make one cube when they are all GeoTIFF "
                f"({_sfx('geotiff')}) or all NetCDF ({_sfx('netcdf')}) files; the last "
                f"argument, {getattr(args, last)!r}, is {out_name}"
            )
    out = getattr(args, last)
    kind = store.sources.FORMATS.get(store.sources.file_format(out) or "")
    if last == "model" and kind is not None:
        # 'fit a_B2.TIF a_B3.TIF' without a model: the last file would be taken for it
        raise CommandError(
            f"MODEL {out!r} is a {kind.label} file; the last argument is where the model is "
            "saved (a .zarr folder): ppa-dask fit INPUT [INPUT ...] MODEL"
        )


def _check_inputs_exist(args):
    """A local MODEL, INPUT or PIPELINE.yaml that is not there, refused in the library's words
    before the command imports what it computes with (seconds of Dask, xarray, scikit-learn)."""
    if args.command in ("transform", "inverse", "info"):
        model = args.model
        if not is_remote(model) and not os.path.exists(local_path(model)):
            raise CommandError(f"no model file at {local_path(model)!r}")
    if args.command in ("fit", "transform", "inverse"):
        path = args.input
        if isinstance(path, list):
            store.sources.expand_paths(path)  # each file, or each glob's first match
        elif is_remote(path):
            pass  # checked when opened
        elif store.sources.file_format(path) is not None:  # a file (or a glob) of a format
            store.sources.expand_paths(path)
        elif not os.path.exists(local_path(path)):
            raise CommandError(f"no Zarr store at {local_path(path)!r}")
    if args.command == "run" and not os.path.exists(args.pipeline):
        raise CommandError(f"pipeline file {args.pipeline!r} does not exist")


#: The commands taking several input files, and the argument that is their output.
_SEVERAL_INPUTS = {"fit": "model", "transform": "output"}


def _inputs_text(path):
    return " ".join(path) if isinstance(path, list) else path


def _add_fit(subparsers):
    p = subparsers.add_parser(
        "fit",
        usage="%(prog)s [options] INPUT [INPUT ...] MODEL",
        help=f"fit PPA on a table or cube ({_FORMAT_NAMES}) and save the model",
        description=(
            "Fit PPA on INPUT (a Zarr array of samples x features, a variable of a Zarr group, "
            "a Parquet or CSV table, or with --feature-dim a cube whose other dimensions are "
            "samples: Zarr, NetCDF, GeoTIFF) and save the model to MODEL (a Zarr group of "
            "arrays and JSON; never pickle)."
        ),
    )
    p.add_argument(
        "input",
        metavar="INPUT",
        help=f"Zarr store (local path or fsspec URL), NetCDF ({_sfx('netcdf')}), GeoTIFF "
        f"({_sfx('geotiff')}), Parquet or CSV; several NetCDF or GeoTIFF files (each an "
        "argument, or a quoted glob) are one cube: one band per file, or a series",
    )
    p.add_argument(
        "model",
        metavar="MODEL",
        help="where to save the model (a .zarr folder): the last argument",
    )
    _add_more(p)
    _add_input_options(p)
    p.add_argument(
        "--feature-dim",
        metavar="DIM",
        type=_feature_dims,
        help="read INPUT with xarray; DIM holds the features (e.g. band); DIM,DIM,...: the "
        "features span several dimensions (time,band: every date's bands; transform and "
        "inverse restore them)",
    )
    p.add_argument(
        "--nan-policy",
        choices=NAN_POLICIES,
        default="raise",
        help="xarray input: samples with NaN in some features (default: raise)",
    )
    p.add_argument(
        "--coslat",
        action="store_true",
        help="xarray input: weight each feature by sqrt(cos(latitude)) (a lat or latitude "
        "coordinate along the features), as EOF analysis weights grid cells; transform and "
        "inverse apply and undo it",
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
        choices=RESIDUAL_CACHES,
        default="auto",
        help="keep the residual on the workers between passes, checkpoint it to "
        "disk, or recompute it (default: auto, from the data size and the "
        "cluster memory)",
    )
    p.add_argument(
        "--solver",
        choices=SOLVERS,
        default="auto",
        help="'covariance': the d x d covariance, one pass per step; 'gram': wide data (many "
        "more features than samples, e.g. grid cells), the samples' Gram matrix in two passes "
        "along feature slabs; 'krylov': many samples and features, Lanczos on the implicit "
        "residual; gram and krylov need --n-components (default: auto, chosen from the shape)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing MODEL (and --performance-report file) that ppa-dask wrote",
    )
    _add_cluster_options(p)
    p.set_defaults(func=run_fit)
    return p


def run_fit(args, stream=None):
    """The ``fit`` command."""
    stream = sys.stdout if stream is None else stream

    _several_inputs(args, "model")
    _check_new_output(args.model, args.overwrite, "MODEL", {"INPUT": args.input})
    _check_report(args, {"INPUT": args.input, "MODEL": args.model})
    if args.coslat and not args.feature_dim:
        raise CommandError("--coslat weights the features of an xarray cube: give --feature-dim")
    config = session.read_cluster_option(args.cluster, args.scheduler)  # the one read, first
    variable, variables = store.sources.variable_choice(args.variable)
    source = store.open_source(
        args.input,
        variable=variable,
        variables=variables,
        feature_dim=args.feature_dim,
        columns=args.columns,
        nodata=args.nodata,
        front="cli",
    )
    X, args.feature_dim = source.data, source.feature_dim
    names = source.feature_names if source.kind == "table" else None
    model = ppa.PPA(
        degree=args.degree,
        cv=args.cv,
        n_components=args.n_components,
        random_state=args.seed,
        residual_cache=args.residual_cache,
        solver=args.solver,
    )
    # the fit's own refusals of degrees, folds and components, before a cluster starts (a
    # cube's samples are its other dimensions: an upper bound when NaN samples are dropped)
    sizes = dict(X.sizes) if args.feature_dim else dict(enumerate(X.shape))
    feature_keys = args.feature_dim if args.feature_dim else 1
    feature_keys = feature_keys if isinstance(feature_keys, tuple) else (feature_keys,)
    if all(key in sizes for key in feature_keys):
        n_features = math.prod(sizes.pop(key) for key in feature_keys)
        model.check_shape(math.prod(sizes.values()), n_features)
    progress = Reporter(stream)
    _say_where(args, progress, placement.input_nbytes(args.input, args.variable))
    shape = dict(X.sizes) if args.feature_dim else f"{X.shape[0]:,} x {X.shape[1]}"
    progress.say(f"ppa-dask fit {_inputs_text(args.input)} ({shape}) -> {args.model}")
    with session.command_session(args, progress, cluster=config):
        with progress.stage("fit_s", f"fitting {model!r}"):
            kwargs = (
                {
                    "feature_dim": args.feature_dim,
                    "nan_policy": args.nan_policy,
                    "coslat": args.coslat,
                }
                if args.feature_dim
                else {}
            )
            model.fit(X, progress=cluster.step_reporter(stream), **kwargs)
            if names:  # a Parquet / CSV input: its columns name the features
                store.name_features(model, names)
        progress.say(
            f"fit: {progress.times['fit_s']:.1f} s, {model.n_passes_} passes, solver "
            f"{model.solver_}, residual cache {model.residual_cache_}, degrees "
            f"{' '.join(str(int(g)) for g in model.degrees_)}"
        )
    store.save_model(model, args.model, overwrite=args.overwrite)
    progress.say(f"saved {os.path.abspath(args.model)}")
    return 0


def _add_apply(subparsers, name, help_, description, func):
    usage = "%(prog)s [options] MODEL INPUT " + ("[INPUT ...] " if name == "transform" else "")
    p = subparsers.add_parser(name, help=help_, description=description, usage=usage + "OUTPUT")
    p.add_argument("model", metavar="MODEL", help="a model saved by 'ppa-dask fit'")
    p.add_argument(
        "input", metavar="INPUT", help="Zarr store, NetCDF, GeoTIFF, Parquet or CSV (as for fit)"
    )
    p.add_argument(
        "output",
        metavar="OUTPUT",
        help=f"Zarr array (or xarray group) to write; {_sfx('geotiff')} / {_sfx('netcdf')} write "
        f"a GeoTIFF / NetCDF (cube models), {_sfx('parquet')} / {_sfx('csv')} a table",
    )
    if name == "transform":
        _add_more(p)  # transform MODEL A_B2.TIF A_B3.TIF OUTPUT, as fit reads them
    _add_input_options(p)
    if name == "transform":
        p.add_argument(
            "--components",
            type=_positive_int,
            default=None,
            metavar="K",
            help="write the first K components (default: all)",
        )
    p.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default=None,
        help="the dtype OUTPUT is written in, every format (default: cube models float32 for "
        "float32 or integer INPUT, float64 otherwise; tables float64)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing OUTPUT (and --performance-report file) that ppa-dask wrote "
        "(never a CSV file, which carries no record of who wrote it)",
    )
    _add_cluster_options(p)
    p.set_defaults(func=func)
    return p


def _add_transform(subparsers):
    return _add_apply(
        subparsers,
        "transform",
        f"PPA components of a table or cube, read and written as {_FORMAT_NAMES}",
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
        f"map PPA components back to the input space ({_FORMAT_NAMES}, as transform)",
        "Apply MODEL's closed-form inverse to the components in INPUT (as written by "
        "'ppa-dask transform'; with m < all components the residual after step m is taken as "
        "zero) and write the reconstruction to OUTPUT.",
        run_inverse,
    )


def _load_model_file(path):
    return store.load_model(path)


def _layout_dim(model):
    """The feature dimension(s) a cube model was fitted along (a tuple when several)."""
    layout = getattr(model, "xarray_layout_", None)
    if layout is None:
        return None
    if layout.get("feature_dims"):
        return tuple(map(str, layout["feature_dims"]))
    return layout.get("feature_dim") or "variable"


def _open_applied(args, model, what, cube_dim):
    """The input of ``transform`` / ``inverse`` opened as the model reads it: the data, and
    for a table model the names of the output's columns. Only metadata is read (a table's
    row counts besides), so the command calls it before any cluster starts: a missing file,
    variable or column is reported at once, not after a cluster's start."""
    if cube_dim is None:
        columns = args.columns
        names_in = getattr(model, "feature_names_in_", None)
        if columns is None and what == "transform" and names_in is not None:
            columns = list(names_in)  # the model's columns, by name
        X = store.open_source(
            args.input, variable=args.variable, columns=columns, nodata=args.nodata, front="cli"
        ).data
        return X, names_in
    dim = cube_dim if what == "transform" else "component"
    variable, variables = store.sources.variable_choice(args.variable)
    fitted_name = model.xarray_layout_.get("name")
    if (
        what == "transform"
        and args.variable is None
        and fitted_name in (store.sources.variable_names(args.input) or ())
    ):
        variable = fitted_name  # the variable the model was fitted on (--variable on fit)
    if what == "inverse" and variable is None:
        # the components file 'transform' wrote (a GeoTIFF's bands are them)
        variable = store.sources.components_variable(args.input)
    stacked = model.xarray_layout_.get("feature_coords", {}).get(store.sources.VARIABLE_DIM)
    if what == "transform" and dim == store.sources.VARIABLE_DIM and stacked is not None:
        # a model fitted on variables stacked as features: the same variables
        variables = list(map(str, stacked)) if variables is None else variables
    options = dict(
        variable=variable, variables=variables, feature_dim=dim, columns=args.columns, front="cli"
    )
    source = store.open_source(args.input, nodata=args.nodata, **options)
    fitted_with = model.xarray_layout_.get("nodata")
    declared = args.nodata is not None or source.nodata is not None
    if what == "transform" and not declared and fitted_with is not None:
        # no --nodata and no tag in the file: the value the model was fitted with
        source = store.open_source(args.input, nodata=fitted_with, **options)
    return source.data, None


def _apply(args, stream, what):
    stream = sys.stdout if stream is None else stream

    if what == "transform":
        _several_inputs(args, "output")
    _check_new_output(
        args.output, args.overwrite, "OUTPUT", {"INPUT": args.input, "MODEL": args.model}
    )
    _check_report(args, {"INPUT": args.input, "MODEL": args.model, "OUTPUT": args.output})
    config = session.read_cluster_option(args.cluster, args.scheduler)  # the one read, first
    model = _load_model_file(args.model)
    wanted = args.components if what == "transform" else None
    refusal = too_many_components(
        "--components", wanted, model.n_components_, f"MODEL '{args.model}'"
    )
    if refusal is not None:
        raise CommandError(refusal)
    cube_dim = _layout_dim(model)
    data, names_in = _open_applied(args, model, what, cube_dim)
    progress = Reporter(stream)
    _say_where(args, progress, placement.input_nbytes(args.input, args.variable))
    progress.say(f"ppa-dask {what} {_inputs_text(args.input)} with {args.model} -> {args.output}")
    with session.command_session(args, progress, cluster=config):
        with progress.stage(f"{what}_s", f"{what}: computing and writing"):
            if cube_dim is None:
                if what == "transform":
                    k = model.n_components_ if args.components is None else args.components
                    out = model.transform(data)[:, :k]
                    names_out = list(model.get_feature_names_out()[: out.shape[1]])
                else:
                    out = model.inverse_transform(data)
                    names_out = names_in
                store.write_result(
                    out,
                    args.output,
                    columns=names_out,
                    overwrite=args.overwrite,
                    attrs={"ppa_dask_command": what, "model": os.path.abspath(args.model)},
                )
                shape = out.shape
            else:
                if what == "transform":
                    out = model.transform(data)
                    if args.components is not None:
                        out = out.isel(component=slice(0, args.components))
                else:
                    out = model.inverse_transform(data)
                    if getattr(out, "name", "") is None:  # an unnamed DataArray
                        out = out.rename("reconstruction")
                    if (
                        cube_dim == store.sources.VARIABLE_DIM
                        and store.sources.file_format(args.output) != "geotiff"
                    ):
                        # variables stacked as the features come back as those variables
                        # (a GeoTIFF holds them as its bands)
                        out = out.to_dataset(dim=store.sources.VARIABLE_DIM)
                # GeoTIFF / NetCDF: georeferencing, coordinates and attributes of the input
                store.write_result(
                    out,
                    args.output,
                    like=data,
                    overwrite=args.overwrite,
                    dtype=args.dtype,
                    what="components" if what == "transform" else "reconstruction",
                )
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
    for name in (
        "n_features_in_",
        "n_samples_",
        "n_components_",
        "n_passes_",
        "residual_cache_",
        "solver_",
    ):
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
                + (f", weighted by sqrt(cos({layout['coslat']}))" if layout.get("coslat") else "")
            )
    lines.append(f"arrays:           {len(info['arrays'])} (SHA-256 checked)")
    print("\n".join(lines), file=stream)
    return 0


# ---------------------------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------------------------

#: Functions adding one sub-command each to the sub-parsers.
_COMMANDS = (
    _add_demo,
    _add_run,
    _add_fit,
    _add_transform,
    _add_inverse,
    _add_info,
    bench.add_parser,
)


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


#: The package's warnings a command prints as one line of its own (not Python's two lines of
#: file, line number and the ``sys.exit(main())`` source line).
_ONE_LINE_WARNINGS = (NoDataWarning, RankDeficientWarning, MissingSamplesWarning)


def _one_line_warnings(previous):
    """``warnings.showwarning`` printing ppa-dask's warnings (no-data, rank, samples left out)
    as one line on stderr (``ppa-dask: warning: ...``), and every other warning as
    ``previous`` does."""

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, _ONE_LINE_WARNINGS):
            text = " ".join(str(message).split())
            print(f"{PROG}: warning: {text}", file=sys.stderr, flush=True)
        else:
            previous(message, category, filename, lineno, file, line)

    return show


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
        if args.command in _SEVERAL_INPUTS:
            _several_inputs(args, _SEVERAL_INPUTS[args.command])
        _check_inputs_exist(args)
    except (CommandError, FileNotFoundError) as exc:
        return _error(exc)
    before = faults.outputs_present(args)
    try:
        # Ctrl-C and SIGTERM (a batch job's time limit, scancel) unwind the command: jobs
        # cancelled, temporaries removed, nothing half-saved
        with raising_signals(), faults.quiet_fault_tracebacks(), warnings.catch_warnings():
            warnings.showwarning = _one_line_warnings(warnings.showwarning)
            return int(args.func(args) or 0)
    except (CommandError, ValueError) as exc:
        # includes the pipeline, cluster-file and model-file errors (ValueError subclasses)
        return _error(exc)
    except (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError) as exc:
        return _error(exc)
    except Exception as exc:
        # a fault around the command (scheduler or connection lost, a worker killed beyond the
        # retries, the disk full, permission lost, a remote read cut): one line saying what
        # failed and what was kept; anything else is a bug and keeps its traceback
        line = faults.fault_line(exc, args, before)
        if line is None:
            raise
        return _error(line)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (SIGINT): stopped, nothing saved", file=sys.stderr, flush=True)
        return 130
    except Terminated:
        print(f"{PROG}: terminated (SIGTERM): stopped, nothing saved", file=sys.stderr, flush=True)
        return EXIT_STATUS[Terminated.signum]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
