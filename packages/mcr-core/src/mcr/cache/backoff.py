"""The reflector's retry delay: client-go's exponential backoff with jitter and a quiet-period reset."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

__all__ = ["Backoff", "BackoffPolicy"]


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """How long a reflector waits before retrying a failed list or watch.

    The n-th consecutive failure waits ``min(initial * factor**(n-1), cap)`` plus a uniformly random
    extra of up to ``jitter`` times that; after ``reset_after`` seconds without a failure the
    sequence starts again at ``initial``. The defaults are client-go's (800 ms → 30 s, factor 2,
    jitter 1.0, reset after 2 min).
    """

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    reset_after: float = 120.0


class Backoff:
    """Mutable state of one :class:`BackoffPolicy` (one per reflector)."""

    __slots__ = ("_last_failure", "_policy", "_rng", "_step")

    def __init__(self, policy: BackoffPolicy, *, rng: random.Random | None = None) -> None:
        self._policy = policy
        self._step = 0.0
        self._last_failure = -1e18
        self._rng = rng or random.Random()

    def next_delay(self) -> float:
        """Record a failure and return how long to wait before the next attempt."""
        p = self._policy
        now = time.monotonic()
        if now - self._last_failure > p.reset_after:
            self._step = 0.0
        self._last_failure = now
        self._step = p.initial if self._step == 0.0 else min(self._step * p.factor, p.cap)
        return self._step + self._rng.random() * p.jitter * self._step

    def reset(self) -> None:
        self._step = 0.0
