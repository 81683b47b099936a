"""The records a PPA fit publishes to its distributed scheduler, one per fitted step.

Under a distributed Client, :meth:`ppa_dask.PPA.fit` logs a small record after each step on the
scheduler's event topic :data:`FIT_TOPIC` (the scheduler's ``log_event``, what
``Client.log_event`` calls). The record is sent on the Client's event loop while the fit goes on
to its next pass, and the fit waits for its records once, at its end (:func:`wait_published`):
``Client.log_event`` waits for the scheduler's answer, a millisecond per step between two passes
that a pass of a fit on two workers, 20-40 ms, does not hide. The scheduler keeps the last
events of a topic (``distributed.admin.low-level-log-length``) and the dashboard page
(:mod:`ppa_dask.cluster.dashboard`) reads them from there. Without a Client, or inside a task (the
members of an ensemble fitted on the workers), nothing is published and nothing is spent beyond
the check for a Client.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import uuid
import weakref

from ppa_dask.utils.compute import current_client

__all__ = ["FIT_TOPIC", "PUBLISH_TIMEOUT", "publish_step", "step_record", "wait_published"]

#: The scheduler event topic of the step records.
FIT_TOPIC = "ppa-fits"
#: Seconds a fit waits at its end for its step records to reach the scheduler (in all); a record
#: not sent by then is lost, not the fit.
PUBLISH_TIMEOUT = 10.0
#: Longest estimator description kept in a record (the page shows it as the fit's title).
MAX_DESCRIPTION = 300

# the id and description of each estimator's current fit (new ones at its first step: the
# description is the estimator's repr, which scikit-learn pretty-prints in about a millisecond)
_fit_ids = weakref.WeakKeyDictionary()


def step_record(
    fit_id,
    estimator,
    *,
    step,
    n_steps,
    n_samples,
    n_features,
    degree,
    candidates,
    cv_scores,
    variance,
    residual,
):
    """The record of step ``step`` (0-based) of a fit, in plain types (msgpack-serialisable).

    ``variance`` is the step's variance along its leading direction with divisor ``n_samples``;
    the record's ``explained_variance`` has the divisor ``n_samples - 1``, like the fitted
    ``explained_variance_``.

    Examples
    --------
    >>> r = step_record("f1", "PPA()", step=0, n_steps=2, n_samples=5, n_features=3, degree=2,
    ...                 candidates=[1, 2], cv_scores=[0.5, 0.25], variance=0.8, residual=0.4)
    >>> r["step"], r["degree"], r["explained_variance"], r["cv_scores"]
    (1, 2, 1.0, [0.5, 0.25])
    """
    ddof = n_samples / (n_samples - 1) if n_samples > 1 else 1.0
    return {
        "fit": str(fit_id),
        "estimator": str(estimator)[:MAX_DESCRIPTION],
        "step": int(step) + 1,
        "n_steps": int(n_steps),
        "n_samples": int(n_samples),
        "n_features": int(n_features),
        "degree": int(degree),
        "candidates": [int(g) for g in candidates],
        "cv_scores": None if cv_scores is None else [float(s) for s in cv_scores],
        "explained_variance": float(variance) * ddof,
        "residual_variance": float(residual),
    }


def publish_step(estimator, **step):
    """Send step ``step["step"]`` of ``estimator``'s fit to the current Client's scheduler.

    Does nothing without a distributed Client (or inside a task). The keywords are those of
    :func:`step_record`; a new fit id starts at step 0. The record goes out on the Client's
    event loop: the call returns at once, with a ``concurrent.futures.Future`` of the send
    (None when nothing is sent) for :func:`wait_published`. A scheduler that cannot be reached
    loses the record, not the fit.

    Examples
    --------
    >>> publish_step(object, step=0, n_steps=1, n_samples=3, n_features=2, degree=1,
    ...              candidates=[1], cv_scores=None, variance=1.0, residual=0.0) is None  # no Client
    True
    """
    client = current_client()
    if client is None:
        return None
    if step["step"] == 0 or estimator not in _fit_ids:
        _fit_ids[estimator] = (uuid.uuid4().hex[:12], repr(estimator))
    record = step_record(*_fit_ids[estimator], **step)

    async def send():
        with contextlib.suppress(OSError, TimeoutError):  # CommClosedError is an OSError
            await client.scheduler.log_event(topic=FIT_TOPIC, msg=record)

    loop = getattr(client.loop, "asyncio_loop", None)
    if loop is None or loop.is_closed():
        return None
    return asyncio.run_coroutine_threadsafe(send(), loop)


def wait_published(sends, timeout=PUBLISH_TIMEOUT):
    """Wait for the sends :func:`publish_step` returned (None entries are skipped), at most
    ``timeout`` seconds in all: after it a fit's records are on the scheduler, as
    ``Client.get_events`` then shows, unless the scheduler could not be reached in time.

    Examples
    --------
    >>> wait_published([None, None])  # nothing was sent
    """
    pending = [s for s in sends if s is not None]
    if pending:
        concurrent.futures.wait(pending, timeout=timeout)
