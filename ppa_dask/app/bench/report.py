"""The outputs of ``ppa-dask bench``: the markdown table (``bench.md``), the plots, the machine.

Examples
--------
>>> cell(0.12345), cell(12345.0), cell(None)
('0.123', '12,345', '-')
"""

from __future__ import annotations

import contextlib
import os
import platform

import numpy as np

from ppa_dask.app.bench.harness import anchor
from ppa_dask.app.scripts.figures import new_figure
from ppa_dask.utils.files import temp_sibling
from ppa_dask.utils.tables import pipe_table
from ppa_dask.utils.version import VERSION

#: The columns of the table of ``bench.md``.
COLUMNS = ("figure", "PPA (s)", "baseline", "baseline (s)", "ratio", "target", "met", "passes")


def cell(value, digits=3):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def bench_markdown(result):
    """The markdown of a bench result (``bench.md``): one paragraph and the table.

    The same text is pasted into the README's Performance section and
    docs/guide/performance.md, so a rerun regenerates both.

    Examples
    --------
    >>> result = {"command": "ppa-dask bench", "machine": "m", "date": "2026-01-01",
    ...           "size": "full", "elapsed_s": 1.0, "rows": []}
    >>> bench_markdown(result).splitlines()[0][:32]
    '`ppa-dask bench` on m, 2026-01-0'
    """
    lines = [
        f"`{result['command']}` on {result['machine']}, {result['date']} "
        f"(sizes: {result['size']}; {result['elapsed_s']:.0f} s in all; load average "
        f"{result.get('load_average', [float('nan')])[0]:.1f} at the end). Times are medians of "
        "interleaved repeats in seconds; passes are PPA's data passes per fit.",
        "",
    ]
    cells = []
    for r in result["rows"]:
        if r["status"] != "measured":
            met = r["status"]
        elif r["met"] is None:
            met = "(reported)"
        else:
            met = "met" if r["met"] else "not met"
        ratio = "-" if r["ratio"] is None else f"{r['ratio_label']} = {cell(r['ratio'])}"
        cells.append(
            [
                r["figure"],
                cell(r["ppa_s"]),
                r["baseline"],
                cell(r["baseline_s"]),
                ratio,
                r["target"] or "-",
                met,
                cell(r["passes"]),
            ]
        )
    lines.append(pipe_table(COLUMNS, cells))
    return "\n".join(lines) + "\n"


def _save_png(fig, path):
    tmp = temp_sibling(path)
    try:
        fig.savefig(tmp, format="png", dpi=110)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def write_plots(rows, output):
    written = []
    by_id = {r["id"]: r for r in rows}
    cost = [by_id[k] for k in ("cost_n", "cost_d") if by_id.get(k, {}).get("points")]
    if cost:
        fig, axes = new_figure(1, len(cost), figsize=(5.5 * len(cost), 4))
        for ax, r in zip(axes[0], cost):
            axis = r["id"].split("_")[1]
            xs = [p[axis] for p in r["points"]]
            ax.loglog(xs, [p["ppa_s"] for p in r["points"]], "o-", label="PPA")
            ax.loglog(xs, [p["pca_s"] for p in r["points"]], "s--", label="PCA")
            ax.set_xlabel(axis)
            ax.set_ylabel("fit time (s)")
            ax.set_title(
                f"slope PPA {cell(r['ppa_slope'])}, PCA {cell(r['pca_slope'])}", fontsize=10
            )
            ax.legend()
        written.append(_save_png(fig, os.path.join(output, "cost_growth.png")))
    passes = [by_id[k] for k in ("pass_floor", "chunks_fit") if by_id.get(k, {}).get("points")]
    if passes:
        fig, axes = new_figure(1, len(passes), figsize=(5.5 * len(passes), 4))
        for ax, r in zip(axes[0], passes):
            xs = [p["chunks"] for p in r["points"]]
            key = "pass_s" if r["id"] == "pass_floor" else "s"
            ax.loglog(xs, [p[f"grouped_{key}"] for p in r["points"]], "o-", label="grouped")
            ax.loglog(
                xs, [p[f"ungrouped_{key}"] for p in r["points"]], "s--", label="task per block"
            )
            ax.set_xlabel("chunks")
            ax.set_ylabel("seconds per pass, no work" if key == "pass_s" else "fit (s)")
            ax.legend()
        written.append(_save_png(fig, os.path.join(output, "pass_cost.png")))
    judged = [r for r in rows if r["target"] and r["ratio"] is not None and r["ratio"] > 0]
    if judged:
        fig, axes = new_figure(figsize=(8, 0.35 * len(judged) + 1.5))
        ax = axes[0, 0]
        bounds = [float(r["target"].split()[1]) or 1.0 for r in judged]
        scaled = [r["ratio"] / b if b else r["ratio"] for r, b in zip(judged, bounds)]
        colors = ["tab:green" if r["met"] else "tab:red" for r in judged]
        ax.barh(range(len(judged)), scaled, color=colors)
        ax.axvline(1.0, color="k", lw=1)
        ax.set_yticks(range(len(judged)), [r["id"] for r in judged], fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("ratio / target bound (green: met)")
        ax.invert_yaxis()
        written.append(_save_png(fig, os.path.join(output, "ratios.png")))
    return [os.path.basename(p) for p in written]


def machine_description():
    import psutil

    mem = psutil.virtual_memory().total / 2**30
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    cpus = f"{os.cpu_count()} CPUs" + (f" {cpu}" if cpu else "")
    return f"{platform.node() or 'this machine'} ({cpus}, {mem:.0f} GiB, {platform.system()})"


def versions():
    out = {"python": platform.python_version(), "ppa_dask": VERSION}
    for name in ("numpy", "sklearn", "dask", "distributed", "xeofs", "dask_ml"):
        module = anchor(name)
        out[name] = None if module is None else getattr(module, "__version__", "?")
    return out


def json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (range, tuple, set)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
