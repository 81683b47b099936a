"""What the paper scripts under ``pipelines/`` write into their output folder.

Tables: :func:`write_table` (rows of dicts as ``stem.csv`` at full precision and ``stem.md``),
:func:`write_csv`, :func:`markdown_table` and :func:`write_frame_table` (a DataFrame), all drawn
by :func:`ppa_dask.utils.tables.pipe_table`, with the cell texts :func:`fmt`, :func:`pm` and
:func:`mean_std_text` and the aggregate :func:`mean_std`; :func:`read_csv` reads a table back.
Reports: :func:`write_report` (``report.md``: the command, the tables, the figures),
:func:`write_grid_report` (the stability scripts' ``report.md``: the command, then their text),
:func:`write_summary` (``summary.json``: the settings, the findings, the time),
:func:`write_json`, :func:`command_line` (the command that reproduces a run),
:func:`prepare_output` and :class:`Timer`.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import shlex
import sys
import time
import warnings

import numpy as np

from ppa_dask.utils.tables import pipe_table

__all__ = [
    "Timer",
    "command_line",
    "fmt",
    "markdown_table",
    "mean_std",
    "mean_std_text",
    "pm",
    "prepare_output",
    "read_csv",
    "write_csv",
    "write_frame_table",
    "write_grid_report",
    "write_json",
    "write_report",
    "write_summary",
    "write_table",
]


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


def write_json(directory, name, obj):
    """Write ``obj`` (numpy values allowed; non-finite floats become null) as JSON."""
    with open(os.path.join(directory, name), "w") as f:
        json.dump(_jsonable(obj), f, indent=2)
        f.write("\n")


def write_summary(directory, args, elapsed, **findings):
    """``summary.json``: the run's settings (``vars(args)``), its ``findings`` in the order
    given and its run time in seconds.

    Examples
    --------
    >>> import argparse, json, os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> write_summary(folder, argparse.Namespace(seed=0), 1.5, degrees={"low": 2})
    >>> with open(os.path.join(folder, "summary.json")) as f:
    ...     list(json.load(f))
    ['settings', 'degrees', 'elapsed_seconds']
    """
    write_json(
        directory, "summary.json", dict(settings=vars(args), **findings, elapsed_seconds=elapsed)
    )


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


def write_grid_report(directory, title, command, lines):
    """The stability scripts' ``report.md``: a heading, the command, then ``lines`` (markdown
    text, one item a line); says where it went.

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> write_grid_report(folder, "FI", "python pipelines/stability_ppa.py", ["Wall time 1 s."])
    ... # doctest: +ELLIPSIS
    wrote .../report.md
    >>> open(os.path.join(folder, "report.md")).read().splitlines()
    ['# FI', '', 'Command: `python pipelines/stability_ppa.py`  ', 'Wall time 1 s.']
    """
    with open(os.path.join(directory, "report.md"), "w") as f:
        f.write("\n".join([f"# {title}", "", f"Command: `{command}`  ", *lines]))
    print(f"wrote {directory}/report.md")


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
