"""Every wait on a scheduler or a batch cluster is bounded: the CLI, run as a real subprocess
(``python -m ppa_dask fit ...``), exits with 2 and one line naming the address or the command
when a scheduler address is a web server, a silent listener or a closed port, and when a
SLURM cluster file cannot start workers (no ``sbatch`` on PATH, an ``sbatch`` that fails).

The subprocesses start together (a module fixture) so the file costs one interpreter start-up,
not five; each is bounded by ``communicate(timeout=...)``, so a hang fails instead of waiting.
"""

import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr

from ppa_dask.cluster import ClusterConnectError, probe_scheduler, read_cluster_config

# starts schedulers (and a web server) in child processes
pytestmark = pytest.mark.cluster


#: Far above the few seconds each case needs (interpreter start-up on a busy machine included),
#: far below "forever".
HANG = 240


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port, deadline=30):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


SLURM_FILE = """\
type: slurm
options:
  cores: 1
  processes: 1
  memory: 1GiB
  scheduler_options: {host: 127.0.0.1, dashboard_address: "127.0.0.1:0"}
scale: {jobs: 1}
worker_timeout: 30
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Start every case's CLI subprocess at once; yield {case: (returncode, stderr, detail)}."""
    base = tmp_path_factory.mktemp("connect")
    data = str(base / "data.zarr")
    z = zarr.create_array(store=data, shape=(50, 3), chunks=(25, 3), dtype="f8")
    z[...] = np.random.default_rng(0).normal(size=(50, 3))

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never says anything
    web_port = _free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(web_port), "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=base,
    )
    closed_port = _free_port()

    cluster_file = base / "slurm.yaml"
    cluster_file.write_text(SLURM_FILE)
    failing = base / "failing-bin"
    failing.mkdir()
    sbatch = failing / "sbatch"
    sbatch.write_text(
        "#!/bin/sh\necho 'sbatch: error: invalid partition specified: normal' >&2\nexit 1\n"
    )
    sbatch.chmod(0o755)
    # a PATH with the system tools but certainly no sbatch
    no_sbatch = base / "no-sbatch-bin"
    no_sbatch.mkdir()

    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    fit = [sys.executable, "-m", "ppa_dask", "fit", data]
    cases = {
        "web": (["--scheduler", f"tcp://127.0.0.1:{web_port}"], env, f"127.0.0.1:{web_port}"),
        "silent": (
            ["--scheduler", f"tcp://127.0.0.1:{silent.getsockname()[1]}"],
            env,
            f"127.0.0.1:{silent.getsockname()[1]}",
        ),
        "closed": (
            ["--scheduler", f"tcp://127.0.0.1:{closed_port}"],
            env,
            f"127.0.0.1:{closed_port}",
        ),
        "no-sbatch": (
            ["--cluster", str(cluster_file)],
            dict(env, PATH=str(no_sbatch)),
            "sbatch",
        ),
        "failing-sbatch": (
            ["--cluster", str(cluster_file), "--worker-timeout", "60"],
            dict(env, PATH=f"{failing}{os.pathsep}{env.get('PATH', '')}"),
            "sbatch",
        ),
    }
    try:
        _wait_listening(web_port)
        procs = {
            name: subprocess.Popen(
                [*fit, str(base / f"{name}.zarr"), *argv, "--connect-timeout", "3"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=child_env,
                cwd=base,
            )
            for name, (argv, child_env, _) in cases.items()
        }
        results = {}
        for name, proc in procs.items():
            try:
                _, err = proc.communicate(timeout=HANG)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                results[name] = (None, "hung", cases[name][2])
                continue
            results[name] = (proc.returncode, err, cases[name][2])
        yield results
    finally:
        web.kill()
        web.wait()
        silent.close()


def _one_line_error(result):
    code, err, _ = result
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ppa-dask: error: "), err
    return lines[0]


def test_a_web_server_is_not_a_scheduler(runs):
    line = _one_line_error(runs["web"])
    assert runs["web"][2] in line and "timed out after 3 s" in line
    assert "not a Dask scheduler" in line


def test_a_silent_listener_times_out(runs):
    line = _one_line_error(runs["silent"])
    assert runs["silent"][2] in line and "timed out after 3 s" in line


def test_a_closed_port_is_refused(runs):
    line = _one_line_error(runs["closed"])
    assert runs["closed"][2] in line and "connection refused" in line


def test_a_cluster_without_its_submission_command(runs):
    line = _one_line_error(runs["no-sbatch"])
    assert "'sbatch' is not on PATH" in line and "slurm.yaml" in line


def test_a_cluster_whose_submission_fails(runs):
    line = _one_line_error(runs["failing-sbatch"])
    assert "'sbatch' exited with status 1" in line and "invalid partition" in line


# ---------------------------------------------------------------------------------------------
# the pieces, in this process
# ---------------------------------------------------------------------------------------------


def test_probe_accepts_a_real_scheduler():
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0") as cluster:
        identity = probe_scheduler(cluster.scheduler_address, timeout=5)
    assert identity["type"] == "Scheduler"


def test_probe_names_a_closed_port():
    address = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(ClusterConnectError, match=f"scheduler {address}: connection refused"):
        probe_scheduler(address, timeout=2)


@pytest.mark.parametrize(
    "key, value, kind",
    [("connect_timeout", 0, "scheduler"), ("worker_timeout", "soon", "slurm")],
)
def test_timeouts_in_cluster_files_are_checked(tmp_path, key, value, kind):
    body = {"scheduler": "address: tcp://127.0.0.1:8786\n", "slurm": "options: {cores: 1}\n"}
    path = tmp_path / "c.yaml"
    path.write_text(f"type: {kind}\n{body[kind]}{key}: {value!r}\n")
    with pytest.raises(ValueError, match=f"{key}: expected a positive number of seconds"):
        read_cluster_config(path)


def test_timeouts_in_cluster_files_are_read(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("type: scheduler\naddress: tcp://127.0.0.1:8786\nconnect_timeout: 2.5\n")
    assert read_cluster_config(path)["connect_timeout"] == 2.5
