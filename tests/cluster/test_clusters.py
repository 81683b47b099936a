"""Clusters: a real multi-process run against ``dask scheduler`` + two ``dask worker`` processes,
a TLS-secured LocalCluster, the SLURM/PBS job scripts and the Kubernetes DaskCluster manifest
of cluster/, and the errors of bad cluster files.

Everything binds to 127.0.0.1; every process started here is stopped here.
"""

import datetime
import os
import time

import dask.array as da
import numpy as np
import paths
import processes
import pytest
import yaml
import zarr

from ppa_dask import PPA, store
from ppa_dask.app.cli import main
from ppa_dask.cluster import (
    ClusterConfigError,
    job_script,
    open_client,
    read_cluster_config,
    validate_daskcluster,
)
from ppa_dask.datasets import make_curved_manifold
from ppa_dask.utils.blas import BLAS_THREAD_VARIABLES

# starts clusters of worker processes, from the library and the command
pytestmark = pytest.mark.cluster


ROOT = str(paths.ROOT)
CLUSTER = os.path.join(ROOT, "cluster")
ONE_BLAS = {name: "1" for name in BLAS_THREAD_VARIABLES}


# ---------------------------------------------------------------------------------------------
# a real multi-process cluster: dask scheduler + two dask worker processes
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def external_cluster(tmp_path_factory):
    """``dask scheduler`` and two single-threaded ``dask worker`` processes on 127.0.0.1."""
    base = tmp_path_factory.mktemp("external")
    with processes.dask_cluster(base, dict(os.environ, **ONE_BLAS), dashboard=True) as address:
        yield address, base


def _executed(address):
    from distributed import Client

    with Client(address, set_as_default=False) as client:
        return client.run(lambda dask_worker: dask_worker.state.executed_count)


