"""The batch jobs of a SLURM or PBS cluster: job states, logs, and a watch.

dask-jobqueue submits the worker jobs and cancels them at close, but it does not look at them
in between: a job that fails at start, is cancelled, pre-empted, lost with its node or ends at
its walltime is never replaced, and a computation waiting for its workers waits forever.
:class:`JobWatch` asks the batch system for the states of the cluster's jobs every few seconds
(``squeue`` / ``qstat``) while a command runs, and

* reports a job that cannot start for now (pending for ``Resources``, ``PartitionTimeLimit``,
  ``ReqNodeNotAvail``, ...), once per job and reason;
* replaces a job that ended before the work did (a new job of the same kind), at most
  ``max_job_restarts`` times per job of the cluster;
* stops the command with one line naming the jobs, their last states and their log files when
  jobs failed before any of their workers joined (a broken environment, a prologue that
  fails), when the bound on restarts is reached, or when no worker has been connected for
  ``worker_timeout`` seconds.

The types of a cluster file's ``options`` are checked with the rest of the file, before anything
is submitted (:func:`ppa_dask.cluster.files.check_jobqueue_options`).

Examples
--------
>>> job_states("slurm", [])
{}
"""

from __future__ import annotations

import collections
import logging
import re
import signal
import subprocess
import threading
import time

__all__ = [
    "JobState",
    "JobWatch",
    "job_states",
    "pbs_log_places",
    "DEFAULT_MAX_JOB_RESTARTS",
    "DEFAULT_JOB_CHECK_INTERVAL",
]

logger = logging.getLogger(__name__)

#: Replacements of each job of a cluster before a run gives up (``max_job_restarts:``).
DEFAULT_MAX_JOB_RESTARTS = 3
#: Seconds between two looks at the jobs' states (``job_check_interval:``).
DEFAULT_JOB_CHECK_INTERVAL = 5.0
#: Seconds a call of squeue / qstat may take.
QUERY_TIMEOUT = 20.0
#: Lines of a failed job's log quoted in the error.
LOG_LINES = 3


# ---------------------------------------------------------------------------------------------
# job states
# ---------------------------------------------------------------------------------------------

JobState = collections.namedtuple("JobState", "job_id state reason log")
JobState.__doc__ = """One job as the batch system reports it: its id, state (``PENDING``,
``RUNNING``, ``FAILED``, ... or ``GONE`` once no longer listed), the reason it is pending (or
None) and its error log file (or None when unknown)."""

#: SLURM states of a job that has ended.
SLURM_ENDED = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
        "GONE",
    }
)
#: States of a job ended from outside (not by what it ran): a replacement may well start.
ENDED_FROM_OUTSIDE = frozenset({"CANCELLED", "DEADLINE", "NODE_FAIL", "PREEMPTED", "TIMEOUT"})
#: SLURM reasons of a pending job that are reported while waiting (a normal wait is not).
QUIET_REASONS = frozenset({"None", "Priority", "", "(null)"})
_REASON_MEANING = {
    "Resources": "the cores or memory it asks for are not free now",
    "PartitionTimeLimit": "its walltime is above the partition's limit",
    "ReqNodeNotAvail": "the nodes it needs are not available (down, drained or reserved)",
    "PartitionNodeLimit": "it asks for more nodes than the partition allows",
    "QOSMaxJobsPerUserLimit": "you have as many jobs running as your QOS allows",
}
#: PBS / Torque states (qstat's S column) of a job that has ended.
PBS_ENDED = frozenset({"C", "F", "X", "GONE"})


def _run(command):
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=QUERY_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.warning("%s: %s", command[0], exc)
        return None
    return done


def _slurm_log(path, job_id, name):
    if not path or path in ("(null)", "N/A"):
        return None
    for pattern, value in (("%j", job_id), ("%J", job_id), ("%A", job_id), ("%x", name)):
        path = path.replace(pattern, value)
    return path


def _slurm_states(job_ids):
    done = _run(
        [
            "squeue",
            "--noheader",
            "--states=all",
            "--jobs=" + ",".join(job_ids),
            "--Format=JobID:|,State:|,Reason:|,STDERR:|,Name:|",
        ]
    )
    if done is None:
        return None
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:  # none of them is known any more
            return {}
        logger.warning("squeue: %s", done.stderr.strip())
        return None
    states = {}
    for line in done.stdout.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) < 5 or not fields[0]:
            continue
        job_id, state, reason, stderr, name = fields[:5]
        reason = None if reason in QUIET_REASONS else reason
        states[job_id] = JobState(job_id, state, reason, _slurm_log(stderr, job_id, name))
    return states


