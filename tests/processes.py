"""Child processes for the tests: a Python process killed with SIGKILL at a moment it announces
(what a killed batch job leaves behind), a ``python -m ppa_dask`` command followed line by
line under a bound on its whole run (signals, lost jobs), and a ``dask scheduler`` with two
``dask worker`` processes (:func:`dask_cluster`), stopped by :func:`stop`; and
:func:`held_still`, processes (such as :func:`worker_pids`) suspended while a block runs.
"""

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
#: the ``dask`` command of this environment
DASK = os.path.join(os.path.dirname(sys.executable), "dask")


def stop(procs):
    """Terminate the processes, and kill any still there 20 s later (bounded waits only)."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=20)


@contextlib.contextmanager
def held_still(pids):
    """The processes ``pids`` suspended while the block runs, resumed after (those that are
    gone by then excepted): a fit's workers held, so that a fault aimed at the fit falls
    inside it, however fast it is (on workers that have loaded their kernels a test's fit
    ends within a second of its start)."""
    import psutil

    held = [psutil.Process(pid) for pid in pids]
    try:
        for process in held:
            process.suspend()
        yield
    finally:
        # also after a failed suspension: none is left stopped
        for process in held:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.resume()


def worker_pids(client):
    """The process id of each worker of ``client``'s scheduler: ``{worker address: pid}``."""
    return client.run(os.getpid)


@contextlib.contextmanager
def dask_cluster(folder, env, dashboard=False):
    """A ``dask scheduler`` and two one-thread ``dask worker`` processes (no nanny: a worker is
    the process itself, its BLAS variables those of ``env``) on 127.0.0.1, run in ``folder``
    and writing to ``folder/cluster.log``; yields the scheduler's address once both workers
    are in, and stops the workers, then the scheduler, on exit. ``dashboard``: the scheduler
    serves its dashboard on a free port."""
    scheduler_file = os.path.join(folder, "scheduler.json")
    logs = open(os.path.join(folder, "cluster.log"), "w")  # noqa: SIM115 - closed on exit
    run = dict(stdout=logs, stderr=subprocess.STDOUT, env=env, cwd=folder)
    board = ["--dashboard-address", "127.0.0.1:0"] if dashboard else ["--no-dashboard"]
    procs = [
        subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", *board]
            + ["--scheduler-file", scheduler_file],
            **run,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(scheduler_file) or not Path(scheduler_file).read_text().strip():
            assert procs[0].poll() is None and time.monotonic() < deadline, "no scheduler"
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written in one go, but give it a moment
        with open(scheduler_file) as f:
            address = json.load(f)["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for i in range(2):
            procs.append(
                subprocess.Popen(
                    [DASK, "worker", address, "--name", f"w{i}", "--nthreads", "1"]
                    + ["--host", "127.0.0.1", "--no-dashboard", "--no-nanny"]
                    + ["--memory-limit", "1GiB"]
                    + ["--local-directory", os.path.join(folder, f"w{i}")],
                    **run,
                )
            )
        from distributed import Client

        with Client(address, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=90)
        yield address
    finally:
        stop(procs[1:])
        stop(procs[:1])
        logs.close()


def kill_when_printed(code, args, marker, timeout=60):
    """Run ``python -c code *args``; SIGKILL it when it prints the line ``marker``.

    Returns what it printed; fails unless it died of that SIGKILL (bounded waits only).
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, **ONE_THREAD),
    )
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.strip() == marker:
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(timeout=timeout)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, "".join(seen)
    return seen


class Command:
    """``python -m ppa_dask ARGS`` in a subprocess: its stdout lines as they come (with the
    seconds since the start), stderr in a file, a bound on the whole run."""

    def __init__(self, args, env, cwd, timeout):
        self.deadline = time.monotonic() + timeout
        self.start = time.monotonic()
        self.stderr_path = os.path.join(cwd, "stderr.txt")
        self._stderr = open(self.stderr_path, "w")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ppa_dask", *args],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            cwd=cwd,
            env=env,
        )
        self.lines = []
        self._queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self._queue.put((time.monotonic() - self.start, line.rstrip("\n")))
        self._queue.put(None)

    def until(self, text):
        """Wait for a line containing ``text``; returns its time (fails at the deadline)."""
        while True:
            left = self.deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=max(left, 0.01))
            except queue.Empty:
                self.kill()
                pytest.fail(f"no line with {text!r} in time:\n" + "\n".join(self.out_lines()))
            if item is None:
                pytest.fail(f"ended without a line with {text!r}:\n" + "\n".join(self.out_lines()))
            self.lines.append(item)
            if text in item[1]:
                return item[0]

    def out_lines(self):
        return [line for _, line in self.lines]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()

    def wait(self):
        """The exit status, all stdout lines and the stderr text (killed at the deadline)."""
        try:
            code = self.proc.wait(timeout=max(self.deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait(timeout=30)
            pytest.fail("the command did not end in time:\n" + "\n".join(self.out_lines()))
        self.end = time.monotonic() - self.start
        while True:
            item = self._queue.get(timeout=30)
            if item is None:
                break
            self.lines.append(item)
        self._stderr.close()
        with open(self.stderr_path) as f:
            err = f.read()
        return code, self.out_lines(), err
