"""Batched Prometheus updates for the per-item hot path (work queue, reconcile workers).

prometheus_client takes a lock for every counter increment and histogram bucket, which would be
most of the queue's cost per item. A :class:`Batch` counts locally and adds
the totals to the real metric children about ``interval`` seconds later (one loop timer per
batch, armed only while something is pending), or when :meth:`Batch.flush` is called (on stop,
on demand). The timer's flush hands the members over :data:`FLUSH_SLICE` at a time, one slice per
loop iteration, so a batch of thousands of members (a controller's per-cluster series over a large
fleet) never holds the loop for the whole flush. Values seen by a scrape are therefore about
``interval`` old (plus the loop iterations of one flush); nothing is lost.

A histogram observation is one ``list.append``: the values are bucketed when flushed, in bulk.
Most flushes span few buckets (reconciles of a few ms land in the first bucket of
``reconcile_time_seconds``): the smallest and largest value tell which, and one counting pass in C
per bucket bound between them buckets every value (a pass costs a fraction of a sort). Values
spread over more than :data:`MAX_PASSES` bounds are sorted once instead, then found with one
binary search per bucket bound. The list keeps its identity across
flushes, so a hot path may bind ``h.values.append`` once, and then keeps the batch's timer armed
itself (``if batch.timer is None: batch.touch()``) once per unit of work instead of per
observation. A histogram holds at most one interval's observations (a float object each); an
``array('d')`` would take less memory but costs more per append than the rest of a no-op
reconcile's bookkeeping. One value observed many times
(:meth:`BatchedHistogram.observe_many`: a run of work items queued together waited as long) is
kept once with its count, and bucketed once per flush.

The hottest path (a worker timing each reconcile) counts instead of keeping values: a histogram's
``counts`` has one slot per bucket of the union of its targets' bounds, :meth:`BatchedHistogram.slot`
says which slot a value goes to and the range of values that share it, and the caller adds 1 to
that slot itself, calling :meth:`~BatchedHistogram.slot` again only for a value outside the
range. Consecutive reconciles mostly land in the same slot, so a value costs one comparison and
one increment (a kept value costs an append, 32 bytes until the flush, and its share of the
flush's passes). The caller adds the values' sum to ``counted_sum`` (a worker adds each run's
elapsed time, the sum of its reconciles' back-to-back durations, when the run ends). The slots'
bounds and each target's bucket per slot depend only on the targets' bounds, so histograms with
the same buckets (a controller has one per cluster) share them; only ``counts`` is a
histogram's own.

A batch belongs to one event loop. Without a running loop every update is flushed at once.
"""

from __future__ import annotations

import asyncio
import math
from bisect import bisect_left, bisect_right
from itertools import repeat
from operator import ge
from typing import Any

__all__ = ["Batch", "BatchedCounter", "BatchedHistogram"]

FLUSH_SLICE = 256
"""Members a timed flush hands to Prometheus in one loop iteration before it lets others run."""

MAX_PASSES = 3
"""Bucket bounds a flush counts values against in one pass each before it sorts them instead."""

_Bounds = tuple[float, ...]
_Layout = tuple[_Bounds, tuple[tuple[int, ...], ...]]
_SHARED_BOUNDS: dict[_Bounds, _Bounds] = {}
_LAYOUTS: dict[tuple[_Bounds, ...], _Layout] = {}
_SHARED_MAX = 256
"""Distinct bucket layouts kept for sharing (mcr's metrics have a handful; more are not shared)."""


def _shared_bounds(bounds: list[float]) -> _Bounds:
    """``bounds`` as a tuple, the same object for every child with equal bounds."""
    key = tuple(bounds)
    shared = _SHARED_BOUNDS.get(key)
    if shared is None:
        if len(_SHARED_BOUNDS) >= _SHARED_MAX:
            return key
        shared = _SHARED_BOUNDS[key] = key
    return shared


