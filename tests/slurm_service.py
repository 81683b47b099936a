"""The one-node SLURM of the tests that submit real batch jobs (tests/cluster/test_slurm.py):
the one ``.ci/run`` started (``PPA_DASK_SLURM``), else one started here when SLURM's programs
are installed, else a skip saying how to get them. Nothing here installs anything."""

import os
import shutil
import subprocess
import tempfile

import paths
import pytest
from system_programs import skip_missing

UP = str(paths.ROOT / "cluster" / "testing" / "slurm-up.sh")
DOWN = str(paths.ROOT / "cluster" / "testing" / "slurm-down.sh")
#: the programs slurm-up.sh starts and the tests run (the PBS tests: slurm-wlm-torque's qsub)
PROGRAMS = ("slurmctld", "slurmd", "sinfo", "munged", "qsub")
HOW = (
    "bash .ci/run installs and starts one; or apt-get install slurmctld slurmd slurm-client "
    "munge slurm-wlm-torque as root; or PPA_DASK_SLURM=DIR, the folder of a running "
    "cluster/testing/slurm-up.sh"
)
#: where a SLURM started here lives: munged runs as the munge user, who cannot pass through
#: pytest's base temporary folder (mode 700) nor a private TMPDIR; /tmp lets every user by
PARENT = "/tmp"


def slurm_folder():
    """The folder of a running one-node SLURM, and whether it was started here (then the
    caller stops it with :func:`stop_slurm`).

    Skips the calling test, saying how to get SLURM, where it cannot be had without installing
    anything (its programs missing, or not root, which its daemons need); fails it where the
    programs are there but the cluster does not start.
    """
    folder = os.environ.get("PPA_DASK_SLURM")
    if folder:
        return folder, False
    missing = [program for program in PROGRAMS if shutil.which(program) is None]
    if missing:
        skip_missing("slurm", f"{' '.join(missing)} not on PATH ({HOW})")
    if os.geteuid() != 0:
        skip_missing("slurm", f"starting its daemons needs root ({HOW})")
    folder = tempfile.mkdtemp(prefix="ppa-dask-slurm.", dir=PARENT)
    os.chmod(folder, 0o755)  # mkdtemp makes it 700
    try:
        up = subprocess.run(
            ["bash", UP, folder], capture_output=True, text=True, timeout=300, check=False
        )
    except subprocess.TimeoutExpired:
        stop_slurm(folder)
        pytest.fail("cluster/testing/slurm-up.sh did not finish within 300 s")
    if up.returncode != 0:
        stop_slurm(folder)
        last = (up.stderr.strip().splitlines() or ["?"])[-1]
        pytest.fail(f"SLURM's programs are here but cluster/testing/slurm-up.sh failed: {last}")
    return folder, True


def stop_slurm(folder):
    """Stop the SLURM that :func:`slurm_folder` started in ``folder`` and remove the folder."""
    if os.path.exists(os.path.join(folder, "env")):
        subprocess.run(["bash", DOWN, folder], capture_output=True, timeout=120, check=False)
    shutil.rmtree(folder, ignore_errors=True)


def read_env(folder):
    """The variables of ``folder``/env (slurm-up.sh's ``export NAME=VALUE`` lines)."""
    env = {}
    with open(os.path.join(folder, "env")) as f:
        for line in f:
            if line.startswith("export "):
                key, _, value = line[len("export ") :].strip().partition("=")
                env[key] = value
    return env
