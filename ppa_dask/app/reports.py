"""What the scripts in ``pipelines/`` share: options, clusters and the fan-out of their
tasks, tables, figures, reports and timers.

One module for the paper's section 5 pipelines (``paper_*.py``), the feature-bagging stability
pipelines (``stability_*.py``) and the VSK experiments (``vsk_*.py``), using only the package's
public API, so the scripts need no ``sys.path`` edits.

* Options: :func:`base_parser` (``--output --repeats --quick --seed --workers`` of the paper
  pipelines), :func:`paper_datasets_parser`, :func:`stability_parser` (``--output --workers
  --scheduler --seed --small --quiet``), :func:`csv_list`.
* Clusters and the fan-out: :func:`cluster` (a given client, a running scheduler, a local
  cluster or none), :func:`run_fanout` / :func:`fan_out` (tasks in order, through
  :func:`ppa_dask.utils.fanout.run_tasks`), :func:`run_grid` (resumable: one part file per
  finished setting). Independent repetitions get their seed from the base seed and their own
  keys and come back in task order, so results do not depend on the number of workers.
* Tables: :func:`write_table` (rows of dicts; CSV at full precision and markdown),
  :func:`write_csv`, :func:`markdown_table`, :func:`write_frame_table` (a DataFrame), all
  drawn by :func:`ppa_dask.utils.tables.pipe_table`; :func:`read_csv`, :func:`mean_std`,
  :func:`pm`, :func:`mean_std_text`, :func:`fmt`.
* Figures and reports: :func:`new_figure` (Agg canvas, no pyplot state),
  :func:`matplotlib_headless`, :func:`save_figure`, :func:`write_report`,
  :func:`write_json`, :func:`command_line`, :func:`prepare_output`, :class:`Timer`.
* Data and grids of the stability and VSK experiments: :func:`load_regression_dataset`,
  :func:`load_breast_cancer`, :func:`load_covid`, :data:`C_GRID`, :data:`GAMMA_GRID`,
  :func:`svm_grid`, :func:`tuned` (by :func:`weighted_f1`). Task seeds come from
  :func:`ppa_dask.utils.seeds.task_seed`.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import json
import math
import os
import platform
import shlex
import sys
import time
import warnings

import numpy as np

from ppa_dask import datasets
from ppa_dask.app.reproductions import add_record_option
from ppa_dask.cluster import dashboard_link, local_client, open_client
from ppa_dask.datasets import PAPER_DATASETS
from ppa_dask.utils.fanout import run_tasks
from ppa_dask.utils.tables import pipe_table

__all__ = [
    "C_GRID",
    "COVID_COLUMNS",
    "GAMMA_GRID",
    "REGRESSION_DATASETS",
    "Timer",
    "base_parser",
    "cluster",
    "command_line",
    "csv_list",
    "fan_out",
    "fmt",
    "load_breast_cancer",
    "load_covid",
    "load_regression_dataset",
    "markdown_table",
    "matplotlib_headless",
    "mean_std",
    "mean_std_text",
    "new_figure",
    "paper_datasets_parser",
    "pm",
    "prepare_output",
    "read_csv",
    "run_fanout",
    "run_grid",
    "save_figure",
    "setting_key",
    "stability_parser",
    "svm_grid",
    "tuned",
    "weighted_f1",
    "weighted_f1_scorer",
    "write_csv",
    "write_frame_table",
    "write_json",
    "write_report",
    "write_table",
]

#: The regression data sets of the stability pipelines.
REGRESSION_DATASETS = ("diabetes", "abalone", "cpu_act", "house_8l")
#: The VSK paper's SVM grids (section 6.1): C = 2^-6 .. 2^5, gamma = 10^-6 .. 10^1.
C_GRID = tuple(2.0**k for k in range(-6, 6))
GAMMA_GRID = tuple(10.0**k for k in range(-6, 2))
#: The series of the ICU experiment: the target and the auxiliary series of psi.
COVID_COLUMNS = ("terapia_intensiva", "totale_casi", "nuovi_positivi", "totale_positivi")


# -------------------------------------------------------------------------------------------
# options
# -------------------------------------------------------------------------------------------


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
    """The options every paper pipeline has; ``--repeats`` defaults to None (pipeline's own).

    Examples
    --------
    >>> args = base_parser("demo", "out").parse_args(["--quick", "--workers", "0"])
    >>> args.output, args.quick, args.workers, args.repeats
    ('out', True, 0, None)
    """
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
    add_record_option(parser)
    return parser


def paper_datasets_parser(
    description, default_output, quick_gd_iter=5, add_options=None, check=None
):
    """A ``parse(argv)`` for the pipelines over the paper's six data sets (with PPA-GD).

    ``add_options(parser)`` adds a script's own options; ``check(args, error)`` validates the
    parsed values after the shared ones (``error(message)`` exits with status 2 and the usage).

    Examples
    --------
    >>> parse = paper_datasets_parser("demo", "out")
    >>> args = parse(["--quick", "--datasets", "vehicles"])
    >>> args.datasets, args.repeats, args.gd_max_iter
    (['vehicles'], 1, 5)
    """

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
        if add_options is not None:
            add_options(parser)
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
        if check is not None:
            check(args, parser.error)
        return args

    return parse


def stability_parser(description, default_output):
    """The options of the stability pipelines.

    Examples
    --------
    >>> args = stability_parser("demo", "out").parse_args(["--small"])
    >>> args.small, args.workers, args.scheduler
    (True, 2, None)
    """
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--output", default=default_output, help=f"output folder (default: {default_output})"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        help="local Dask workers, one thread each (0: run in this process)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        help="address of a running Dask scheduler to use instead of a local cluster",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument(
        "--small", action="store_true", help="a small grid that finishes in a minute or two"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_record_option(p)
    return p


def csv_list(kind):
    """argparse type: a comma-separated list of ``kind`` values.

    Examples
    --------
    >>> csv_list(int)("1,2,3")
    [1, 2, 3]
    """

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


# -------------------------------------------------------------------------------------------
# clusters and the fan-out
# -------------------------------------------------------------------------------------------


@contextlib.contextmanager
def cluster(workers=2, scheduler=None, client=None):
    """The run's Dask client: ``client`` itself, one connected to ``scheduler``, a local
    cluster of ``workers`` one-thread processes (closed on exit), or None (``workers=0``: in
    process).

    The scheduler and the local cluster are :func:`ppa_dask.cluster.open_client`'s (the
    command's opener): a scheduler is probed within its connect timeout before a Client is
    made, so a wrong address fails in seconds with one line naming it.

    Examples
    --------
    >>> with cluster(workers=0) as client:
    ...     client is None
    True
    """
    if client is not None:
        yield client
    elif not scheduler and workers == 0:
        # in process, Dask's configuration untouched: the tasks fan out through run_tasks,
        # which gives them one BLAS thread itself
        yield None
    else:
        with open_client(scheduler=scheduler or None, n_workers=workers) as opened:
            yield opened


def _ship_by_value(func):
    """Workers may not be able to import a pipeline script: send its code with the task."""
    import cloudpickle

    for name in {func.__module__, __name__}:
        module = sys.modules.get(name)
        if module is not None and not name.startswith(("ppa_dask", "sklearn", "__main__")):
            with contextlib.suppress(ValueError):  # already registered
                cloudpickle.register_pickle_by_value(module)


def _in_order(func, items, shared, client, label, verbose):
    if client is not None:
        _ship_by_value(func)
    results = [None] * len(items)
    for position, result in run_tasks(
        func, items, shared, client=client, label=label, verbose=int(verbose)
    ):
        results[position] = result
    return results


def run_fanout(func, specs, workers, label="tasks", verbose=True):
    """Run ``func(spec)`` for every spec on a local cluster of ``workers`` processes (0: in
    process); results in spec order.

    Examples
    --------
    >>> run_fanout(abs, [-1, 2, -3], workers=0, verbose=False)
    [1, 2, 3]
    """
    specs = list(specs)
    if workers == 0:
        return _in_order(func, specs, (), None, label, verbose)
    with local_client(n_workers=workers) as client:
        if verbose:
            print(
                f"{label}: {len(specs)} tasks on {workers} workers, dashboard "
                f"{dashboard_link(client)}",
                flush=True,
            )
        return _in_order(func, specs, (), client, label, verbose)


def _call_with_kwargs(item):
    func, kwargs = item
    return func(**kwargs)


def fan_out(client, func, tasks):
    """Run ``func(**kwargs)`` for each kwargs dict in ``tasks`` on ``client`` (None: in
    process); results in task order.

    Examples
    --------
    >>> fan_out(None, pow, [{"base": 2, "exp": 3}, {"base": 3, "exp": 2}])
    [8, 9]
    """
    if client is not None:
        _ship_by_value(func)
    return _in_order(_call_with_kwargs, [(func, kw) for kw in tasks], (), client, "tasks", 0)


def setting_key(setting, context=None):
    """Key of a setting's part file: the setting and the run-wide ``context`` (data sizes,
    seed, ...), so parts of a run with other arguments are never mistaken for this one's.

    Examples
    --------
    >>> setting_key({"q": 1}) == setting_key({"q": 1}) != setting_key({"q": 2})
    True
    """
    text = json.dumps([setting, context or {}], sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def run_grid(func, settings, shared, output, client, label, quiet=False, context=None):
    """Rows of ``func(setting, *shared)`` for every setting: earlier parts reused, the rest run
    as tasks and each written to ``<output>/parts/<key>.json`` as it finishes. ``context``
    holds whatever else determines the results (the arguments behind ``shared``).

    Examples
    --------
    >>> import tempfile
    >>> rows = run_grid(lambda s: {"x": 2 * s}, [1, 2], (), tempfile.mkdtemp(), None, "grid", True)
    >>> [row["x"] for row in rows]
    [2, 4]
    """
    parts = os.path.join(output, "parts")
    os.makedirs(parts, exist_ok=True)
    rows, todo = {}, []
    for setting in settings:
        key = setting_key(setting, context)
        path = os.path.join(parts, f"{key}.json")
        if os.path.exists(path):
            with open(path) as f:
                rows[key] = json.load(f)
        else:
            todo.append(setting)
    if todo and client is not None:
        _ship_by_value(func)
    for k, result in run_tasks(
        func, todo, shared, client=client, label=label, verbose=0 if quiet else 1
    ):
        key = setting_key(todo[k], context)
        result = result if isinstance(result, list) else [result]
        result = [dict(r, _key=key) for r in result]
        tmp = os.path.join(parts, f"{key}.json.tmp")
        with open(tmp, "w") as f:
            json.dump(_plain(result), f)
        os.replace(tmp, os.path.join(parts, f"{key}.json"))
        rows[key] = result
    out = []
    for setting in settings:
        out.extend(rows[setting_key(setting, context)])
    return out


# -------------------------------------------------------------------------------------------
# tables
# -------------------------------------------------------------------------------------------


def _md_cell(value, fmt_):
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return "-" if math.isnan(value) else str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return format(value, fmt_)


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

    Examples
    --------
    >>> import tempfile
    >>> print(write_table(tempfile.mkdtemp(), "t", [("k", "k"), ("v", "value")],
    ...                   [{"k": 1, "v": 0.5}]), end="")
    | k | value |
    |---|---|
    | 1 | 0.500 |
    """
    with open(os.path.join(directory, stem + ".csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([c[0] for c in columns])
        for row in rows:
            writer.writerow([_csv_cell(row.get(c[0])) for c in columns])
    cols = [(c[0], c[1], c[2] if len(c) > 2 else fmt) for c in (md_columns or columns)]
    body = [
        [_md_cell(row.get(key), f) for key, _, f in cols]
        for row in (rows if md_rows is None else md_rows)
    ]
    text = pipe_table([header for _, header, _ in cols], body) + "\n"
    if title:
        text = f"**{title}**\n\n" + text
    with open(os.path.join(directory, stem + ".md"), "w") as f:
        f.write(text)
    return text


def read_csv(path):
    """Rows of a CSV file as dicts of strings (for tests)."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_csv(rows, path, columns=None):
    """Write rows (dicts) to ``path``; the columns default to every key not starting with
    ``_``, sorted. Returns the columns.

    Examples
    --------
    >>> import os, tempfile
    >>> write_csv([{"b": 1, "a": None, "_key": "x"}], os.path.join(tempfile.mkdtemp(), "r.csv"))
    ['a', 'b']
    """
    columns = columns or sorted({k for r in rows for k in r if not k.startswith("_")})
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})
    return columns


def fmt(value, digits=4):
    """A number for a markdown cell: ``digits`` significant digits, exponent when tiny/huge.

    Examples
    --------
    >>> fmt(0.123456), fmt(1e-5), fmt(None)
    ('0.1235', '1.000e-05', 'n/a')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}g}"
    return str(value)


