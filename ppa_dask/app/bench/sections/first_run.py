"""The ``first_run`` section: the first ``ppa-dask demo`` on a machine (empty numba cache)
against the same demo with the cache warm, each a fresh process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ppa_dask.app.bench.harness import (
    make_row,
    median,
)


def _demo_once(cache, output, samples):
    """One ``ppa-dask demo --no-cube`` in a fresh process with ``NUMBA_CACHE_DIR=cache``; its
    wall time and the kernels' record of its summary."""
    argv = [sys.executable, "-m", "ppa_dask", "demo", "--no-cube", "--output", output]
    if samples is not None:
        argv += ["--n-samples", str(samples)]
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    env.pop("NUMBA_DISABLE_JIT", None)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise RuntimeError(f"ppa-dask demo exited {done.returncode}: {' '.join(tail)}")
    with open(os.path.join(output, "summary.json")) as f:
        kernels = json.load(f)["kernels"]
    shutil.rmtree(output, ignore_errors=True)
    return seconds, kernels


def section_first_run(s, say):
    """The first ``ppa-dask demo`` on a machine (an empty numba cache: every kernel compiled)
    against a warm one (the cache filled by an earlier run), each a fresh process as a user
    runs it, alternating cold and warm, ``first_run_repeats`` rounds."""
    tmp = tempfile.mkdtemp(prefix="ppa-bench-first-")
    try:
        return _first_run_rows(s, say, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _first_run_rows(s, say, tmp):
    samples = s["first_run_samples"]
    warm = os.path.join(tmp, "numba-warm")
    os.makedirs(warm, exist_ok=True)
    _demo_once(warm, os.path.join(tmp, "demo-prime"), samples)  # fills the warm cache
    times = {"first": [], "warm": []}
    compiled = []
    for r in range(s["first_run_repeats"]):
        cold = tempfile.mkdtemp(prefix="numba-cold-", dir=tmp)
        seconds, kernels = _demo_once(cold, os.path.join(tmp, f"demo-cold-{r}"), samples)
        shutil.rmtree(cold, ignore_errors=True)
        times["first"].append(seconds)
        compiled.append(kernels["first_run"])
        seconds, kernels = _demo_once(warm, os.path.join(tmp, f"demo-warm-{r}"), samples)
        times["warm"].append(seconds)
        if kernels["first_run"]:
            raise RuntimeError("the warm demo compiled kernels: its cache was not used")
        say(f"first_run: round {r + 1}: first {times['first'][-1]:.1f} s, warm {seconds:.1f} s")
    if not all(compiled):
        raise RuntimeError("a first-run demo compiled no kernel: its empty cache was not used")
    first, again = median(times["first"]), median(times["warm"])
    size = "defaults" if samples is None else f"--n-samples {samples:,}"
    return [
        make_row(
            "first_demo",
            f"first ppa-dask demo --no-cube on a machine ({size}; empty numba cache: every "
            "kernel compiled)",
            "the same demo with the cache warm",
            first,
            again,
            first / again,
            "first / warm",
            ("<=", 1.3),
            times=times,
            note=f"wall time of the command, {len(times['first'])} alternating rounds, medians",
        )
    ]