def _layout(target_bounds: tuple[_Bounds, ...]) -> _Layout:
    """The slots for targets with ``target_bounds``: every bound of any target, ascending, and
    for each target its bucket per slot (the first of its bounds at or above the slot's: every
    target bound is a slot bound, so the values of one slot share a bucket in each target).
    The same objects for equal ``target_bounds``."""
    layout = _LAYOUTS.get(target_bounds)
    if layout is None:
        bounds = tuple(sorted({bound for own in target_bounds for bound in own}))
        layout = bounds, tuple(tuple(bisect_left(own, bound) for bound in bounds) for own in target_bounds)
        if len(_LAYOUTS) < _SHARED_MAX:
            _LAYOUTS[target_bounds] = layout
    return layout


class BatchedCounter:
    """A counter child's pending increments."""

    __slots__ = ("batch", "child", "pending")

    def __init__(self, batch: Batch, child: Any) -> None:
        self.batch = batch
        self.child = child
        self.pending = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.pending += amount
        if self.batch.timer is None:
            self.batch.touch()

    def flush(self) -> None:
        if self.pending:
            pending, self.pending = self.pending, 0.0
            self.child.inc(pending)


class _Target:
    """One Prometheus histogram child that sorted values are added to.

    Uses the child's bucket bounds and values (prometheus_client attributes ``_upper_bounds``,
    ``_buckets``, ``_sum``); if they are not there (``direct``), each value is observed.
    """

    __slots__ = ("bounds", "buckets", "child", "direct", "sum")

    def __init__(self, child: Any) -> None:
        self.child = child
        bounds = getattr(child, "_upper_bounds", None)
        buckets = getattr(child, "_buckets", None)
        total = getattr(child, "_sum", None)
        # prometheus_client's private attributes, where they look as expected (else empty, unused).
        self.bounds: _Bounds = ()
        self.buckets: list[Any] = []
        self.sum: Any = total
        self.direct = True
        if (
            isinstance(bounds, list)
            and isinstance(buckets, list)
            and len(bounds) == len(buckets)
            and bounds
            and bounds[-1] == math.inf
            and total is not None
        ):
            self.bounds, self.buckets, self.direct = _shared_bounds(bounds), buckets, False

    def add_unsorted(self, values: list[float], lowest: float, highest: float, total: float) -> bool:
        """Add ``values`` (in any order; their extremes and sum given) by counting passes.

        Returns ``False``, adding nothing, when they spread over more than :data:`MAX_PASSES`
        bucket bounds (then :meth:`add` them sorted).
        """
        if self.direct:
            self.add(values, total)
            return True
        bounds = self.bounds
        first = bisect_left(bounds, lowest)  # the bucket of the smallest value (the first bound >= it)
        last = bisect_left(bounds, highest)
        if last - first > MAX_PASSES:
            return False
        buckets = self.buckets
        below = 0
        n = len(values)
        for k in range(first, last):
            upto = sum(map(ge, repeat(bounds[k], n), values))  # values <= bound, in C
            if upto > below:
                buckets[k].inc(upto - below)
                below = upto
        buckets[last].inc(len(values) - below)
        self.sum.inc(total)
        return True

    def add_counts(self, counts: list[int], buckets_of: tuple[int, ...], total: float) -> None:
        """Add ``counts[k]`` observations to bucket ``buckets_of[k]`` for each slot ``k``, and
        ``total`` to the sum (not for a ``direct`` target: its histogram's slots are scratch)."""
        per_bucket = [0] * len(self.buckets)
        for count, bucket in zip(counts, buckets_of, strict=True):
            if count:
                per_bucket[bucket] += count
        self._add_per_bucket(per_bucket, total)

    def _add_per_bucket(self, per_bucket: list[int], total: float) -> None:
        """Add ``per_bucket[i]`` observations to bucket ``i`` and ``total`` to the sum."""
        for bucket, count in zip(self.buckets, per_bucket, strict=True):
            if count:
                bucket.inc(count)
        self.sum.inc(total)

    def add_weighted(self, weighted: list[tuple[float, int]]) -> None:
        """Add each ``(value, count)`` of ``weighted``: ``value`` observed ``count`` times."""
        if self.direct:
            for value, count in weighted:
                for _ in range(count):
                    self.child.observe(value)
            return
        bounds = self.bounds
        per_bucket = [0] * len(bounds)
        total = 0.0
        for value, count in weighted:
            per_bucket[bisect_left(bounds, value)] += count  # the first bound >= value
            total += value * count
        self._add_per_bucket(per_bucket, total)

    def add(self, values: list[float], total: float) -> None:
        """Add ``values`` (sorted ascending, summing to ``total``)."""
        if self.direct:
            for value in values:
                self.child.observe(value)
            return
        count = len(values)
        below = 0
        # Prometheus buckets are stored per bucket (an observation increments the first bucket
        # whose bound is >= the value); the last bound is +Inf, so every value lands somewhere.
        for bucket, bound in zip(self.buckets, self.bounds, strict=True):
            upto = bisect_right(values, bound)
            if upto > below:
                bucket.inc(upto - below)
                below = upto
                if below == count:
                    break
        self.sum.inc(total)