def _qstat_full(text):
    """``qstat -f`` output: job id -> {attribute: value} (values that PBS wraps onto indented
    continuation lines joined back)."""
    jobs, attrs, key = {}, None, None
    for line in text.splitlines():
        head = re.match(r"Job Id:\s*(\S+)", line)
        if head:
            attrs, key = {}, None
            jobs[head.group(1).split(".")[0]] = attrs
            continue
        if attrs is None or not line.strip():
            continue
        pair = re.match(r"\s+([A-Za-z_][\w.]*) = (.*)$", line)
        if pair:
            key = pair.group(1)
            attrs[key] = pair.group(2).strip()
        elif key is not None:
            attrs[key] += line.strip()
    return jobs


def pbs_log_places(job_script):
    r"""Where a PBS job script sends its logs: ``{"e": path, "o": path, "join": "oe"}`` from its
    ``#PBS -e`` / ``-o`` / ``-j`` lines (dask-jobqueue writes ``-e DIR/ -o DIR/`` for its
    ``log_directory``), missing keys when the script says nothing.

    Examples
    --------
    >>> pbs_log_places("#!/bin/bash\n#PBS -e /logs/\n#PBS -o /logs/\n#PBS -j oe\nrun")
    {'e': '/logs/', 'o': '/logs/', 'join': 'oe'}
    """
    places = {}
    for line in job_script.splitlines():
        found = re.match(r"#PBS\s+-([eoj])\s*(\S+)", line.strip())
        if found:
            places["join" if found.group(1) == "j" else found.group(1)] = found.group(2)
    return places


def _pbs_log(job_id, attrs, places, folder):
    """The log file of PBS job ``job_id`` (its error log, or its output when the two are
    joined), or None while none can be found.

    ``qstat -f``'s Error_Path / Output_Path first (``host:/path``), then the job script's
    ``-e`` / ``-o``, then the folder the jobs were submitted from (PBS's default). A directory
    holds the log under the names the PBS flavours give it: ``NAME.e<seq>`` / ``NAME.o<seq>``
    (Torque, OpenPBS, and SLURM's qsub wrapper, whose NAME is the script's), ``<id>.ER`` /
    ``<id>.OU`` (PBS Pro).
    """
    import glob
    import os

    seq = job_id.split(".")[0]
    join = attrs.get("Join_Path", places.get("join", "n"))
    order = ("o", "e") if join.startswith("o") else ("e", "o")
    suffix = {"e": (f"*.e{seq}", f"{seq}*.ER"), "o": (f"*.o{seq}", f"{seq}*.OU")}
    given = {
        "e": attrs.get("Error_Path") or places.get("e"),
        "o": attrs.get("Output_Path") or places.get("o"),
    }
    for stream in order:
        path = given[stream]
        if path:
            path = path.split(":", 1)[1] if re.match(r"[\w.-]+:/", path) else path
            path = os.path.expanduser(path)
            if not (path.endswith("/") or os.path.isdir(path)):
                return path  # a file named in full (it may appear only when the job ends)
        for where in (path, folder):
            if not where:
                continue
            found = [
                f for pattern in suffix[stream] for f in glob.glob(os.path.join(where, pattern))
            ]
            if found:
                return max(found, key=os.path.getmtime)
    return None


def _pbs_states(job_ids, places=None, folder=None):
    done = _run(["qstat", "-f", *job_ids])
    if done is None:
        return None
    states = {}
    # jobs PBS no longer knows are left out (qstat names them on stderr and exits non-zero)
    for job_id, attrs in _qstat_full(done.stdout).items():
        if job_id not in job_ids or "job_state" not in attrs:
            continue
        # Torque's exit_status, PBS Pro's Exit_status, once the job has ended
        status = attrs.get("exit_status", attrs.get("Exit_status"))
        reason = f"exit status {status}" if status not in (None, "") else None
        log = _pbs_log(job_id, attrs, places or {}, folder)
        states[job_id] = JobState(job_id, attrs["job_state"], reason, log)
    return states


def job_states(kind, job_ids, log_places=None, folder=None):
    """The states of the jobs ``job_ids`` of a ``slurm`` or ``pbs`` cluster.

    Returns a dict job id -> :class:`JobState` (jobs the batch system no longer lists are
    absent), or None when the query command failed. For PBS, ``log_places`` (from
    :func:`pbs_log_places`) and ``folder`` (where the jobs were submitted from) help find the
    log files that ``qstat`` does not name.
    """
    job_ids = [str(j) for j in job_ids]
    if not job_ids:
        return {}
    if kind == "slurm":
        return _slurm_states(job_ids)
    return _pbs_states(job_ids, log_places, folder)


