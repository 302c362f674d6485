"""The controller work queue and its rate limiters (client-go's ``workqueue``).

:mod:`mcr.workqueue.queue` holds :class:`WorkQueue`; :mod:`mcr.workqueue.ratelimit` the per-item
and bucket rate limiters; :mod:`mcr.workqueue.metrics` the ``workqueue_*`` metrics of one queue.
"""

from __future__ import annotations

from mcr.workqueue.queue import (
    LOW_PRIORITY,
    QueueShutDown,
    WorkQueue,
)

__all__ = [
    "LOW_PRIORITY",
    "QueueShutDown",
    "WorkQueue",
]
