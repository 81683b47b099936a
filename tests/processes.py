"""A child Python process killed with SIGKILL at a moment it announces (for the tests of what
a killed batch job leaves behind)."""

import os
import signal
import subprocess
import sys

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