def _ended(kind, state):
    return state in (SLURM_ENDED if kind == "slurm" else PBS_ENDED)


def log_tail(path, lines=LOG_LINES):
    """The last ``lines`` non-empty lines of a log file, joined by `` | `` ('' if unreadable)."""
    if not path:
        return ""
    try:
        with open(path, errors="replace") as f:
            text = f.read()[-20000:]
    except OSError:
        return ""
    tail = [" ".join(t.split()) for t in text.splitlines() if t.strip()][-lines:]
    return " | ".join(tail)[-400:]


# ---------------------------------------------------------------------------------------------
# the watch
# ---------------------------------------------------------------------------------------------


class JobWatch:
    """Watch the jobs of a running dask-jobqueue cluster from a thread of this process.

    Parameters
    ----------
    cluster : dask_jobqueue.JobQueueCluster
        The cluster (its ``workers`` are the jobs, ``worker_spec`` what it should run).
    kind : {"slurm", "pbs"}
    say : callable
        Receives one line for each thing worth knowing (a pending job, a replacement).
    max_job_restarts : int
        Replacements allowed for each job of the cluster.
    worker_timeout : float
        Seconds without any connected worker before the run fails.
    interval : float
        Seconds between two looks at the jobs.
    where : str
        The cluster file, first word of the error line.
    adaptive : bool
        An adaptive cluster: lost jobs are not resubmitted here (the adaptive scaling submits
        what the load needs) and the bound on restarts counts over the whole cluster.
    expect_workers : bool
        Whether a worker must be connected at all times (not an adaptive cluster whose
        minimum is 0).
    log_places : dict, optional
        PBS: where the job script sends the logs (:func:`pbs_log_places`).
    folder : str, optional
        PBS: the folder the jobs are submitted from (where PBS writes logs by default).

    Attributes
    ----------
    fault : str or None
        Why the run must stop (one line), once it must. The thread then interrupts the main
        thread (as SIGINT does), and :meth:`check` raises it.

    Examples
    --------
    >>> JobWatch.describe([JobState("12", "FAILED", None, None)])
    'job 12 FAILED'
    """

    def __init__(
        self,
        cluster,
        kind,
        say,
        max_job_restarts,
        worker_timeout,
        interval,
        where,
        adaptive=False,
        expect_workers=True,
        log_places=None,
        folder=None,
    ):
        self.cluster = cluster
        self.log_places = log_places
        self.folder = folder
        self.kind = kind
        self.adaptive = adaptive
        self.expect_workers = expect_workers
        self.say = say or (lambda line: None)
        self.max_job_restarts = max_job_restarts
        self.worker_timeout = worker_timeout
        self.interval = interval
        self.where = where
        self.fault = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._slot = {}  # job name -> the name of the job of the cluster it stands for
        self._restarts = collections.Counter()
        self._joined = set()
        self._submitted = {}  # job id -> when it was first seen with its id
        self._handled = set()  # job ids already counted as ended
        self._reported = set()
        self._last = {}  # job id -> JobState
        self._names = {}  # job id -> job name
        self._empty_since = time.monotonic()
        self._started = time.monotonic()

    # -- life cycle ---------------------------------------------------------------------------

    def start(self):
        self._thread = threading.Thread(target=self._run, name="ppa-dask-jobwatch", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stop watching (before the cluster closes and cancels its jobs)."""
        with self._lock:
            self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)  # a query under way is not waited for

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:  # a watch that fails must not take the run with it
                logger.exception("watching the batch jobs failed")

    # -- one look -----------------------------------------------------------------------------

    def _jobs(self):
        for _ in range(5):
            try:
                return {
                    name: str(job.job_id)
                    for name, job in list(self.cluster.workers.items())
                    if getattr(job, "job_id", None)
                }
            except RuntimeError:  # changed while being read by the event loop's thread
                continue
        return {}

    def _connected(self):
        try:
            workers = list(dict(self.cluster.scheduler_info.get("workers", {})).values())
        except RuntimeError:
            return None
        return [str(w.get("name", "")) for w in workers]

    def poll(self):
        """Look at the jobs once (also called by the watch's thread every ``interval`` s)."""
        now = time.monotonic()
        jobs = self._jobs()
        for name, job_id in jobs.items():
            if job_id not in self._names:
                self._names[job_id] = name
                self._slot.setdefault(name, "cluster" if self.adaptive else name)
                self._submitted[job_id] = now
        connected = self._connected()
        if connected is not None:
            for name in jobs:
                if name not in self._joined and any(
                    w == name or w.startswith(name + "-") for w in connected
                ):
                    self._joined.add(name)
                    job_id = jobs[name]
                    self.say(
                        f"job {job_id} ({name}): worker connected "
                        f"{now - self._submitted[job_id]:.1f} s after its submission"
                    )
            if connected:
                self._empty_since = None
            elif self._empty_since is None:
                self._empty_since = now
        pending = [j for j in jobs.values() if j not in self._handled]
        states = job_states(self.kind, pending, self.log_places, self.folder)
        if states is None:
            return
        start_failures, lost = [], []
        for name, job_id in jobs.items():
            if job_id in self._handled:
                continue
            state = states.get(job_id)
            if state is None:
                old = self._last.get(job_id)
                state = JobState(job_id, "GONE", None, old.log if old else None)
            self._last[job_id] = state
            waiting = state.state in ("PENDING", "Q", "H")
            if waiting and state.reason and (job_id, state.reason) not in self._reported:
                self._reported.add((job_id, state.reason))
                meaning = _REASON_MEANING.get(state.reason.split(",")[0])
                self.say(
                    f"job {job_id} ({name}) is pending: {state.reason}"
                    + (f" ({meaning})" if meaning else "")
                    + "; waiting for it"
                )
            if not _ended(self.kind, state.state):
                continue
            self._handled.add(job_id)
            if name not in self._joined and state.state not in ENDED_FROM_OUTSIDE:
                start_failures.append(state)
            else:
                lost.append((name, state))
        if start_failures:
            self._fail(
                "worker jobs failed before a worker started: "
                + self.describe(start_failures, tail=True)
            )
            return
        if lost:
            over = [
                s for name, s in lost if self._restarts[self._slot[name]] >= self.max_job_restarts
            ]
            if over:
                self._fail(
                    f"worker jobs ended and max_job_restarts ({self.max_job_restarts}) is "
                    f"reached: {self.describe(over)}"
                )
                return
            for name, s in lost:
                slot = self._slot[name]
                self._restarts[slot] += 1
                self.say(
                    f"job {s.job_id} ({name}) ended ({s.state}) before the work did: "
                    + (
                        "the adaptive scaling submits what the load needs"
                        if self.adaptive
                        else f"submitting a replacement ({self._restarts[slot]} of at most "
                        f"{self.max_job_restarts})"
                    )
                )
            self._replace([name for name, _ in lost])
        empty = self._empty_since
        if self.expect_workers and empty is not None and now - empty > self.worker_timeout:
            alive = [self._last[j] for j in jobs.values() if j in self._last]
            self._fail(
                f"no worker connected for {self.worker_timeout:g} s (raise --worker-timeout "
                f"or worker_timeout if the queue is slow): {self.describe(alive) or 'no job'}"
            )

    @staticmethod
    def describe(states, tail=False):
        """``job 12 FAILED, log slurm-12.out`` for each job, with ``tail`` the last lines of
        the log too."""
        parts = []
        for s in states:
            text = f"job {s.job_id} {s.state}" + (f" ({s.reason})" if s.reason else "")
            if s.log:
                last = log_tail(s.log) if tail else ""
                text += f", log {s.log}" + (f": {last}" if last else "")
            parts.append(text)
        return "; ".join(parts)

    def _replace(self, names):
        cluster = self.cluster

        def replace():
            if self._stop.is_set():
                return
            fresh = []
            if not self.adaptive:
                # the new names are taken while the old ones are still there, so none is reused
                for _ in names:
                    spec = cluster.new_worker_spec()
                    fresh += list(spec)
                    cluster.worker_spec.update(spec)
            for name in names:
                cluster.worker_spec.pop(name, None)
            for old, new in zip(names, fresh):
                self._slot[new] = self._slot.get(old, old)
            # the dead jobs are closed (their cancel command is harmless) and new ones submitted
            cluster.scale(jobs=len(cluster.worker_spec))

        cluster.loop.add_callback(replace)

    def _fail(self, message):
        with self._lock:
            if self._stop.is_set() or self.fault is not None:
                return
            self.fault = f"{self.where}: {message}"
            self._stop.set()
            # the main thread unwinds as on Ctrl-C (the caller turns it into the fault): a
            # real SIGINT sent to it, which also ends a wait it is blocked in at once
            if callable(signal.getsignal(signal.SIGINT)):
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            else:
                logger.error("%s (SIGINT is ignored: the main thread is not interrupted)", message)
