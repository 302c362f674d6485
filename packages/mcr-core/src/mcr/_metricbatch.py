"""Batched Prometheus updates for the per-item hot path (work queue, reconcile workers).

prometheus_client takes a lock for every counter increment and histogram bucket (about 1-2 µs
each), which would be most of the queue's cost per item. A :class:`Batch` counts locally and adds
the totals to the real metric children at most ``interval`` seconds later (one loop timer per
batch, armed only while something is pending), or when :meth:`Batch.flush` is called (on stop,
on demand). Values seen by a scrape are therefore at most ``interval`` old; nothing is lost.

A batch belongs to one event loop. Without a running loop every update is flushed at once.
"""

from __future__ import annotations

import asyncio
import bisect
from typing import Any

__all__ = ["Batch", "BatchedCounter", "BatchedHistogram", "observe"]


class BatchedCounter:
    """A counter child's pending increments."""

    __slots__ = ("_batch", "child", "pending")

    def __init__(self, batch: Batch, child: Any) -> None:
        self._batch = batch
        self.child = child
        self.pending = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.pending += amount
        if self._batch._timer is None:
            self._batch.touch()

    def flush(self) -> None:
        if self.pending:
            pending, self.pending = self.pending, 0.0
            self.child.inc(pending)


class BatchedHistogram:
    """A histogram child's pending observations, bucketed locally.

    Uses the child's bucket bounds and values (prometheus_client attributes ``_upper_bounds``,
    ``_buckets``, ``_sum``); if they are not there, observes directly instead.
    """

    __slots__ = ("_batch", "_buckets", "_sum", "bounds", "child", "counts", "direct", "total")

    def __init__(self, batch: Batch, child: Any) -> None:
        self._batch = batch
        self.child = child
        bounds = getattr(child, "_upper_bounds", None)
        self._buckets = getattr(child, "_buckets", None)
        self._sum = getattr(child, "_sum", None)
        self.direct = not (
            isinstance(bounds, list)
            and isinstance(self._buckets, list)
            and len(bounds) == len(self._buckets)
            and self._sum is not None
        )
        self.bounds: list[float] = [] if self.direct else list(bounds)  # type: ignore[arg-type]  # prometheus_client keeps bucket bounds untyped
        self.counts = [0] * len(self.bounds)
        self.total = 0.0

    def observe(self, value: float) -> None:
        if self.direct:
            self.child.observe(value)
            return
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        if self._batch._timer is None:
            self._batch.touch()

    def flush(self) -> None:
        if self.direct or not any(self.counts):
            return
        counts, self.counts = self.counts, [0] * len(self.bounds)
        total, self.total = self.total, 0.0
        for bucket, n in zip(self._buckets, counts, strict=True):  # type: ignore[arg-type]  # prometheus_client's private bucket list is untyped
            if n:
                bucket.inc(n)
        self._sum.inc(total)  # type: ignore[union-attr]  # set together with _buckets for non-direct histograms


def observe(h: BatchedHistogram, value: float) -> None:
    """``h.observe(value)`` for hot paths: one Python call instead of a method lookup and call."""
    if h.direct:
        h.child.observe(value)
        return
    h.counts[bisect_left(h.bounds, value)] += 1
    h.total += value
    if h._batch._timer is None:
        h._batch.touch()


bisect_left = bisect.bisect_left


class Batch:
    """A group of batched metric children flushed together."""

    __slots__ = ("_timer", "interval", "members")

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.members: list[BatchedCounter | BatchedHistogram] = []
        self._timer: asyncio.TimerHandle | bool | None = None

    def counter(self, child: Any) -> BatchedCounter:
        c = BatchedCounter(self, child)
        self.members.append(c)
        return c

    def histogram(self, child: Any) -> BatchedHistogram:
        h = BatchedHistogram(self, child)
        self.members.append(h)
        return h

    def touch(self) -> None:
        """Schedule a flush within ``interval`` (or flush now when no loop is running)."""
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._timer = True  # stops members from re-entering touch() during the flush
            self.flush()
            return
        self._timer = loop.call_later(self.interval, self.flush)

    def flush(self) -> None:
        """Hand every pending value to Prometheus now."""
        timer = self._timer
        if isinstance(timer, asyncio.TimerHandle):
            timer.cancel()
        self._timer = True
        try:
            for member in self.members:
                member.flush()
        finally:
            self._timer = None
