"""Local clusters that close quietly: distributed's reports of a shutdown working as intended.

Closing a :func:`ppa_dask.cluster.local_client` cluster, distributed logs things that are not
faults, and a command that printed them would look as if it had failed:

* in this process (:class:`ClosingClusterNoise`, installed by
  :func:`ppa_dask.cluster.local_client` while it closes the cluster): the nanny's ``Worker
  process still alive after ... seconds, killing`` (on a loaded machine a worker process took
  longer than 4 s to exit, and the nanny ended it, which is what closing asks for), and the
  scheduler's ``Received heartbeat from unregistered worker`` (closing removes the workers
  from the scheduler first, and a heartbeat one sent before it was stopped arrived after);
* a worker's ``Failed to communicate with scheduler during heartbeat.``, an error with a
  traceback (in the worker process, whose stderr is the command's): a closing worker closes its
  connections to the scheduler, also the one on which a heartbeat awaits its answer, and that
  heartbeat then fails (:class:`HeartbeatCutShortByClosing`, installed in every worker by this
  module's preload hook :func:`dask_setup`).

Each filter drops only its own messages, and only while the cluster or the worker is closing:
a heartbeat that fails while the cluster runs is still reported. The same preload drops, in
the workers, two more reports the command makes itself: a worker's ``Async instruction ...
ended with CancelledError`` while it closes (its tasks cancelled when the command ends on an
error, :class:`CancelledByClosing`), and the ``Compute Failed`` record of a task that read a
missing or damaged chunk of a Zarr input (:class:`InputErrorReported`): the command reports
that as its one line (``ppa-dask: error: Zarr chunk file ... is missing``), and a worker's
multi-line record on the command's stderr would break the one-line contract.

Examples
--------
>>> import logging
>>> record = logging.makeLogRecord({"msg": "Worker process still alive after 4.0 seconds"})
>>> ClosingClusterNoise().filter(record)
False
"""

from __future__ import annotations

import logging

__all__ = [
    "CANCELLED",
    "COMPUTE_FAILED",
    "CancelledByClosing",
    "HEARTBEAT_FAILURE",
    "InputErrorReported",
    "LATE_HEARTBEAT",
    "SLOW_EXIT",
    "ClosingClusterNoise",
    "HeartbeatCutShortByClosing",
    "dask_setup",
]

#: How distributed's nanny starts the message of a worker process it kills at close.
SLOW_EXIT = "Worker process still alive after"
#: How distributed's scheduler starts the message of a heartbeat from a worker it removed.
LATE_HEARTBEAT = "Received heartbeat from unregistered worker"
#: distributed's worker's message when a heartbeat to the scheduler fails.
HEARTBEAT_FAILURE = "Failed to communicate with scheduler during heartbeat."
#: How distributed's worker starts the record of a task that raised.
COMPUTE_FAILED = "Compute Failed"
#: How distributed's worker ends the message of its tasks cancelled as it closes.
CANCELLED = "ended with CancelledError"
#: The exceptions a task raises that the command reports on its one line (their repr's start).
_REPORTED = ("ChunkError(",)
#: The statuses (names of :class:`distributed.core.Status`) of a worker that is closing.
_CLOSING = frozenset({"closing", "closing_gracefully", "closed"})


class ClosingClusterNoise(logging.Filter):
    """Drop the nanny's record of a worker process it killed and the scheduler's of a worker's
    heartbeat after its removal: installed on their loggers while a cluster closes."""

    #: The loggers whose records it sees.
    LOGGERS = ("distributed.nanny", "distributed.scheduler")

    def filter(self, record):
        return not record.getMessage().startswith((SLOW_EXIT, LATE_HEARTBEAT))


class HeartbeatCutShortByClosing(logging.Filter):
    """Drop the record of a failed heartbeat of ``worker`` while it is closing.

    Examples
    --------
    >>> import logging, types
    >>> record = logging.makeLogRecord({"msg": HEARTBEAT_FAILURE})
    >>> worker = types.SimpleNamespace(status=types.SimpleNamespace(name="closing"))
    >>> HeartbeatCutShortByClosing(worker).filter(record)
    False
    >>> worker.status.name = "running"
    >>> HeartbeatCutShortByClosing(worker).filter(record)
    True
    """

    def __init__(self, worker):
        super().__init__()
        self.worker = worker

    def filter(self, record):
        if record.getMessage() != HEARTBEAT_FAILURE:
            return True
        return getattr(self.worker.status, "name", None) not in _CLOSING


class CancelledByClosing(logging.Filter):
    """Drop a worker's record of a task cancelled while ``worker`` closes (distributed: "this
    should exclusively happen in Worker.close()").

    Examples
    --------
    >>> import logging, types
    >>> record = logging.makeLogRecord({"msg": "Async instruction for x ended with CancelledError"})
    >>> worker = types.SimpleNamespace(status=types.SimpleNamespace(name="closing"))
    >>> CancelledByClosing(worker).filter(record)
    False
    """

    def __init__(self, worker):
        super().__init__()
        self.worker = worker

    def filter(self, record):
        if not record.getMessage().endswith(CANCELLED):
            return True
        return getattr(self.worker.status, "name", None) not in _CLOSING


class InputErrorReported(logging.Filter):
    """Drop a worker's ``Compute Failed`` record of a task that raised one of the errors the
    command reports as its one line (a missing or damaged chunk of a Zarr input).

    Examples
    --------
    >>> import logging
    >>> record = logging.makeLogRecord(
    ...     {"msg": "Compute Failed\\nException: %r\\n", "args": ("ChunkError('x')",)})
    >>> InputErrorReported().filter(record)
    False
    """

    def filter(self, record):
        message = record.getMessage()
        if not message.startswith(COMPUTE_FAILED):
            return True
        said = next((x for x in message.splitlines() if x.startswith("Exception:")), "")
        return not any(name in said for name in _REPORTED)


def dask_setup(worker):
    """Distributed's preload hook, run in each worker process as it starts: filter the
    worker's heartbeat failures and cancelled tasks while it closes, and the records of the
    input errors the command reports itself."""
    logging.getLogger("distributed.worker").addFilter(HeartbeatCutShortByClosing(worker))
    logging.getLogger("distributed.worker").addFilter(InputErrorReported())
    logging.getLogger("distributed.worker.state_machine").addFilter(CancelledByClosing(worker))
