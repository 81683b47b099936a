"""Saved results of the papers' experiments: one small JSON record per experiment.

A pipeline run with ``--record results/<name>.json`` writes a record of what it computed, which
is committed under ``results/`` in the repository; ``docs/reproductions.md`` and its figures
are built from these records only. A record holds

* ``command``: the command that made it (``["python", "pipelines/<script>.py", options...]``,
  run from the repository root; ``--output`` is left out, it does not change the numbers);
* ``reduced``: options that, appended to the command, rerun a smaller grid of the same
  experiment (fewer splits, data sets, sizes) whose cells are a subset of the saved ones, with
  the same seeds: the test suite runs it and compares;
* ``seeds`` (the base seed and every task seed), ``versions`` (Python and the packages that
  compute), ``date`` (UTC), ``run_seconds`` (wall time of the tasks) and ``machine`` (host
  name, CPU count);
* ``keys`` and ``cells``: the per-task numbers, one cell per (key values), stored column-wise
  (``{"columns": [...], "rows": [[...], ...]}``) with floats at :data:`DIGITS` significant
  digits, NaN as null;
* ``tables``: how the page summarises the cells (:func:`table_rows`): a value aggregated over
  the seeds (mean, sample standard deviation, min, max, count) per row and column, beside the
  paper's number when it gives one;
* ``figures``: what the documentation draws from the tables (:func:`draw_figure`);
* optionally ``tolerance``: how closely a rerun on another CPU reproduces the cells, for an
  experiment whose numbers depend on the CPU's rounding (a non-convex optimiser, nearly singular
  systems): ``rtol`` and ``atol`` of :func:`compare_cells`, ``why`` (what was measured), and
  optionally ``unstable`` (``{"field": name, "above": number}``: cells whose ``field`` is above
  that, or null, in the saved or the rerun record are rounding and are not compared). Without
  it a rerun must agree to :data:`RTOL` / :data:`ATOL`.

The page holds each rendered table between ``<!-- reproduction NAME TABLE -->`` and
``<!-- end reproduction -->`` (``TABLE`` = ``command``: the record's command, run time, date
and versions); :func:`render_page` rewrites those blocks from the records
(``python -m ppa_dask.app.reproductions docs/reproductions.md``) and :func:`stale_blocks` says
which ones differ from them (a test), so the page's numbers are the files' numbers.

Examples
--------
>>> import os, tempfile
>>> cells = [dict(seed=s, method=m, value=v) for s, m, v in
...          [(1, "pca", 0.30), (2, "pca", 0.34), (1, "ppa", 0.41), (2, "ppa", 0.43)]]
>>> table = dict(name="t", title="demo", value="value", rows=[], column="method",
...              over="seed", paper={"": {"pca": 0.35, "ppa": 0.42}}, digits=2)
>>> record = make_record("demo", "a demo", "nowhere", ["python", "pipelines/paper_metric_knn.py"],
...                      seeds=[1, 2], keys=["seed", "method"], cells=cells, tables=[table],
...                      run_seconds=1.0)
>>> path = os.path.join(tempfile.mkdtemp(), "demo.json")
>>> write_record(path, record)
>>> [(r["column"], round(r["mean"], 2), r["n"], r["paper"]) for r in
...  table_rows(read_record(path), "t")]
[('pca', 0.32, 2, 0.35), ('ppa', 0.42, 2, 0.42)]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import itertools
import json
import math
import os
import platform
import re
import shlex
import sys
import textwrap

import numpy as np

from ppa_dask.utils.files import JSONFileError, read_json_file, write_text_atomic
from ppa_dask.utils.tables import pipe_table
from ppa_dask.utils.version import VERSION

__all__ = [
    "FORMAT",
    "DIGITS",
    "RTOL",
    "ATOL",
    "RECORD_MAX_BYTES",
    "ReproductionRecordError",
    "package_versions",
    "recorded_command",
    "make_record",
    "stored_value",
    "write_record",
    "read_record",
    "record_cells",
    "table_rows",
    "render_table",
    "render_page",
    "stale_blocks",
    "page_blocks",
    "parse_recorded_command",
    "compare_cells",
    "draw_figure",
    "figure_names",
    "draw_all_figures",
    "add_record_option",
    "seeds_of",
]

#: The format tag of a record (a reader refuses other versions).
FORMAT = "ppa-dask reproduction record 1"
#: Significant digits of the floats saved: far below any spread between seeds, and a record of
#: ten thousand cells stays a few hundred KB.
DIGITS = 10
#: How closely a rerun must reproduce a record's cells when the record declares no
#: ``tolerance``: rounding of the saved digits, nothing more.
RTOL, ATOL = 1e-6, 1e-12
#: Largest record read back: the records are meant to be small (KBs to a few hundred KB).
RECORD_MAX_BYTES = 4 * 2**20
#: The packages whose versions a record keeps.
VERSIONED = ("numpy", "scipy", "scikit-learn", "dask", "distributed", "numba", "matplotlib")
#: Fields every record has.
REQUIRED = (
    "format", "experiment", "title", "paper", "command", "reduced", "seeds", "versions",
    "date", "run_seconds", "machine", "keys", "cells", "tables", "figures",
)  # fmt: skip
#: Fields of a table spec, and of a figure spec.
TABLE_FIELDS = {"name", "title", "value", "rows", "column", "over"}
FIGURE_KINDS = ("bars", "lines")

_BLOCK = re.compile(
    r"(<!-- reproduction (?P<name>[\w.-]+) (?P<table>[\w.-]+) -->\n)(?P<body>.*?)"
    r"(<!-- end reproduction -->)",
    re.S,
)


class ReproductionRecordError(ValueError):
    """A record that cannot be used: the message names the file and what is wrong."""


# --------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------


def package_versions():
    """Versions of Python, ppa-dask and the packages that compute the results.

    Examples
    --------
    >>> sorted(package_versions())[:3]
    ['dask', 'distributed', 'matplotlib']
    """
    out = {"python": platform.python_version(), "ppa-dask": VERSION}
    for name in VERSIONED:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return dict(sorted(out.items()))


def recorded_command(script, argv):
    """The command to save: ``python pipelines/<script> options``, ``--output`` left out.

    Examples
    --------
    >>> recorded_command("/x/pipelines/paper_metric_knn.py", ["--output", "/tmp/a", "--seed",
    ...                  "1", "--output=/b", "--record", "results/ppa_metric_knn.json"])
    ... # doctest: +NORMALIZE_WHITESPACE
    ['python', 'pipelines/paper_metric_knn.py', '--seed', '1', '--record',
     'results/ppa_metric_knn.json']
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    kept, skip = [], False
    for item in argv:
        if skip:
            skip = False
        elif item == "--output":
            skip = True
        elif not item.startswith("--output="):
            kept.append(str(item))
    return ["python", f"pipelines/{os.path.basename(script)}", *kept]


