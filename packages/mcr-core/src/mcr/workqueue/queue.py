"""The work queue between event handlers and reconcile workers.

It behaves like controller-runtime's priority queue, plus fairness across clusters:

- **De-duplication.** An item is at most once in the queue. An item handed to a worker is
  *processing* until :meth:`WorkQueue.done`; adding it meanwhile marks it dirty, and ``done``
  puts it back, so one key is never processed by two workers at once and no update is lost.
- **Priorities.** Higher first (default 0; initial-list events use :data:`LOW_PRIORITY`, -100),
  first in first out within a priority. Adding a queued item with a higher priority raises it
  (behind the items already at that priority). Adding and taking cost O(1) whatever the backlog
  (a deque per priority and cluster); :meth:`WorkQueue.add_many` queues a whole list at once.
- **Fair across clusters.** Each cluster (the item's ``cluster_name``) has its own sub-queue and
  :meth:`WorkQueue.get` serves the clusters round-robin, priority first within each, so a cluster
  with a backlog of thousands does not starve another.
- **Delays and backoff.** :meth:`WorkQueue.add_after` waits on one shared timer (a heap and a
  single loop callback, not a task per item). :meth:`WorkQueue.add_rate_limited` asks the rate
  limiter for the delay; :meth:`WorkQueue.forget` clears an item's backoff.
- **Per-cluster purge.** :meth:`WorkQueue.forget_cluster` drops a cluster's queued, dirty,
  delayed and backed-off items and its rate-limiter state.
- **Shutdown.** :meth:`WorkQueue.shutdown` stops handing out items (waiting ``get`` calls raise
  :class:`QueueShutDown`); with ``drain=True`` it waits until every processing item is done.

The queue belongs to one event loop and is not thread-safe. Metrics use controller-runtime's
``workqueue_*`` names with labels ``name`` and ``controller``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from itertools import repeat
from operator import itemgetter
from operator import sub as _minus
from typing import Any, Generic, TypeVar

from mcr.metrics.batching import Batch, BatchedHistogram
from mcr.workqueue.delay import Delayed
from mcr.workqueue.fair import ClusterQueue, Info, Rounds
from mcr.workqueue.metrics import QueueMetrics
from mcr.workqueue.ratelimit import RateLimiter, cluster_of, default_controller_rate_limiter
from mcr.workqueue.waiters import Waiters

__all__ = ["LOW_PRIORITY", "QueueShutDown", "WorkQueue"]

LOW_PRIORITY = -100
"""The priority of events from an informer's initial list (controller-runtime's ``LowPriority``)."""

T = TypeVar("T", bound=Hashable)


class QueueShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down."""


