"""Batch clusters for real: the CLI against a one-node SLURM (cluster/testing/slurm-up.sh), its
PBS-style wrappers (qsub/qstat/qdel of slurm-wlm-torque), and the faults batch users meet: lost
jobs, signals, jobs that die at start, jobs that cannot start, malformed cluster files.

The SLURM is the one named by ``PPA_DASK_SLURM`` (the folder slurm-up.sh printed; .ci/run starts
one), else one started here for the module, in a folder of its own under /tmp, and stopped after
it (tests/slurm_service.py). Nothing is installed here: where SLURM's programs are missing (or
this is not root, which the daemons need) the tests skip, saying how to get them
(tests/system_programs.py; under ``CI=true`` the skip fails the run). Every command runs in a
subprocess under a time bound; every test's jobs carry a name of their own and are cancelled
after it whatever happened.
"""

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import paths
import processes
import pytest
import slurm_service
import yaml
import zarr

from ppa_dask import store
from ppa_dask.app.cli import main
from ppa_dask.datasets import make_curved_manifold

# also a cluster: the jobs start Dask workers
pytestmark = [pytest.mark.slurm, pytest.mark.cluster]

ROOT = str(paths.ROOT)
FIT = ["--degree", "2", "--n-components", "4", "--seed", "0"]
ONE_BLAS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def slurm():
    """The environment variables that reach the one-node SLURM (SLURM_CONF, ...)."""
    folder, started = slurm_service.slurm_folder()
    try:
        yield slurm_service.read_env(folder)
    finally:
        if started:
            slurm_service.stop_slurm(folder)


def _env(slurm):
    return dict(os.environ, **slurm, **ONE_BLAS, PYTHONPATH=ROOT)


def _squeue(slurm, name):
    """The ids and states of the jobs named ``name`` that SLURM still lists."""
    done = subprocess.run(
        ["squeue", "--noheader", "--states=all", "--name", name, "--format=%i %T"],
        capture_output=True,
        text=True,
        timeout=30,
        env=_env(slurm),
        check=True,
    )
    return [line.split() for line in done.stdout.splitlines() if line.strip()]


def _alive(slurm, name):
    ended = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED"}
    return [job for job in _squeue(slurm, name) if job[1] not in ended]


