"""Batched Prometheus updates for the per-item hot path (work queue, reconcile workers).

prometheus_client takes a lock for every counter increment and histogram bucket (about 1-2 µs
each), which would be most of the queue's cost per item. A :class:`Batch` counts locally and adds
the totals to the real metric children at most ``interval`` seconds later (one loop timer per
batch, armed only while something is pending), or when :meth:`Batch.flush` is called (on stop,
on demand). Values seen by a scrape are therefore at most ``interval`` old; nothing is lost.

A histogram observation is one ``list.append``: the values are bucketed when flushed, in bulk
(sorted once in C, then one binary search per bucket bound), and at the latest every
:data:`MAX_PENDING` values, which bounds the memory a batch holds.

A batch belongs to one event loop. Without a running loop every update is flushed at once.
"""

from __future__ import annotations

import asyncio
import math
from bisect import bisect_right
from typing import Any

__all__ = ["MAX_PENDING", "Batch", "BatchedCounter", "BatchedHistogram", "observe"]

MAX_PENDING = 4096
"""Pending observations after which a histogram folds them into Prometheus without waiting."""


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
    """A histogram child's pending observations (``values``), bucketed when flushed.

    Uses the child's bucket bounds and values (prometheus_client attributes ``_upper_bounds``,
    ``_buckets``, ``_sum``); if they are not there, observes directly instead.
    """

    __slots__ = ("_batch", "_buckets", "_sum", "bounds", "child", "direct", "values")

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
            and bounds
            and bounds[-1] == math.inf
            and self._sum is not None
        )
        self.bounds: list[float] = [] if self.direct else list(bounds)  # type: ignore[arg-type]  # prometheus_client keeps bucket bounds untyped
        self.values: list[float] = []

    def observe(self, value: float) -> None:
        observe(self, value)

    def flush(self) -> None:
        values = self.values
        if not values:
            return
        self.values = []
        values.sort()
        total = len(values)
        below = 0
        # Prometheus buckets are stored per bucket (an observation increments the first bucket
        # whose bound is >= the value); the last bound is +Inf, so every value lands somewhere.
        for bucket, bound in zip(self._buckets, self.bounds, strict=True):  # type: ignore[arg-type]  # prometheus_client's private bucket list is untyped
            upto = bisect_right(values, bound)
            if upto > below:
                bucket.inc(upto - below)
                below = upto
                if below == total:
                    break
        self._sum.inc(math.fsum(values))  # type: ignore[union-attr]  # set together with _buckets for non-direct histograms


def observe(h: BatchedHistogram, value: float) -> None:
    """Record ``value`` in ``h``: a list append on the hot path, Prometheus within the interval."""
    if h.direct:
        h.child.observe(value)
        return
    values = h.values
    values.append(value)
    n = len(values)
    if n == 1:
        # The first pending value arms the batch's timer (invariant: pending values => armed).
        if h._batch._timer is None:
            h._batch.touch()
    elif n >= MAX_PENDING:
        h.flush()


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