def stored_value(value, digits=DIGITS):
    """A cell's value as a record stores it: floats at ``digits`` significant digits, NaN/inf
    as null, other values as they are.

    A summary computed from values as stored is the same whether its settings were computed
    in this run or read back from a record.

    Examples
    --------
    >>> stored_value(2 / 3), stored_value(float("nan")), stored_value("rf")
    (0.6666666667, None, 'rf')
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            return None
        return float(f"{value:.{digits}g}")
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"a cell value must be a number, a string or None, got {type(value)}")


def make_record(
    experiment,
    title,
    paper,
    command,
    *,
    seeds,
    keys,
    cells,
    tables=(),
    figures=(),
    reduced=(),
    volatile=(),
    tolerance=None,
    digits=DIGITS,
    run_seconds,
    notes=None,
):
    """A record (a dict ready for :func:`write_record`); see the module docstring.

    Parameters
    ----------
    experiment : str
        The record's name (its file is ``results/<experiment>.json``).
    title, paper : str
        What it reproduces, and where in which paper.
    command : list of str
        :func:`recorded_command`.
    seeds : list of int
        Every seed the run used (base and task seeds).
    keys : list of str
        The cell fields that identify a cell (with the seed among them); the others are values.
    cells : list of dict
        One dict per cell, every dict with the same fields.
    tables, figures : list of dict
        Table specs: ``name``, ``title``, ``value``, ``rows`` (list of key fields),
        ``column`` (a key field), ``over`` (the key field aggregated over, the seed), and
        optionally ``where`` (field -> value, or list of values, the cells kept), ``paper``
        (``{row label: {column: number}}``, the row label the row's values joined by
        ``" / "``), ``digits``, ``tolerance`` (agreement when ``|ours - paper| <=
        tolerance``), ``labels`` (column value -> header), ``row_labels`` (row label ->
        display), ``row_headers``, ``count_header``, ``range`` (also show ``[min, max]``
        over the seeds), ``scale`` (factor applied to the value), ``single`` (each group
        is one number, shown alone, no spread: a text saying which, e.g. ``"the fixed split
        (split 0)"`` or ``"one run, no random draws"``). Figure specs: ``name``,
        ``kind`` in :data:`FIGURE_KINDS`, ``table``, ``title``, ``ylabel``, for ``lines``
        also ``x`` and ``panel`` (row fields), ``xlabel``, ``ylim``, ``panel_labels``.
    reduced : list of str
        Options appended to ``command`` for the test suite's smaller rerun.
    volatile : list of str
        What a rerun does not reproduce (times), skipped by :func:`compare_cells`: value
        fields, or ``"field=value"`` for the cells whose ``field`` has that value.
    tolerance : dict or None
        For numbers that depend on the CPU's rounding: ``rtol``, ``atol``, ``why`` and
        optionally ``unstable`` (see the module docstring); None: :data:`RTOL` / :data:`ATOL`.
    digits : int
        Significant digits of the floats saved (default :data:`DIGITS`).
    run_seconds : float
    notes : str or None
    """
    cells = list(cells)
    columns = list(cells[0]) if cells else list(keys)
    for i, cell in enumerate(cells):
        if list(cell) != columns:
            raise ValueError(f"cell {i} has fields {list(cell)}, expected {columns}")
    missing = [k for k in keys if k not in columns]
    if missing:
        raise ValueError(f"keys {missing} are not cell fields {columns}")
    record = dict(
        format=FORMAT,
        experiment=str(experiment),
        title=str(title),
        paper=str(paper),
        command=[str(c) for c in command],
        reduced=[str(c) for c in reduced],
        volatile=[str(c) for c in volatile],
        **({} if tolerance is None else {"tolerance": dict(tolerance)}),
        seeds=sorted({int(s) for s in seeds}),
        versions=package_versions(),
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        run_seconds=round(float(run_seconds), 1),
        machine=dict(host=platform.node(), cpus=os.cpu_count()),
        keys=list(keys),
        cells=dict(
            columns=columns, rows=[[stored_value(c[k], digits) for k in columns] for c in cells]
        ),
        tables=[dict(t) for t in tables],
        figures=[dict(f) for f in figures],
        notes=notes,
    )
    _check(record, f"record {experiment!r}")
    return record


def write_record(path, record):
    """Write ``record`` to ``path`` atomically: JSON, its cells one row per line (small diffs
    when a rerun changes a few numbers)."""
    _check(record, os.fspath(path))
    head = json.dumps({k: v for k, v in record.items() if k != "cells"}, indent=1)
    rows = ",\n".join(json.dumps(row) for row in record["cells"]["rows"])
    cells = json.dumps(record["cells"]["columns"])
    text = f'{head[:-2]},\n "cells": {{"columns": {cells}, "rows": [\n{rows}\n]}}\n}}\n'
    write_text_atomic(path, text)


def seeds_of(specs, base_seed):
    """The base seed and every ``spec["seed"]`` of a run's task specs.

    Examples
    --------
    >>> seeds_of([{"seed": 5}, {"seed": 7}], 0)
    [0, 5, 7]
    """
    return sorted({int(base_seed), *(int(s["seed"]) for s in specs)})


def add_record_option(parser):
    """The ``--record FILE`` option of the pipelines that save a record.

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_record_option(p)
    >>> p.parse_args(["--record", "results/x.json"]).record
    'results/x.json'
    """
    parser.add_argument(
        "--record",
        default=None,
        metavar="FILE",
        help="also save the run's numbers as a reproduction record (JSON) at FILE, e.g. "
        "results/<experiment>.json (ppa_dask.app.reproductions)",
    )


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------


def _check(record, name):
    def fail(problem):
        raise ReproductionRecordError(f"{name}: {problem}")

    if not isinstance(record, dict):
        fail("not a JSON object")
    if record.get("format") != FORMAT:
        fail(f"format is {record.get('format')!r}, expected {FORMAT!r}")
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        fail(f"missing fields {missing}")
    command = record["command"]
    if (
        not isinstance(command, list)
        or len(command) < 2
        or command[0] != "python"
        or not all(isinstance(c, str) for c in command)
    ):
        fail(f"command must be ['python', 'pipelines/<script>.py', ...], got {command!r}")
    cells = record["cells"]
    if not isinstance(cells, dict) or set(cells) != {"columns", "rows"}:
        fail("cells must be {'columns': [...], 'rows': [[...], ...]}")
    width = len(cells["columns"])
    bad = [
        i for i, row in enumerate(cells["rows"]) if not isinstance(row, list) or len(row) != width
    ]
    if bad:
        fail(f"cells row {bad[0]} does not have {width} values")
    absent = [k for k in record["keys"] if k not in cells["columns"]]
    if absent:
        fail(f"keys {absent} are not cell columns")
    names = set()
    for table in record["tables"]:
        lacking = TABLE_FIELDS - set(table)
        if lacking:
            fail(f"table {table.get('name')!r} lacks {sorted(lacking)}")
        for field in [*table["rows"], table["column"], table["over"], *table.get("where", {})]:
            if field not in cells["columns"]:
                fail(f"table {table['name']!r} uses {field!r}, not a cell column")
        names.add(table["name"])
    for figure in record["figures"]:
        if figure.get("kind") not in FIGURE_KINDS or figure.get("table") not in names:
            fail(f"figure {figure.get('name')!r}: kind must be in {FIGURE_KINDS} and table "
                 f"one of {sorted(names)}")  # fmt: skip
    if "tolerance" in record:
        problem = _tolerance_problem(record["tolerance"], cells["columns"])
        if problem:
            fail(f"tolerance {problem}")


def _tolerance_problem(tolerance, columns):
    """What is wrong with a record's ``tolerance`` entry, or None."""

    def number(value):
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    expected = (
        "{'rtol': >= 0, 'atol': >= 0, 'why': text, optionally 'unstable' and 'cpu_dependent'}"
    )
    known = {"rtol", "atol", "why", "unstable", "cpu_dependent"}
    if not isinstance(tolerance, dict) or not {"rtol", "atol", "why"} <= set(tolerance):
        return f"must be {expected}, got {tolerance!r}"
    if set(tolerance) - known:
        return f"has unknown fields {sorted(set(tolerance) - known)}"
    if not all(number(tolerance[k]) and tolerance[k] >= 0 for k in ("rtol", "atol")):
        return (
            f"rtol and atol must be numbers >= 0, got {tolerance['rtol']!r}, {tolerance['atol']!r}"
        )
    if not isinstance(tolerance["why"], str) or not tolerance["why"].strip():
        return "why must say what was measured"
    unstable = tolerance.get("unstable")
    if unstable is not None and not (
        isinstance(unstable, dict)
        and set(unstable) == {"field", "above"}
        and unstable["field"] in columns
        and number(unstable["above"])
    ):
        return f"unstable must be {{'field': a cell column, 'above': a number}}, got {unstable!r}"
    selections = tolerance.get("cpu_dependent")
    if selections is not None and not (
        isinstance(selections, list)
        and selections
        and all(isinstance(s, dict) and s and set(s) <= set(columns) for s in selections)
    ):
        return (
            "cpu_dependent must be a non-empty list of {cell column: value or list of values}, "
            f"got {selections!r}"
        )
    return None


def read_record(path):
    """Read and check the record at ``path`` (bounded to :data:`RECORD_MAX_BYTES`).

    Raises
    ------
    ReproductionRecordError
        Naming the file: not JSON, too large, another format, a field missing or malformed.
    """
    try:
        record = read_json_file(path, max_bytes=RECORD_MAX_BYTES)
    except JSONFileError as exc:
        raise ReproductionRecordError(str(exc)) from None
    _check(record, os.fspath(path))
    return record


def record_cells(record):
    """The cells as a list of dicts (null values as NaN for numbers' sake: None stays None)."""
    columns = record["cells"]["columns"]
    return [dict(zip(columns, row)) for row in record["cells"]["rows"]]


def _table(record, name):
    for table in record["tables"]:
        if table["name"] == name:
            return table
    raise ReproductionRecordError(
        f"record {record['experiment']!r} has no table {name!r}; it has "
        f"{[t['name'] for t in record['tables']]}"
    )


def _label(values):
    return " / ".join(str(v) for v in values)


def table_rows(record, name):
    """The summary rows of one table spec: each (row, column) group of cells aggregated over
    the table's ``over`` field.

    Returns
    -------
    list of dict
        ``row`` (tuple of the row fields' values), ``label`` (joined by ``" / "``),
        ``column``, ``n`` (finite values), ``mean``, ``std`` (sample standard deviation,
        ``ddof=1``; 0 for one value), ``min``, ``max``, ``paper`` (or None), ``difference``
        (``mean - paper``) and ``agrees`` (``|difference| <= tolerance``; None without a
        paper number or a tolerance). Rows in first-appearance order of the cells.
    """
    table = _table(record, name)
    where = table.get("where", {})
    scale = float(table.get("scale", 1.0))
    groups = {}
    for cell in record_cells(record):
        if any(cell[k] not in v if isinstance(v, list) else cell[k] != v
               for k, v in where.items()):  # fmt: skip
            continue
        key = (tuple(cell[f] for f in table["rows"]), cell[table["column"]])
        groups.setdefault(key, []).append(cell)
    paper = table.get("paper", {})
    tolerance = table.get("tolerance")
    rows = []
    for (row, column), members in groups.items():
        free = [
            k
            for k in record["keys"]
            if k not in (*table["rows"], table["column"], table["over"], *where)
        ]  # noqa: E501
        mixed = [k for k in free if len({m[k] for m in members}) > 1]
        if mixed:
            raise ReproductionRecordError(
                f"table {name!r} of {record['experiment']!r}: the group {row} x {column!r} "
                f"mixes values of {mixed}; add them to 'rows' or 'where'"
            )
        values = (
            np.array(
                [np.nan if m[table["value"]] is None else m[table["value"]] for m in members],
                dtype=np.float64,
            )
            * scale
        )
        finite = values[np.isfinite(values)]
        n = int(finite.size)
        label = _label(row)
        ref = paper.get(label, {}).get(str(column))
        mean = float(finite.mean()) if n else math.nan
        out = dict(
            row=row,
            label=label,
            column=column,
            n=n,
            mean=mean,
            std=float(finite.std(ddof=1)) if n > 1 else (0.0 if n else math.nan),
            min=float(finite.min()) if n else math.nan,
            max=float(finite.max()) if n else math.nan,
            paper=ref,
            difference=None if ref is None or not n else mean - ref,
            agrees=None,
        )
        if ref is not None and tolerance is not None and n:
            out["agrees"] = bool(abs(mean - ref) <= tolerance)
        rows.append(out)
    return rows


def _num(value, digits):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}"


