"""What the PPA-paper pipelines share: command line, fan-out over a cluster, tables, figures.

Every pipeline takes ``--output DIR --repeats N --quick --seed S --workers W``. Its independent
repetitions are tasks (functions of :mod:`ppa_dask.experiments`) submitted to a local Dask
cluster of ``W`` one-thread worker processes (``ppa_dask.cluster.local_client``) with
``pure=False`` (:func:`ppa_dask._fanout.run_tasks`); ``--workers 0`` runs them one after the
other in this process. Each task's seed comes from the base seed and the task's own keys, and
results are put back in task order, so the tables do not depend on ``W``.

Tables are written twice, as CSV (full precision) and as a markdown table; figures as PNG
through matplotlib's Agg canvas (no display, no pyplot state).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:  # run from a checkout without installing
    sys.path.insert(1, ROOT)

import numpy as np  # noqa: E402


def _nonnegative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_int(text):
    value = _nonnegative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def base_parser(description, default_output):
    """The options every paper pipeline has; ``--repeats`` defaults to None (pipeline's own)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--output",
        default=default_output,
        help=f"folder for tables and figures (default: {default_output})",
    )
    parser.add_argument(
        "--repeats",
        type=_positive_int,
        default=None,
        help="independent repetitions (random splits / data draws)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small settings (subsets, few repetitions) for tests and smoke runs",
    )
    parser.add_argument(
        "--seed",
        type=_nonnegative_int,
        default=0,
        help="base seed; every task's seed is derived from it (default: 0)",
    )
    parser.add_argument(
        "--workers",
        type=_nonnegative_int,
        default=2,
        help="Dask worker processes of the local cluster, one thread each; "
        "0 runs the tasks in this process (default: 2)",
    )
    return parser


def paper_datasets_parser(description, default_output, quick_gd_iter=5):
    """Parse the options of the pipelines over the paper's six data sets (with PPA-GD)."""
    from ppa_dask.datasets import PAPER_DATASETS

    def parse(argv=None):
        parser = base_parser(description, default_output)
        parser.add_argument(
            "--datasets",
            type=csv_list(str),
            default=list(PAPER_DATASETS),
            help="comma-separated subset of " + ",".join(PAPER_DATASETS),
        )
        parser.add_argument(
            "--gd-max-iter",
            type=int,
            default=None,
            help=f"PPA-GD objective evaluations per step (default 20; quick {quick_gd_iter})",
        )
        args = parser.parse_args(argv)
        unknown = [name for name in args.datasets if name not in PAPER_DATASETS]
        if unknown:
            parser.error(f"unknown data sets {unknown}; choose from {', '.join(PAPER_DATASETS)}")
        if args.repeats is None:
            args.repeats = 1 if args.quick else 10
        if args.gd_max_iter is None:
            args.gd_max_iter = quick_gd_iter if args.quick else 20
        if args.gd_max_iter < 0:
            parser.error(f"--gd-max-iter must be >= 0, got {args.gd_max_iter}")
        return args

    return parse


def csv_list(kind):
    """argparse type: a comma-separated list of ``kind`` values."""

    def parse(text):
        try:
            items = [kind(item) for item in text.split(",") if item.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list, got {text!r}"
            ) from None
        if not items:
            raise argparse.ArgumentTypeError("the list is empty")
        return items

    return parse


def run_fanout(func, specs, workers, label="tasks", verbose=True):
    """Run ``func(spec)`` for every spec as Dask tasks (or in process); results in spec order."""
    from ppa_dask.utils.fanout import run_tasks

    specs = list(specs)
    results = [None] * len(specs)
    if workers == 0:
        for position, result in run_tasks(
            func, specs, client=None, label=label, verbose=int(verbose)
        ):
            results[position] = result
        return results
    from ppa_dask.app.cluster import dashboard_link, local_client

    with local_client(n_workers=workers) as client:
        if verbose:
            print(
                f"{label}: {len(specs)} tasks on {workers} workers, dashboard "
                f"{dashboard_link(client)}",
                flush=True,
            )
        for position, result in run_tasks(
            func, specs, client=client, label=label, verbose=int(verbose)
        ):
            results[position] = result
    return results


