"""Times of batch runs on the one-node SLURM of slurm-up.sh, medians of N runs: the jobs'
submission -> each worker connected, the command's start -> its first worker, the whole fit on
SLURM beside the same fit in one process (--scheduler threads; the models compared), scancel of
every worker job -> the replacements connected, SIGTERM / SIGINT -> the exit and no job left,
jobs whose prologue exits 3 -> the exit (the default job_check_interval of 5 s), a job that
cannot start (3 jobs of 1 core on 2 cores) -> the line saying so, and the PBS file through
SLURM's Torque wrappers. From the repository root:

    PPA_DASK_SLURM=DIR PYTHONPATH=$PWD python cluster/testing/slurm_times.py 3

(DIR as printed by slurm-up.sh). The figures are in docs/guide/clusters.md.
"""

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import yaml
import zarr

sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import processes  # noqa: E402 - the tests' command runner

from ppa_dask import store  # noqa: E402
from ppa_dask.datasets import make_curved_manifold  # noqa: E402

FIT = ["--degree", "2", "--n-components", "4", "--seed", "0"]


def slurm_env(folder):
    env = dict(os.environ, **processes.ONE_THREAD, PYTHONPATH=os.getcwd())
    with open(os.path.join(folder, "env")) as f:
        for line in f:
            key, _, value = line[len("export ") :].strip().partition("=")
            env[key] = value
    return env


