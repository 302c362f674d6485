"""The ``nop`` provider: no clusters at all (a manager with it runs only the local cluster)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from mcr.errors import ClusterNotFoundError
from mcr.providers.clusters import Extract

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.multicluster import Aware, ClusterName

__all__ = ["NopProvider"]


class NopProvider:
    """Discovers nothing: :meth:`get` always raises, :meth:`index_field` does nothing to no cluster,
    and :meth:`start` waits until cancelled."""

    async def get(self, name: ClusterName) -> Cluster:
        """Always raises :class:`~mcr.ClusterNotFoundError`."""
        raise ClusterNotFoundError(name, f"cluster {name!r} not found: the nop provider has no clusters")

    async def index_field(self, kind: Any, field: str, extract: Extract) -> None:
        """Nothing to index: there is never a cluster."""

    async def start(self, aware: Aware) -> None:
        """Run (engaging nothing) until cancelled."""
        await asyncio.Future()
