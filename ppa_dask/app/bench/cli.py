"""The ``ppa-dask bench`` sub-command: its parser and the run of the selected sections.

Examples
--------
>>> import argparse
>>> add_parser(argparse.ArgumentParser().add_subparsers()).parse_args([]).output
'bench'
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import shutil
import sys
import tempfile

from ppa_dask.app.bench.sizes import SECTIONS, SIZES, WORKERS
from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.files import write_json_atomic, write_text_atomic
from ppa_dask.utils.lazy import load
from ppa_dask.utils.progress import Reporter

# loaded when the bench runs (ppa_dask.utils.lazy.load): the command's parser (add_parser) and
# its --help come without Dask and distributed, which these import
harness = load("ppa_dask.app.bench.harness")
report = load("ppa_dask.app.bench.report")
sections_ = load("ppa_dask.app.bench.sections")


def add_parser(subparsers):
    """Add the ``bench`` sub-command to the CLI's sub-parsers; return its parser.

    Examples
    --------
    >>> import argparse
    >>> sub = argparse.ArgumentParser().add_subparsers()
    >>> add_parser(sub).parse_args(["--quick"]).quick
    True
    """
    p = subparsers.add_parser(
        "bench",
        help="time PPA against its baselines (PCA, the direct port, xeofs, dask-ml, scans)",
        description=(
            "Time every performance figure of ppa-dask beside its baseline in the same process "
            "or on the same local cluster (2 worker processes, one thread and one BLAS thread "
            "each), as medians of interleaved repeats, and print each row's target and whether "
            "it was met. Writes DIR/bench.json, DIR/bench.md and PNG plots. The full run takes "
            "about 10-25 minutes on 2 cores; --quick a few."
        ),
    )
    p.add_argument("--quick", action="store_true", help="smaller sizes: a few minutes on 2 cores")
    p.add_argument("--output", "-o", metavar="DIR", default="bench", help="output folder")
    p.add_argument(
        "--only",
        metavar="SECTIONS",
        default=None,
        help="comma-separated sections to run: " + ", ".join(SECTIONS) + " (default: all)",
    )
    p.add_argument(
        "--tmpdir", metavar="DIR", default=None, help="parent of the scratch folder (stores)"
    )
    # the test suite's sizes (every row in seconds); not for measurements
    p.add_argument("--size", choices=tuple(SIZES), default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=run_bench)
    return p


def _selected(only):
    if only is None:
        return list(SECTIONS)
    names = [t.strip() for t in only.split(",") if t.strip()]
    unknown = [t for t in names if t not in SECTIONS]
    if unknown or not names:
        raise ValueError(
            f"--only: unknown section(s) {', '.join(unknown) or repr(only)}; "
            f"choose from {', '.join(SECTIONS)}"
        )
    return [name for name in SECTIONS if name in names]


def _command(args):
    """The command as run, less the options that only say where files go."""
    argv = list(getattr(args, "argv", None) or ["ppa-dask", "bench"] + ["--quick"] * args.quick)
    shown, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in ("--output", "-o", "--tmpdir"):
            skip = True
        elif not word.startswith(("--output=", "--tmpdir=")):
            shown.append(word)
    return shlex.join(shown)


def run_bench(args, stream=None):
    """The ``bench`` command: run the selected sections, write bench.json, bench.md, PNGs.

    Parameters
    ----------
    args : argparse.Namespace
        ``quick``, ``output``, ``only``, ``tmpdir`` and ``size`` (see :func:`add_parser`).
    stream : file-like, optional
        Where progress lines and the table go (default ``sys.stdout``).

    Returns
    -------
    int
        0 (a target not met is a result, not an error).

    Raises
    ------
    ValueError
        For an unknown ``--only`` section or an output path that is not a folder, before
        anything runs.

    Examples
    --------
    >>> import argparse
    >>> run_bench(argparse.Namespace(quick=True, output=".", only="nothing", tmpdir=None,
    ...                              size=None))
    Traceback (most recent call last):
    ...
    ValueError: --only: unknown section(s) nothing; choose from memory, table2, cost, ooc, ...
    """
    stream = sys.stdout if stream is None else stream
    sections = _selected(args.only)
    size = args.size or ("quick" if args.quick else "full")
    s = SIZES[size]
    output = os.path.abspath(args.output)
    if os.path.exists(output) and not os.path.isdir(output):
        raise ValueError(f"--output {args.output!r} exists and is not a folder")
    if args.tmpdir is not None and not os.path.isdir(args.tmpdir):
        raise ValueError(f"--tmpdir {args.tmpdir!r} is not a folder")
    os.makedirs(output, exist_ok=True)
    progress = Reporter(stream)
    say = progress.say
    say(f"{_command(args)}: sizes {size!r}, sections {', '.join(sections)}")

    rows = {}
    tmp = tempfile.mkdtemp(prefix="ppa-bench-", dir=args.tmpdir)
    try:
        with one_blas_thread():
            for name, section in sections_.IN_PROCESS_SECTIONS.items():
                if name in sections:
                    with progress.stage(f"{name}_s", f"section {name}"):
                        rows.update({r["id"]: r for r in section(s, say)})
        scratch = os.path.join(tmp, "scratch")
        # the out-of-core row has its cluster to itself unless the limits agree (tiny sizes)
        shared = s["ooc_memory_limit"] == s["cluster_memory_limit"]
        if "ooc" in sections and not shared:
            with harness.bench_cluster(WORKERS, s["ooc_memory_limit"], scratch) as client:
                with progress.stage("ooc_s", "section ooc"):
                    rows.update({r["id"]: r for r in sections_.section_ooc(s, say, tmp, client)})
        # the scaling row brings its own clusters, one at a time
        if "scaling" in sections:
            with progress.stage("scaling_s", "section scaling"):
                rows.update({r["id"]: r for r in sections_.section_scaling(s, say, tmp, scratch)})
        on_cluster = [
            n for n in sections if n in sections_.ON_CLUSTER_SECTIONS or (n == "ooc" and shared)
        ]
        if on_cluster:
            with harness.bench_cluster(WORKERS, s["cluster_memory_limit"], scratch) as client:
                for name in on_cluster:
                    with progress.stage(f"{name}_s", f"section {name}"), client.as_current():
                        if name == "ooc":
                            found = sections_.section_ooc(s, say, tmp, client)
                        else:
                            found = sections_.ON_CLUSTER_SECTIONS[name](s, say, tmp)
                        rows.update({r["id"]: r for r in found})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ordered = [rows[r] for name in sections for r in SECTIONS[name] if r in rows]
    result = {
        "command": _command(args),
        "machine": report.machine_description(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "size": size,
        "sizes": s,
        "sections": sections,
        "versions": report.versions(),
        "load_average": list(os.getloadavg()),
        "elapsed_s": progress.total(),
        "stage_s": dict(progress.times),
        "rows": ordered,
    }
    result["figures"] = report.write_plots(ordered, output)
    write_json_atomic(os.path.join(output, "bench.json"), result, default=report.json_default)
    text = report.bench_markdown(result)
    write_text_atomic(os.path.join(output, "bench.md"), text)
    progress.plain()
    progress.plain(text)
    say(f"wrote {output}/bench.json, bench.md, {', '.join(result['figures']) or 'no plots'}")
    return 0
