"""Forgetting the metric series of clusters that left the fleet.

Every per-cluster metric carries a ``cluster`` label, so a fleet whose clusters come and go would
keep one set of series for every cluster name ever engaged: in memory (a controller's
reconcile-time histogram alone has 40 buckets per cluster) and in every scrape. The manager
records each disengagement in a :class:`DepartedSeries`; its :meth:`~DepartedSeries.run` task
removes a departed cluster's series once ``retention`` seconds have passed (long enough for
Prometheus to scrape their last values), unless the name was engaged again meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from mcr.metrics import forget_clusters

__all__ = ["DEFAULT_RETENTION", "DepartedSeries"]

log = logging.getLogger("mcr.manager")

DEFAULT_RETENTION = 600.0
"""Seconds a disengaged cluster's series stay served: ten scrapes at Prometheus' default interval."""


class DepartedSeries:
    """Disengaged cluster names and when they left; :meth:`run` forgets their series when due.

    ``engaged(name)`` tells whether the name is engaged anywhere in the process now (metrics are
    process-wide, so a name another manager still runs keeps its series). Not thread-safe: call
    from the event loop the manager runs on.
    """

    def __init__(self, retention: float, engaged: Callable[[str], bool]) -> None:
        if retention < 0:
            raise ValueError(f"metrics_cluster_retention must be >= 0 or None, not {retention!r}")
        self.retention = retention
        self._engaged = engaged
        self._left: dict[str, float] = {}  # name -> loop time it was disengaged

    def departed(self, name: str) -> None:
        """``name`` was disengaged (not replaced): forget its series ``retention`` s from now."""
        self._left[name] = asyncio.get_running_loop().time()

    def returned(self, name: str) -> None:
        """``name`` is engaged again: its series stay."""
        self._left.pop(name, None)

    async def run(self) -> None:
        """Until cancelled: remove the series of every name disengaged ``retention`` seconds ago.

        Checks every ``retention / 2`` seconds (at least 50 ms, at most a minute), so a departed
        cluster's series go between ``retention`` and ``1.5 * retention`` after it left.
        """
        loop = asyncio.get_running_loop()
        tick = min(max(self.retention / 2, 0.05), 60.0)
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            due = [name for name, left in self._left.items() if now - left >= self.retention]
            for name in due:
                del self._left[name]
            gone = [name for name in due if not self._engaged(name)]
            if not gone:
                continue
            try:
                forget_clusters(gone)
            except Exception:  # a metrics failure must not end the task: logged, their series stay
                log.exception("forgetting the metric series of departed clusters failed: %s", gone[:10])
                continue
            log.debug("forgot the metric series of %d departed clusters", len(gone))