def render_table(record, name):
    """The markdown of one table: per row, for every column ``mean ± std`` over the seeds
    (and ``[min, max]`` with the spec's ``range``; ``-`` where no value is finite), the
    paper's number and ``ours - paper`` when the table has them, and a last column with the
    count of seeds.

    Examples
    --------
    >>> cells = [dict(seed=s, m="a", v=v) for s, v in [(1, 1.0), (2, 3.0)]]
    >>> t = dict(name="t", title="T", value="v", rows=[], column="m", over="seed")
    >>> r = make_record("x", "x", "p", ["python", "pipelines/paper_metric_knn.py"], seeds=[1, 2],
    ...                 keys=["seed", "m"], cells=cells, tables=[t], run_seconds=0)
    >>> print(render_table(r, "t"))
    |  | a | seeds |
    |---|---|---|
    |  | 2.00 ± 1.41 | 2 |
    """
    table = _table(record, name)
    digits = int(table.get("digits", 2))
    labels = table.get("labels", {})
    rows = table_rows(record, name)
    columns = list(dict.fromkeys(r["column"] for r in rows))
    by = {(r["label"], r["column"]): r for r in rows}
    with_paper = any(r["paper"] is not None for r in rows)
    headers = [" / ".join(table.get("row_headers", table["rows"]))]
    for c in columns:
        head = str(labels.get(str(c), c))
        headers.append(head)
        if with_paper:
            headers += [f"paper {head}", f"{head} - paper"]
    headers.append(table.get("count_header", "seeds"))
    body = []
    row_labels = table.get("row_labels", {})
    for label in dict.fromkeys(r["label"] for r in rows):
        cells = [str(row_labels.get(label, label))]
        counts = set()
        for c in columns:
            r = by.get((label, c))
            if r is None:
                cells += ["-"] * (3 if with_paper else 1)
                continue
            counts.add(r["n"])
            if not r["n"]:
                text = "-"
            elif table.get("single"):
                text = _num(r["mean"], digits)
            else:
                text = f"{_num(r['mean'], digits)} ± {_num(r['std'], digits)}"
            if r["n"] and table.get("range"):
                text += f" [{_num(r['min'], digits)}, {_num(r['max'], digits)}]"
            cells.append(text)
            if with_paper:
                diff = r["difference"]
                cells.append(_num(r["paper"], digits))
                cells.append("-" if diff is None else f"{diff:+.{digits}f}")
        counts.discard(0)
        cells.append(",".join(str(n) for n in sorted(counts)) or "0")
        body.append(cells)
    return pipe_table(headers, body)


