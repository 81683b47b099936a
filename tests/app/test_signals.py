"""SIGINT and SIGTERM mid-fit on the clusters that need no batch system: a local cluster the
command starts (``--cluster local``) and a running scheduler it connects to (``--scheduler
tcp://...``, a ``dask scheduler`` and two ``dask worker`` processes started here). The batch
clusters have the same tests against a real SLURM and its PBS wrappers (tests/cluster/test_slurm.py).

Each: exit 130 (SIGINT) or 143 (SIGTERM) with one line within seconds of the signal, no model
and nothing beside it; the local cluster's processes gone with the command; the scheduler that
was not the command's own left running with its workers and none of the fit's tasks. And,
without any batch system, reading a SLURM or PBS file (which imports dask-jobqueue) leaves
Ctrl-C raising KeyboardInterrupt. On Kubernetes (none here) the signal comes while a
KubeCluster, replaced by one that waits, waits for its pods: the same one line.
"""

import os
import signal
import subprocess
import sys
import time

import paths
import processes
import psutil
import pytest
import zarr

from ppa_dask.datasets import make_curved_manifold

# signals sent to the command running in a child process
pytestmark = pytest.mark.slow


ROOT = str(paths.ROOT)
# several passes on 2 workers; the workers are held still while the signal comes
FIT = ["--degree", "1-3", "--n-components", "5", "--seed", "0"]
SIGNALS = [
    (signal.SIGTERM, 143, "terminated (SIGTERM): stopped, nothing saved"),
    (signal.SIGINT, 130, "interrupted (SIGINT): stopped, nothing saved"),
]
#: seconds from the signal to the exit ("within seconds"; a clean close takes 1-3 s here)
BOUND = 20


def _env():
    return dict(os.environ, **processes.ONE_THREAD, PYTHONPATH=ROOT)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    base = tmp_path_factory.mktemp("signal-data")
    X = make_curved_manifold(200_000, n_features=6, random_state=5)
    path = str(base / "x.zarr")
    z = zarr.create_array(store=path, shape=X.shape, chunks=(25_000, 6), dtype="f8")
    z[...] = X
    return path


@pytest.fixture
def scheduler(tmp_path_factory):
    """The address of a ``dask scheduler`` with two ``dask worker`` processes (127.0.0.1),
    fresh for each test."""
    with processes.dask_cluster(tmp_path_factory.mktemp("scheduler"), _env()) as address:
        yield address


def _signal_mid_fit(args, tmp_path, signum, worker_pids=None):
    """Run the command, send ``signum`` mid-fit; the command and seconds to exit.

    The fit takes under a second once the workers have loaded their kernels, so a signal sent
    some time after the fit began could come after its end. Instead the worker processes
    (``worker_pids``, or the command's own children) are suspended as the fit begins, the
    signal is sent while they hold the fit mid-pass, and they are resumed half a second later
    to let the command close its cluster."""
    cmd = processes.Command(args, _env(), str(tmp_path), 300)
    cmd.until("fitting PPA(")
    children = psutil.Process(cmd.proc.pid).children(recursive=True)
    with processes.held_still(worker_pids or [child.pid for child in children]):
        assert cmd.proc.poll() is None, "the command ended before the signal"
        sent = time.monotonic() - cmd.start
        cmd.proc.send_signal(signum)
        time.sleep(0.5)
    code, out, err = cmd.wait()
    # the fit's summary line would say it was over before the signal
    assert not [line for line in out if "] fit: " in line], out
    return code, out, err, cmd.end - sent, children


def _worker_pids(scheduler):
    from distributed import Client

    with Client(scheduler, set_as_default=False, timeout=30) as client:
        return list(processes.worker_pids(client).values())


