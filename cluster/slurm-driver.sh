#!/usr/bin/env bash
# The ppa-dask driver as a SLURM job of its own: the command, its Dask scheduler and its
# progress run in this job, the workers are the jobs its cluster file asks for.
#
#   sbatch cluster/slurm-driver.sh run pipelines/magic_gamma.yaml --cluster cluster/slurm.yaml
#   sbatch cluster/slurm-driver.sh fit data.zarr model.zarr --cluster cluster/slurm.yaml
#
# The arguments after the script are ppa-dask's. PPA_DASK_ENV names the Python environment that
# holds ppa-dask (default ~/venvs/ppa-dask); sbatch's own options on its command line win over
# the #SBATCH lines below (e.g. sbatch --time=12:00:00 --account=my-project ...).
#
# The time limit is the whole run's, worker queue waits included: at the limit SLURM sends
# SIGTERM, ppa-dask cancels its worker jobs and exits 143 with nothing half-saved, and a
# pipeline resubmitted with the same command resumes at the stage it was in.
#SBATCH --job-name=ppa-dask-driver
#SBATCH --time=04:00:00
#SBATCH --cpus-per-task=1
#SBATCH --mem=4G
#SBATCH --output=ppa-dask-driver-%j.out
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: sbatch $0 COMMAND ARGS... (ppa-dask's)" >&2; exit 2; }
env="${PPA_DASK_ENV:-$HOME/venvs/ppa-dask}"
# shellcheck disable=SC1091
source "$env/bin/activate"
# one BLAS thread: the driver merges small matrices, the workers do the heavy passes
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
echo "ppa-dask driver: job ${SLURM_JOB_ID:-?} on $(hostname), $(command -v ppa-dask)"
# exec: ppa-dask is the job's process itself and gets SLURM's SIGTERM directly
exec ppa-dask "$@"