def markdown_table(rows, columns, headers=None):
    """A pipe table of rows (dicts), cells by :func:`fmt`.

    Examples
    --------
    >>> print(markdown_table([{"q": 1, "FI": 0.25}], ["q", "FI"]))
    | q | FI |
    |---|---|
    | 1 | 0.25 |
    """
    return pipe_table(headers or columns, [[fmt(r.get(c)) for c in columns] for r in rows])


def write_frame_table(df, output, name, title=None, floatfmt="{:.3f}", note=None):
    """Write a DataFrame as ``name.csv`` and ``name.md`` into ``output``; return the markdown.

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> text = write_frame_table(pd.DataFrame({"a": [1], "b": [0.5]}), tempfile.mkdtemp(), "t")
    >>> text.splitlines()[2]
    '| 1 | 0.500 |'
    """

    def cell(v):
        if isinstance(v, (float, np.floating)):
            return "nan" if np.isnan(v) else floatfmt.format(v)
        return str(v)

    os.makedirs(output, exist_ok=True)
    df.to_csv(os.path.join(output, name + ".csv"), index=False)
    body = [[cell(v) for v in row] for row in df.itertuples(index=False)]
    text = (f"## {title}\n\n" if title else "") + pipe_table([str(c) for c in df.columns], body)
    text += "\n"
    if note:
        text += "\n" + note.strip() + "\n"
    with open(os.path.join(output, name + ".md"), "w") as fh:
        fh.write(text)
    return text


