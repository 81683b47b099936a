#!/usr/bin/env bash
# A one-node SLURM on this machine, for the tests that submit real batch jobs (tests/cluster/test_slurm.py).
#
#   cluster/testing/slurm-up.sh [DIR]     # prints DIR (default: a new temporary folder)
#   cluster/testing/slurm-down.sh DIR
#
# Installs nothing: SLURM's programs must be there already (Debian's slurmctld, slurmd,
# slurm-client, munge, and slurm-wlm-torque for the PBS-style qsub/qstat/qdel wrappers; `bash
# .ci/run` installs them), else it exits 1 naming what is missing. Writes a configuration for this
# host into DIR (state, spool, logs and pid files there too), starts munged (as the munge user,
# with its own socket), slurmctld and slurmd, and waits until sinfo shows the node idle. DIR and
# its parents must be passable by the munge user (not a private temporary folder such as
# pytest's). The plugins chosen need neither systemd nor cgroups (proctrack/linuxproc,
# task/none). The client commands find the daemons through DIR/env (SLURM_CONF, MUNGE socket);
# source it, or let the tests read it (PPA_DASK_SLURM=DIR). slurm-down.sh stops exactly the
# daemons started here, by the pids in their pid files. Needs root (it runs the daemons).
set -euo pipefail
log() { echo "slurm-up: $*" >&2; }

# checked first, before anything is written: the programs this script and the tests run
programs=(slurmctld slurmd sinfo munged qsub)
missing=()
for p in "${programs[@]}"; do
    command -v "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    log "not on PATH: ${missing[*]}; this script installs nothing (Debian: apt-get install" \
        "slurmctld slurmd slurm-client munge slurm-wlm-torque, as bash .ci/run does)"
    exit 1
fi

dir="${1:-$(mktemp -d /tmp/ppa-dask-slurm.XXXXXX)}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
# munged runs as the munge user: it must be able to pass through DIR (mktemp -d makes it 700)
chmod 755 "$dir"

host="$(hostname -s)"
cpus="$(nproc)"
# leave the machine some memory: the node offers 3/4 of it to jobs
mem_mb="$(awk '/MemTotal/ {print int($2 / 1024 * 3 / 4)}' /proc/meminfo)"
mkdir -p "$dir"/{state,spool,log,munge}
chown munge:munge "$dir/munge"
chmod 700 "$dir/munge"

# munge: a key of this run's own, a socket in DIR (the system's munged, if any, is left alone)
key="$dir/munge/munge.key"
[ -f "$key" ] || { head -c 1024 /dev/urandom >"$key"; }
chown munge:munge "$key"
chmod 400 "$key"
socket="$dir/munge/munge.socket"

cat >"$dir/slurm.conf" <<CONF
# one-node SLURM written by cluster/testing/slurm-up.sh
ClusterName=ppa-dask-test
SlurmctldHost=$host
SlurmUser=root
SlurmctldPort=6917
SlurmdPort=6918
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
# SLURM's default: a driver job gets 30 s from SIGTERM to SIGKILL to cancel its workers (4-5 s)
KillWait=30
Waittime=0
SchedulerParameters=sched_interval=1
DefMemPerCPU=1024
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
# a partition of short jobs only: a longer walltime pends there for PartitionTimeLimit
PartitionName=short Nodes=$host MaxTime=00:05:00 State=UP
CONF

cat >"$dir/env" <<ENV
export SLURM_CONF=$dir/slurm.conf
export MUNGE_SOCKET=$socket
ENV
# shellcheck disable=SC1091
source "$dir/env"

# every daemon writes its pid file; slurm-down.sh stops those pids and nothing else
runuser -u munge -- munged --socket="$socket" --key-file="$key" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" --force
slurmctld -f "$dir/slurm.conf"
slurmd -f "$dir/slurm.conf"

# the node is idle once slurmd registered; bounded, with the logs' tails on failure
for _ in $(seq 1 120); do
    state="$(sinfo -h -N -o '%T' 2>/dev/null | head -1 || true)"
    if [ "$state" = "idle" ]; then
        log "node $host idle ($cpus CPUs, $mem_mb MB); SLURM_CONF=$dir/slurm.conf"
        echo "$dir"
        exit 0
    fi
    sleep 0.5
done
log "the node did not become idle within 60 s (state: ${state:-none}); logs in $dir/log"
tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
"$(dirname "$0")/slurm-down.sh" "$dir" || true
exit 1
