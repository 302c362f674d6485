"""What a reconcile's outcome does to its request (controller-runtime's result semantics).

=======================  ===================================================  ================
reconcile outcome        queue action                                         ``result`` label
=======================  ===================================================  ================
returns None / Result()  forget (clear backoff)                               success
``requeue_after > 0``    forget, then add after the delay (with ``priority``)  requeue_after
raises TerminalError     forget, no requeue; counted as error and terminal    error
raises anything else     add rate-limited (per-item backoff), logged w/ trace  error
=======================  ===================================================  ================

A :class:`~mcr.errors.ClusterNotFoundError` counts as success: the cluster is gone, retrying
cannot help. The worker handles the common ``None`` itself; these functions the other outcomes,
and the requests a worker holds but must not reconcile (:func:`drop_unserved`,
:func:`drop_unfenced`).
"""

from __future__ import annotations

import logging

from mcr.controller.engagement import ClusterMetrics
from mcr.controller.fence import Tenure
from mcr.errors import ClusterNotFoundError, TerminalError
from mcr.reconcile import Request, Result
from mcr.workqueue import WorkQueue

__all__ = ["drop_unfenced", "drop_unserved", "record_failure", "record_result"]

log = logging.getLogger("mcr.controller")


def record_failure(
    queue: WorkQueue[Request], req: Request, exc: Exception, m: ClusterMetrics, *, timed: bool
) -> None:
    """Record a reconcile that raised ``exc`` and requeue it unless that is pointless.

    ``timed``: the controller bounds reconciles, so a ``TimeoutError`` counts as a timeout too.
    """
    if isinstance(exc, TerminalError):
        queue.forget(req)
        m.error.inc()
        m.errors.inc()
        m.terminal.inc()
        log.error("terminal reconciler error (not requeued)", exc_info=exc)
    elif isinstance(exc, ClusterNotFoundError):
        queue.forget(req)
        m.success.inc()
        log.debug("dropping request: %s", exc)
    else:
        queue.add_rate_limited(req)
        m.error.inc()
        m.errors.inc()
        if isinstance(exc, TimeoutError) and timed:
            m.timeouts.inc()
        log.error("reconciler error", exc_info=exc)


def record_result(queue: WorkQueue[Request], req: Request, result: object, m: ClusterMetrics) -> None:
    """Act on what a reconcile returned other than ``None`` (the worker handles that)."""
    if not isinstance(result, Result):
        queue.add_rate_limited(req)
        m.error.inc()
        m.errors.inc()
        log.error(
            "reconciler returned %r, expected mcr.Result or None; requeued with backoff",
            type(result).__name__,
        )
        return
    after = result.requeue_after
    if after is not None and after > 0:
        queue.forget(req)
        queue.add_after(req, after, result.priority or 0)
        m.requeue_after.inc()
    else:
        queue.forget(req)
        m.success.inc()


def drop_unserved(queue: WorkQueue[Request], req: Request, controller: str, *, handed_over: bool) -> None:
    """Let a held request go unreconciled: its cluster is being handed over or is not engaged.

    A cluster being handed over (``handed_over``; the request was held since the run was taken,
    or enqueued since by another cluster's mapping): not started, so it goes like a queued
    request; a cluster not engaged: its backoff is forgotten too. Either way it stops processing
    with the rest of its run. (A run taken before a shutdown is finished, as the request in
    flight is.)
    """
    cluster = req.cluster_name
    if handed_over:
        log.debug("dropping %s: cluster %r is being handed over", req, cluster)
        return
    queue.forget(req)
    log.debug("dropping %s: cluster %r is not engaged", req, cluster, extra={"controller": controller})


def drop_unfenced(
    queue: WorkQueue[Request], req: Request, fence: Tenure, leadership: Tenure, controller: str
) -> None:
    """Let a request go unreconciled: this replica is no longer sure it holds the cluster's
    ``fence`` or its ``leadership`` (the cluster is being given up, or the manager is stopping)."""
    queue.forget(req)
    lost = fence if fence.valid_until <= queue.clock() else leadership
    log.debug("dropping %s: %s is not held", req, lost.name, extra={"controller": controller})