class BatchedHistogram:
    """A histogram child's pending observations, bucketed when flushed: ``values`` observed once
    each, ``weighted`` ones, ``(value, count)`` pairs, and ``counts`` per slot (see :meth:`slot`)
    with their sum in ``counted_sum``.

    :meth:`mirror` adds more children that receive the same observations: when one measurement
    belongs in two histograms, the hot path records it once (and a flush sorts it at most once).
    """

    __slots__ = (
        "_buckets_of",
        "batch",
        "bounds",
        "child",
        "counted_sum",
        "counts",
        "targets",
        "values",
        "weighted",
    )

    def __init__(self, batch: Batch, child: Any) -> None:
        self.batch = batch
        self.child = child
        self.targets = [_Target(child)]
        self.values: list[float] = []
        self.weighted: list[tuple[float, int]] = []
        self.bounds: _Bounds = ()
        """The slots' upper bounds: every target's bounds, ascending, ``+Inf`` last (empty when a
        target is ``direct``: then :meth:`slot` keeps each value instead). Shared with every
        histogram whose targets have the same bounds."""
        self.counts: list[int] = []
        """Observations per slot, not yet flushed; the list keeps its identity."""
        self.counted_sum = 0.0
        """The sum of the values counted in ``counts`` (the caller adds it)."""
        self._buckets_of: tuple[tuple[int, ...], ...] = ()  # per target: its bucket for each slot
        self._merge_bounds()

    def mirror(self, child: Any) -> None:
        """Also add every observation of this histogram to ``child``.

        The slots change: pending counts are flushed first, and a caller must ask :meth:`slot`
        again for any value after this.
        """
        self._flush_counts()
        self.targets.append(_Target(child))
        self._merge_bounds()

    def _merge_bounds(self) -> None:
        targets = self.targets
        if any(target.direct for target in targets):
            self.bounds = ()
            self._buckets_of = ()
            self.counts[:] = [0]  # one scratch slot (see slot)
            return
        self.bounds, self._buckets_of = _layout(tuple(target.bounds for target in targets))
        self.counts[:] = [0] * len(self.bounds)

    def slot(self, value: float) -> tuple[int, float, float]:
        """Where to count ``value``: ``(k, low, high)``. The caller adds 1 to ``counts[k]`` (and
        ``value`` to ``counted_sum``), and may do the same for any later value ``v`` with
        ``low < v <= high`` without calling this again, until :meth:`mirror` is called.

        With a ``direct`` target this keeps ``value`` (as :meth:`observe` would, without arming
        the batch's timer) and returns a scratch slot and an empty range; the flush drops the
        scratch slot and ``counted_sum``.
        """
        bounds = self.bounds
        if not bounds:
            self.values.append(value)
            return 0, 0.0, -1.0
        k = bisect_left(bounds, value)  # bounds end with +Inf: every value has a slot
        return k, (bounds[k - 1] if k else -math.inf), bounds[k]

    def observe(self, value: float) -> None:
        """Record ``value`` (in Prometheus within the batch's interval)."""
        self.values.append(value)
        if self.batch.timer is None:
            self.batch.touch()

    def observe_many(self, value: float, count: int) -> None:
        """Record ``value`` ``count`` times (as ``count`` calls of :meth:`observe` would)."""
        if count > 0:
            self.weighted.append((value, count))
            if self.batch.timer is None:
                self.batch.touch()

    def _flush_counts(self) -> None:
        counts = self.counts
        total = self.counted_sum
        # A sum may come without counts: a worker adds a run's time when the run ends, after a
        # flush in the middle of the run (while a reconcile awaited) took the counts before it.
        if not total and not any(counts):
            return
        self.counted_sum = 0.0
        try:
            for target, buckets_of in zip(self.targets, self._buckets_of, strict=False):
                target.add_counts(counts, buckets_of, total)
        finally:
            counts[:] = repeat(0, len(counts))  # in place: hot paths hold the list

    def flush(self) -> None:
        self._flush_counts()
        weighted = self.weighted
        if weighted:
            try:
                for target in self.targets:
                    target.add_weighted(weighted)
            finally:
                del weighted[:]
        pending = self.values
        if not pending:
            return
        try:
            # Plain float addition, as prometheus_client sums observations itself (math.fsum is
            # exact but costs six times as much per value).
            total = sum(pending)
            lowest, highest = min(pending), max(pending)
            ordered = False
            for target in self.targets:
                if not target.add_unsorted(pending, lowest, highest, total):
                    if not ordered:
                        pending.sort()
                        ordered = True
                    target.add(pending, total)
        finally:
            del pending[:]  # in place: hot paths hold pending.append