def mean_std(values):
    """Mean and standard deviation (ddof=0) along axis 0 over the finite values (NaN if none).

    Examples
    --------
    >>> [float(v) for v in mean_std([1.0, 3.0, np.nan])]
    [2.0, 1.0]
    """
    a = np.asarray(values, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN, quietly
        return np.nanmean(a, axis=0), np.nanstd(a, axis=0)


def pm(mean, std, fmt=".2f"):
    """``"mean ± std"`` as text (for markdown cells); ``-`` for a missing mean.

    Examples
    --------
    >>> pm(1.0, 0.25)
    '1.00 ± 0.25'
    """
    if not np.isfinite(mean):
        return "-"
    return f"{format(mean, fmt)} ± {format(std, fmt)}"


def mean_std_text(values):
    """``"mean ± std"`` of a sequence, std with ddof=1 (0 for a single value).

    Examples
    --------
    >>> mean_std_text([1.0, 2.0, 3.0])
    '2.000 ± 1.000'
    """
    values = np.asarray(values, dtype=float)
    return f"{values.mean():.3f} ± {values.std(ddof=1) if values.size > 1 else 0.0:.3f}"


# -------------------------------------------------------------------------------------------
# figures, reports, output folders, timers
# -------------------------------------------------------------------------------------------


def new_figure(nrows=1, ncols=1, figsize=(6, 4), projection=None, squeeze=False):
    """A matplotlib Figure on an Agg canvas and its axes (array of shape (nrows, ncols)).

    ``nrows=0`` returns ``(figure, None)`` for figures that add their own axes.

    Examples
    --------
    >>> fig, axes = new_figure(1, 2)
    >>> axes.shape
    (1, 2)
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


def matplotlib_headless():
    """``matplotlib.pyplot`` on the Agg backend (no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, directory, name, dpi=110):
    """Write ``fig`` as the PNG ``directory/name``; return its path.

    A figure without a layout engine (pyplot's default) is laid out tightly first, and one
    made by pyplot is closed afterwards (the scripts draw many).

    Examples
    --------
    >>> import os, tempfile
    >>> fig, axes = new_figure()
    >>> os.path.exists(save_figure(fig, tempfile.mkdtemp(), "f.png"))
    True
    """
    path = os.path.join(directory, name)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, format="png", dpi=dpi)
    if getattr(fig.canvas, "manager", None) is not None:
        matplotlib_headless().close(fig)
    return path


