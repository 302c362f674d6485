"""The ready items of a work queue, kept per cluster and per priority so that taking the next
one is O(1) and the clusters take turns (:class:`~mcr.workqueue.queue.WorkQueue` serves them
round-robin).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

__all__ = ["ClusterQueue", "Info", "Rounds", "take_stale"]

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


class Rounds(Generic[T]):
    """The clusters with ready items, taking turns: one :class:`ClusterQueue` each, in
    round-robin order, and the stale-entry counts of their items.

    The queue owns the entries' bookkeeping (``queued``: item → :data:`Info`) and passes it in;
    a cluster whose last live entry is taken leaves the rounds at once.
    """

    __slots__ = ("rr", "stale", "subs")

    def __init__(self) -> None:
        self.subs: dict[str, ClusterQueue[T]] = {}
        self.rr: deque[ClusterQueue[T]] = deque()
        self.stale: dict[T, dict[int, int]] = {}

    def join(self, cluster: str) -> ClusterQueue[T]:
        """A new (empty) sub-queue for ``cluster``, last in the round-robin."""
        sub = self.subs[cluster] = ClusterQueue(cluster)
        self.rr.append(sub)
        return sub

    def leave(self, sub: ClusterQueue[T]) -> None:
        """Take ``sub`` (the cluster whose turn it is) out of the rounds: no live entries left.

        What its deques still hold is stale; those entries' stale counts go with them.
        """
        self.rr.popleft()
        del self.subs[sub.name]
        stale = self.stale
        for priority, dq in sub.levels.items():
            for item in dq:
                if item in stale:
                    take_stale(stale, item, priority)

    def pop(self, queued: dict[T, Info]) -> tuple[Any, Info | None, deque[T] | None]:
        """Take the next live entry in round-robin order and drop it from ``queued``.

        Returns ``(item, info, fast)``, or ``(None, None, None)`` when nothing is ready. ``fast``
        is the deque the next items come from while this stays the only cluster with ready items,
        all at one priority (the queue's fast path), else ``None``.
        """
        rr = self.rr
        stale = self.stale
        while rr:
            sub = rr[0]
            levels = sub.levels
            order = sub.order
            while order:
                priority = order[0]
                dq = levels[priority]
                while dq:
                    item = dq.popleft()
                    if stale and item in stale and take_stale(stale, item, priority):
                        continue
                    found = queued.pop(item, None)
                    if found is None:
                        continue  # cannot happen: every entry is live or counted stale
                    if not dq:
                        del levels[priority]
                        del order[0]
                    sub.live -= 1
                    if not sub.live:
                        self.leave(sub)
                        return item, found, None
                    if len(rr) > 1:
                        rr.rotate(-1)  # this cluster's turn is over
                        return item, found, None
                    # The only cluster with ready items: its next items come from the fast path
                    # until a cluster or a level is added (or a requeue happens).
                    return item, found, levels[order[0]] if len(order) == 1 else None
                del levels[priority]
                del order[0]
            self.leave(sub)
        return None, None, None

    def forget(self, cluster: str, queued: dict[T, Info]) -> int:
        """Drop ``cluster``'s sub-queue and its entries from ``queued``; returns how many were live."""
        sub = self.subs.pop(cluster, None)
        if sub is None:
            return 0
        self.rr.remove(sub)
        stale = self.stale
        dropped = 0
        for dq in sub.levels.values():
            for item in dq:
                if stale:
                    stale.pop(item, None)
                if queued.pop(item, None) is not None:
                    dropped += 1
        return dropped