class Batch:
    """A group of batched metric children flushed together."""

    __slots__ = ("_slice", "interval", "members", "timer")

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.members: dict[int, BatchedCounter | BatchedHistogram] = {}
        """The members by ``id``, in the order they were made: :meth:`discard` costs what it
        removes, not what stays (a manager disengaging 1000 clusters one by one)."""
        self.timer: asyncio.TimerHandle | bool | None = None
        """The armed flush (``None`` when nothing is pending): hot paths call :meth:`touch` only then."""
        self._slice: asyncio.Handle | None = None  # the next slice of a timed flush under way

    def counter(self, child: Any) -> BatchedCounter:
        c = BatchedCounter(self, child)
        self.members[id(c)] = c
        return c

    def histogram(self, child: Any) -> BatchedHistogram:
        h = BatchedHistogram(self, child)
        self.members[id(h)] = h
        return h

    def discard(self, members: list[BatchedCounter | BatchedHistogram]) -> None:
        """Flush ``members`` and stop batching them (they must not be used afterwards)."""
        for member in members:
            member.flush()
            self.members.pop(id(member), None)

    def touch(self) -> None:
        """Schedule a flush within ``interval`` (or flush now when no loop is running)."""
        if self.timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.timer = True  # stops members from re-entering touch() during the flush
            self.flush()
            return
        self.timer = loop.call_later(self.interval, self._flush_due, loop)

    def flush(self) -> None:
        """Hand every pending value to Prometheus now (a timed flush under way ends here)."""
        timer = self.timer
        if isinstance(timer, asyncio.TimerHandle):
            timer.cancel()
        self._cancel_slices()
        self.timer = True
        try:
            for member in self.members.values():
                member.flush()
        finally:
            self.timer = None

    def _cancel_slices(self) -> None:
        if self._slice is not None:
            self._slice.cancel()
            self._slice = None

    def _flush_due(self, loop: asyncio.AbstractEventLoop) -> None:
        """The timer's flush: the members as they are now, :data:`FLUSH_SLICE` per loop iteration.

        The timer is disarmed first, so a value that comes while the slices run arms the next
        flush; a timed flush still under way when the next one is due starts over."""
        self.timer = None
        self._cancel_slices()
        self._flush_slice(loop, list(self.members.values()), 0)

    def _flush_slice(
        self, loop: asyncio.AbstractEventLoop, members: list[BatchedCounter | BatchedHistogram], start: int
    ) -> None:
        self._slice = None
        end = start + FLUSH_SLICE
        try:
            for member in members[start:end]:
                member.flush()  # a member discarded since was flushed then: nothing is pending
        finally:
            if end < len(members):
                self._slice = loop.call_soon(self._flush_slice, loop, members, end)
