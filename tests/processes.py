"""Child processes for the tests: a Python process killed with SIGKILL at a moment it announces
(what a killed batch job leaves behind), and a ``python -m ppa_dask`` command followed line by
line under a bound on its whole run (signals, lost jobs).
"""

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


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
