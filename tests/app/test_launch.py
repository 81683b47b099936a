"""The ppa-dask command starts compiling its kernels before the package's imports
(ppa_dask.launch): on a machine's first run the compile overlaps the two seconds of imports
instead of following them, and nothing else ever starts it."""

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

from ppa_dask import launch
from ppa_dask.ppa import first_run, fused

# a process that is the console script `ppa-dask ARGS`, recording (with an audit hook, set before
# anything of the package is imported) the order of its module imports and its child processes
AS_THE_COMMAND = textwrap.dedent(
    """
    import json, sys
    events = []
    def hook(event, args):
        if event == "import":
            events.append(("import", args[0]))
        elif event == "subprocess.Popen":
            events.append(("popen", " ".join(map(str, args[1]))))
    sys.addaudithook(hook)
    sys.argv = ["/venv/bin/ppa-dask", *sys.argv[1:]]
    import ppa_dask
    from ppa_dask.ppa import fused
    from ppa_dask import launch
    from ppa_dask.ppa import first_run
    started = first_run.compile_in_background()
    record = first_run.background_record()
    popens = [i for i, e in enumerate(events) if e[0] == "popen"]
    compile_child = [i for i in popens if launch.FUSED_FILE in events[i][1]]
    first = lambda name: next(i for i, e in enumerate(events) if e == ("import", name))
    print(json.dumps(dict(
        started=started, record=record, popens=len(popens), children=len(compile_child),
        child_at=compile_child[0] if compile_child else None,
        sklearn_at=first("sklearn"), numba_at=first("numba"),
    )))
    """
)


def as_the_command(cache, *arguments):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    env.pop("NUMBA_DISABLE_JIT", None)
    done = subprocess.run(
        [sys.executable, "-c", AS_THE_COMMAND, *arguments],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_first_command_compiles_in_a_child_started_before_the_package_imports(tmp_path):
    cache = tmp_path / "numba-cache"
    first = as_the_command(cache, "fit", "x.zarr", "model.zarr")
    # one child, started before scikit-learn (the bulk of the imports) and numba were imported,
    # and found again by the command's session instead of a second one
    assert first["children"] == 1 and first["started"] == "process"
    assert first["child_at"] < first["sklearn_at"] and first["child_at"] < first["numba_at"]
    assert sorted(first["record"]["compiled"]) == sorted(fused.SIGNATURES)
    # the next command on this machine: the child finds the cache complete and compiles nothing
    again = as_the_command(cache, "demo", "--output", str(tmp_path / "out"))
    assert again["children"] == 1 and again["record"] is None
    # a command that computes nothing here starts no child at all
    for arguments in (("info", "model.zarr"), ("run", "p.yaml", "--check"), ("fit", "--help")):
        assert as_the_command(cache, *arguments)["popens"] == 0, arguments


@pytest.mark.parametrize(
    ("argv", "orig_argv", "starts"),
    [
        (["/venv/bin/ppa-dask", "demo"], [], True),
        (["/venv/bin/ppa-dask", "run", "p.yaml", "--output", "o"], [], True),
        (["/venv/bin/ppa-dask", "transform", "m", "x", "o", "--scheduler", "threads"], [], True),
        (
            ["-m", "fit", "x", "m"],
            ["python", "-X", "utf8", "-m", "ppa_dask", "fit", "x", "m"],
            True,
        ),
        (["/venv/bin/ppa-dask", "fit", "x", "m", "--cluster", "slurm.yaml"], [], False),
        (["/venv/bin/ppa-dask", "fit", "x", "m", "--cluster=slurm.yaml"], [], False),
        (["/venv/bin/ppa-dask", "run", "p.yaml", "--check"], [], False),
        (["/venv/bin/ppa-dask", "demo", "-h"], [], False),
        (["/venv/bin/ppa-dask", "info", "m"], [], False),
        (["/venv/bin/ppa-dask", "bench"], [], False),
        (["/venv/bin/ppa-dask"], [], False),
        (["-m", "demo"], ["python", "-m", "other_package", "demo"], False),
        (["-c", "demo"], ["python", "-c", "import ppa_dask", "demo"], False),
        (["my_script.py", "demo"], ["python", "my_script.py", "demo"], False),
        ([], [], False),
    ],
)
def test_only_the_command_about_to_compute_here_starts_the_compile(
    monkeypatch, argv, orig_argv, starts
):
    calls = []
    monkeypatch.setattr(launch.standalone, "start", lambda *a: calls.append(a))
    assert launch.compile_early(argv, orig_argv) is starts
    assert calls == (
        [(launch.FUSED_FILE, "ppa_dask.ppa.fused", "compile_missing")] if starts else []
    )


def test_a_process_started_by_another_never_starts_it(monkeypatch):
    # a Dask worker of a LocalCluster is spawned with its parent's sys.argv
    calls = []
    monkeypatch.setattr(launch.standalone, "start", lambda *a: calls.append(a))
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    assert launch.compile_early(["/venv/bin/ppa-dask", "demo"], []) is False and calls == []


def test_the_child_is_the_kernels_file_and_function_the_engine_names():
    assert os.path.samefile(launch.FUSED_FILE, fused.__file__)
    assert launch.CHILD_FUNCTION == first_run.CHILD_FUNCTION
