"""The work queue's parts: a cluster's ready items, stale-entry accounting and the queue's metrics.

Private to :mod:`mcr.workqueue` (kept apart to keep that module readable).
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mcr import metrics
from mcr._metricbatch import Batch

if TYPE_CHECKING:
    from mcr.workqueue import WorkQueue

__all__ = ["ClusterQueue", "Info", "QueueMetrics", "take_stale"]

T = TypeVar("T", bound=Hashable)

# A queued item's bookkeeping is (priority, added_at). Each cluster keeps one FIFO deque per
# priority (highest served first), so adding and taking are O(1) whatever the backlog. Raising a
# queued item's priority appends it to the higher deque and leaves a *stale* entry behind in the
# lower one; stale entries are counted per item and priority and skipped when they come up (a
# stale entry always precedes any live entry of the same item at the same priority).
Info = tuple[int, float]


class ClusterQueue(Generic[T]):
    """One cluster's ready items: a deque per priority, ``order`` lists priorities highest first.

    ``live`` counts the entries that are not stale: a cluster whose live count drops to zero
    leaves the round-robin at once (its remaining entries are all stale).
    """

    __slots__ = ("levels", "live", "name", "order")

    def __init__(self, name: str) -> None:
        self.name = name
        self.live = 0
        self.levels: dict[int, deque[T]] = {}
        self.order: list[int] = []

    def level(self, priority: int) -> deque[T]:
        """The deque of ``priority``, created (in order) if missing."""
        dq = self.levels.get(priority)
        if dq is None:
            dq = self.levels[priority] = deque()
            order = self.order
            i = 0
            while i < len(order) and order[i] > priority:
                i += 1
            order.insert(i, priority)
        return dq


def take_stale(stale: dict[T, dict[int, int]], item: T, priority: int) -> bool:
    """Consume one stale entry of ``item`` at ``priority`` if there is one (the one just popped)."""
    counts = stale[item]
    n = counts.get(priority)
    if not n:
        return False
    if n > 1:
        counts[priority] = n - 1
    else:
        del counts[priority]
        if not counts:
            del stale[item]
    return True


class QueueMetrics:
    """The queue's metrics with controller-runtime's names, at a fraction of a µs per item.

    Counts and durations are batched (:mod:`mcr._metricbatch`: in Prometheus within a second);
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

    def __init__(self, queue: WorkQueue[Any], name: str) -> None:
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
            return float(len(q._queued)) if q is not None else 0.0

        def unfinished() -> float:
            q = queue_ref()
            return q._unfinished()[0] if q is not None else 0.0

        def longest() -> float:
            q = queue_ref()
            return q._unfinished()[1] if q is not None else 0.0

        metrics.WORKQUEUE_DEPTH.labels(name, name).set_function(depth)
        metrics.WORKQUEUE_UNFINISHED_WORK_SECONDS.labels(name, name).set_function(unfinished)
        metrics.WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS.labels(name, name).set_function(longest)
