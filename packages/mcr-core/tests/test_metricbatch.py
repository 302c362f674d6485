"""Batched histograms bucket exactly as prometheus_client's own ``observe`` does."""

from __future__ import annotations

import random
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Histogram

from mcr._metricbatch import MAX_PASSES, Batch, _Target

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
    class Child:
        def __init__(self) -> None:
            self.seen: list[float] = []

        def observe(self, value: float) -> None:
            self.seen.append(value)

    batch = Batch()
    child = Child()
    histogram = batch.histogram(child)
    histogram.observe_many(0.5, 3)
    histogram.observe(0.25)
    batch.flush()
    assert sorted(child.seen) == [0.25, 0.5, 0.5, 0.5]