class WorkQueue(Generic[T]):
    """A de-duplicating, prioritised, rate-limited work queue that is fair across clusters.

    ``name`` labels the metrics (both ``name`` and ``controller``; ``""`` disables metrics).
    ``rate_limiter`` defaults to controller-runtime's per-item exponential backoff (5 ms..1000 s).
    ``cluster_of`` maps an item to its cluster (default: its ``cluster_name`` attribute).
    """

    def __init__(
        self,
        name: str = "",
        *,
        rate_limiter: RateLimiter | None = None,
        cluster_of: Callable[[Any], str] = cluster_of,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.rate_limiter: RateLimiter = rate_limiter or default_controller_rate_limiter()
        self._cluster_of = cluster_of
        self.clock = clock
        """The queue's clock (``time.monotonic`` unless given): enqueue and hand-out times."""
        self._queued: dict[T, Info] = {}
        self._rounds: Rounds[T] = Rounds()
        # The rounds' containers, bound once: the hot paths read them directly.
        self._subs = self._rounds.subs
        self._rr = self._rounds.rr
        self._stale = self._rounds.stale
        # The deque _pop may take from directly: set while exactly one cluster has ready items,
        # all at one priority; any new cluster, level or requeue in between clears it.
        self._fast: deque[T] | None = None
        self._processing: dict[T, float] = {}
        self._dirty: dict[T, int] = {}
        self._delayed: Delayed[T] = Delayed(clock, self.add)
        self._waiting = self._delayed.waiting
        self._waiters = Waiters()
        self._getters = self._waiters.futures  # empty: nobody to wake
        self.popped_at = 0.0
        """The :attr:`clock` reading when the last item was handed out (a worker's start time)."""
        self._shutting_down = False
        self._drained: asyncio.Event | None = None
        self.backed_off: set[T] = set()
        """Items whose failures :meth:`add_rate_limited` recorded in the rate limiter and that
        :meth:`forget` has not cleared since (read it, do not change it). A worker may skip
        ``forget`` for an item not in it: the limiter has no history of that item from this queue."""
        self._metrics = QueueMetrics(self, name) if name else None

    def flush_metrics(self) -> None:
        """Hand recorded counts and durations to Prometheus now (normally within a second)."""
        if self._metrics is not None:
            self._metrics.batch.flush()

    # --- adding -----------------------------------------------------------------------------

    def add(self, item: T, priority: int = 0) -> None:
        """Queue ``item`` now (no-op after shutdown).

        Queued already: only raises its priority. Processing: marks it dirty, so ``done`` requeues
        it. Waiting for a delay: the delay is dropped, the item is ready now.
        """
        if self._shutting_down:
            return
        queued = self._queued
        if item in queued or item in self._processing or (self._waiting and item in self._waiting):
            self._add_known(item, priority)
            return
        # A new item, the path of nearly every event: _push, inlined.
        queued[item] = (priority, self.clock())
        of = self._cluster_of
        if of is cluster_of:
            # cluster_of, inlined for the default mapping.
            cluster = getattr(item, "cluster_name", "")
            if cluster.__class__ is not str and not isinstance(cluster, str):
                cluster = ""
        else:
            cluster = of(item)
        sub = self._subs.get(cluster) or self._new_sub(cluster)
        sub.live += 1
        dq = sub.levels.get(priority)
        if dq is None:
            dq = sub.level(priority)
            self._fast = None
        dq.append(item)
        m = self._metrics
        if m is not None:
            adds = m.adds  # adds.inc(), inlined
            adds.pending += 1.0
            if adds.batch.timer is None:
                adds.batch.touch()
        if self._getters:
            self._waiters.wake_one()

    def _add_known(self, item: T, priority: int) -> None:
        """The rest of :meth:`add`: ``item`` is waiting, processing or queued already."""
        waiting = self._waiting
        if waiting and item in waiting:
            priority = max(priority, waiting.pop(item)[1])
        m = self._metrics
        if item in self._processing:
            old = self._dirty.get(item)
            if old is None or priority > old:
                self._dirty[item] = priority
            if m is not None:
                m.adds.inc()
            return
        info = self._queued.get(item)
        if info is None:
            # It was waiting only: ready now.
            self._push(item, priority, self.clock())
            if m is not None:
                m.adds.inc()
            if self._getters:
                self._waiters.wake_one()
        elif priority > info[0]:
            # The entry at the old priority goes stale; _pop skips it.
            counts = self._stale.setdefault(item, {})
            counts[info[0]] = counts.get(info[0], 0) + 1
            self._push(item, priority, info[1], fresh=False)

    def add_many(self, items: list[T], priority: int = 0, *, cluster: str | None = None) -> None:
        """:meth:`add` each of ``items`` in order, at ``priority``: one call for a whole list.

        ``cluster``: the caller vouches that every item belongs to that cluster (as
        ``cluster_of`` maps it). Then, when none of the items is queued, processing or waiting
        yet (an informer's list, typically), they are queued by a few C-level bulk operations;
        otherwise each takes the path of :meth:`add`. New items share one enqueue time.
        """
        if self._shutting_down or not items:
            return
        queued = self._queued
        processing = self._processing
        waiting = self._waiting
        if (
            cluster is not None
            and (not queued or queued.keys().isdisjoint(items))
            and (not processing or processing.keys().isdisjoint(items))
            and (not waiting or waiting.keys().isdisjoint(items))
        ):
            fresh = dict.fromkeys(items, (priority, self.clock()))
            if queued:
                queued.update(fresh)
            else:
                self._queued = fresh  # nothing to merge with: adopt the new dict
            sub = self._subs.get(cluster) or self._new_sub(cluster)
            if priority not in sub.levels:
                self._fast = None
            sub.level(priority).extend(fresh)
            added = len(fresh)
            sub.live += added
            m = self._metrics
            if m is not None:
                m.adds.inc(added)
            getters = self._getters
            while added and getters:
                self._waiters.wake_one()
                added -= 1
            return
        for item in items:
            self.add(item, priority)

    def add_after(self, item: T, delay: float, priority: int = 0) -> None:
        """Queue ``item`` after ``delay`` seconds (now if ``delay <= 0``; no-op after shutdown).

        An item already queued stays queued (it is ready sooner); an item already waiting keeps
        the earlier of the two deadlines.
        """
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item, priority)
            return
        if item in self._queued:
            return
        self._delayed.add(item, self.clock() + delay, priority)

    def add_rate_limited(self, item: T, priority: int = 0) -> None:
        """Queue ``item`` after the delay its rate limiter gives for one more failure."""
        if self._shutting_down:
            return
        if self._metrics is not None:
            self._metrics.retries.inc()
        self.backed_off.add(item)
        self.add_after(item, self.rate_limiter.when(item), priority)

    def forget(self, item: T) -> None:
        """Clear ``item``'s failure history in the rate limiter (call on success)."""
        self.backed_off.discard(item)
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many times ``item`` has been requeued for failures since it was last forgotten."""
        return self.rate_limiter.num_requeues(item)

    # --- taking -----------------------------------------------------------------------------

    async def get(self) -> T:
        """The next item, waiting for one; it is processing until :meth:`done`.

        Raises :class:`QueueShutDown` once the queue is shut down. On cancellation no item is
        taken (a wake-up meant for this call is passed on).
        """
        while True:
            # Shut down means no new work, even with items still queued (drain only waits for
            # the items already processing).
            if self._shutting_down:
                raise QueueShutDown(f"work queue {self.name!r} is shut down")
            item = self._pop()
            if item is not _NOTHING:
                self._arm_metrics()
                return item  # type: ignore[return-value]  # _pop returns T or the sentinel
            await self._waiters.wait()

    async def wait(self) -> None:
        """Wait until an item is ready; take it with :meth:`take` (or :meth:`get_nowait`).

        Returns at once if one is ready; raises :class:`QueueShutDown` once the queue is shut
        down. Nothing is taken here, so another caller may take the item first (take returns
        nothing then, and the caller waits again). Each item added wakes one waiting caller (of
        this method or of :meth:`get`); a wake-up that reaches a cancelled call is passed on.
        """
        if self._shutting_down:
            raise QueueShutDown(f"work queue {self.name!r} is shut down")
        if self._queued:
            return
        await self._waiters.wait()
        if self._shutting_down:
            raise QueueShutDown(f"work queue {self.name!r} is shut down")

    def get_nowait(self) -> T | None:
        """The next item if one is ready, else ``None`` (also after shutdown)."""
        if self._shutting_down:
            return None
        item = self._pop()
        if item is _NOTHING:
            return None
        self._arm_metrics()
        return item  # type: ignore[return-value]  # _pop returns T or the sentinel

    def take(self, limit: int) -> list[T]:
        """Up to ``limit`` ready items at once, in the order :meth:`get_nowait` would hand them out.

        Each is processing (until :meth:`done` or :meth:`finish`) from now on, and :attr:`popped_at`
        is the clock reading of the hand-out (of its last item). Empty when nothing is ready and
        after shutdown. For a worker that runs many short items back to back: one call instead of
        one per item.
        """
        if self._shutting_down or limit < 1:
            return []
        fast = self._fast
        if fast is None and len(self._rr) == 1 and len(order := self._rr[0].order) == 1:
            # One cluster with ready items at one priority (_pop sets this up after one pop).
            fast = self._fast = self._rr[0].levels[order[0]]
        items: list[Any]
        if not fast or self._stale or limit == 1:
            items = []
            pop = self._pop
            while len(items) < limit and (item := pop()) is not _NOTHING:
                items.append(item)
        else:
            # One cluster, one priority, only live entries (see _pop): take a run of its deque.
            # Bulk operations (each a C-level loop) instead of one Python-level step per item.
            sub = self._rr[0]
            if limit >= len(fast):
                items = list(fast)
                fast.clear()
            else:
                items = [fast.popleft() for _ in range(limit)]
            now = self.popped_at = self.clock()
            infos = list(map(self._queued.pop, items))
            self._processing.update(dict.fromkeys(items, now))
            m = self._metrics
            if m is not None:
                first = infos[0]
                if len(infos) > 1 and first is infos[-1]:
                    # Queued by one call (add_many): the deque holds that call's entries side by
                    # side, so every item of the run waited as long. One value and its count.
                    m.queue_duration.observe_many(now - first[1], len(infos))
                else:
                    # now - added_at for each, without a Python-level step per item
                    m.queue_extend(map(_minus, repeat(now, len(infos)), map(_added_at, infos)))
            sub.live -= len(items)
            if not sub.live:
                self._drop(sub)
        if items:
            self._arm_metrics()
        return items

    def done(self, item: T) -> None:
        """Mark ``item`` processed; if it was added meanwhile, queue it again."""
        start = self._processing.pop(item, None)
        m = self._metrics
        if start is not None and m is not None:
            m.work_append(self.clock() - start)
            self._arm_metrics()
        if self._dirty or self._drained is not None:
            self._after_done(item)

    def finish(self, item: T) -> None:
        """:meth:`done` without recording ``item``'s work duration.

        For a worker that records that duration itself, in a histogram that
        :meth:`mirror_work_duration` links to the queue's: the measurement is taken once.
        """
        self._processing.pop(item, None)
        if self._dirty or self._drained is not None:
            self._after_done(item)

    def finish_all(self, items: list[T]) -> None:
        """:meth:`finish` each of ``items``, in one call; those not processing are skipped.

        For a worker that took a run of items (:meth:`take`) and ends it as a whole: an item
        added while the run was under way is put back when the run ends.
        """
        _consume(map(self._processing.pop, items, repeat(None, len(items))))
        if self._dirty or self._drained is not None:
            for item in items:
                self._after_done(item)

    @property
    def metrics_batch(self) -> Batch | None:
        """The batch the queue's metrics are flushed with (``None``: an unnamed queue, no metrics).

        A worker may record its own metrics in it: they are flushed together.
        """
        return self._metrics.batch if self._metrics is not None else None

    def mirror_work_duration(self, histogram: BatchedHistogram) -> None:
        """Add every observation of ``histogram`` to the queue's work duration too (see :meth:`finish`)."""
        if self._metrics is not None:
            histogram.mirror(self._metrics.work_duration.child)

    def _after_done(self, item: T) -> None:
        """The rest of :meth:`done` once ``item`` left ``_processing``: requeue it if it was
        added meanwhile, and wake a draining :meth:`shutdown`."""
        if self._dirty:
            priority = self._dirty.pop(item, None)
            if priority is not None and not self._shutting_down:
                self._push(item, priority, self.clock())
                if self._getters:
                    self._waiters.wake_one()
        if self._drained is not None and not self._processing:
            self._drained.set()

    # --- lifecycle ----------------------------------------------------------------------------

    def forget_cluster(self, cluster_name: str) -> int:
        """Purge ``cluster_name``: queued, dirty, delayed items and its rate-limiter state.

        Items of that cluster that are processing stay processing until ``done`` but are not
        requeued. Returns how many queued or waiting items were dropped.
        """
        self._fast = None
        dropped = self._rounds.forget(cluster_name, self._queued)
        of = self._cluster_of
        dropped += self._delayed.drop_where(lambda item: of(item) == cluster_name)
        for item in [item for item in self._dirty if of(item) == cluster_name]:
            del self._dirty[item]
        self.backed_off.difference_update([item for item in self.backed_off if of(item) == cluster_name])
        self.rate_limiter.forget_cluster(cluster_name)
        return dropped

    async def shutdown(self, drain: bool = False) -> None:
        """Stop handing out items; waiting and future ``get`` calls raise :class:`QueueShutDown`.

        Adds are ignored from now on and delayed items are dropped. With ``drain=True`` this waits
        until every processing item is ``done``. Repeat calls are harmless.
        """
        self._shutting_down = True
        self.flush_metrics()
        self._delayed.clear()
        self._waiters.wake_all()
        if drain and self._processing:
            if self._drained is None:
                self._drained = asyncio.Event()
            await self._drained.wait()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    # --- inspection ---------------------------------------------------------------------------

    def __len__(self) -> int:
        """Items ready to be handed out (not counting processing or delayed ones)."""
        return len(self._queued)

    def processing(self) -> list[T]:
        """Items handed out and not yet done."""
        return list(self._processing)

    def waiting(self) -> int:
        """Items waiting for a delay or backoff."""
        return len(self._waiting)

    def depth_by_cluster(self) -> dict[str, int]:
        """Ready items per cluster."""
        counts: dict[str, int] = {}
        of = self._cluster_of
        for item in self._queued:
            name = of(item)
            counts[name] = counts.get(name, 0) + 1
        return counts

    # --- internals ----------------------------------------------------------------------------

    def _push(self, item: T, priority: int, added_at: float, *, fresh: bool = True) -> None:
        """Queue an entry for ``item``; ``fresh=False`` when it replaces one that just went stale."""
        self._fast = None
        self._queued[item] = (priority, added_at)
        cluster = self._cluster_of(item)
        sub = self._subs.get(cluster) or self._new_sub(cluster)
        if fresh:
            sub.live += 1
        sub.level(priority).append(item)

    def _pop(self) -> object:
        """The next ready item (now processing), round-robin over clusters; else ``_NOTHING``."""
        fast = self._fast
        found: Info | None = None
        if fast and not self._stale:
            # One cluster has ready items, at one priority, none stale: no turn or level to
            # choose, and the deque holds live entries only.
            item = fast.popleft()
            found = self._queued.pop(item, None)
            if found is not None:
                sub = self._rr[0]
                sub.live -= 1
                if not sub.live:
                    self._drop(sub)
        if found is None:
            item, found, self._fast = self._rounds.pop(self._queued)
            if found is None:
                return _NOTHING
        now = self.popped_at = self.clock()
        self._processing[item] = now
        m = self._metrics
        if m is not None:
            # The caller arms the metric batch's timer (see _arm_metrics).
            m.queue_append(now - found[1])
        return item

    def _drop(self, sub: ClusterQueue[T]) -> None:
        """Take ``sub`` (the cluster whose turn it is) out of the rounds; ends the fast path."""
        self._rounds.leave(sub)
        self._fast = None

    def _new_sub(self, cluster: str) -> ClusterQueue[T]:
        """A new (empty) sub-queue for ``cluster``, last in the round-robin; ends the fast path."""
        self._fast = None
        return self._rounds.join(cluster)

    def _arm_metrics(self) -> None:
        """Make sure recorded metrics reach Prometheus within the batch interval."""
        m = self._metrics
        if m is not None and m.batch.timer is None:
            m.batch.touch()

    def unfinished_work(self) -> tuple[float, float]:
        """Seconds of work in progress: the sum over processing items, and the longest of them.

        Measured with :attr:`clock` from each hand-out; ``(0.0, 0.0)`` while nothing is processing.
        """
        now = self.clock()
        total = 0.0
        longest = 0.0
        for start in self._processing.values():
            age = now - start
            total += age
            longest = max(longest, age)
        return total, longest


_NOTHING = object()
_added_at = itemgetter(1)  # of an Info
_consume: Callable[[Iterable[Any]], None] = deque[Any](maxlen=0).extend  # runs an iterator out, in C