#: The block name that renders a record's command, run time, date and versions.
COMMAND_BLOCK = "command"


def _command_text(record):
    v = record["versions"]
    packages = ", ".join(
        f"{k} {v[k]}" for k in ("numpy", "scipy", "scikit-learn", "dask") if v.get(k)
    )
    return (
        f"```bash\n{shlex.join(record['command'])}\n```\n\n"
        f"Run {record['date'][:10]} in {record['run_seconds']:.0f} s on {record['machine']['cpus']} "
        f"CPUs (Python {v['python']}, ppa-dask {v['ppa-dask']}, {packages}); "
        f"{f'{n} seeds' if (n := len(record['seeds'])) else 'no random draws'}, in "
        f"`results/{record['experiment']}.json`.\n"
    )


def _block_text(record, table_name):
    if table_name == COMMAND_BLOCK:
        return _command_text(record)
    table = _table(record, table_name)
    minutes = record["run_seconds"] / 60
    spread = table.get("single") or f"mean ± sample std over {table['over']}s"
    head = (
        f"**{table['title']}** (from `results/{record['experiment']}.json`; "
        f"{spread}; run time {minutes:.1f} min)"
    )
    return f"{head}\n\n{render_table(record, table_name)}\n"


def page_blocks(text):
    """``(record name, table name, body)`` of every reproduction block of a page's text."""
    return [(m["name"], m["table"], m["body"]) for m in _BLOCK.finditer(text)]


