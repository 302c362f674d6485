"""The controller's parts: one cluster's engagement and one cluster's metric children.

Private to :mod:`mcr.controller` (kept apart to keep that module readable).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from mcr import metrics
from mcr._metricbatch import Batch, BatchedCounter, BatchedHistogram

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.source import Kind

__all__ = ["ClusterMetrics", "Engagement"]


class Engagement:
    """One cluster's engagement: its watch tasks, their states and the errors of failing ones."""

    __slots__ = ("cluster", "errors", "name", "states", "superseded", "tasks")

    def __init__(self, name: str, cluster: Cluster) -> None:
        self.name = name
        self.cluster = cluster
        self.tasks: dict[Kind, asyncio.Task[None]] = {}
        self.states: dict[Kind, str] = {}
        self.errors: dict[Kind, str] = {}  # why each failing watch failed last
        self.superseded = asyncio.Event()

    def state(self) -> str:
        """``synced`` when every watch synced, ``failed`` if one is failing, else ``pending``."""
        values = self.states.values()
        if any(v == "failed" for v in values):
            return "failed"
        if all(v == "synced" for v in values):
            return "synced"
        return "pending"

    async def stop(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        self.tasks.clear()


class ClusterMetrics:
    """One (controller, cluster)'s metric children, bound once."""

    __slots__ = ("error", "errors", "requeue_after", "success", "terminal", "time", "timeouts")

    def __init__(self, batch: Batch, controller: str, cluster: str) -> None:
        self.success = batch.counter(metrics.RECONCILE_TOTAL.labels(controller, "success", cluster))
        self.error = batch.counter(metrics.RECONCILE_TOTAL.labels(controller, "error", cluster))
        self.requeue_after = batch.counter(
            metrics.RECONCILE_TOTAL.labels(controller, "requeue_after", cluster)
        )
        self.errors = batch.counter(metrics.RECONCILE_ERRORS_TOTAL.labels(controller, cluster))
        self.terminal = batch.counter(metrics.TERMINAL_RECONCILE_ERRORS_TOTAL.labels(controller, cluster))
        self.timeouts = batch.counter(metrics.RECONCILE_TIMEOUTS_TOTAL.labels(controller, cluster))
        self.time = batch.histogram(metrics.RECONCILE_TIME_SECONDS.labels(controller, cluster))

    def settle(self, successes: int, elapsed: float) -> None:
        """Add what a worker's run counted itself: ``successes`` reconciles that succeeded, and
        ``elapsed``, the sum of the reconcile times it counted into ``time``'s slots."""
        self.success.pending += successes
        self.time.counted_sum += elapsed

    def members(self) -> list[BatchedCounter | BatchedHistogram]:
        return [
            self.success,
            self.error,
            self.requeue_after,
            self.errors,
            self.terminal,
            self.timeouts,
            self.time,
        ]
