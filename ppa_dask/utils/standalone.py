"""One function of one module file, run in a child process of its own, without its package.

The compiled kernels (:mod:`ppa_dask.ppa.fused`) are compiled on a first run by such a child.
The ``ppa-dask`` command starts it first thing, while the package is still being imported
(:mod:`ppa_dask.launch`), and the command looks for it again when it opens its session:
:func:`start` is idempotent per file and function, so both name the same child. The child
imports the file alone, under its module name (numba keys its on-disk cache by the file and the
function, so what the child writes is what every other process looks up): it pays for the
file's own imports, not for the package's.

Examples
--------
>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "answer.py")
>>> with open(path, "w") as f:
...     _ = f.write("def value():\\n    return {'answer': 42}\\n")
>>> proc = start(path, "answer", "value")
>>> start(path, "answer", "value") is proc and started(path, "value") is proc
True
>>> result(proc, timeout=60)
{'answer': 42}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

__all__ = ["start", "started", "result"]

#: the child: import the file alone under its module name, call the function, print its JSON
_CHILD = (
    "import importlib.util, json, sys\n"
    "path, name, function = sys.argv[1:4]\n"
    "spec = importlib.util.spec_from_file_location(name, path)\n"
    "module = importlib.util.module_from_spec(spec)\n"
    "sys.modules[name] = module\n"
    "spec.loader.exec_module(module)\n"
    "print(json.dumps(getattr(module, function)()))\n"
)
_started = {}  # (absolute path, function) -> its child process, one per process


def _key(path, function):
    return os.path.abspath(path), function


def start(path, module_name, function):
    """Start ``function()`` of the file ``path``, imported alone as ``module_name``, in a child
    process (its stdout kept for :func:`result`, no stdin, stderr discarded); or return the child
    already started in this process for that file and function."""
    key = _key(path, function)
    if key not in _started:
        _started[key] = subprocess.Popen(
            [sys.executable, "-c", _CHILD, key[0], module_name, function],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    return _started[key]


def started(path, function):
    """The child :func:`start` started in this process for this file and function, or None."""
    return _started.get(_key(path, function))


def result(proc, timeout):
    """What the child's function returned (its last line of output, read as JSON), waited for at
    most ``timeout`` seconds; None when it failed, printed nothing or did not finish in time (it
    is then left to finish on its own)."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0 or not out.strip():
        return None
    return json.loads(out.strip().splitlines()[-1])