def _record_for(results_dir, name, cache):
    if name not in cache:
        cache[name] = read_record(os.path.join(results_dir, f"{name}.json"))
    return cache[name]


def render_page(text, results_dir):
    """``text`` with every reproduction block rewritten from the records in ``results_dir``."""
    cache = {}

    def block(m):
        record = _record_for(results_dir, m["name"], cache)
        return m.group(1) + _block_text(record, m["table"]) + m.group(5)

    return _BLOCK.sub(block, text)


def stale_blocks(text, results_dir):
    """The ``(record, table)`` blocks of a page whose text is not the records' rendering."""
    cache = {}
    return [
        (name, table)
        for name, table, body in page_blocks(text)
        if body != _block_text(_record_for(results_dir, name, cache), table)
    ]


# --------------------------------------------------------------------------------------------
# the command and the reduced rerun
# --------------------------------------------------------------------------------------------


def _load_script(path):
    # a script imports only the package (tests/test_architecture.py), so its folder need not
    # be on sys.path
    name = "_reproduction_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_recorded_command(record, root, extra=()):
    """Check that the record's command exists and its options parse; return
    ``(module, args)``, the loaded script and its parsed options (``extra`` appended).

    Raises
    ------
    ReproductionRecordError
        The script is missing, has no ``parse_args``, or refuses the options (its message).
    """
    script = os.path.join(root, record["command"][1])
    if not os.path.isfile(script):
        raise ReproductionRecordError(
            f"{record['experiment']}: the recorded script {record['command'][1]} does not exist"
        )
    module = _load_script(script)
    if not hasattr(module, "parse_args"):
        raise ReproductionRecordError(f"{record['command'][1]} has no parse_args")
    argv = [*record["command"][2:], *extra]
    try:
        args = module.parse_args(argv)
    except SystemExit as exc:
        raise ReproductionRecordError(
            f"{record['experiment']}: {shlex.join(record['command'])} does not parse "
            f"(exit {exc.code})"
        ) from None
    return module, args


