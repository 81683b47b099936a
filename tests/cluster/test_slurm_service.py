"""The SLURM of the tests is had without touching the system: cluster/testing/slurm-up.sh
installs nothing, the tests skip (saying how to get SLURM) where its programs are missing, and a
SLURM started by the tests lives in a folder of /tmp the munge user can pass through, removed
afterwards. Nothing here starts a daemon: the programs and scripts are stand-ins."""

import os
import shutil
import stat
import subprocess
from pathlib import Path

import paths
import pytest
import slurm_service
from system_programs import REASON, refused

UP = paths.ROOT / "cluster" / "testing" / "slurm-up.sh"
# what would install or query packages; each stand-in records that it was called
INSTALLERS = ("apt-get", "apt", "dpkg", "dpkg-query", "aptitude")


def _stand_ins(folder, names, body="exit 0"):
    folder.mkdir(exist_ok=True)
    for name in names:
        path = folder / name
        path.write_text(f'#!/bin/sh\necho "$0 $*" >> "{folder}/called"\n{body}\n')
        path.chmod(0o755)
    return folder


def test_slurm_up_installs_nothing_and_says_what_is_missing(tmp_path):
    bin_ = _stand_ins(tmp_path / "bin", INSTALLERS)  # and none of SLURM's programs
    folder = tmp_path / "slurm"
    done = subprocess.run(
        [shutil.which("bash"), str(UP), str(folder)],
        env={"PATH": str(bin_)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert not (bin_ / "called").exists(), (bin_ / "called").read_text()
    assert not folder.exists()  # refused before writing anything
    assert "not on PATH: slurmctld slurmd sinfo munged qsub" in done.stderr
    assert "installs nothing" in done.stderr and "apt-get install slurmctld" in done.stderr


@pytest.fixture
def no_slurm_here(tmp_path, monkeypatch):
    """A PATH without SLURM's programs (the installers there record any call), no SLURM named."""
    bin_ = _stand_ins(tmp_path / "bin", INSTALLERS)
    monkeypatch.setenv("PATH", str(bin_))
    monkeypatch.delenv("PPA_DASK_SLURM", raising=False)
    monkeypatch.delenv("CI", raising=False)
    return bin_


def test_without_its_programs_the_slurm_tests_skip_saying_how_to_get_them(
    no_slurm_here, monkeypatch
):
    before = set(Path(slurm_service.PARENT).glob("ppa-dask-slurm.*"))
    with pytest.raises(pytest.skip.Exception) as skipped:
        slurm_service.slurm_folder()
    reason = str(skipped.value)
    assert REASON.search(reason).group(1) == "slurm", reason
    assert "slurmctld slurmd sinfo munged qsub not on PATH" in reason
    assert ".ci/run" in reason and "apt-get install slurmctld" in reason
    assert "PPA_DASK_SLURM" in reason
    assert not (no_slurm_here / "called").exists()
    assert set(Path(slurm_service.PARENT).glob("ppa-dask-slurm.*")) == before
    # the skip policy lets README's command pass with it (on a machine where .ci/run did not
    # provide SLURM), and fails CI's
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PPA_DASK_REQUIRED_PROGRAMS", raising=False)
    assert refused(reason) is None
    monkeypatch.setenv("CI", "true")
    assert refused(reason) == "slurm is required under CI (CI=true)"


def test_not_root_the_slurm_tests_skip(no_slurm_here, monkeypatch):
    _stand_ins(no_slurm_here, slurm_service.PROGRAMS)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.skip.Exception, match="needs the system program slurm: .*root"):
        slurm_service.slurm_folder()


def test_a_named_slurm_is_used_as_it_is(monkeypatch, tmp_path):
    monkeypatch.setenv("PPA_DASK_SLURM", str(tmp_path))
    assert slurm_service.slurm_folder() == (str(tmp_path), False)


def test_a_slurm_started_here_is_in_a_folder_the_munge_user_passes_and_is_removed(
    no_slurm_here, monkeypatch, tmp_path, tmp_path_factory
):
    _stand_ins(no_slurm_here, slurm_service.PROGRAMS)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    # stand-ins for slurm-up.sh (writes DIR/env as it does) and slurm-down.sh
    up, down = tmp_path / "up.sh", tmp_path / "down.sh"
    up.write_text(
        f'echo "$1" > {tmp_path}/up; echo "export SLURM_CONF=$1/slurm.conf" > "$1/env"\n'
    )
    down.write_text(f'echo "$1" > {tmp_path}/down\n')
    monkeypatch.setattr(slurm_service, "UP", str(up))
    monkeypatch.setattr(slurm_service, "DOWN", str(down))
    monkeypatch.setenv(
        "PATH", f"{no_slurm_here}:{os.path.dirname(shutil.which('bash', path=os.defpath))}"
    )

    folder, started = slurm_service.slurm_folder()
    try:
        assert started and (tmp_path / "up").read_text().strip() == folder
        assert os.path.dirname(folder) == "/tmp"
        base = tmp_path_factory.getbasetemp()
        assert not Path(folder).is_relative_to(base)
        # every folder from / to it lets others pass (munged runs as the munge user)
        for part in [Path(folder), *Path(folder).parents]:
            assert os.stat(part).st_mode & stat.S_IXOTH, f"{part} is closed to other users"
        assert slurm_service.read_env(folder) == {"SLURM_CONF": f"{folder}/slurm.conf"}
    finally:
        slurm_service.stop_slurm(folder)
    assert (tmp_path / "down").read_text().strip() == folder
    assert not os.path.exists(folder)
    assert not (no_slurm_here / "called").exists()