def test_fit_on_a_multi_process_cluster(external_cluster, capsys):
    address, base = external_cluster
    X = make_curved_manifold(40_000, n_features=6, random_state=3)
    data = str(base / "data.zarr")
    z = zarr.create_array(store=data, shape=X.shape, chunks=(4000, 6), dtype="f8")
    z[...] = X
    before = _executed(address)
    report = base / "report.html"
    model_path = str(base / "model.zarr")
    code = main(
        [
            "fit",
            data,
            model_path,
            "--degree",
            "1-3",
            "--seed",
            "1",
            "--scheduler",
            address,
            "--performance-report",
            str(report),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert f"scheduler {address}, 2 worker(s)" in out
    assert "dashboard: http://127.0.0.1:" in out
    assert "step 5 of 5" in out
    # both worker processes did part of the work
    after = _executed(address)
    assert len(after) == 2 and all(after[w] > before.get(w, 0) for w in after)
    # and the model is the one fitted in memory from the same numbers
    model = store.load_model(model_path)
    direct = PPA(degree=[1, 2, 3], random_state=1).fit(X)
    assert model.degrees_.tolist() == direct.degrees_.tolist()
    np.testing.assert_allclose(model.transform(X), direct.transform(X), atol=1e-8)
    assert "Dask Performance Report" in report.read_text()


def test_pipeline_on_the_cluster_equals_the_in_process_run(external_cluster, capsys):
    address, base = external_cluster
    config = {
        "name": "c",
        "seed": 2,
        "data": {"source": "generated", "n_samples": 20_000, "n_features": 5, "chunk_rows": 2_500},
        "model": {"degree": [1, 2, 3]},
        "plots": {"components": 0, "dpi": 30},
    }
    path = base / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    cluster_out, local_out = base / "on-cluster", base / "in-process"
    assert main(["run", str(path), "--scheduler", address, "--output", str(cluster_out)]) == 0
    out = capsys.readouterr().out
    assert "tasks" in out  # the fan-out progress bars of the preprocessing
    assert main(["run", str(path), "--scheduler", "threads", "--output", str(local_out)]) == 0
    capsys.readouterr()
    # the results do not depend on where (or on how many workers) they were computed
    for stage, name in [("02-preprocess", "samples.zarr"), ("04-transform", "components.zarr")]:
        a = store.open_array(str(cluster_out / stage / name)).compute()
        b = store.open_array(str(local_out / stage / name)).compute()
        assert np.array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# the local cluster's worker processes
# ---------------------------------------------------------------------------------------------


def _worker_environ(names):
    return {name: os.environ.get(name) for name in names}


def test_local_workers_get_one_blas_thread_and_glibc_malloc_defaults(monkeypatch):
    """distributed's nanny gives its workers MALLOC_TRIM_THRESHOLD_=65536 (the precondition
    below); local_client's workers run without it, and this process's environment is as
    before afterwards."""
    import dask
    from distributed import Client  # noqa: F401  (the nanny's configuration is loaded)

    from ppa_dask.cluster.local import MALLOC_TRIM_VARIABLE, local_client

    assert MALLOC_TRIM_VARIABLE in dask.config.get("distributed.nanny.pre-spawn-environ")
    monkeypatch.delenv(MALLOC_TRIM_VARIABLE, raising=False)
    for name in BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    names = (*BLAS_THREAD_VARIABLES, MALLOC_TRIM_VARIABLE)
    with local_client(n_workers=1, dashboard_address=None) as client:
        (env,) = client.run(_worker_environ, names).values()
    assert env == {**ONE_BLAS, MALLOC_TRIM_VARIABLE: None}
    assert _worker_environ(names) == dict.fromkeys(names)


def test_a_malloc_setting_of_the_caller_reaches_the_local_workers(monkeypatch):
    from ppa_dask.cluster.local import MALLOC_TRIM_VARIABLE, local_client

    monkeypatch.setenv(MALLOC_TRIM_VARIABLE, "262144")
    with local_client(n_workers=1, dashboard_address=None) as client:
        (env,) = client.run(_worker_environ, [MALLOC_TRIM_VARIABLE]).values()
    assert env == {MALLOC_TRIM_VARIABLE: "262144"}
    assert os.environ[MALLOC_TRIM_VARIABLE] == "262144"


def _affinity_of_every_thread():
    return sorted(
        {tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir("/proc/self/task")}
    )


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity call here")
def test_local_workers_run_on_cores_of_their_own_also_after_a_restart(monkeypatch):
    """Each worker process of a local cluster whose threads fit in the CPUs (every thread of
    it) is pinned to a CPU of its own, and so is the worker the nanny starts in its place;
    with more worker threads than CPUs, or pin_workers=False, nothing is pinned."""
    from ppa_dask.cluster.cores import CORES_VARIABLE, usable_cpus
    from ppa_dask.cluster.local import local_client

    monkeypatch.delenv(CORES_VARIABLE, raising=False)  # gone again afterwards, see below
    cpus = usable_cpus()
    n = min(2, len(cpus))
    with local_client(n_workers=n, dashboard_address=None) as client:
        # the layout went to the workers only (distributed's nanny exports its workers'
        # environment into this process again when it restarts one)
        assert CORES_VARIABLE not in os.environ
        pinned = client.run(_affinity_of_every_thread)
        pids = set(client.run(os.getpid).values())
        client.restart_workers([sorted(pinned)[0]], timeout=60)
        client.wait_for_workers(n, timeout=60)
        after = client.run(_affinity_of_every_thread)
        new_pids = set(client.run(os.getpid).values())
    expected = sorted([(c,)] for c in cpus[:n])
    assert sorted(pinned.values()) == expected
    assert len(new_pids - pids) == 1  # the restarted worker is a process of its own
    assert sorted(after.values()) == expected
    free = [tuple(cpus)]
    with local_client(n_workers=len(cpus) + 1, dashboard_address=None) as client:
        assert all(v == free for v in client.run(_affinity_of_every_thread).values())
    with local_client(n_workers=n, dashboard_address=None, pin_workers=False) as client:
        assert all(v == free for v in client.run(_affinity_of_every_thread).values())
    with pytest.raises(ValueError, match="pin_workers must be 'auto' or False, got 'yes'"):
        with local_client(n_workers=1, pin_workers="yes"):
            pass


def _callback_ms(dask_worker, name):
    return dask_worker.periodic_callbacks[name].callback_time


def _scheduler_callback_ms(dask_scheduler, name):
    return dask_scheduler.periodic_callbacks[name].callback_time


@pytest.mark.parametrize(
    "key, callback, shipped, configured, expected_ms",
    [
        ("distributed.worker.profile.interval", "profile", "10ms", None, 100),
        ("distributed.worker.profile.interval", "profile", "10ms", "20ms", 20),
        ("distributed.admin.tick.interval", "tick", "20ms", None, 500),
        ("distributed.admin.tick.interval", "tick", "20ms", "50ms", 50),
    ],
)
def test_local_clusters_wake_less_often_unless_configured(
    key, callback, shipped, configured, expected_ms
):
    """Distributed's workers sample their stacks every 10 ms and check their event loop every
    20 ms (the precondition); local_client's every 100 and 500 ms, the scheduler's loop too, or
    at the interval the caller's Dask configuration sets."""
    import dask
    from distributed import Client  # noqa: F401  (the workers' configuration is loaded)

    from ppa_dask.cluster.local import QUIET_SETTINGS, local_client

    assert key in QUIET_SETTINGS and dask.config.get(key) == shipped
    settings = {} if configured is None else {key: configured}
    with dask.config.set(settings), local_client(n_workers=1, dashboard_address=None) as client:
        (on_worker,) = client.run(_callback_ms, name=callback).values()
        on_scheduler = (
            client.run_on_scheduler(_scheduler_callback_ms, name=callback)
            if callback == "tick"
            else None
        )
    assert on_worker == expected_ms
    assert on_scheduler in (None, expected_ms)
    assert dask.config.get(key) == shipped


def _answer_heartbeats_late(dask_scheduler, seconds):
    import asyncio

    answer = dask_scheduler.handlers["heartbeat_worker"]
    waiting = dask_scheduler.heartbeats_waiting = []

    async def late(**message):
        waiting.append(message["address"])
        await asyncio.sleep(seconds)
        return answer(**message)

    dask_scheduler.handlers["heartbeat_worker"] = late


def _heartbeats_waiting(dask_scheduler):
    return len(dask_scheduler.heartbeats_waiting)


def _wait_for_a_heartbeat(client):
    deadline = time.monotonic() + 10
    while not client.run_on_scheduler(_heartbeats_waiting):
        assert time.monotonic() < deadline, "no heartbeat reached the scheduler in 10 s"
        time.sleep(0.1)


def test_closing_a_local_cluster_reports_nothing_of_a_heartbeat_it_cut_short(capfd):
    """A worker closing while its heartbeat awaits the scheduler's answer closes that connection
    itself, and distributed logs the heartbeat's failure as an error with a traceback (in the
    worker process, whose stderr is this one's): the shutdown working, not a fault. The
    scheduler here answers heartbeats 10 s late, and the cluster closes once one is waiting."""
    from ppa_dask.cluster.local import local_client

    with local_client(n_workers=1, dashboard_address=None) as client:
        client.run_on_scheduler(_answer_heartbeats_late, seconds=10)
        _wait_for_a_heartbeat(client)
    err = capfd.readouterr().err
    assert "heartbeat" not in err and "distributed." not in err, err


def _answer_heartbeats_once_removed(dask_scheduler):
    import asyncio

    answer = dask_scheduler.handlers["heartbeat_worker"]
    waiting = dask_scheduler.heartbeats_waiting = []

    async def once_removed(**message):
        waiting.append(message["address"])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while message["address"] in dask_scheduler.workers and loop.time() < deadline:
            await asyncio.sleep(0.001)
        return answer(**message)

    dask_scheduler.handlers["heartbeat_worker"] = once_removed


def test_closing_a_local_cluster_reports_nothing_of_a_heartbeat_after_the_workers_removal(
    capfd, caplog
):
    """Closing removes the workers from the scheduler before it stops them; a heartbeat that
    arrives in between makes the scheduler (in this process) warn of an unregistered worker.
    Here the scheduler reads a waiting heartbeat only once its worker is removed."""
    from ppa_dask.cluster.local import local_client

    with local_client(n_workers=1, dashboard_address=None) as client:
        client.run_on_scheduler(_answer_heartbeats_once_removed)
        _wait_for_a_heartbeat(client)
    records = [r.getMessage() for r in caplog.records if r.name.startswith("distributed")]
    err = capfd.readouterr().err
    assert records == [] and "distributed." not in err, (records, err)


# ---------------------------------------------------------------------------------------------
# TLS
# ---------------------------------------------------------------------------------------------


def _certificates(folder, name="ppa-dask test"):
    """A CA and a certificate it signed (for 127.0.0.1), as PEM files; returns their paths."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    os.makedirs(folder, exist_ok=True)
    paths = {n: os.path.join(folder, f"{n}.pem") for n in ("ca", "cert", "key")}
    with open(paths["ca"], "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths["cert"], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths["key"], "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return paths


def test_tls_secured_local_cluster_runs_a_fit(tmp_path):
    from distributed import Client
    from distributed.security import Security

    _certificates(tmp_path / "certs")
    config = {
        "type": "local",
        "options": {"n_workers": 1, "memory_limit": "1GiB", "dashboard_address": "127.0.0.1:0"},
        # relative to the configuration file's folder
        "security": {
            "tls_ca_file": "certs/ca.pem",
            **{
                f"tls_{role}_{part}": f"certs/{part}.pem"
                for role in ("client", "scheduler", "worker")
                for part in ("cert", "key")
            },
        },
    }
    cfg = tmp_path / "tls.yaml"
    cfg.write_text(yaml.safe_dump(config))
    X = make_curved_manifold(8000, n_features=4, random_state=0)
    with open_client(cluster=str(cfg)) as client:
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:")
        model = PPA(degree=2, random_state=0).fit(da.from_array(X, chunks=2000))
        executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
        assert sum(executed.values()) > 0
        # a client without a certificate signed by the cluster's CA is turned away
        other = _certificates(tmp_path / "other", "intruder")
        stranger = Security(
            tls_ca_file=other["ca"],
            tls_client_cert=other["cert"],
            tls_client_key=other["key"],
            require_encryption=True,
        )
        with pytest.raises((OSError, TimeoutError)):
            Client(address, security=stranger, timeout="3s", set_as_default=False)
        with pytest.raises((OSError, TimeoutError)):  # nor does plain TCP get in
            Client(address.replace("tls://", "tcp://"), timeout="3s", set_as_default=False)
    direct = PPA(degree=2, random_state=0).fit(X)
    np.testing.assert_allclose(model.transform(X), direct.transform(X), atol=1e-9)


# ---------------------------------------------------------------------------------------------
# SLURM and PBS job scripts (dask-jobqueue; nothing is submitted)
# ---------------------------------------------------------------------------------------------

LOOPBACK = {"scheduler_options": {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}}


def _lines(script):
    return [line.strip() for line in script.splitlines()]


def _worker_command(script):
    (command,) = [line for line in _lines(script) if "distributed.cli.dask_worker" in line]
    return command.split()


def test_slurm_job_script():
    script = job_script(os.path.join(CLUSTER, "slurm.yaml"), LOOPBACK)
    lines = _lines(script)
    for directive in (
        "#SBATCH -J ppa-dask",
        "#SBATCH -p normal",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --mem=16G",
        "#SBATCH -t 02:00:00",
    ):
        assert directive in lines, directive
    for name in BLAS_THREAD_VARIABLES:  # one BLAS thread per worker process
        assert f"export {name}=1" in lines, name
    cmd = _worker_command(script)
    assert cmd[cmd.index("--nthreads") + 1] == "1"
    assert cmd[cmd.index("--nworkers") + 1] == "4"
    # each of the 4 workers gets a quarter of the job's 16 GiB
    assert cmd[cmd.index("--memory-limit") + 1] == "4.00GiB"
    assert cmd[cmd.index("--local-directory") + 1] == "$TMPDIR"
    assert any(a.startswith("tcp://127.0.0.1:") for a in cmd)
    # the prologue comes before the worker starts
    assert lines.index("export OMP_NUM_THREADS=1") < lines.index(" ".join(cmd))


def test_pbs_job_script():
    script = job_script(os.path.join(CLUSTER, "pbs.yaml"), LOOPBACK)
    lines = _lines(script)
    for directive in (
        "#PBS -N ppa-dask",
        "#PBS -q workq",
        "#PBS -l select=1:ncpus=4:mem=16GB",
        "#PBS -l walltime=02:00:00",
        "#PBS -j oe",
    ):
        assert directive in lines, directive
    cmd = _worker_command(script)
    assert cmd[cmd.index("--nthreads") + 1] == "1"
    # 16 GB (decimal) over 4 workers, in GiB
    assert cmd[cmd.index("--memory-limit") + 1] == f"{16e9 / 4 / 2**30:.2f}GiB"
    for name in BLAS_THREAD_VARIABLES:
        assert f"export {name}=1" in lines


def test_blas_exports_are_added_when_the_file_omits_them(tmp_path):
    cfg = tmp_path / "bare.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {"type": "slurm", "options": {"cores": 2, "processes": 2, "memory": "2GiB"}}
        )
    )
    lines = _lines(job_script(str(cfg), LOOPBACK))
    assert all(f"export {name}=1" in lines for name in BLAS_THREAD_VARIABLES)


# ---------------------------------------------------------------------------------------------
# the Kubernetes DaskCluster manifest (validated without a Kubernetes cluster)
# ---------------------------------------------------------------------------------------------


def _manifest():
    with open(os.path.join(CLUSTER, "kubernetes.yaml")) as f:
        return yaml.safe_load(f)


def _crd_schema():
    from ppa_dask.cluster.kubernetes import daskcluster_schema

    schema = daskcluster_schema()
    assert schema is not None, "dask-kubernetes (the test extra) ships the DaskCluster schema"
    return schema


def test_kubernetes_manifest_is_a_valid_daskcluster():
    spec = _manifest()
    validate_daskcluster(spec, schema=_crd_schema())
    config = read_cluster_config(os.path.join(CLUSTER, "kubernetes.yaml"))
    assert config["type"] == "kubernetes"
    # what the manifest promises: single-threaded workers, one BLAS thread, a Dask memory limit
    # below the container's, a service reaching the scheduler's ports
    (worker,) = spec["spec"]["worker"]["spec"]["containers"]
    args = worker["args"]
    assert args[:2] == ["dask", "worker"]
    assert args[args.index("--nthreads") + 1] == "1"
    env = {e["name"]: e["value"] for e in worker["env"]}
    assert env["OMP_NUM_THREADS"] == "1" and env["OPENBLAS_NUM_THREADS"] == "1"
    from dask.utils import parse_bytes

    limit = parse_bytes(args[args.index("--memory-limit") + 1])
    assert limit < parse_bytes(worker["resources"]["limits"]["memory"])
    (scheduler,) = spec["spec"]["scheduler"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in scheduler["ports"]}
    service = {p["targetPort"]: p["port"] for p in spec["spec"]["scheduler"]["service"]["ports"]}
    assert service == {"tcp-comm": 8786, "http-dashboard": 8787} and ports == {
        "tcp-comm": 8786,
        "http-dashboard": 8787,
    }


def test_the_validator_agrees_with_dask_kubernetes_and_catches_mistakes():
    schema = _crd_schema()
    from dask_kubernetes import operator

    # the operator's own generated spec passes
    validate_daskcluster(
        operator.make_cluster_spec(name="x", image="ghcr.io/dask/dask:latest", n_workers=2),
        schema=schema,
    )
    cases = [
        (("spec", "worker", "replica"), 2, "spec.worker.replica: unknown field"),
        (("spec", "worker", "replicas"), "four", "spec.worker.replicas: expected integer"),
        (
            ("spec", "scheduler", "spec", "containers", 0, "args"),
            ["python"],
            "no container runs 'dask scheduler'",
        ),
        (
            ("spec", "scheduler", "service", "ports", 0, "targetPort"),
            "comm",
            "targetPort 'comm' is not a named port",
        ),
        (("kind",), "DaskJob", "kind: expected 'DaskCluster'"),
    ]
    for path, value, expected in cases:
        spec = _manifest()
        node = spec
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        with pytest.raises(ClusterConfigError) as info:
            validate_daskcluster(spec, schema=schema)
        assert expected in str(info.value), (path, str(info.value))


# ---------------------------------------------------------------------------------------------
# bad cluster files
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, expected",
    [
        ({"type": "yarn"}, "type: expected one of local, pbs, scheduler, slurm"),
        (
            {"type": "local", "options": {"n_worker": 2}},
            "options.n_worker: unknown key (did you mean 'n_workers'?)",
        ),
        ({"type": "local", "workers": 2}, "workers: unknown key"),
        (
            {"type": "local", "security": {"tls_ca_file": "missing.pem"}},
            "security.tls_ca_file: no such file",
        ),
        ({"type": "local", "security": {"tls_ca": "x"}}, "security.tls_ca: unknown key"),
        ({"type": "scheduler", "address": "localhost"}, "address: expected a scheduler address"),
        (
            {"type": "slurm", "options": {"memroy": "4GiB"}},
            "options.memroy: unknown key (did you mean 'memory'?)",
        ),
        ({"type": "pbs", "scale": {"jobs": 0}}, "scale.jobs: expected a positive integer"),
        (
            {"type": "slurm", "scale": {"jobs": 1}, "adapt": {"maximum_jobs": 2}},
            "either scale or adapt",
        ),
    ],
)
def test_bad_cluster_files_are_named(tmp_path, content, expected):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(content))
    with pytest.raises(ClusterConfigError) as info:
        read_cluster_config(str(cfg))
    assert str(info.value).startswith(str(cfg))
    assert expected in str(info.value)


def test_bundled_cluster_files_are_valid():
    for name in ("local.yaml", "slurm.yaml", "pbs.yaml", "kubernetes.yaml"):
        assert read_cluster_config(os.path.join(CLUSTER, name))["path"].endswith(name)


@pytest.mark.parametrize("kind", ["slurm", "pbs"])
def test_every_option_a_batch_file_accepts_has_its_type_checked(tmp_path, kind):
    # the options a file accepts, as the error for an unknown one lists them
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"type": kind, "options": {"zzz_unknown": 1}}))
    with pytest.raises(ClusterConfigError) as info:
        read_cluster_config(str(cfg))
    accepted = str(info.value).split("expected one of ", 1)[1].split(", ")
    assert {"walltime", "memory", "job_script_prologue", "cores", "queue"} <= set(accepted)
    for name in accepted:
        # a value of the wrong type for every option (a mapping; a list for the one mapping)
        wrong = [1] if name == "scheduler_options" else {"x": 1}
        cfg.write_text(yaml.safe_dump({"type": kind, "options": {name: wrong}}))
        with pytest.raises(ClusterConfigError, match=rf"options\.{name}: expected") as info:
            read_cluster_config(str(cfg))
        assert str(info.value).startswith(f"{cfg}: "), str(info.value)
