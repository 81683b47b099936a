#!/usr/bin/env bash
# Stop the one-node SLURM that cluster/testing/slurm-up.sh started in DIR: jobs cancelled, then
# slurmd, slurmctld and munged, each by the pid in its pid file (never by name), waiting
# (bounded) for each to exit. DIR itself is left for its logs; remove it when done with them.
set -uo pipefail
dir="${1:?usage: slurm-down.sh DIR (as printed by slurm-up.sh)}"
[ -f "$dir/env" ] || { echo "slurm-down: $dir holds no SLURM of slurm-up.sh" >&2; exit 1; }
# shellcheck disable=SC1091
source "$dir/env"
timeout 10 scancel --full --quiet --user="$(id -un)" 2>/dev/null || true

stop() {  # stop the process whose pid is in the file $1, if it is still the daemon $2
    local file="$1" name="$2" pid
    [ -f "$file" ] || return 0
    pid="$(cat "$file")"
    # a pid file left by a daemon that already exited may name a recycled pid: check its name
    if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$file"
}
stop "$dir/slurmd.pid" slurmd
stop "$dir/slurmctld.pid" slurmctld
stop "$dir/munge/munged.pid" munged
echo "slurm-down: stopped the SLURM of $dir" >&2