def prepare_output(path):
    os.makedirs(path, exist_ok=True)
    return path


def _md_cell(value, fmt):
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return "-" if math.isnan(value) else str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return format(value, fmt)


def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, (np.floating, float)):
        return repr(float(value))
    if isinstance(value, (np.integer,)):
        return str(int(value))
    return str(value)


def write_table(
    directory, stem, columns, rows, title=None, fmt=".3f", md_columns=None, md_rows=None
):
    """Write ``rows`` (dicts) as ``stem.csv`` and ``stem.md``; return the markdown text.

    ``columns`` is a list of ``(key, header)`` or ``(key, header, format)``; the CSV has the
    keys as its header and full precision. ``md_columns`` (same form) chooses other columns for
    the markdown table (e.g. "mean ± std" text), by default ``columns``, and ``md_rows`` its
    rows (e.g. a wide layout of a long CSV), by default ``rows``.
    """
    with open(os.path.join(directory, stem + ".csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([c[0] for c in columns])
        for row in rows:
            writer.writerow([_csv_cell(row.get(c[0])) for c in columns])
    cols = [(c[0], c[1], c[2] if len(c) > 2 else fmt) for c in (md_columns or columns)]
    lines = []
    if title:
        lines += [f"**{title}**", ""]
    lines.append("| " + " | ".join(header for _, header, _ in cols) + " |")
    lines.append("|" + "|".join("---" for _ in cols) + "|")
    for row in rows if md_rows is None else md_rows:
        lines.append("| " + " | ".join(_md_cell(row.get(key), f) for key, _, f in cols) + " |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(directory, stem + ".md"), "w") as f:
        f.write(text)
    return text


def read_csv(path):
    """Rows of a CSV written by :func:`write_table` as dicts of strings (for tests)."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def mean_std(values):
    """Mean and standard deviation (ddof=0) along axis 0 over the finite values (NaN if none)."""
    a = np.asarray(values, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN, quietly
        return np.nanmean(a, axis=0), np.nanstd(a, axis=0)


def pm(mean, std, fmt=".2f"):
    """``"mean ± std"`` as text (for markdown cells)."""
    if not np.isfinite(mean):
        return "-"
    return f"{format(mean, fmt)} ± {format(std, fmt)}"


def new_figure(nrows=1, ncols=1, figsize=(6, 4), projection=None, squeeze=False):
    """A matplotlib Figure on an Agg canvas and its axes (array of shape (nrows, ncols)).

    ``nrows=0`` returns ``(figure, None)`` for figures that add their own axes.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    if nrows == 0:  # the caller lays out its own axes
        return fig, None
    if projection is None:
        axes = fig.subplots(nrows, ncols, squeeze=squeeze)
    else:
        axes = np.array(
            [
                [
                    fig.add_subplot(nrows, ncols, i * ncols + j + 1, projection=projection)
                    for j in range(ncols)
                ]
                for i in range(nrows)
            ]
        )
    return fig, axes


def save_figure(fig, directory, name, dpi=110):
    path = os.path.join(directory, name)
    fig.savefig(path, format="png", dpi=dpi)
    return path


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def write_json(directory, name, obj):
    with open(os.path.join(directory, name), "w") as f:
        json.dump(_jsonable(obj), f, indent=2)
        f.write("\n")


def write_report(directory, title, command, sections, figures, elapsed):
    """``report.md``: the command, the markdown tables and links to the figures."""
    lines = [f"# {title}", "", "```", command, "```", ""]
    lines += [
        f"Run time: {elapsed:.1f} s on {platform.node() or 'this machine'} "
        f"(Python {platform.python_version()}).",
        "",
    ]
    for text in sections:
        lines += [text, ""]
    for name in figures:
        lines += [f"![{name}]({name})", ""]
    with open(os.path.join(directory, "report.md"), "w") as f:
        f.write("\n".join(lines))


def command_line(script, argv):
    """The command that reproduces a run (for the report)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return " ".join(["python", f"pipelines/{os.path.basename(script)}", *args])


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.elapsed = time.perf_counter() - self.start
