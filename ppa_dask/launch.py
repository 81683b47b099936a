"""The ``ppa-dask`` command's first step, taken while the package is still being imported.

A module of the package root, beside ``__main__``, importing only the shared leaf: the root
calls it before its other imports, so nothing of the layers is loaded yet.

On a machine's first run the compiled kernels (:mod:`ppa_dask.ppa.fused`) take several CPU
seconds to compile, and the command's fit waits for them. Importing the package takes about two
seconds of one core, so the root package calls :func:`compile_early` before it imports anything
else: when this process is the ``ppa-dask`` command about to compute on this machine, the child
that compiles the kernels into numba's on-disk cache starts at once, on the other core, and the
command finds it again when it opens its session
(:func:`ppa_dask.ppa.first_run.compile_in_background` names the same child). The child checks
the cache itself and exits at once when it is complete, so the parent never imports numba for
this. Nothing happens in any other process: a library
user's ``import ppa_dask``, a Dask worker (a process with a parent), ``--help``, ``--check``,
``--cluster`` (the workers are elsewhere), ``info`` and ``bench`` (which starts its own commands).

Examples
--------
>>> command_arguments(["/venv/bin/ppa-dask", "fit", "x.zarr", "m.zarr"], [])
['fit', 'x.zarr', 'm.zarr']
>>> command_arguments(["-m", "demo"], ["/usr/bin/python3", "-X", "utf8", "-m", "ppa_dask", "demo"])
['demo']
>>> command_arguments(["-c", "demo"], ["python", "-c", "...", "demo"]) is None
True
>>> computes_here(["demo", "--output", "out"]), computes_here(["run", "p.yaml", "--check"])
(True, False)
"""

from __future__ import annotations

import multiprocessing
import os
import sys

from ppa_dask.utils import standalone

__all__ = [
    "COMPUTING_COMMANDS",
    "FUSED_FILE",
    "command_arguments",
    "computes_here",
    "compile_early",
]

#: the commands that call the compiled kernels in this machine's processes
COMPUTING_COMMANDS = ("demo", "run", "fit", "transform", "inverse")
#: options with which such a command computes nothing here (or its workers run elsewhere)
NOT_COMPUTING_HERE = ("-h", "--help", "--version", "--check", "--cluster")
#: the kernels' file, found without importing the engine (whose package imports the rest)
FUSED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ppa", "fused.py")
_FUSED_MODULE = "ppa_dask.ppa.fused"
_COMMAND = "ppa-dask"
CHILD_FUNCTION = "compile_missing"  # ppa_dask.ppa.first_run.CHILD_FUNCTION (tested equal)


def command_arguments(argv, orig_argv):
    """The command's arguments when this process is the ``ppa-dask`` command (its console script,
    or ``python -m ppa_dask`` while the package is being imported), else None.

    ``argv`` and ``orig_argv`` are :data:`sys.argv` and :data:`sys.orig_argv`."""
    if not argv:
        return None
    name = os.path.splitext(os.path.basename(argv[0]))[0]
    if name == _COMMAND:
        return list(argv[1:])
    if argv[0] == "-m" and "-m" in orig_argv:
        at = orig_argv.index("-m")
        if orig_argv[at + 1 : at + 2] == ["ppa_dask"]:
            return list(argv[1:])
    return None


def computes_here(arguments):
    """Whether the command's arguments ask for a command that calls the kernels in this machine's
    processes (see :data:`COMPUTING_COMMANDS` and :data:`NOT_COMPUTING_HERE`)."""
    if not arguments or arguments[0] not in COMPUTING_COMMANDS:
        return False
    return not any(a.split("=", 1)[0] in NOT_COMPUTING_HERE for a in arguments[1:])


def compile_early(argv=None, orig_argv=None):
    """Start the kernels' compile child when this process is the ``ppa-dask`` command about to
    compute here (not in a process started by another, such as a Dask worker); returns whether
    it did. The child compiles only what numba's on-disk cache lacks
    (:func:`ppa_dask.ppa.fused.compile_missing`)."""
    argv = sys.argv if argv is None else argv
    orig_argv = getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv
    if multiprocessing.parent_process() is not None:
        return False
    arguments = command_arguments(argv, orig_argv)
    if arguments is None or not computes_here(arguments):
        return False
    standalone.start(FUSED_FILE, _FUSED_MODULE, CHILD_FUNCTION)
    return True