def _one_error_line(err):
    lines = [line for line in err.splitlines() if line.startswith("ppa-dask: ")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("signum, status, line", SIGNALS)
def test_a_signal_mid_fit_on_a_local_cluster(data, tmp_path, signum, status, line):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    model = out_dir / "model.zarr"
    code, out, err, took, children = _signal_mid_fit(
        ["fit", data, str(model), *FIT, "--cluster", "local"], tmp_path, signum
    )
    assert "local cluster" in "\n".join(out)
    assert len(children) >= 2  # the worker processes (and their nannies) were running
    assert code == status, err
    assert _one_error_line(err) == f"ppa-dask: {line}"
    assert took < BOUND
    assert list(out_dir.iterdir()) == []  # no model, no temporary beside it
    # the cluster went with the command: none of its processes outlived it
    _, alive = psutil.wait_procs(children, timeout=5)
    assert alive == []


@pytest.mark.parametrize("signum, status, line", SIGNALS)
def test_a_signal_mid_fit_on_a_scheduler_address(data, scheduler, tmp_path, signum, status, line):
    from distributed import Client

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    model = out_dir / "model.zarr"
    code, out, err, took, _ = _signal_mid_fit(
        ["fit", data, str(model), *FIT, "--scheduler", scheduler],
        tmp_path,
        signum,
        worker_pids=_worker_pids(scheduler),
    )
    assert f"scheduler {scheduler}" in "\n".join(out)
    assert code == status, err
    assert _one_error_line(err) == f"ppa-dask: {line}"
    assert took < BOUND
    assert list(out_dir.iterdir()) == []
    # not the command's cluster: it runs on with both workers, and the fit's tasks are released
    with Client(scheduler, set_as_default=False, timeout=30) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        deadline = time.monotonic() + 10
        while left := client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)):
            assert time.monotonic() < deadline, f"{left} tasks of the fit left on the scheduler"
            time.sleep(0.2)


@pytest.mark.parametrize("kind", ["slurm", "pbs"])
def test_reading_a_batch_cluster_file_keeps_ctrl_c(kind):
    # importing dask-jobqueue (which reading a SLURM or PBS file does) installs a SIGINT
    # handler calling sys.exit(): Ctrl-C would end the command with status 0 and no word. A
    # fresh interpreter, so that the import really happens; then a real SIGINT to itself.
    script = (
        "import os, signal, sys, time\n"
        # Ctrl-C as in a terminal, also where this test runs in the background (a shell starts
        # background commands with SIGINT ignored, and Python then leaves it ignored)
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from ppa_dask.cluster import read_cluster_config\n"
        "read_cluster_config(sys.argv[1])\n"
        "assert 'dask_jobqueue' in sys.modules\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(10)\n"
        "except KeyboardInterrupt:\n"
        "    print('KeyboardInterrupt')\n"
    )
    path = os.path.join(ROOT, "cluster", f"{kind}.yaml")
    done = subprocess.run(
        [sys.executable, "-c", script, path],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "KeyboardInterrupt", (done.stdout, done.stderr)


@pytest.mark.parametrize("signum, status, line", SIGNALS, ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_a_kubernetes_cluster_starts_is_one_line(
    data, tmp_path, signum, status, line
):
    # No Kubernetes here: dask-kubernetes is imported for real (as --cluster kubernetes.yaml
    # does, whatever its import does to the handlers), and its KubeCluster replaced by one that
    # waits as a cluster waiting for its pods does; the signal comes during that wait.
    script = (
        "import sys, time\n"
        "import dask_kubernetes.operator as operator\n"
        "class WaitingKubeCluster:\n"
        "    def __init__(self, **options):\n"
        "        print('waiting for pods', flush=True)\n"
        "        time.sleep(120)\n"
        "operator.KubeCluster = WaitingKubeCluster\n"
        "from ppa_dask.app.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    model = tmp_path / "m.zarr"
    kube = os.path.join(ROOT, "cluster", "kubernetes.yaml")
    proc = subprocess.Popen(
        [sys.executable, "-c", script, "fit", data, str(model), "--cluster", kube, *FIT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 120
        out = []
        while not out or out[-1].strip() != "waiting for pods":
            assert proc.poll() is None and time.monotonic() < deadline, (out, proc.stderr.read())
            out.append(proc.stdout.readline())
        proc.send_signal(signum)
        sent = time.monotonic()
        stdout, stderr = proc.communicate(timeout=BOUND)
        assert time.monotonic() - sent < BOUND
    finally:
        processes.stop([proc])
    assert proc.returncode == status, (stdout, stderr)
    assert _one_error_line(stderr) == f"ppa-dask: {line}"
    assert "Traceback" not in stderr, stderr
    assert os.listdir(tmp_path) == []  # no model, nothing beside it
