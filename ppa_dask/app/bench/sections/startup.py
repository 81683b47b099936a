"""The ``startup`` section: how long ``ppa-dask --help`` and ``import ppa_dask`` take, each a
fresh process, beside ``python -c pass`` in the same run (interleaved).

A user's first ``--help`` or mistyped option should answer at once: the command parses its
arguments and checks its inputs before importing dask, distributed, xarray, scikit-learn or
numba (the package's names load on first use).
"""

from __future__ import annotations

import subprocess
import sys

from ppa_dask.app.bench.harness import interleaved, make_row, median


def _run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-500:]}")


def section_startup(s, say):
    python = sys.executable
    funcs = {
        "help": lambda: _run([python, "-m", "ppa_dask", "--help"]),
        "import": lambda: _run([python, "-c", "import ppa_dask"]),
        "pass": lambda: _run([python, "-c", "pass"]),
    }
    for fn in funcs.values():
        fn()  # warm-up: the page cache and the bytecode caches
    times, _ = interleaved(funcs, s["startup_repeats"])
    med = {k: median(v) for k, v in times.items()}
    say(", ".join(f"{k} {v:.3f} s" for k, v in med.items()))
    rows = []
    for row_id, label in (("startup_help", "ppa-dask --help"), ("startup_import", "import")):
        key = "help" if row_id == "startup_help" else "import"
        figure = (
            "python -m ppa_dask --help (a fresh process)"
            if key == "help"
            else 'python -c "import ppa_dask" (a fresh process)'
        )
        rows.append(
            make_row(
                row_id,
                figure,
                'python -c "pass"',
                med[key],
                med["pass"],
                med[key],
                f"seconds ({label}; {med[key] / med['pass']:.1f}x python's own start)",
                ("<=", 1.0),
                times=times,
            )
        )
    return rows