def compare_cells(saved, rerun, rtol=None, atol=None):
    """Differences between a rerun's cells and the saved ones, as messages (empty: equal).

    Every cell of ``rerun`` must be in ``saved`` (same key values) with every value equal
    within ``rtol`` / ``atol`` (default: the saved record's ``tolerance``, else :data:`RTOL`
    / :data:`ATOL`); ``saved`` may hold more cells (the larger grid). Cells the record's
    ``tolerance`` calls unstable (a value beyond ``unstable``'s bound, or a cell matching one
    of the ``cpu_dependent`` selections, ``{column: value or values}``, whose numbers another
    CPU's rounding moves beyond any useful tolerance) are not compared, but at least one cell
    must be. What either
    record calls ``volatile`` is not compared: a record saved before its script kept a
    volatile number (a time) lacks those cells, and the rerun says they are volatile.
    """
    tolerance = saved.get("tolerance") or {}
    rtol = tolerance.get("rtol", RTOL) if rtol is None else rtol
    atol = tolerance.get("atol", ATOL) if atol is None else atol
    unstable = tolerance.get("unstable")
    selections = tolerance.get("cpu_dependent") or []

    def selected(cell, selection):
        return all(
            cell.get(k) in (v if isinstance(v, list) else [v]) for k, v in selection.items()
        )

    def is_unstable(cell):
        if any(selected(cell, s) for s in selections):
            return True  # cells the record names as following the CPU's rounding
        if unstable is None:
            return False
        value = cell.get(unstable["field"])
        return (
            value is None
            or (isinstance(value, float) and math.isnan(value))
            or (value > unstable["above"])
        )

    keys = saved["keys"]
    if rerun["keys"] != keys or rerun["cells"]["columns"] != saved["cells"]["columns"]:
        return [f"fields differ: {rerun['cells']['columns']} vs {saved['cells']['columns']}"]
    index = {tuple(c[k] for k in keys): c for c in record_cells(saved)}
    volatile = {*saved.get("volatile", ()), *rerun.get("volatile", ())}
    skipped = {tuple(v.split("=", 1)) for v in volatile if "=" in v}
    problems, compared = [], 0
    for cell in record_cells(rerun):
        key = tuple(cell[k] for k in keys)
        if any(str(cell.get(f)) == v for f, v in skipped):
            continue
        old = index.get(key)
        if old is None:
            problems.append(f"cell {dict(zip(keys, key))} is not in the saved record")
            continue
        if is_unstable(cell) or is_unstable(old):
            continue
        compared += 1
        for field, value in cell.items():
            if field in keys or field in volatile:
                continue
            ref = old[field]
            if isinstance(value, (int, float)) and isinstance(ref, (int, float)):
                if not math.isclose(value, ref, rel_tol=rtol, abs_tol=atol):
                    problems.append(f"{dict(zip(keys, key))} {field}: {value!r} vs {ref!r}")
            elif value != ref:
                problems.append(f"{dict(zip(keys, key))} {field}: {value!r} vs {ref!r}")
    if not record_cells(rerun):
        problems.append("the rerun has no cells")
    elif not compared and not problems:
        problems.append("no cell of the rerun was compared (all volatile or unstable)")
    return problems


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------