def _job_pids(slurm, jobs):
    """The process ids of running jobs on this one node (``scontrol listpids``: a header line,
    then one process a line, its id first)."""
    pids = []
    for job in jobs:
        listed = subprocess.run(
            ["scontrol", "listpids", job],
            env=_env(slurm),
            timeout=30,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.splitlines()[1:]
        pids += [int(f[0]) for f in map(str.split, listed) if f and f[0].isdigit()]
    return pids


@pytest.fixture
def job_name(slurm, request):
    """A name for the test's jobs; whatever is left of them is cancelled afterwards."""
    name = "ppa-t-" + re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[-30:].strip("-")
    yield name
    subprocess.run(["scancel", "--name", name], env=_env(slurm), timeout=30, check=False)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A small Zarr array and the model fitted from it in this process (the local result)."""
    base = tmp_path_factory.mktemp("slurm-data")
    X = make_curved_manifold(4000, n_features=6, random_state=5)
    path = str(base / "x.zarr")
    z = zarr.create_array(store=path, shape=X.shape, chunks=(1000, 6), dtype="f8")
    z[...] = X
    local = str(base / "local.zarr")
    assert main(["fit", path, local, *FIT, "--scheduler", "threads"]) == 0
    return path, store.load_model(local), X


def _cluster_file(tmp_path, job_name, kind="slurm", jobs=2, **top):
    options = {
        "job_name": job_name,
        "queue": "debug",
        "walltime": "00:15:00",
        "cores": 1,
        "processes": 1,
        "memory": "1GiB",
        "python": sys.executable,  # the venv of this checkout
        "local_directory": str(tmp_path / "scratch"),
        "log_directory": str(tmp_path / "logs"),
        # the checkout's ppa_dask on the workers too
        "job_script_prologue": [f"export PYTHONPATH={ROOT}", *top.pop("prologue", [])],
        "scheduler_options": {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"},
    }
    if kind == "pbs":
        options["resource_spec"] = "nodes=1:ppn=1,mem=1gb"
    options.update(top.pop("options", {}))
    config = {"type": kind, "options": options, "scale": {"jobs": jobs}, **top}
    config.setdefault("job_check_interval", 1)
    path = tmp_path / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


def Command(args, slurm, cwd, timeout):  # noqa: N802 - reads as the class it makes
    """``python -m ppa_dask ARGS`` against the test SLURM (processes.Command)."""
    return processes.Command(args, _env(slurm), cwd, timeout)


def _same_model(path, reference, X):
    model = store.load_model(path)
    assert model.degrees_.tolist() == reference.degrees_.tolist()
    np.testing.assert_allclose(model.transform(X), reference.transform(X), atol=1e-8)


def _error_line(err):
    """The command's one error line (distributed's log lines on stderr aside)."""
    lines = [line for line in err.splitlines() if line.startswith("ppa-dask: ")]
    assert len(lines) == 1, err
    return lines[0]


# ---------------------------------------------------------------------------------------------
# runs that work
# ---------------------------------------------------------------------------------------------


def test_a_fit_on_slurm_equals_the_local_fit_and_a_job_without_room_is_reported(
    slurm, job_name, data, tmp_path
):
    path, reference, X = data
    # 3 jobs of 1 core on a node of 2 cores: the third waits for Resources, and says so
    cluster = _cluster_file(tmp_path, job_name, jobs=3)
    model = str(tmp_path / "model.zarr")
    cmd = Command(["fit", path, model, *FIT, "--cluster", cluster], slurm, tmp_path, 240)
    code, out, err = cmd.wait()
    assert code == 0, err
    text = "\n".join(out)
    assert "is pending: Resources" in text
    assert text.count("worker connected") >= 2
    _same_model(model, reference, X)
    assert _alive(slurm, job_name) == []  # cancelled at close, the pending one too


def test_a_pipeline_run_on_slurm_equals_the_local_run(slurm, job_name, tmp_path):
    config = {
        "name": "p",
        "seed": 2,
        "data": {"source": "generated", "n_samples": 4000, "n_features": 5, "chunk_rows": 1000},
        "model": {"degree": 2, "n_components": 3},
        "plots": {"components": 0, "dpi": 30},
    }
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(yaml.safe_dump(config))
    cluster = _cluster_file(tmp_path, job_name)
    on, local = tmp_path / "on-slurm", tmp_path / "local"
    cmd = Command(
        ["run", str(pipeline), "--cluster", cluster, "--output", str(on)], slurm, tmp_path, 240
    )
    code, out, err = cmd.wait()
    assert code == 0, err
    assert main(["run", str(pipeline), "--scheduler", "threads", "--output", str(local)]) == 0
    for stage, name in [("02-preprocess", "samples.zarr"), ("04-transform", "components.zarr")]:
        a = store.open_array(str(on / stage / name)).compute()
        b = store.open_array(str(local / stage / name)).compute()
        np.testing.assert_allclose(a, b, atol=1e-9)
    assert _alive(slurm, job_name) == []


def test_the_pbs_file_runs_through_the_torque_wrappers(slurm, job_name, data, tmp_path):
    path, reference, X = data
    cluster = _cluster_file(tmp_path, job_name, kind="pbs")
    model = str(tmp_path / "model.zarr")
    cmd = Command(["fit", path, model, *FIT, "--cluster", cluster], slurm, tmp_path, 240)
    code, out, err = cmd.wait()
    assert code == 0, err
    assert "worker connected" in "\n".join(out)  # qstat saw the jobs the workers run in
    _same_model(model, reference, X)
    assert _alive(slurm, job_name) == []  # qdel at close


# ---------------------------------------------------------------------------------------------
# lost jobs
# ---------------------------------------------------------------------------------------------


def test_jobs_cancelled_mid_fit_are_replaced_and_the_model_is_the_same(
    slurm, job_name, data, tmp_path
):
    path, reference, X = data
    cluster = _cluster_file(tmp_path, job_name)
    model = str(tmp_path / "model.zarr")
    cmd = Command(["fit", path, model, *FIT, "--cluster", cluster], slurm, tmp_path, 240)
    cmd.until("step 2 of")
    first = [job for job, _ in _alive(slurm, job_name)]
    assert len(first) == 2
    subprocess.run(["scancel", *first], env=_env(slurm), timeout=30, check=True)
    code, out, err = cmd.wait()
    assert code == 0, err
    text = "\n".join(out)
    for job in first:
        assert f"job {job} " in text and "submitting a replacement (1 of at most 3)" in text
    connected = [line for line in out if "worker connected" in line]
    assert len(connected) == 4  # the two first jobs and their two replacements
    _same_model(model, reference, X)
    assert _alive(slurm, job_name) == []


def test_no_restart_allowed_ends_with_one_line_naming_the_lost_jobs(
    slurm, job_name, data, tmp_path
):
    path, _, _ = data
    cluster = _cluster_file(tmp_path, job_name, max_job_restarts=0)
    model = tmp_path / "model.zarr"
    cmd = Command(["fit", path, str(model), *FIT, "--cluster", cluster], slurm, tmp_path, 180)
    cmd.until("step 2 of")
    first = [job for job, _ in _alive(slurm, job_name)]
    subprocess.run(["scancel", *first], env=_env(slurm), timeout=30, check=True)
    lost = time.monotonic() - cmd.start
    code, _, err = cmd.wait()
    assert code == 2
    line = _error_line(err)
    assert "max_job_restarts (0) is reached" in line
    for job in first:
        assert f"job {job} CANCELLED, log {tmp_path / 'logs'}" in line
    assert cmd.end - lost < 30  # noticed within seconds, not a hang
    assert not model.exists()
    assert _alive(slurm, job_name) == []


def test_lost_jobs_whose_replacements_cannot_start_end_the_run_at_the_worker_timeout(
    slurm, job_name, data, tmp_path
):
    path, _, _ = data
    cluster = _cluster_file(tmp_path, job_name)
    model = tmp_path / "model.zarr"
    args = ["fit", path, str(model), *FIT, "--cluster", cluster, "--worker-timeout", "8"]
    cmd = Command(args, slurm, tmp_path, 180)
    cmd.until("fitting PPA(")
    time.sleep(1.0)
    first = [job for job, _ in _alive(slurm, job_name)]
    assert len(first) == 2
    # the node reserved for maintenance from now on: the replacements cannot start
    reservation = f"{job_name}-maint"[-40:]
    control = ["scontrol", "create", f"reservation={reservation}", "starttime=now"]
    control += ["duration=10", "nodes=ALL", "users=root", "flags=maint,ignore_jobs"]
    subprocess.run(control, env=_env(slurm), timeout=30, check=True, capture_output=True)
    try:
        subprocess.run(["scancel", *first], env=_env(slurm), timeout=30, check=True)
        lost = time.monotonic() - cmd.start
        code, out, err = cmd.wait()
    finally:
        subprocess.run(
            ["scontrol", "delete", f"reservation={reservation}"],
            env=_env(slurm),
            timeout=30,
            check=False,
        )
    assert code == 2
    text = "\n".join(out)
    for job in first:
        assert re.search(rf"job {job} \(\S+\) ended \(CANCELLED\) before the work did", text)
    assert text.count("submitting a replacement (1 of at most 3)") == 2, text
    assert "is pending: ReqNodeNotAvail" in text, text
    line = _error_line(err)
    assert "no worker connected for 8 s" in line, line
    # the jobs named are the replacements, with their last state and log file
    named = re.findall(r"job (\d+) PENDING \(ReqNodeNotAvail[^)]*\), log (\S+)", line)
    assert len(named) == 2 and not {job for job, _ in named} & set(first), line
    assert all(log.startswith(str(tmp_path / "logs")) for _, log in named), line
    assert cmd.end - lost < 8 + 30  # the worker timeout, then seconds
    assert not model.exists()
    assert _alive(slurm, job_name) == []


# ---------------------------------------------------------------------------------------------
# signals
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["slurm", "pbs"])
@pytest.mark.parametrize(
    "signum, code, word",
    [(signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted (SIGINT)")],
)
def test_a_signal_mid_fit_cancels_the_jobs_and_saves_nothing(
    slurm, job_name, data, tmp_path, signum, code, word, kind
):
    path, _, _ = data
    cluster = _cluster_file(tmp_path, job_name, kind=kind)
    model = tmp_path / "model.zarr"
    cmd = Command(["fit", path, str(model), *FIT, "--cluster", cluster], slurm, tmp_path, 180)
    # inside the fit's passes: the processes of the workers' jobs are suspended as the fit
    # begins (a fit on workers that have loaded their kernels can end within a second) and
    # the signal comes while they hold it; they are resumed half a second later
    cmd.until("fitting PPA(")
    jobs = [job for job, _ in _alive(slurm, job_name)]
    assert len(jobs) == 2
    pids = _job_pids(slurm, jobs)
    assert pids, f"no processes of the jobs {jobs} on this node"
    with processes.held_still(pids):
        sent = time.monotonic() - cmd.start
        cmd.proc.send_signal(signum)
        time.sleep(0.5)
    status, out, err = cmd.wait()
    assert not [line for line in out if "] fit: " in line], out  # the fit was not over
    assert status == code
    assert word in _error_line(err)
    assert cmd.end - sent < 30
    assert _alive(slurm, job_name) == []
    assert not model.exists()
    # nothing of the model's beside it either (no temporary sibling left); under the Torque
    # wrappers the jobs' logs are SCRIPT.e<id> / .o<id> in the folder qsub ran in, and the
    # workers' scratch folder is the workers' (there only when they made it)
    left = {p.name for p in tmp_path.iterdir() if not re.search(r"\.sh\.[eo]\d+$", p.name)}
    assert left - {"scratch"} == {"logs", f"{kind}.yaml", "stderr.txt"}


# ---------------------------------------------------------------------------------------------
# jobs that die, jobs that cannot start, bad files
# ---------------------------------------------------------------------------------------------


def test_jobs_whose_prologue_fails_end_the_run_within_90_s(slurm, job_name, data, tmp_path):
    path, _, _ = data
    failing = ['echo "module: python/9.9 not found" >&2', "exit 3"]
    # the default worker timeout (600 s) and the default check interval
    cluster = _cluster_file(tmp_path, job_name, prologue=failing)
    with open(cluster) as f:
        config = yaml.safe_load(f)
    del config["job_check_interval"]
    with open(cluster, "w") as f:
        yaml.safe_dump(config, f)
    model = tmp_path / "model.zarr"
    cmd = Command(["fit", path, str(model), *FIT, "--cluster", cluster], slurm, tmp_path, 90)
    code, _, err = cmd.wait()
    assert code == 2
    line = _error_line(err)
    assert "worker jobs failed before a worker started" in line
    assert line.count(" FAILED") == 2 and "module: python/9.9 not found" in line
    assert f"log {tmp_path / 'logs'}" in line
    assert not model.exists()
    assert _alive(slurm, job_name) == []


def test_pbs_jobs_whose_prologue_fails_name_their_own_log_files(slurm, job_name, data, tmp_path):
    path, _, _ = data
    failing = ['echo "module: python/9.9 not found" >&2', "exit 3"]
    cluster = _cluster_file(tmp_path, job_name, kind="pbs", prologue=failing)
    model = tmp_path / "model.zarr"
    cmd = Command(["fit", path, str(model), *FIT, "--cluster", cluster], slurm, tmp_path, 90)
    code, _, err = cmd.wait()
    assert code == 2
    line = _error_line(err)
    assert "worker jobs failed before a worker started" in line
    # qstat names no log: SLURM's qsub wrapper puts -e/-o on sbatch's command line, over the
    # script's '#PBS -e logs/', so each log is SCRIPT.e<job id> in the folder qsub ran in
    named = re.findall(r"job (\d+) C, log (\S+): module: python/9\.9 not found", line)
    assert len(named) == 2, line
    for job, log in named:
        assert os.path.dirname(log) == str(tmp_path) and log.endswith(f".e{job}")
        with open(log) as f:
            assert "module: python/9.9 not found" in f.read()
    assert not model.exists()
    assert _alive(slurm, job_name) == []


@pytest.mark.parametrize(
    "options, reason",
    [
        # held back by SLURM for an hour: never starts within the test
        ({"job_extra_directives": ["--begin=now+3600"]}, "BeginTime"),
        # 15 minutes asked of a partition whose limit is 5 (slurm-up.sh's 'short')
        ({"queue": "short"}, "PartitionTimeLimit (its walltime is above the partition's limit)"),
    ],
)
def test_jobs_that_cannot_start_are_reported_then_the_worker_timeout_ends_the_run(
    slurm, job_name, data, tmp_path, options, reason
):
    path, _, _ = data
    cluster = _cluster_file(tmp_path, job_name, jobs=1, options=options)
    cmd = Command(
        ["fit", path, str(tmp_path / "m.zarr"), "--cluster", cluster, "--worker-timeout", "8"],
        slurm,
        tmp_path,
        90,
    )
    code, out, err = cmd.wait()
    assert code == 2
    assert any(f"is pending: {reason}; waiting for it" in line for line in out), out
    line = _error_line(err)
    assert "no worker" in line and "8 s" in line
    assert f"PENDING ({reason.split()[0]})" in line
    assert _alive(slurm, job_name) == []


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"prologue": [False]}, "options.job_script_prologue[1]: expected a string"),
        ({"options": {"walltime": 7200}}, "options.walltime: expected a quoted time limit"),
        ({"options": {"walltime": "2 hours"}}, "options.walltime: expected a time limit"),
        ({"options": {"memory": "lots"}}, "options.memory: expected a memory size"),
        ({"options": {"cores": "4"}}, "options.cores: expected a positive integer"),
        ({"options": {"worker_extra_args": "--lifetime 1h"}}, "expected a list of strings"),
        ({"options": {"walltme": "01:00:00"}}, "did you mean 'walltime'?"),
        ({"max_job_restarts": -1}, "max_job_restarts: expected a non-negative integer"),
    ],
)
def test_a_malformed_cluster_file_ends_with_one_line_before_any_job(
    slurm, job_name, data, tmp_path, capsys, change, expected
):
    path, _, _ = data
    cluster = _cluster_file(tmp_path, job_name, **change)
    code = main(["fit", path, str(tmp_path / "m.zarr"), "--cluster", cluster])
    err = capsys.readouterr().err
    assert code == 2
    assert _error_line(err).startswith(f"ppa-dask: error: {cluster}: ")
    assert expected in err
    assert _squeue(slurm, job_name) == []  # nothing was ever submitted


# ---------------------------------------------------------------------------------------------
# the driver itself as a batch job (cluster/slurm-driver.sh, as the batch guide shows it)
# ---------------------------------------------------------------------------------------------

DRIVER = os.path.join(ROOT, "cluster", "slurm-driver.sh")


def _submit_driver(slurm, tmp_path, name, args):
    """``sbatch cluster/slurm-driver.sh ARGS`` from ``tmp_path``; the driver's job id."""
    done = subprocess.run(
        ["sbatch", "--parsable", f"--job-name={name}-driver", DRIVER, *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env=dict(_env(slurm), PPA_DASK_ENV=sys.prefix),
        check=True,
    )
    return done.stdout.strip().split(";")[0]


def _driver_log(tmp_path, job, text, timeout):
    """The driver's log once it holds ``text`` (fails at the deadline)."""
    path = tmp_path / f"ppa-dask-driver-{job}.out"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return path.read_text()
        time.sleep(0.5)
    pytest.fail(
        f"no {text!r} in {path} within {timeout} s:\n"
        + (path.read_text() if path.exists() else "(no log)")
    )


def test_the_driver_script_submitted_with_sbatch_runs_the_fit(slurm, job_name, data, tmp_path):
    path, reference, X = data
    # the driver takes one of the node's 2 cores, one worker job the other
    cluster = _cluster_file(tmp_path, job_name, jobs=1)
    model = str(tmp_path / "model.zarr")
    job = _submit_driver(
        slurm, tmp_path, job_name, ["fit", path, model, *FIT, "--cluster", cluster]
    )
    log = _driver_log(tmp_path, job, "saved ", 240)
    assert f"ppa-dask driver: job {job} on " in log and "worker connected" in log
    deadline = time.monotonic() + 60
    while _alive(slurm, f"{job_name}-driver"):
        assert time.monotonic() < deadline, "the driver job did not end"
        time.sleep(0.5)
    assert [s for j, s in _squeue(slurm, f"{job_name}-driver") if j == job] == ["COMPLETED"]
    _same_model(model, reference, X)
    assert _alive(slurm, job_name) == []


def test_scancel_of_the_driver_cancels_its_workers_and_saves_nothing(
    slurm, job_name, data, tmp_path
):
    path, _, _ = data
    cluster = _cluster_file(tmp_path, job_name, jobs=1)
    model = tmp_path / "model.zarr"
    job = _submit_driver(
        slurm, tmp_path, job_name, ["fit", path, str(model), *FIT, "--cluster", cluster]
    )
    # the worker is in (the fit starts only then) and the fit's passes run (2-3 s here)
    _driver_log(tmp_path, job, "fitting PPA(", 240)
    assert len(_alive(slurm, job_name)) == 1
    sent = time.monotonic()
    # what the driver's time limit does too: SIGTERM, then SIGKILL after KillWait (30 s)
    subprocess.run(["scancel", job], env=_env(slurm), timeout=30, check=True)
    log = _driver_log(tmp_path, job, "ppa-dask: terminated (SIGTERM): stopped, nothing saved", 60)
    while _alive(slurm, job_name) or _alive(slurm, f"{job_name}-driver"):
        assert time.monotonic() - sent < 30, "jobs left after the driver's scancel"
        time.sleep(0.2)
    assert "Traceback" not in log
    assert not model.exists()
