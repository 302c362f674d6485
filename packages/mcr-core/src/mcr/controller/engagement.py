"""What a controller keeps per engaged cluster: the watches it runs there and their states,
and the cluster's reconcile metric children."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcr import metrics
from mcr.controller.fence import UNFENCED, Tenure
from mcr.metrics.batching import Batch, BatchedCounter, BatchedHistogram
from mcr.reconcile import Request
from mcr.source import Kind, kind_name
from mcr.workqueue import WorkQueue

if TYPE_CHECKING:
    from mcr.cache.handlers import Registration
    from mcr.cluster import Cluster

__all__ = ["ClusterMetrics", "EngagedCluster"]

log = logging.getLogger("mcr.controller")


def _nothing() -> None:
    pass


class EngagedCluster:
    """One cluster's engagement: its watch tasks, their states and the errors of failing ones,
    and the fence it runs under (:data:`UNFENCED` when no coordinator fences the cluster)."""

    __slots__ = ("cluster", "errors", "fence", "name", "states", "superseded", "tasks", "unwatch")

    def __init__(self, name: str, cluster: Cluster, fence: Tenure | None = None) -> None:
        self.name = name
        self.cluster = cluster
        self.fence = UNFENCED if fence is None else fence
        self.unwatch: Callable[[], None] = _nothing  # withdraws this engagement's lapse callback
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

    def start_watch(
        self,
        src: Kind,
        queue: WorkQueue[Request],
        controller: str,
        sync_timeout: float,
        retry: tuple[float, float],
    ) -> None:
        """Start ``src`` on this cluster in a task of its own, feeding ``queue``.

        The start (discovery, informer, sync) is bounded by ``sync_timeout`` and retried with
        backoff from ``retry[0]`` up to ``retry[1]`` seconds, the state of the watch and its last
        error kept in :attr:`states` and :attr:`errors`; once started it holds its registration
        until :meth:`stop` cancels it.
        """
        self.states[src] = "pending"
        self.tasks[src] = asyncio.get_running_loop().create_task(
            self._run_watch(src, queue, controller, sync_timeout, retry),
            name=f"mcr-watch-{controller}-{self.name}-{kind_name(src.kind)}",
        )

    async def _run_watch(
        self,
        src: Kind,
        queue: WorkQueue[Request],
        controller: str,
        sync_timeout: float,
        retry: tuple[float, float],
    ) -> None:
        delay, longest = retry
        while True:
            registration: Registration | None = None
            try:
                # The whole start (discovery, informer creation, sync) is bounded, not just the
                # sync: an unresponsive API server must not hold this watch for ever.
                async with asyncio.timeout(sync_timeout):
                    registration = await src.start_for_cluster(
                        self.name, self.cluster, queue, sync_timeout=sync_timeout
                    )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001  # any failure of one watch: retry it, keep the others
                self.states[src] = "failed"
                self.errors[src] = f"watch of {kind_name(src.kind)}: {str(exc) or type(exc).__name__}"
                log.warning(
                    "watch of %s failed in cluster %r, retrying in %.1fs: %s",
                    kind_name(src.kind),
                    self.name,
                    delay,
                    str(exc) or type(exc).__name__,
                    extra={"controller": controller, "cluster": self.name},
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, longest)
                continue
            self.states[src] = "synced"
            self.errors.pop(src, None)
            log.debug(
                "watching %s",
                kind_name(src.kind),
                extra={"controller": controller, "cluster": self.name},
            )
            try:
                await asyncio.get_running_loop().create_future()  # until cancelled
            finally:
                registration.remove()

    async def stop(self) -> None:
        """Cancel the watch tasks and wait for them to end (their errors are theirs to report)."""
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
        """Every child, for retiring this cluster's series."""
        return [
            self.success,
            self.error,
            self.requeue_after,
            self.errors,
            self.terminal,
            self.timeouts,
            self.time,
        ]
