"""Batched histograms bucket exactly as prometheus_client's own ``observe`` does."""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from mcr.metrics.batching import FLUSH_SLICE, MAX_PASSES, Batch, _Target
from mcr.testing import eventually

RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
QUEUE_BUCKETS = tuple(10.0**e for e in range(-8, 2))


def _counts(child: Any) -> tuple[list[float], float]:
    return [b.get() for b in child._buckets], child._sum.get()


def _pair(buckets: tuple[float, ...]) -> tuple[Any, Any]:
    registry = CollectorRegistry()
    batched = Histogram("batched", "batched", buckets=buckets, registry=registry)
    direct = Histogram("direct", "direct", buckets=buckets, registry=registry)
    return batched, direct


CASES = {
    "one bucket": [random.uniform(0, 0.004) for _ in range(500)],
    "a few bounds": [random.uniform(0.004, 0.04) for _ in range(500)],
    "every bucket": [random.expovariate(1 / 3) for _ in range(500)],
    "on the bounds": [b for b in RECONCILE_BUCKETS[:3] for _ in range(5)] + [0.0],
    "on the bounds, sorted": [b for b in RECONCILE_BUCKETS for _ in range(2)] + [0.0, 70.0],
    "one value": [0.3],
}


class _Observer:
    """A histogram child without prometheus_client's buckets: it is observed value by value."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def observe(self, value: float) -> None:
        self.seen.append(value)


class _Mirrored:
    """A batched histogram mirrored into a second one with other bounds (counted or sorted on
    their own), and two prometheus_client histograms observed directly, for comparison."""

    def __init__(self) -> None:
        self.batch = Batch()
        self.batched, self.direct = _pair(RECONCILE_BUCKETS)
        self.queue_batched, self.queue_direct = _pair(QUEUE_BUCKETS)
        self.histogram = self.batch.histogram(self.batched)
        self.histogram.mirror(self.queue_batched)

    def observe_directly(self, value: float) -> None:
        self.direct.observe(value)
        self.queue_direct.observe(value)

    def flush_and_compare(self) -> None:
        self.batch.flush()
        assert self.histogram.values == []
        assert self.histogram.weighted == []
        for got, want in ((self.batched, self.direct), (self.queue_batched, self.queue_direct)):
            got_buckets, got_sum = _counts(got)
            want_buckets, want_sum = _counts(want)
            assert got_buckets == want_buckets
            assert got_sum == pytest.approx(want_sum)


@pytest.mark.parametrize("values", CASES.values(), ids=CASES.keys())
def test_a_flush_buckets_values_as_observe_does(values: list[float]) -> None:
    pair = _Mirrored()
    for value in values:
        pair.histogram.values.append(value)
        pair.observe_directly(value)
    pair.flush_and_compare()


def test_values_spread_over_many_bounds_are_not_counted_pass_by_pass() -> None:
    batched, _ = _pair(RECONCILE_BUCKETS)
    target = _Target(batched)
    narrow = [0.001, 0.02]  # buckets 0..2: two passes
    wide = [0.001, 0.2 * 10**MAX_PASSES]  # more bounds between them than MAX_PASSES
    assert target.add_unsorted(narrow, min(narrow), max(narrow), sum(narrow))
    assert not target.add_unsorted(wide, min(wide), max(wide), sum(wide))
    buckets, total = _counts(batched)
    assert sum(buckets) == 2, "the refused values were not added"
    assert total == pytest.approx(sum(narrow))


@pytest.mark.parametrize("values", CASES.values(), ids=CASES.keys())
def test_observe_many_buckets_as_that_many_observes(values: list[float]) -> None:
    pair = _Mirrored()
    for i, value in enumerate(values):
        count = i % 4  # 0 to 3 times (0: recorded as nothing)
        pair.histogram.observe_many(value, count)
        pair.histogram.values.append(value)  # beside single observations, in the same flush
        for _ in range(count + 1):
            pair.observe_directly(value)
    pair.flush_and_compare()


def test_observe_many_reaches_a_child_without_prometheus_buckets() -> None:
    batch = Batch()
    child = _Observer()
    histogram = batch.histogram(child)
    histogram.observe_many(0.5, 3)
    histogram.observe(0.25)
    batch.flush()
    assert sorted(child.seen) == [0.25, 0.5, 0.5, 0.5]


async def test_discard_flushes_and_drops_only_the_given_members() -> None:
    # In a running loop, observations wait for the batch's timer (or a flush).
    batch = Batch()
    children = [_Observer() for _ in range(6)]
    histograms = [batch.histogram(child) for child in children]
    for i, histogram in enumerate(histograms):
        histogram.observe(float(i))
    gone = [histograms[1], histograms[4]]
    batch.discard(gone)
    # Discarded members are flushed once, then no longer flushed by the batch.
    assert [child.seen for child in children] == [[], [1.0], [], [], [4.0], []]
    assert list(batch.members.values()) == [h for h in histograms if h not in gone]
    batch.discard(gone)  # again: nothing left to drop
    assert len(batch.members) == 4
    batch.flush()
    assert [child.seen for child in children] == [[0.0], [1.0], [2.0], [3.0], [4.0], [5.0]]


def _count(histogram: Any, value: float) -> None:
    """Count ``value`` the way a worker does (see BatchedHistogram.slot)."""
    k, low, high = histogram.slot(value)
    assert low < value <= high or not histogram.bounds
    histogram.counts[k] += 1
    histogram.counted_sum += value


@pytest.mark.parametrize("values", CASES.values(), ids=CASES.keys())
def test_counted_values_bucket_as_observe_does(values: list[float]) -> None:
    pair = _Mirrored()
    assert pair.histogram.bounds == tuple(sorted(set(RECONCILE_BUCKETS) | set(QUEUE_BUCKETS) | {math.inf}))
    for i, value in enumerate(values):
        if i % 3:
            _count(pair.histogram, value)
        else:
            pair.histogram.values.append(value)  # beside kept values, in the same flush
        pair.observe_directly(value)
    counts = pair.histogram.counts
    pair.flush_and_compare()
    assert pair.histogram.counts is counts, "the list keeps its identity"
    assert not any(counts)
    assert pair.histogram.counted_sum == 0.0


def test_a_slot_covers_the_values_of_one_bucket_in_each_target() -> None:
    pair = _Mirrored()
    k, low, high = pair.histogram.slot(0.003)
    assert (low, high) == (0.001, 0.005)  # a queue bound, then a reconcile bound
    for value in (0.0011, 0.003, 0.005):
        assert low < value <= high
        pair.histogram.counts[k] += 1
        pair.histogram.counted_sum += value
        pair.observe_directly(value)
    assert pair.histogram.slot(0.0) == (0, -math.inf, 1e-8)
    assert pair.histogram.slot(100.0)[1:] == (60.0, math.inf)
    pair.flush_and_compare()


def test_a_sum_added_after_its_counts_were_flushed_is_flushed_on_its_own() -> None:
    # A worker's run: its reconciles are counted, a flush takes the counts while a reconcile
    # awaits, and the run's time is added as the sum when the run ends.
    batch = Batch()
    batched, direct = _pair(RECONCILE_BUCKETS)
    histogram = batch.histogram(batched)
    for value in (0.003, 0.004):
        k, _, _ = histogram.slot(value)
        histogram.counts[k] += 1
        direct.observe(value)
    batch.flush()
    histogram.counted_sum += 0.007
    batch.flush()
    assert _counts(batched)[0] == _counts(direct)[0]
    assert _counts(batched)[1] == pytest.approx(0.007)
    assert histogram.counted_sum == 0.0


def test_mirroring_flushes_the_counts_taken_under_the_old_slots() -> None:
    batch = Batch()
    batched, direct = _pair(RECONCILE_BUCKETS)
    histogram = batch.histogram(batched)
    for value in (0.003, 0.02, 0.02, 7.0):
        _count(histogram, value)
        direct.observe(value)
    queue_batched, _ = _pair(QUEUE_BUCKETS)
    histogram.mirror(queue_batched)
    assert _counts(batched) == _counts(direct), "counted before the slots changed"
    assert _counts(queue_batched)[0] == [0.0] * (len(QUEUE_BUCKETS) + 1), "not mirrored back"
    assert len(histogram.counts) == len(histogram.bounds)
    assert not any(histogram.counts)


def test_histograms_with_the_same_buckets_share_their_slots_and_count_apart() -> None:
    # A controller has one reconcile-time histogram per cluster, each mirrored into the queue's
    # work duration: the slots are the same for all of them and kept once.
    first, second = _Mirrored(), _Mirrored()
    assert first.histogram.bounds is second.histogram.bounds
    assert first.histogram.targets[0].bounds is second.histogram.targets[0].bounds
    assert first.histogram.counts is not second.histogram.counts
    _count(first.histogram, 0.003)
    first.observe_directly(0.003)
    for value in (0.02, 7.0):
        _count(second.histogram, value)
        second.observe_directly(value)
    first.flush_and_compare()
    second.flush_and_compare()
    # Other buckets, other slots; mirroring moves a histogram to the slots of its new targets.
    batch = Batch()
    alone = batch.histogram(_pair(RECONCILE_BUCKETS)[0])
    assert alone.bounds == (*RECONCILE_BUCKETS, math.inf)
    assert alone.bounds is not first.histogram.bounds
    alone.mirror(_pair(QUEUE_BUCKETS)[0])
    assert alone.bounds is first.histogram.bounds


def test_counting_into_a_child_without_prometheus_buckets_keeps_each_value() -> None:
    batch = Batch()
    child = _Observer()
    histogram = batch.histogram(child)
    assert histogram.bounds == ()
    for value in (0.5, 0.25, 0.5):
        _count(histogram, value)  # every value asks slot(): the range is empty
    batch.flush()
    assert sorted(child.seen) == [0.25, 0.5, 0.5]
    assert histogram.counted_sum == 0.0
    assert not any(histogram.counts)


async def test_a_timed_flush_lets_the_loop_run_between_slices_and_loses_nothing() -> None:
    registry = CollectorRegistry()
    family = Counter("sliced", "sliced", ["i"], registry=registry)
    batch = Batch(interval=0.01)
    n = 3 * FLUSH_SLICE + 7
    counters = [batch.counter(family.labels(str(i))) for i in range(n)]
    for counter in counters:
        counter.inc()

    def flushed() -> int:
        return sum(1 for i in range(n) if family.labels(str(i))._value.get() == 1.0)

    # Sample how many reached Prometheus at every loop iteration while the timed flush runs: an
    # all-at-once flush would only ever show none or all of them.
    seen: list[int] = []
    async with asyncio.timeout(10):
        while not seen or seen[-1] < n:
            seen.append(flushed())
            await asyncio.sleep(0)
    assert any(0 < x < n for x in seen), seen
    # A value that comes after the flush went out arms the next one; nothing is lost.
    counters[0].inc(5.0)
    assert batch.timer is not None
    await eventually(lambda: family.labels("0")._value.get() == 6.0, timeout=5.0)
    assert flushed() == n - 1  # counter 0 now holds 6, every other one 1


async def test_flush_finishes_a_timed_flush_under_way() -> None:
    registry = CollectorRegistry()
    family = Counter("finished", "finished", ["i"], registry=registry)
    batch = Batch(interval=0.01)
    n = 2 * FLUSH_SLICE
    for i in range(n):
        batch.counter(family.labels(str(i))).inc()
    await eventually(lambda: family.labels("0")._value.get() == 1.0, timeout=5.0)
    batch.flush()  # the rest at once, whether the slices had come yet or not
    assert all(family.labels(str(i))._value.get() == 1.0 for i in range(n))
    assert batch.timer is None
