"""Items that wait for a deadline before joining a :class:`~mcr.workqueue.queue.WorkQueue`.

One heap and one loop timer serve every waiting item (not a task per item). An item waits at most
once: adding it again keeps the earlier deadline (and the higher priority). When a deadline
passes, the item is handed to the queue's ``ready`` callback with its priority.
"""

from __future__ import annotations

import asyncio
import heapq
import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Delayed"]

T = TypeVar("T", bound=Hashable)


class Delayed(Generic[T]):
    """The waiting items of one queue, in deadline order; belongs to one event loop.

    ``clock`` is the queue's clock; ``ready(item, priority)`` (a bound method, held weakly so
    that the queue that owns this is not kept alive by it) is called from the loop's timer callback
    when ``item``'s deadline has passed; it must not raise.
    """

    def __init__(self, clock: Callable[[], float], ready: Callable[[T, int], None]) -> None:
        self._clock = clock
        self._ready = weakref.WeakMethod(ready)
        self.waiting: dict[T, tuple[float, int]] = {}
        """Each waiting item's ``(deadline, priority)``; the queue pops an item it adds now."""
        self._heap: list[tuple[float, int, T]] = []
        self._seq = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def __len__(self) -> int:
        return len(self.waiting)

    def add(self, item: T, ready_at: float, priority: int) -> None:
        """Make ``item`` wait until ``ready_at`` (a clock reading); an earlier deadline it already
        has wins, and keeps the higher of the two priorities."""
        waiting = self.waiting.get(item)
        if waiting is not None and waiting[0] <= ready_at:
            if priority > waiting[1]:
                self.waiting[item] = (waiting[0], priority)
            return
        self.waiting[item] = (ready_at, priority)
        self._seq += 1
        heapq.heappush(self._heap, (ready_at, self._seq, item))
        if self._timer is None or ready_at < self._timer_at:
            self._arm(ready_at)

    def drop_where(self, pred: Callable[[T], bool]) -> int:
        """Stop waiting for the items ``pred`` selects; returns how many there were."""
        gone = [item for item in self.waiting if pred(item)]
        for item in gone:
            del self.waiting[item]
        return len(gone)

    def clear(self) -> None:
        """Drop every waiting item and the timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.waiting.clear()
        self._heap.clear()

    def _arm(self, ready_at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = ready_at
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(max(0.0, ready_at - self._clock()), self._fire)

    def _fire(self) -> None:
        self._timer = None
        ready = self._ready()
        if ready is None:
            return  # the queue is gone
        now = self._clock()
        heap = self._heap
        while heap and heap[0][0] <= now:
            ready_at, _, item = heapq.heappop(heap)
            waiting = self.waiting.get(item)
            if waiting is None or waiting[0] != ready_at:
                continue  # superseded by an earlier deadline, an add, or a purge
            del self.waiting[item]
            ready(item, waiting[1])
        while heap:
            ready_at, _, item = heap[0]
            waiting = self.waiting.get(item)
            if waiting is not None and waiting[0] == ready_at:
                self._arm(ready_at)
                return
            heapq.heappop(heap)
