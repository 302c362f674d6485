"""The ``single`` provider: one named cluster, engaged for as long as the provider runs."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from mcr.errors import ClusterNotFoundError
from mcr.providers.clusters import Extract

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.multicluster import Aware, ClusterName

__all__ = ["SingleProvider"]


class SingleProvider:
    """Hands out exactly one cluster under ``name``.

    :meth:`start` engages it and runs until cancelled; the cancellation disengages it (the engage
    call is cancelled with it). ``get(name)`` returns the cluster; any other name raises
    :class:`~mcr.ClusterNotFoundError`. The cluster's lifecycle stays with the caller unless
    ``start_cluster=True`` (then :meth:`start` starts it before engaging and stops it at the end),
    since a single cluster is usually one the program already runs.
    """

    def __init__(self, name: ClusterName, cluster: Cluster, *, start_cluster: bool = False) -> None:
        self.name = name
        self.cluster = cluster
        self._start_cluster = start_cluster

    async def get(self, name: ClusterName) -> Cluster:
        """The cluster if ``name`` is its name; :class:`~mcr.ClusterNotFoundError` otherwise."""
        if name != self.name:
            raise ClusterNotFoundError(
                name, f"cluster {name!r} not found: the single provider only has {self.name!r}"
            )
        return self.cluster

    async def index_field(self, kind: Any, field: str, extract: Extract) -> None:
        """Index ``field`` on the cluster."""
        await self.cluster.index_field(kind, field, extract)

    async def start(self, aware: Aware) -> None:
        """Engage the cluster with ``aware`` until cancelled."""
        if self._start_cluster:
            await self.cluster.start()
        try:
            await aware.engage(self.name, self.cluster)
            await asyncio.Future()  # the aware let go early; stay engaged until cancelled
        finally:
            if self._start_cluster:
                await self.cluster.stop()
