"""The PBS side of the job watch without a PBS: ``job_states("pbs", ...)`` reads a ``qstat -f``
(a stand-in script on PATH printing what PBS Pro and Torque print) and finds each job's log
file where the PBS flavours put it. The same path against SLURM's real qsub/qstat wrappers is
in tests/cluster/test_slurm.py.
"""

import os
import stat

import pytest

from ppa_dask.cluster.batchjobs import job_states, pbs_log_places

# the jobqueue and Kubernetes specs of a cluster file, started for real where they can be
pytestmark = pytest.mark.cluster


# PBS Pro: a full Error_Path wrapped onto a continuation line (a tab), the exit status
# capitalised; Torque: a directory as Error_Path; a joined job; one with no paths at all (what
# SLURM's qstat wrapper prints)
QSTAT = """\
Job Id: 101.pbs-server
    Job_Name = ppa-dask
    job_state = F
    queue = workq
    Error_Path = login1:{logs}/101.pbs-se
\trver.ER
    Exit_status = 3
    Join_Path = n
    Output_Path = login1:{logs}/101.pbs-server.OU

Job Id: 102.torque
    Job_Name = ppa-dask
    job_state = C
    Error_Path = login1:{logs}/
    Output_Path = login1:{logs}/
    exit_status = 127

Job Id: 103.torque
    Job_Name = ppa-dask
    job_state = R
    Join_Path = oe
    Error_Path = login1:{logs}/
    Output_Path = login1:{logs}/

Job Id:\t104
\tJob_Name = ppa-dask
\tjob_state = C
\tqueue = debug
"""


@pytest.fixture
def qstat(tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    logs.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "qstat.txt").write_text(QSTAT.format(logs=logs))
    script = bin_dir / "qstat"
    # like qstat: the jobs asked for and known; the others named on stderr, exit status 153
    script.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = "-f" ] || exit 9\ncat {tmp_path / "qstat.txt"}\n'
        'for j in "$@"; do case $j in 1*) ;; *) echo "qstat: Unknown Job Id $j" >&2;; esac; done\n'
        "exit 153\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return logs


def test_log_files_are_found_where_each_pbs_flavour_puts_them(qstat, tmp_path):
    logs = qstat
    (logs / "ppa-dask.e102").write_text("module: python/9.9 not found\n")
    (logs / "ppa-dask.e1020").write_text("another job's log\n")
    (logs / "ppa-dask.o103").write_text("both streams\n")
    (logs / "ppa-dask.e103").write_text("not this one: the streams are joined\n")
    submitted = tmp_path / "submitted"
    submitted.mkdir()
    (submitted / "tmpab12cd.sh.e104").write_text("error of 104\n")
    states = job_states("pbs", ["101", "102", "103", "104", "999"], folder=str(submitted))
    assert sorted(states) == ["101", "102", "103", "104"]  # 999: not known
    # PBS Pro names the file in full (joined from its two lines), before it even exists
    assert states["101"].log == f"{logs}/101.pbs-server.ER"
    assert (states["101"].state, states["101"].reason) == ("F", "exit status 3")
    # Torque: a folder; the file of this job's number in it, not of job 1020
    assert states["102"].log == str(logs / "ppa-dask.e102")
    assert states["102"].reason == "exit status 127"
    # joined streams: the output file
    assert states["103"].log == str(logs / "ppa-dask.o103")
    assert (states["103"].state, states["103"].reason) == ("R", None)
    # no paths in qstat (SLURM's wrapper): the submission folder, named after the script
    assert states["104"].log == str(submitted / "tmpab12cd.sh.e104")


def test_the_job_scripts_log_directives_are_used_when_qstat_names_none(qstat, tmp_path):
    elsewhere = tmp_path / "job-logs"
    elsewhere.mkdir()
    (elsewhere / "104.server.ER").write_text("error of 104\n")
    script = f"#!/usr/bin/env bash\n#PBS -N ppa-dask\n#PBS -e {elsewhere}/\n#PBS -o {elsewhere}/\n"
    places = pbs_log_places(script)
    assert places == {"e": f"{elsewhere}/", "o": f"{elsewhere}/"}
    states = job_states("pbs", ["104"], log_places=places, folder=str(tmp_path))
    assert states["104"].log == str(elsewhere / "104.server.ER")
    # nothing anywhere yet (a job still queued): no log named rather than a wrong one
    assert job_states("pbs", ["104"], folder=str(tmp_path))["104"].log is None
