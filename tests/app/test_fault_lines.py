"""Every fault around a command ends in one line, exit status 2, naming what failed and what
was kept, and leaves nothing half-written.

The faults are real: a ``dask scheduler`` process killed with SIGKILL in the middle of
``ppa-dask fit``, a worker (behind its nanny) killed until distributed gives up on a task, a
device that fills up (a 2 MB tmpfs mounted for the test) and a file-size limit (RLIMIT_FSIZE
in the child, which makes writes fail with EFBIG) during ``transform`` for every output format,
write permission taken away mid-write (``chattr -R +i`` on the output's folder: root, which
permission bits do not stop, cannot write into an immutable folder either), a remote (HTTP)
store whose server cuts its connections mid-read.

Each test checks its line against the ``fault`` row of the error table (docs/guide/errors.md)
it covers: those rows need a real fault, so tests/docs/test_error_table.py does not run them;
``test_every_fault_row_has_its_test`` ties each row to the test here.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import queue
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import paths
import pytest
from processes import ONE_THREAD, held_still, worker_pids

from ppa_dask import PPA, datasets
from ppa_dask.store import save_model

# kills schedulers, workers and connections of real clusters mid-fit
pytestmark = pytest.mark.cluster


PAGE = paths.ERRORS_PAGE
FAULT_ROW = re.compile(
    r"^\|\s*fault\s*\|\s*`([\w-]+)`\s*\|\s*(.+?)\s*\|\s*`(.+?)`\s*\|\s*(\d+)\s*\|\s*$"
)
#: The fault rows of the table and the test covering each.
COVERED = {
    "scheduler-lost": "test_scheduler_killed_mid_fit",
    "connection-lost": "test_connection_to_the_scheduler_cut_mid_fit",
    "worker-killed": "test_worker_killed_beyond_the_retries",
    "disk-full": "test_full_disk_during_transform",
    "file-size-limit": "test_file_size_limit_during_transform",
    "permission-lost": "test_write_permission_lost_mid_write",
    "remote-read-cut": "test_remote_store_read_interrupted",
}
FORMATS = {
    # output suffix -> the model it needs (a table model, or one fitted on an xarray cube)
    "zarr": "table",
    "csv": "table",
    "parquet": "table",
    "cube.zarr": "cube",
    "nc": "cube",
    "tif": "cube",
}


def fault_rows():
    rows = {}
    for line in PAGE.read_text().splitlines():
        match = FAULT_ROW.match(line)
        if match:
            key, _, told, status = match.groups()
            rows[key] = (told, int(status))
    return rows


def assert_row(key, err, **names):
    """``err`` (the command's stderr) is one line holding the row's words, in order."""
    told, status = fault_rows()[key]
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ppa-dask: error: "), lines
    at = 0
    for part in re.split(r"\s*…\s*", told.format(**names)):
        found = lines[0].find(part, at)
        assert found >= 0, (part, lines[0])
        at = found + len(part)
    return status


def test_every_fault_row_has_its_test():
    rows = fault_rows()
    assert set(rows) == set(COVERED), (sorted(rows), sorted(COVERED))
    for name in COVERED.values():
        assert callable(globals().get(name)), name


# ---------------------------------------------------------------------------------------------
# the command in a child process
# ---------------------------------------------------------------------------------------------


def child_env():
    root = str(paths.ROOT)
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, **ONE_THREAD, PYTHONPATH=root + (os.pathsep + path if path else ""))


class Command:
    """``python -m ppa_dask ARGS`` in a child; its stdout lines read as they come."""

    def __init__(self, args, cwd, preexec_fn=None, user=None):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ppa_dask", *map(str, args)],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
            preexec_fn=preexec_fn,
            user=user,
        )
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, text, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            self.seen.append(line)
            if text in line:
                return
        raise AssertionError(f"no {text!r} in {self.seen} / {self.finish(5)}")

    def finish(self, timeout):
        """Wait (bounded) for the exit; returns (status, stderr)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            raise AssertionError(f"the command did not end within {timeout} s") from None
        return self.proc.returncode, self.proc.stderr.read()


def run_command(args, cwd, timeout=300, **options):
    return Command(args, cwd, **options).finish(timeout)


def assert_no_leftovers(folder, allowed=()):
    """Nothing in ``folder`` but ``allowed``: no output, no temporary sibling."""
    left = sorted(set(os.listdir(folder)) - set(allowed))
    assert left == [], left


# ---------------------------------------------------------------------------------------------
# inputs and models
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A table (100,000 x 6, 10 chunks) with its model, and a cube (16 bands of 256 x 256
    pixels, in a Zarr group) with a model fitted on it through the xarray adapter."""
    root = tmp_path_factory.mktemp("inputs")
    table = datasets.write_zarr(root / "table.zarr", 100_000, n_features=6, random_state=0,
                                chunk_rows=10_000)  # fmt: skip
    X = np.random.default_rng(0).normal(size=(500, 6))
    save_model(PPA(degree=2, random_state=0).fit(X), root / "table-model.zarr")
    cube = datasets.make_cube(n_bands=16, ny=256, nx=256, random_state=0,
                              path=root / "cube.zarr")  # fmt: skip
    model = PPA(degree=2, random_state=0).fit(cube["reflectance"][:, :64, :64],
                                              feature_dim="band")  # fmt: skip
    save_model(model, root / "cube-model.zarr")
    return {
        "table": (root / "table-model.zarr", table, []),
        "cube": (root / "cube-model.zarr", root / "cube.zarr", ["--variable", "reflectance"]),
    }


@pytest.fixture(scope="module")
def fit_input(tmp_path_factory):
    """A table whose fit on one worker takes several seconds a step (400,000 x 8)."""
    root = tmp_path_factory.mktemp("fit")
    return datasets.write_zarr(root / "big.zarr", 400_000, n_features=8, random_state=0,
                               chunk_rows=20_000)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the full disk and the file-size limit, for every output format
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def full_disk(tmp_path):
    """A 2 MB tmpfs (the outputs are 4-8 MB). Needs root, for mount(8)."""
    point = tmp_path / "small"
    point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"mount (root) could not mount a tmpfs: {done.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True)


def transform_args(inputs, fmt, out):
    model, data, options = inputs[FORMATS[fmt]]
    return ["transform", model, data, out, *options, "--scheduler", "threads"]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_full_disk_during_transform(inputs, full_disk, fmt):
    out = full_disk / f"out.{fmt}"
    status, err = run_command(transform_args(inputs, fmt, out), full_disk)
    assert status == assert_row("disk-full", err, out=out.name), err
    assert_no_leftovers(full_disk)


def _file_size_limit(limit):
    # in the child before it runs python: writes past ``limit`` bytes fail with EFBIG (the
    # signal a process gets for them by default, SIGXFSZ, is ignored)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_file_size_limit_during_transform(inputs, tmp_path, fmt):
    out = tmp_path / f"out.{fmt}"
    status, err = run_command(
        transform_args(inputs, fmt, out),
        tmp_path,
        preexec_fn=functools.partial(_file_size_limit, 100_000),
    )
    assert status == assert_row("file-size-limit", err, out=out.name), err
    assert_no_leftovers(tmp_path)


def test_the_limits_leave_a_fitting_write_alone(inputs, tmp_path):
    # the same command with room enough writes its output (the faults above are the limits')
    out = tmp_path / "out.parquet"
    status, err = run_command(
        transform_args(inputs, "parquet", out),
        tmp_path,
        preexec_fn=functools.partial(_file_size_limit, 50_000_000),
    )
    assert status == 0, err
    assert sorted(os.listdir(tmp_path)) == ["out.parquet"]


# ---------------------------------------------------------------------------------------------
# write permission lost mid-write
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def long_write(tmp_path_factory):
    """A table model and a 2,000,000 x 6 input of 100 chunks: its transform writes ~90 MB to
    Zarr, a second or more, so the permission can be taken away in the middle of it."""
    root = tmp_path_factory.mktemp("long")
    data = datasets.write_zarr(root / "big.zarr", 2_000_000, n_features=6, random_state=0,
                               chunk_rows=20_000)  # fmt: skip
    X = np.random.default_rng(0).normal(size=(500, 6))
    save_model(PPA(degree=2, random_state=0).fit(X), root / "model.zarr")
    return root / "model.zarr", data


def _immutable(path, on):
    return subprocess.run(
        ["chattr", "-R", "+i" if on else "-i", str(path)], capture_output=True, text=True
    )


def test_write_permission_lost_mid_write(long_write, tmp_path):
    import shutil

    if shutil.which("chattr") is None:
        pytest.skip("chattr (e2fsprogs) is not installed")
    folder = tmp_path / "outputs"
    folder.mkdir()
    probe = folder / "probe"
    probe.mkdir()
    done = _immutable(probe, True)
    _immutable(probe, False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is refused here: {done.stderr.strip()}")
    probe.rmdir()
    model, data = long_write
    out = folder / "o.zarr"
    command = Command(["transform", model, data, out, "--scheduler", "threads"], tmp_path)
    try:
        # the permission goes once the temporary sibling holds its first chunks
        deadline = time.monotonic() + 120
        while not any(
            p.name.startswith(".o.zarr.tmp-") and (p / "c").is_dir() for p in folder.iterdir()
        ):
            assert command.proc.poll() is None, command.finish(5)
            assert time.monotonic() < deadline, "the write did not start within 120 s"
            time.sleep(0.02)
        assert _immutable(folder, True).returncode == 0
        status, err = command.finish(120)
        # while the folder is immutable: no output, only the temporary the line names
        (left,) = os.listdir(folder)
        assert not out.exists()
    finally:
        _immutable(folder, False)
    assert status == assert_row("permission-lost", err, out=out.name), err
    # the line names the write that was denied (a chunk, not the clean-up after it) and the
    # temporary left behind (its removal was denied too)
    denied, kept = err.split("; ", 1)
    assert f"{left}/c/" in denied and f"{left}'" in kept, err
    # the chunks of the temporary are not all there: the write was cut short, not finished
    assert len(list((folder / left / "c").iterdir())) < 100
    assert (folder / left / "ppa-dask-writer.json").exists()


# ---------------------------------------------------------------------------------------------
# a scheduler and a worker in their own processes
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def cluster_processes(tmp_path, **scheduler_env):
    """A ``dask scheduler`` and one ``dask worker`` (one thread, behind a nanny) as child
    processes; yields the scheduler's address and the worker's pid lookup."""
    from distributed import Client

    file = tmp_path / "scheduler.json"
    env = dict(child_env(), **scheduler_env)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(file),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
    ]
    try:
        deadline = time.monotonic() + 60
        while not file.exists() or not file.read_text().strip():
            assert time.monotonic() < deadline, "the scheduler did not start within 60 s"
            time.sleep(0.2)
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "distributed.cli.dask_worker",
                    "--scheduler-file",
                    str(file),
                    "--nthreads",
                    "1",
                    "--nworkers",
                    "1",
                    "--no-dashboard",
                    "--memory-limit",
                    "2GiB",
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
        )
        address = json.loads(file.read_text())["address"]
        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=90)
            yield address, client, procs[0]
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait(timeout=30)


def test_scheduler_killed_mid_fit(fit_input, tmp_path):
    model = tmp_path / "out" / "m.zarr"
    with cluster_processes(tmp_path) as (address, client, scheduler):
        workers = list(worker_pids(client).values())
        command = Command(["fit", fit_input, model, "--scheduler", address], tmp_path)
        command.wait_for("fitting PPA")
        with held_still(workers):
            time.sleep(0.5)  # the fit's first tasks on the held workers
            scheduler.kill()
        t0 = time.monotonic()
        status, err = command.finish(120)
        took = time.monotonic() - t0
    assert status == assert_row("scheduler-lost", err, scheduler=address, model=model), err
    assert took < 60, took
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


class _Proxy:
    """A TCP relay in front of the scheduler, whose connections ``cut`` closes."""

    def __init__(self, target):
        import socket

        host, port = target.removeprefix("tcp://").rsplit(":", 1)
        self.target = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self.server.getsockname()[1]}"
        self.sockets = []
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import socket

        while self.open:
            try:
                a, _ = self.server.accept()
            except OSError:
                return
            b = socket.create_connection(self.target)
            self.sockets += [a, b]
            for src, dst in ((a, b), (b, a)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass

    def cut(self):
        import socket

        self.open = False
        self.server.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def test_connection_to_the_scheduler_cut_mid_fit(fit_input, tmp_path):
    # the scheduler lives on; the command's connection to it (through a relay) is cut and
    # cannot be made again
    model = tmp_path / "m.zarr"
    with cluster_processes(tmp_path) as (address, client, _):
        workers = list(worker_pids(client).values())
        proxy = _Proxy(address)
        command = Command(["fit", fit_input, model, "--scheduler", proxy.address], tmp_path)
        command.wait_for("fitting PPA")
        with held_still(workers):
            time.sleep(0.5)  # the fit's first tasks on the held workers
            proxy.cut()
        status, err = command.finish(120)
    assert status == assert_row("connection-lost", err, scheduler=proxy.address, model=model)
    assert not model.exists()


def test_worker_killed_beyond_the_retries(fit_input, tmp_path):
    # the scheduler gives up on a task after the first death of a worker running it
    model = tmp_path / "m.zarr"
    with cluster_processes(tmp_path, DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0") as (
        address,
        client,
        _,
    ):
        workers = list(worker_pids(client).values())
        command = Command(["fit", fit_input, model, "--scheduler", address], tmp_path)
        command.wait_for("fitting PPA")
        # held, the first worker cannot finish the fit before it is killed, its task given
        with held_still(workers):
            time.sleep(0.5)
            for pid in workers:
                os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        # kill the worker (its nanny starts another) until a death falls on a running task
        while command.proc.poll() is None and time.monotonic() - t0 < 120:
            time.sleep(0.5)
            with contextlib.suppress(Exception):
                for pid in client.run(os.getpid, wait=True).values():
                    os.kill(pid, signal.SIGKILL)
        status, err = command.finish(60)
    assert status == assert_row("worker-killed", err, model=model), err
    assert not model.exists()


# ---------------------------------------------------------------------------------------------
# a remote store whose server stops answering mid-read
# ---------------------------------------------------------------------------------------------


def test_remote_store_read_interrupted(inputs, tmp_path):
    model, table, _ = inputs["table"]
    served = {"chunks": 0}

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(Path(table).parent), **kwargs)

        def log_message(self, *args):
            pass

        def do_GET(self):
            if "/c/" in self.path:
                served["chunks"] += 1
                if served["chunks"] > 3:  # the server goes away after three chunks
                    self.connection.close()
                    self.close_connection = True
                    return
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{Path(table).name}"
    out = tmp_path / "out.zarr"
    try:
        status, err = run_command(
            ["transform", model, url, out, "--scheduler", "threads"], tmp_path, timeout=180
        )
    finally:
        server.shutdown()
        server.server_close()
    assert served["chunks"] > 3
    assert status == assert_row("remote-read-cut", err, url=url, out=out.name), err
    assert_no_leftovers(tmp_path)
