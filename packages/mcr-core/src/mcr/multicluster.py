"""Multi-cluster contracts: providers discover clusters and engage them with aware runnables.

These are small Protocols; implementations do not inherit from them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    from mcr.cluster import Cluster

__all__ = ["LOCAL_CLUSTER", "Aware", "ClusterName", "Provider", "ProviderRunnable"]

ClusterName: TypeAlias = str
"""The name a provider gives a cluster. ``""`` is the local cluster."""

LOCAL_CLUSTER: ClusterName = ""


@runtime_checkable
class Aware(Protocol):
    """Something that runs per cluster: the manager, each controller.

    ``engage`` runs for as long as the cluster stays engaged: it does not return while the
    cluster is engaged and ends by cancellation. Cancelling the task that awaits it is the
    disengagement; the coroutine then tears down everything it started for that cluster and
    re-raises ``CancelledError``. It never waits for the cluster to be reachable: engagement is
    asynchronous, bounded and retried internally, so one unreachable cluster delays no other.
    Engaging a name already engaged with another cluster object replaces the old one.
    """

    async def engage(self, name: ClusterName, cluster: Cluster) -> None: ...


@runtime_checkable
class Provider(Protocol):
    """Discovers clusters and hands them out by name."""

    async def get(self, name: ClusterName) -> Cluster:
        """The engaged cluster named ``name``; raises :class:`mcr.ClusterNotFoundError` otherwise."""
        ...

    async def index_field(self, kind: Any, field: str, extract: Callable[[Any], list[str]]) -> None:
        """Register a field index on every current and every future cluster."""
        ...


@runtime_checkable
class ProviderRunnable(Protocol):
    """A provider that runs: the manager calls ``start`` itself and cancels it on shutdown."""

    async def start(self, aware: Aware) -> None:
        """Discover clusters and engage them with ``aware`` until cancelled."""
        ...
