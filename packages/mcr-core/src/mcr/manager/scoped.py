"""Per-cluster views of a manager, and the field indexer that reaches every cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.manager.probes import Check
    from mcr.multicluster import Provider

__all__ = ["FieldIndexer", "RunnableHost", "ScopedManager"]


class RunnableHost(Protocol):
    """What a :class:`ScopedManager` delegates to: the :class:`~mcr.manager.Manager` it views."""

    @property
    def elected(self) -> asyncio.Event:
        """Set once leader-election runnables may run."""
        ...

    def add(self, runnable: Any) -> None:
        """Run ``runnable`` with the manager."""
        ...

    async def start(self, *, handle_signals: bool | None = None) -> None:
        """Run everything until stopped."""
        ...

    def add_healthz_check(self, name: str, check: Check) -> None:
        """Add a liveness check."""
        ...

    def add_readyz_check(self, name: str, check: Check) -> None:
        """Add a readiness check."""
        ...


class ScopedManager:
    """A manager as single-cluster code sees it: one cluster's client, cache, config and indexer.

    ``add``, ``start``, ``elected`` and the probe checks delegate to the real manager, so code written
    for one cluster (``mgr.client``, ``mgr.add(...)``) runs unchanged. Any other attribute is read
    from the cluster.
    """

    def __init__(self, manager: RunnableHost, name: str, cluster: Cluster) -> None:
        self.manager = manager
        self.cluster_name = name
        self.cluster = cluster

    def __repr__(self) -> str:
        return f"ScopedManager(cluster={self.cluster_name!r})"

    def __getattr__(self, attr: str) -> Any:
        # Only called for attributes not found on the view: fall back to the cluster's.
        return getattr(self.cluster, attr)

    @property
    def client(self) -> Any:
        return self.cluster.client

    @property
    def api_reader(self) -> Any:
        return self.cluster.api_reader

    @property
    def cache(self) -> Any:
        return self.cluster.cache

    @property
    def config(self) -> Any:
        return self.cluster.config

    @property
    def elected(self) -> Any:
        return self.manager.elected

    def get_cluster(self) -> Cluster:
        return self.cluster

    def get_field_indexer(self) -> Cluster:
        """This cluster's indexer (``index_field(kind, field, extract)``)."""
        return self.cluster

    def add(self, runnable: Any) -> None:
        self.manager.add(runnable)

    async def start(self, *, handle_signals: bool | None = None) -> None:
        await self.manager.start(handle_signals=handle_signals)

    def add_healthz_check(self, name: str, check: Any) -> None:
        self.manager.add_healthz_check(name, check)

    def add_readyz_check(self, name: str, check: Any) -> None:
        self.manager.add_readyz_check(name, check)


class FieldIndexer:
    """Registers a field index on the local cluster and, through the provider, on every other one.

    The provider applies it to its current and future clusters. Errors name the cluster or provider.
    """

    def __init__(self, local: Cluster | None, provider: Provider | None) -> None:
        self._local = local
        self._provider = provider

    async def index_field(self, kind: Any, field: str, extract: Callable[[Any], list[str]]) -> None:
        if self._local is not None:
            try:
                await self._local.index_field(kind, field, extract)
            except Exception as exc:
                exc.add_note(f"while indexing field {field!r} on the local cluster")
                raise
        if self._provider is not None:
            try:
                await self._provider.index_field(kind, field, extract)
            except Exception as exc:
                exc.add_note(f"while indexing field {field!r} on the clusters of provider {self._provider!r}")
                raise
