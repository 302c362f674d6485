from __future__ import annotations

import itertools

import pytest

from mcr.reconcile import Request
from mcr.workqueue.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    bucket_controller_rate_limiter,
    default_controller_rate_limiter,
)


def test_exponential_doubles_from_5ms_and_caps_at_1000s() -> None:
    rl = default_controller_rate_limiter()
    item = Request("ns", "a")
    delays = [rl.when(item) for _ in range(20)]
    assert delays[:5] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert all(b == pytest.approx(min(2 * a, 1000.0)) for a, b in itertools.pairwise(delays))
    assert rl.num_requeues(item) == 20
    many = [rl.when(item) for _ in range(2000)]  # far past float overflow of 2**n
    assert many[-1] == 1000.0


def test_exponential_is_per_item_and_forget_resets() -> None:
    rl = ItemExponentialFailureRateLimiter(0.001, 1.0)
    a, b = Request("ns", "a"), Request("ns", "b")
    assert [rl.when(a) for _ in range(3)] == pytest.approx([0.001, 0.002, 0.004])
    assert rl.when(b) == pytest.approx(0.001)
    rl.forget(a)
    assert rl.num_requeues(a) == 0
    assert rl.when(a) == pytest.approx(0.001)


def test_forget_cluster_drops_only_that_cluster() -> None:
    rl = bucket_controller_rate_limiter()
    a1, a2, b1 = Request("ns", "x", "a"), Request("ns", "y", "a"), Request("ns", "x", "b")
    for item in (a1, a2, b1, b1):
        rl.when(item)
    rl.forget_cluster("a")
    assert rl.num_requeues(a1) == 0
    assert rl.num_requeues(a2) == 0
    assert rl.num_requeues(b1) == 2


def test_bucket_allows_burst_then_spaces_at_qps() -> None:
    now = [100.0]
    rl = BucketRateLimiter(qps=10, burst=100, clock=lambda: now[0])
    assert [rl.when(i) for i in range(100)] == [0.0] * 100
    assert rl.when("x") == pytest.approx(0.1)
    assert rl.when("y") == pytest.approx(0.2)
    now[0] += 1.0  # ten tokens later: the two borrowed ones are repaid, eight remain
    assert [rl.when(i) for i in range(8)] == [0.0] * 8
    assert rl.when("w") == pytest.approx(0.1)


def test_bucket_refills_to_at_most_burst() -> None:
    now = [0.0]
    rl = BucketRateLimiter(qps=1, burst=2, clock=lambda: now[0])
    assert rl.when(1) == 0.0
    assert rl.when(2) == 0.0
    assert rl.when(3) == pytest.approx(1.0)
    now[0] += 100.0  # refills, but only up to the burst
    assert rl.when(4) == 0.0
    assert rl.when(5) == 0.0
    assert rl.when(6) == pytest.approx(1.0)


def test_max_of_takes_the_longest_delay() -> None:
    now = [0.0]
    rl = MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000), BucketRateLimiter(1, 1, clock=lambda: now[0])
    )
    item = Request("ns", "a")
    assert rl.when(item) == pytest.approx(0.005)  # bucket has its one token
    assert rl.when(item) == pytest.approx(1.0)  # bucket empty: 1 s beats 10 ms
    assert rl.num_requeues(item) == 2
    rl.forget(item)
    assert rl.num_requeues(item) == 0


def test_fast_slow() -> None:
    rl = ItemFastSlowRateLimiter(0.01, 5.0, 2)
    assert [rl.when("a") for _ in range(4)] == [0.01, 0.01, 5.0, 5.0]


def test_invalid_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        ItemExponentialFailureRateLimiter(0, 1)
    with pytest.raises(ValueError, match="burst"):
        BucketRateLimiter(10, 0)
    with pytest.raises(ValueError, match="at least one"):
        MaxOfRateLimiter()
