"""Rate limiters: how long a failed item waits before it is handed out again.

The defaults match controller-runtime: a per-item exponential backoff from 5 ms doubling up to
1000 s (:func:`default_controller_rate_limiter`), optionally combined with an overall token bucket
of 10 qps and burst 100 through :class:`MaxOfRateLimiter` (:func:`bucket_controller_rate_limiter`).

Limiters are used from one event loop; they are not thread-safe. Every limiter can forget a whole
cluster's state at once (:meth:`RateLimiter.forget_cluster`), which the work queue calls when a
cluster is disengaged. An item's cluster is its ``cluster_name`` attribute (``""`` if it has none).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Protocol, runtime_checkable

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "bucket_controller_rate_limiter",
    "cluster_of",
    "default_controller_rate_limiter",
]


def cluster_of(item: object) -> str:
    """The cluster an item belongs to: its ``cluster_name`` attribute, ``""`` without one."""
    name = getattr(item, "cluster_name", "")
    return name if isinstance(name, str) else ""


@runtime_checkable
class RateLimiter(Protocol):
    """Decides the delay before a failed item is retried."""

    def when(self, item: Hashable) -> float:
        """Record one more failure of ``item`` and return how long (seconds) it should wait."""
        ...

    def forget(self, item: Hashable) -> None:
        """Drop ``item``'s failure history (it succeeded, or is no longer tracked)."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """How many failures of ``item`` are on record."""
        ...

    def forget_cluster(self, cluster_name: str) -> None:
        """Drop the failure history of every item of ``cluster_name``."""
        ...


class ItemExponentialFailureRateLimiter:
    """Per-item exponential backoff: ``base * 2**failures``, capped at ``max_delay``.

    The first failure waits ``base`` (5 ms by default), the next 10 ms, 20 ms, ... up to
    ``max_delay`` (1000 s by default).
    """

    __slots__ = ("_failures", "base", "max_delay")

    def __init__(self, base: float = 0.005, max_delay: float = 1000.0) -> None:
        if base <= 0 or max_delay <= 0:
            raise ValueError(f"backoff base ({base}) and max_delay ({max_delay}) must be positive")
        self.base = base
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        if failures > 1023:  # 2.0**1024 overflows a float; the cap is long reached by then
            return self.max_delay
        return min(self.base * 2.0**failures, self.max_delay)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)

    def forget_cluster(self, cluster_name: str) -> None:
        _drop_cluster(self._failures, cluster_name)


class ItemFastSlowRateLimiter:
    """``fast_delay`` for the first ``max_fast_attempts`` failures of an item, then ``slow_delay``."""

    __slots__ = ("_failures", "fast_delay", "max_fast_attempts", "slow_delay")

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        failures = self._failures.get(item, 0) + 1
        self._failures[item] = failures
        return self.fast_delay if failures <= self.max_fast_attempts else self.slow_delay

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)

    def forget_cluster(self, cluster_name: str) -> None:
        _drop_cluster(self._failures, cluster_name)


class BucketRateLimiter:
    """An overall token bucket: ``qps`` tokens per second, at most ``burst`` saved up.

    Each call to :meth:`when` reserves one token and returns how long until that token exists, so
    a burst of failures beyond ``burst`` is spread out at ``qps``. Items have no history here.
    """

    __slots__ = ("_clock", "_last", "_tokens", "burst", "qps")

    def __init__(
        self, qps: float = 10.0, burst: int = 100, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"bucket needs qps > 0 and burst >= 1 (got qps={qps}, burst={burst})")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def when(self, item: Hashable) -> float:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, item: Hashable) -> None:
        return None

    def num_requeues(self, item: Hashable) -> int:
        return 0

    def forget_cluster(self, cluster_name: str) -> None:
        return None


class MaxOfRateLimiter:
    """Combines limiters: every limiter records the failure, the longest delay wins."""

    __slots__ = ("limiters",)

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)

    def forget_cluster(self, cluster_name: str) -> None:
        for limiter in self.limiters:
            limiter.forget_cluster(cluster_name)


def default_controller_rate_limiter() -> RateLimiter:
    """controller-runtime's default: per-item exponential backoff, 5 ms to 1000 s."""
    return ItemExponentialFailureRateLimiter(0.005, 1000.0)


def bucket_controller_rate_limiter(qps: float = 10.0, burst: int = 100) -> RateLimiter:
    """client-go's classic default: ``MaxOf(exponential 5 ms..1000 s, bucket 10 qps / burst 100)``."""
    return MaxOfRateLimiter(ItemExponentialFailureRateLimiter(0.005, 1000.0), BucketRateLimiter(qps, burst))


def _drop_cluster(failures: dict[Hashable, int], cluster_name: str) -> None:
    for item in [item for item in failures if cluster_of(item) == cluster_name]:
        del failures[item]