def draw_all_figures(results_dir, out_dir):
    """Draw every figure of every record in ``results_dir`` into ``out_dir`` (made if needed);
    return the paths written. The documentation build calls this (docs/conf.py)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for entry in sorted(os.listdir(results_dir)):
        if not entry.endswith(".json"):
            continue
        record = read_record(os.path.join(results_dir, entry))
        for spec, name in zip(record["figures"], figure_names(record)):
            paths.append(draw_figure(record, spec["name"], os.path.join(out_dir, name)))
    return paths


def figure_names(record):
    """The PNG file names of a record's figures: ``<experiment>-<figure>.png``."""
    return [f"{record['experiment']}-{f['name']}.png" for f in record["figures"]]


def draw_figure(record, name, path):
    """Draw one figure of a record from its table's rows into the PNG ``path``.

    ``bars``: one group of bars per row, one bar per column (mean, error bar the sample std),
    the paper's numbers as black ticks. ``lines``: one panel per value of the ``panel`` row
    field, the ``x`` row field on the horizontal axis, one line per column with a band of
    ± one std.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    spec = next((f for f in record["figures"] if f["name"] == name), None)
    if spec is None:
        raise ReproductionRecordError(f"record {record['experiment']!r} has no figure {name!r}")
    table = _table(record, spec["table"])
    labels = table.get("labels", {})
    rows = table_rows(record, spec["table"])
    columns = list(dict.fromkeys(r["column"] for r in rows))
    # one colour per method across every figure (PCA grey, PPA red, PPA-GD blue, NLPCA
    # green), the rest in turn
    fixed = {"pca": "0.45", "ppa": "tab:red", "ppa_gd": "tab:blue", "nlpca": "tab:green"}
    # (in turn, again from the start past the last: a figure may have more columns)
    spare = itertools.cycle(
        [
            "0.45",
            "tab:red",
            "tab:blue",
            "tab:green",
            "tab:purple",
            "tab:orange",
            "tab:brown",
            "tab:pink",
            "tab:olive",
            "tab:cyan",
        ]
    )
    colors = {c: fixed.get(str(c)) or next(spare) for c in columns}
    if spec["kind"] == "bars":
        groups = list(dict.fromkeys(r["label"] for r in rows))
        fig = Figure(figsize=(1.3 * len(groups) + 2.5, 3.6), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        width = 0.8 / max(len(columns), 1)
        by = {(r["label"], r["column"]): r for r in rows}
        for i, c in enumerate(columns):
            x = np.arange(len(groups)) + (i - (len(columns) - 1) / 2) * width
            got = [by.get((g, c)) for g in groups]
            mean = [r["mean"] if r else np.nan for r in got]
            std = [r["std"] if r else 0 for r in got]
            ax.bar(x, mean, width, yerr=std, capsize=2, color=colors[c],
                   label=str(labels.get(str(c), c)))  # fmt: skip
            paper = [r["paper"] if r and r["paper"] is not None else np.nan for r in got]
            if np.isfinite(paper).any():
                ax.scatter(x, paper, marker="_", s=180, color="k", zorder=3,
                           label="paper" if i == 0 else None)  # fmt: skip
        names = [str(table.get("row_labels", {}).get(g, g)) for g in groups]
        ax.set_xticks(np.arange(len(groups)), names, fontsize=8)
        ax.axhline(0, color="k", lw=0.5)
        # bars that all stand high above 0 (scores near 1, errors near 100 %): start the axis
        # below the lowest error bar, or their differences are invisible
        low = [r["mean"] - r["std"] for r in rows if r["n"]]
        high = [r["mean"] + r["std"] for r in rows if r["n"]]
        if low and min(low) > 0 and min(low) >= 0.5 * max(high):
            span = max(high) - min(low) + 1e-3 * max(high)
            ax.set_ylim(min(low) - 0.3 * span, max(high) + 0.3 * span)
        ax.legend(fontsize=7)
    else:
        x_field, panel_field = spec["x"], spec["panel"]
        xi, pi = table["rows"].index(x_field), table["rows"].index(panel_field)
        panels = list(dict.fromkeys(r["row"][pi] for r in rows))
        ncols = min(3, len(panels))
        nrows = -(-len(panels) // ncols)
        fig = Figure(figsize=(4.0 * ncols, 3.0 * nrows), layout="constrained")
        FigureCanvasAgg(fig)
        axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
        clip = spec.get("ylim")
        for ax, panel in zip(axes, panels):
            for c in columns:
                mine = [r for r in rows if r["row"][pi] == panel and r["column"] == c]
                x = np.array([r["row"][xi] for r in mine], dtype=float)
                m = np.array([r["mean"] for r in mine])
                s = np.array([r["std"] for r in mine])
                ax.plot(x, m, marker="o", ms=2.5, color=colors[c],
                        label=str(labels.get(str(c), c)))  # fmt: skip
                ax.fill_between(x, m - s, m + s, color=colors[c], alpha=0.15, lw=0)
            ax.set_title(str(spec.get("panel_labels", {}).get(str(panel), panel)), fontsize=9)
            ax.set_xlabel(spec.get("xlabel", x_field), fontsize=8)
            if clip:
                ax.set_ylim(*clip)
            ax.grid(alpha=0.3)
        for ax in axes[len(panels) :]:
            ax.set_visible(False)
        axes[0].legend(fontsize=7)
        ax = axes[0]
    ax.set_ylabel(spec.get("ylabel", table["value"]), fontsize=8)
    width = int(fig.get_figwidth() * 12)  # characters of a 10-point title across the figure
    fig.suptitle(textwrap.fill(spec.get("title", table["title"]), width), fontsize=10)
    fig.savefig(path, format="png", dpi=100)
    return path


# --------------------------------------------------------------------------------------------
# command line: rewrite a page's blocks from the records
# --------------------------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m ppa_dask.app.reproductions",
        description="Rewrite the reproduction blocks of a page from the saved records.",
    )
    parser.add_argument("page", help="the page, e.g. docs/reproductions.md")
    parser.add_argument("--results", default="results", help="folder of the records")
    parser.add_argument("--check", action="store_true", help="only list stale blocks")
    args = parser.parse_args(argv)
    with open(args.page, encoding="utf-8") as f:
        text = f.read()
    if args.check:
        stale = stale_blocks(text, args.results)
        for name, table in stale:
            print(f"stale: {name} {table}")
        return 1 if stale else 0
    new = render_page(text, args.results)
    if new != text:
        with open(args.page, "w", encoding="utf-8") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