def prepare_output(path):
    """Create the output folder (and parents); return it."""
    os.makedirs(path, exist_ok=True)
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


def _plain(value):
    """JSON-ready values of a task's result: numpy scalars unwrapped, NaN as null."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else value
    return value


def write_json(directory, name, obj):
    """Write ``obj`` (numpy values allowed; non-finite floats become null) as JSON."""
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


def command_line(script, argv=None):
    """The command that reproduces a run of ``pipelines/<script>`` (for the report).

    Examples
    --------
    >>> command_line("/x/pipelines/paper_metric_knn.py", ["--quick", "--output", "a b"])
    "python pipelines/paper_metric_knn.py --quick --output 'a b'"
    """
    args = sys.argv[1:] if argv is None else list(argv)
    return " ".join(["python", f"pipelines/{os.path.basename(script)}", *map(shlex.quote, args)])


class Timer:
    """Wall time of a ``with`` block, in ``elapsed`` (seconds).

    Examples
    --------
    >>> with Timer() as t:
    ...     pass
    >>> t.elapsed >= 0
    True
    """

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.elapsed = time.perf_counter() - self.start


# -------------------------------------------------------------------------------------------
# data and model selection of the stability and VSK experiments
# -------------------------------------------------------------------------------------------


def load_regression_dataset(name, n_samples=None, seed=0, standardize=False):
    """``(X, y)`` of a regression data set of the stability pipelines, optionally
    row-subsampled (seeded) and standardised."""
    if name == "diabetes":
        from sklearn.datasets import load_diabetes

        X, y = load_diabetes(return_X_y=True)
    elif name == "abalone":
        X, y = datasets.load_abalone(sex="codes")
    elif name == "cpu_act":
        X, y = datasets.load_cpu_act()
    elif name == "house_8l":
        X, y = datasets.load_house_8l()
    else:
        raise ValueError(f"unknown data set {name!r}; choose from {REGRESSION_DATASETS}")
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if n_samples is not None and n_samples < X.shape[0]:
        rows = np.sort(
            np.random.default_rng([seed, 17]).choice(X.shape[0], n_samples, replace=False)
        )
        X, y = X[rows], y[rows]
    if standardize:
        sd = X.std(axis=0)
        X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return X, y


def load_breast_cancer():
    """The original Wisconsin breast cancer data: ``X`` (683, 9) float, ``y`` labels 2/4."""
    X, y = datasets.load_breast_cancer_wisconsin()
    return np.asarray(X, dtype=np.float64), np.asarray(y)


def load_covid(start="2020-02-24", end="2020-04-26"):
    """The Italian national series between two dates (inclusive) as a dict of numpy arrays.

    Keys: ``date`` (``datetime64[D]``) and :data:`COVID_COLUMNS` (float): ICU patients
    (``terapia_intensiva``), total cases, daily new cases, current positives.
    """
    data = datasets.load_covid_italy(start=start, end=end)
    return {k: data[k] for k in ("date",) + COVID_COLUMNS}


def svm_grid(kernel, prefix="", C_grid=C_GRID, gamma_grid=GAMMA_GRID):
    """The paper's parameter grid for an SVC (``prefix`` e.g. ``"svc__"`` inside a Pipeline).

    Examples
    --------
    >>> sorted(svm_grid("rbf", "svc__"))
    ['svc__C', 'svc__gamma']
    """
    grid = {prefix + "C": list(C_grid)}
    if kernel == "rbf":
        grid[prefix + "gamma"] = list(gamma_grid)
    return grid


def weighted_f1(y_true, y_pred):
    """The class-weighted F1 score, computed as ``sklearn.metrics.f1_score(y_true, y_pred,
    average="weighted")`` computes it (the same operations in the same order, so the same
    float), without its input validation.

    Per label of ``y_true`` or ``y_pred``: ``F1 = 2 tp / (n_true + n_pred)`` (0 when both are
    0), averaged with the weights ``n_true``. In a grid search of small SVMs scikit-learn's
    checks of the labels cost several times the fit itself (the VSK breast cancer pipeline
    spent half its time there, measured with cProfile); the equality is tested.

    Examples
    --------
    >>> round(weighted_f1([0, 0, 1, 1], [0, 1, 1, 1]), 6)
    0.733333
    """
    y_true, y_pred = np.asarray(y_true).ravel(), np.asarray(y_pred).ravel()
    if y_true.shape != y_pred.shape or not y_true.size:
        raise ValueError(
            f"y_true and y_pred must be non-empty and of one length, got {y_true.size} and "
            f"{y_pred.size} labels"
        )
    labels, index = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    n, k = y_true.size, labels.size
    true, pred = index[:n], index[n:]
    n_true = np.bincount(true, minlength=k)
    n_pred = np.bincount(pred, minlength=k)
    tp = np.bincount(true[true == pred], minlength=k)
    denominator = 1.0 * n_true.astype(np.float64) + n_pred.astype(np.float64)
    empty = denominator == 0
    denominator[empty] = 1
    f1 = (2.0 * tp.astype(np.float64)) / denominator
    f1[empty] = 0.0
    return float(np.average(f1, weights=n_true))


def weighted_f1_scorer(estimator, X, y):
    """A scorer (``scoring=`` of a search) of :func:`weighted_f1` on ``estimator.predict(X)``."""
    return weighted_f1(y, estimator.predict(X))


def tuned(estimator, grid, cv=5):
    """GridSearchCV by weighted F1 (the paper's score; :func:`weighted_f1_scorer`), in
    process, errors raised."""
    from sklearn.model_selection import GridSearchCV

    return GridSearchCV(
        estimator, grid, cv=cv, scoring=weighted_f1_scorer, n_jobs=1, error_score="raise"
    )
