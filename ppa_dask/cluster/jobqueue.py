"""Batch-job clusters: SLURM and PBS through dask-jobqueue, started, watched and closed.

:func:`jobqueue_client` starts the jobqueue cluster of a ``type: slurm`` / ``type: pbs`` file
(:func:`ppa_dask.cluster.read_cluster_config`), sizes it (``scale`` or ``adapt``), watches its
jobs while the Client is open (:class:`ppa_dask.cluster.batchjobs.JobWatch`) and fails with one
line when the job submission command is missing or fails, or when no worker has joined after
``worker_timeout`` seconds (:class:`ppa_dask.cluster.ClusterConnectError`). Every job script
exports one BLAS thread per worker. :func:`job_script` shows the script a file submits, without
submitting anything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import shutil
import time

from ppa_dask.cluster.batchjobs import DEFAULT_JOB_CHECK_INTERVAL, JobWatch, pbs_log_places
from ppa_dask.cluster.errors import ClusterConfigError, ClusterConnectError
from ppa_dask.cluster.files import (
    DEFAULT_WORKER_TIMEOUT,
    JOBQUEUE_CLASSES,
    check_seconds,
    jobqueue_class,
    read_cluster_config,
)
from ppa_dask.utils.blas import BLAS_THREAD_VARIABLES

__all__ = ["job_script", "jobqueue_client"]


class _DropRecorded(logging.Filter):
    """Drops the log records of exceptions already reported (jobqueue's failed submissions,
    which asyncio and tornado log once more as unretrieved task exceptions)."""

    def __init__(self, failures):
        super().__init__()
        self.failures = failures

    def filter(self, record):
        from distributed.client import AllExit

        exc = record.exc_info[1] if record.exc_info else None
        # AllExit: what a gather interrupted by a signal leaves behind in the event loop
        return not (isinstance(exc, AllExit) or any(exc is f for f in self.failures))


@contextlib.contextmanager
def _dropping_logs_of(failures):
    import gc

    loggers = [logging.getLogger(name) for name in ("asyncio", "tornado.application")]
    drop = _DropRecorded(failures)
    for logger in loggers:
        logger.addFilter(drop)
    try:
        yield
    finally:
        gc.collect()  # orphaned failed tasks report themselves now, while the filter is on
        for logger in loggers:
            logger.removeFilter(drop)


def _blas_prologue(lines):
    """A jobqueue job script prologue that also exports one BLAS thread per worker."""
    lines = list(lines or [])
    have = " ".join(lines)
    for name in BLAS_THREAD_VARIABLES:
        if name not in have:
            lines.append(f"export {name}=1")
    return lines


def _jobqueue_cluster(config, failures=None):
    """The jobqueue cluster of ``config``; with a ``failures`` list, every job whose
    submission raises appends its exception there (jobqueue itself only logs it)."""
    cls = jobqueue_class(config["type"], config["path"])
    options = dict(config["options"])
    options["job_script_prologue"] = _blas_prologue(options.get("job_script_prologue"))
    if config["security"] is not None:
        options["security"] = config["security"]
        options.setdefault("protocol", "tls://")
    if failures is not None:
        options["job_cls"] = _recording_job_class(cls.job_cls, failures)
    try:
        return cls(**options)
    except (TypeError, ValueError) as exc:
        raise ClusterConfigError(f"{config['path']}: options: {exc}") from None


def _recording_job_class(job_cls, failures):
    """A subclass of the jobqueue ``job_cls`` that records why a job could not start."""

    from distributed.core import Status

    class RecordingJob(job_cls):
        async def start(self):
            try:
                await super().start()
            except Exception as exc:
                failures.append(exc)
                self.status = Status.failed  # so that closing the cluster does not trip on it
                raise

    RecordingJob.__name__ = RecordingJob.__qualname__ = job_cls.__name__
    return RecordingJob


def _submit_command(config):
    """The program a jobqueue cluster submits its jobs with (``sbatch``, ``qsub``)."""
    cls = jobqueue_class(config["type"], config["path"])
    return shlex.split(cls.job_cls.submit_command)[0]


def _check_submit_command(config):
    command = _submit_command(config)
    if shutil.which(command) is None:
        raise ClusterConnectError(
            f"{config['path']}: cannot start workers: the job submission command {command!r} "
            f"is not on PATH (run ppa-dask on a {config['type'].upper()} login node)"
        )


def _job_failure_line(exc, command):
    """One line saying why a job submission failed (jobqueue's RuntimeError is multi-line)."""
    text = str(exc)
    code = re.search(r"Exit code: (-?\d+)", text)
    err = re.search(r"stderr:\n(.*)", text, re.S)
    detail = " ".join(err.group(1).split()) if err and err.group(1).strip() else ""
    if code:
        return f"{command!r} exited with status {code.group(1)}" + (
            f": {detail}" if detail else ""
        )
    return f"{command!r} failed: {type(exc).__name__}: {' '.join(text.split())}"


def _needs_workers_at_start(config):
    """False for an adaptive cluster allowed to have no job before work arrives."""
    if "adapt" not in config:
        return True
    adapt = config["adapt"]
    return bool(adapt.get("minimum") or adapt.get("minimum_jobs"))


def _wait_for_first_worker(client, config, timeout, failures):
    """Return once a worker has joined; ClusterConnectError naming the submission command when
    a submission failed or no worker joined within ``timeout`` seconds."""
    command = _submit_command(config)
    deadline = time.monotonic() + timeout
    while True:
        if failures:
            raise ClusterConnectError(
                f"{config['path']}: cannot start workers: "
                + _job_failure_line(failures[0], command)
            )
        left = deadline - time.monotonic()
        if left <= 0:
            raise ClusterConnectError(
                f"{config['path']}: no worker joined within {timeout:g} s of submitting jobs "
                f"with {command!r} (queue wait or failing jobs; see the job logs, or raise "
                "--worker-timeout / worker_timeout)"
            )
        try:
            client.wait_for_workers(1, timeout=min(0.5, left))
            return
        except TimeoutError:
            continue


def job_script(path, overrides=None):
    """The batch job script a SLURM/PBS configuration submits, without submitting anything.

    A jobqueue cluster object is created (its scheduler starts in this process, bound as the
    file or ``overrides`` say) and closed again; no job is submitted.

    Examples
    --------
    >>> print(job_script("cluster/slurm.yaml",
    ...                  {"scheduler_options": {"host": "127.0.0.1"}}))  # doctest: +SKIP
    #!/usr/bin/env bash
    #SBATCH -J ppa-dask
    ...
    """
    config = read_cluster_config(path, overrides)
    if config["type"] not in JOBQUEUE_CLASSES:
        raise ClusterConfigError(
            f"{path}: job scripts exist for slurm and pbs, not {config['type']!r}"
        )
    cluster = _jobqueue_cluster(config)
    try:
        return cluster.job_script()
    finally:
        cluster.close()


@contextlib.contextmanager
def jobqueue_client(config, worker_timeout=None, notify=None):
    """Start the jobqueue cluster of ``config`` (a ``slurm`` / ``pbs`` file read by
    :func:`ppa_dask.cluster.read_cluster_config`), watch its jobs, and yield a Client of it;
    the jobs are cancelled on exit.

    Parameters
    ----------
    config : dict
        The file's configuration.
    worker_timeout : float, optional
        Seconds until the first worker must have joined, and that the cluster may go without
        any worker later. Default: the file's ``worker_timeout``, else
        :data:`ppa_dask.cluster.files.DEFAULT_WORKER_TIMEOUT`.
    notify : callable, optional
        Receives a line for each thing the watch of the jobs reports.

    Raises
    ------
    ClusterConnectError
        The job submission command missing or failing, jobs failing before their worker
        started, lost jobs beyond ``max_job_restarts``, or no worker for ``worker_timeout``
        seconds, raised in place of the interrupted computation.
    """
    from distributed import Client

    kind = config["type"]
    timeout = check_seconds(
        "worker_timeout",
        worker_timeout
        if worker_timeout is not None
        else config.get("worker_timeout", DEFAULT_WORKER_TIMEOUT),
    )
    _check_submit_command(config)  # before a scheduler is started
    failures = []
    with _dropping_logs_of(failures):
        jobs = _jobqueue_cluster(config, failures)
        watch = JobWatch(
            jobs,
            kind,
            notify,
            max_job_restarts=config["max_job_restarts"],
            worker_timeout=timeout,
            interval=config.get("job_check_interval", DEFAULT_JOB_CHECK_INTERVAL),
            where=config["path"],
            adaptive="adapt" in config,
            expect_workers=_needs_workers_at_start(config),
            # PBS's qstat names no log file: found from the script's -e/-o, or where
            # qsub ran (PBS's default)
            log_places=pbs_log_places(jobs.job_script()) if kind == "pbs" else None,
            folder=os.getcwd(),
        )
        try:
            if "adapt" in config:
                jobs.adapt(**config["adapt"])
            else:
                jobs.scale(**config.get("scale", {"jobs": 1}))
            watch.start()
            with Client(jobs, set_as_default=True) as client:
                if _needs_workers_at_start(config):
                    # the watch says first which jobs are waiting, and why; this bound
                    # is the last resort
                    last_resort = timeout + 2 * watch.interval + 5
                    _wait_for_first_worker(client, config, last_resort, failures)
                yield client
            watch.stop()
        except BaseException as exc:
            watch.stop()  # before the jobs are cancelled, which it would see as lost
            # the error being raised says what went wrong; closing may fail after it
            # (a cancel command that is missing too), which must not replace it
            with contextlib.suppress(Exception):
                jobs.close()
            if watch.fault is not None and isinstance(exc, KeyboardInterrupt):
                raise ClusterConnectError(watch.fault) from None  # the watch interrupted
            raise
        jobs.close()
