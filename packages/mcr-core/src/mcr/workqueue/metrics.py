"""The ``workqueue_*`` metrics of one :class:`~mcr.workqueue.queue.WorkQueue`."""

from __future__ import annotations

import threading
import weakref
from typing import Protocol

from mcr import metrics
from mcr.metrics.batching import Batch

__all__ = ["MeasuredQueue", "QueueMetrics"]


class MeasuredQueue(Protocol):
    """What the gauges read of a queue when collected."""

    def __len__(self) -> int:
        """Items ready to be handed out."""
        ...

    def unfinished_work(self) -> tuple[float, float]:
        """Seconds of work in progress: in total, and of the longest-running item."""
        ...


class QueueMetrics:
    """The queue's metrics with controller-runtime's names, batched off the per-item path.

    Counts and durations are batched (:mod:`mcr.metrics.batching`: in Prometheus within a second);
    the depth and unfinished-work gauges are computed when collected, and collecting the depth
    gauge (registered before the others) from the queue's own thread flushes the batch first, so
    a scrape on the event loop sees exact values.
    """

    __slots__ = (
        "__weakref__",
        "_thread",
        "adds",
        "batch",
        "queue_append",
        "queue_duration",
        "queue_extend",
        "retries",
        "work_append",
        "work_duration",
    )

    def __init__(self, queue: MeasuredQueue, name: str) -> None:
        self.batch = Batch()
        self.adds = self.batch.counter(metrics.WORKQUEUE_ADDS_TOTAL.labels(name, name))
        self.retries = self.batch.counter(metrics.WORKQUEUE_RETRIES_TOTAL.labels(name, name))
        self.queue_duration = self.batch.histogram(
            metrics.WORKQUEUE_QUEUE_DURATION_SECONDS.labels(name, name)
        )
        self.work_duration = self.batch.histogram(metrics.WORKQUEUE_WORK_DURATION_SECONDS.labels(name, name))
        # Bound once: an observation on the hot path is one call (the arrays keep their identity).
        self.queue_append = self.queue_duration.values.append
        self.queue_extend = self.queue_duration.values.extend
        self.work_append = self.work_duration.values.append
        self._thread = threading.get_ident()
        queue_ref = weakref.ref(queue)
        self_ref = weakref.ref(self)

        def depth() -> float:
            m = self_ref()
            if m is not None and threading.get_ident() == m._thread:
                m.batch.flush()
            q = queue_ref()
            return float(len(q)) if q is not None else 0.0

        def unfinished() -> float:
            q = queue_ref()
            return q.unfinished_work()[0] if q is not None else 0.0

        def longest() -> float:
            q = queue_ref()
            return q.unfinished_work()[1] if q is not None else 0.0

        metrics.WORKQUEUE_DEPTH.labels(name, name).set_function(depth)
        metrics.WORKQUEUE_UNFINISHED_WORK_SECONDS.labels(name, name).set_function(unfinished)
        metrics.WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS.labels(name, name).set_function(longest)