def cluster_file(run, name, kind="slurm", jobs=2, prologue=(), check_interval=1):
    options = {
        "job_name": name,
        "queue": "debug",
        "walltime": "00:15:00",
        "cores": 1,
        "processes": 1,
        "memory": "1GiB",
        "python": sys.executable,
        "local_directory": f"{run}/scratch",
        "log_directory": f"{run}/logs",
        "job_script_prologue": [f"export PYTHONPATH={os.getcwd()}", *prologue],
        "scheduler_options": {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"},
    }
    if kind == "pbs":
        options["resource_spec"] = "nodes=1:ppn=1,mem=1gb"
    # a look at the jobs every second, as in the tests (1 s resolution), unless asked otherwise
    config = {"type": kind, "options": options, "scale": {"jobs": jobs}}
    if check_interval is not None:
        config["job_check_interval"] = check_interval
    path = f"{run}/{kind}.yaml"
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    return path


def live_jobs(env, name):
    out = subprocess.run(
        ["squeue", "-h", "--name", name, "-o", "%i %T"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    return [job for job, state in rows if state in ("RUNNING", "PENDING", "CONFIGURING")]


def fit_command(env, base, data, name, **cluster):
    run = tempfile.mkdtemp(dir=base)
    args = ["fit", data, f"{run}/m.zarr", *FIT, "--cluster", cluster_file(run, name, **cluster)]
    return processes.Command(args, env, run, 300)


def model_difference(path, reference, X):
    """The largest difference of the components of X between a model file and the local one."""
    return float(np.abs(store.load_model(path).transform(X) - reference.transform(X)).max())


def describe(values):
    return f"median {statistics.median(values):.1f} s ({', '.join(f'{v:.1f}' for v in values)})"


def main(n_runs):
    env = slurm_env(os.environ["PPA_DASK_SLURM"])
    base = tempfile.mkdtemp(prefix="ppa-dask-slurm-times-")
    X = make_curved_manifold(4000, n_features=6, random_state=5)
    data = os.path.join(base, "x.zarr")
    z = zarr.create_array(store=data, shape=X.shape, chunks=(1000, 6), dtype="f8")
    z[...] = X
    connected, first, replaced = [], [], []
    signals = {signal.SIGTERM: ([], []), signal.SIGINT: ([], [])}
    local, on_slurm, on_pbs, pbs_first, failed, pending, differences = [], [], [], [], [], [], []
    for i in range(n_runs):
        # the same fit in one process, then on SLURM undisturbed, then through qsub
        run = tempfile.mkdtemp(dir=base)
        cmd = processes.Command(
            ["fit", data, f"{run}/m.zarr", *FIT, "--scheduler", "threads"], env, run, 300
        )
        code, _, err = cmd.wait()
        assert code == 0, err
        local.append(cmd.end)
        reference = store.load_model(f"{run}/m.zarr")
        for kind, total, to_first in (("slurm", on_slurm, first), ("pbs", on_pbs, pbs_first)):
            cmd = fit_command(env, base, data, f"ppa-times-{i}-{kind}", kind=kind)
            code, _, err = cmd.wait()
            assert code == 0, err
            total.append(cmd.end)
            text = "\n".join(cmd.out_lines())
            to_first.append(float(re.search(r"\[\s*([\d.]+) s\] scheduler ", text).group(1)))
            if kind == "slurm":
                connected += [
                    float(t) for t in re.findall(r"worker connected ([\d.]+) s after", text)
                ]
            differences.append(
                model_difference(
                    os.path.join(os.path.dirname(cmd.stderr_path), "m.zarr"), reference, X
                )
            )
        # jobs that die at start, noticed at the default job_check_interval
        failing = ['echo "module: python/9.9 not found" >&2', "exit 3"]
        cmd = fit_command(
            env, base, data, f"ppa-times-{i}-fail", prologue=failing, check_interval=None
        )
        code, _, err = cmd.wait()
        assert code == 2 and "failed before a worker started" in err, err
        failed.append(cmd.end)
        # 3 jobs of 1 core on 2 cores: the third is reported pending (Resources)
        cmd = fit_command(env, base, data, f"ppa-times-{i}-pending", jobs=3)
        pending.append(cmd.until("is pending: Resources"))
        code, _, err = cmd.wait()
        assert code == 0, err
        # lost jobs
        name = f"ppa-times-{i}"
        cmd = fit_command(env, base, data, name)
        cmd.until("step 2 of")
        text = "\n".join(cmd.out_lines())
        connected += [float(t) for t in re.findall(r"worker connected ([\d.]+) s after", text)]
        first.append(float(re.search(r"\[\s*([\d.]+) s\] scheduler ", text).group(1)))
        victims = live_jobs(env, name)
        lost = time.monotonic() - cmd.start
        subprocess.run(["scancel", *victims], env=env, timeout=30, check=True)
        code, _, err = cmd.wait()
        assert code == 0, err
        # the replacements' lines: the last worker connected after the scancel
        back = [t for t, line in cmd.lines if "worker connected" in line and t > lost]
        replaced.append(max(back) - lost)
        for signum, (to_exit, to_no_job) in signals.items():
            name = f"ppa-times-{i}-{signum.name}"
            cmd = fit_command(env, base, data, name)
            cmd.until("step 2 of")
            sent = time.monotonic() - cmd.start
            cmd.proc.send_signal(signum)
            code, _, err = cmd.wait()
            assert code == 128 + signum, err
            while live_jobs(env, name):
                time.sleep(0.1)
            to_exit.append(cmd.end - sent)
            to_no_job.append(time.monotonic() - cmd.start - sent)
        print(f"run {i + 1} of {n_runs} done", flush=True)
    print(f"submission -> worker connected: {describe(connected)}")
    print(f"command start -> first worker in: {describe(first)}")
    print(f"the fit in one process (--scheduler threads): {describe(local)}")
    print(f"the fit on SLURM, 2 jobs: {describe(on_slurm)}")
    print(
        f"the fit through qsub (PBS file): {describe(on_pbs)}; first worker in "
        f"{describe(pbs_first)}"
    )
    print(f"largest difference of the components from the local model: {max(differences):.1e}")
    print(f"prologue exits 3 -> exit 2 (job_check_interval 5 s): {describe(failed)}")
    print(f"command start -> 'is pending: Resources' (3 jobs on 2 cores): {describe(pending)}")
    print(f"scancel of both jobs -> both replacements connected: {describe(replaced)}")
    for signum, (to_exit, to_no_job) in signals.items():
        print(f"{signum.name} -> exit: {describe(to_exit)}; -> no job: {describe(to_no_job)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
