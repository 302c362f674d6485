"""A namespace of a host cluster, presented as a cluster of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from mcr.cluster import Cluster
from mcr_provider_namespace._cache import ScopedCache, SharedViews
from mcr_provider_namespace._client import ScopedClient
from mcr_provider_namespace._scope import VIEW_NAMESPACE, Scope, namespace_of, with_namespace

if TYPE_CHECKING:
    from mcr.cache import InformerCache
    from mcr.client import Client
    from mcr.recorder import EventRecorder

__all__ = ["NamespaceCluster", "ScopedRecorder"]


class ScopedRecorder:
    """Records events about a namespace cluster's objects in the host namespace they live in.

    It wraps the host's recorder of the same component (one per component for all namespace
    clusters); the Event names the real object, in the real namespace.
    """

    def __init__(self, host: EventRecorder, namespace: str) -> None:
        self._host = host
        self._namespace = namespace

    def __repr__(self) -> str:
        return f"ScopedRecorder({self._host!r}, namespace={self._namespace!r})"

    def _real(self, obj: object) -> object:
        return with_namespace(obj, self._namespace) if namespace_of(obj) == VIEW_NAMESPACE else obj

    def event(
        self,
        obj: object,
        type: str,
        reason: str,
        message: str,
        action: str | None = None,
        related: object | None = None,
    ) -> None:
        """As :meth:`mcr.recorder.EventRecorder.event`, about ``obj`` in the host namespace."""
        self._host.event(
            self._real(obj),
            type,
            reason,
            message,
            action,
            self._real(related) if related is not None else None,
        )


class NamespaceCluster(Cluster):
    """The namespace ``namespace`` of ``host``, as a cluster named ``name`` (by default the namespace).

    Namespaced objects appear in namespace ``default`` and are written to ``namespace``: ``client``
    (reads from the host's cache), ``api_reader`` (reads from the API server), ``cache`` (the host's
    informers, filtered to the namespace), ``event_recorder`` and ``index_field`` (the host's
    indexes, shared by every namespace cluster). Cluster-scoped objects are the host's: readable,
    not writable. ``start`` and ``stop`` leave the host alone: the provider runs it. ``config`` is
    the host's.
    """

    def __init__(self, host: Cluster, namespace: str, shared: SharedViews, name: str | None = None) -> None:
        # Not Cluster.__init__: a namespace cluster has no transport, cache or recorder of its own.
        self.name = name if name is not None else namespace
        self.namespace = namespace
        self.host = host
        self.config = host.config
        self.transport = host.transport
        self.rest_mapper = host.rest_mapper
        scope = Scope(self.name, namespace, host.rest_mapper)
        self.cache = cast("InformerCache", ScopedCache(shared, scope))
        self.api_reader = cast("Client", ScopedClient(host.api_reader, scope))
        self.client = cast("Client", ScopedClient(host.client, scope))
        self._recorders = {}
        self._scoped_recorders: dict[str, ScopedRecorder] = {}
        self._started = False
        self._stopped = False
        self._stop_task = None

    def __repr__(self) -> str:
        return f"NamespaceCluster(name={self.name!r}, namespace={self.namespace!r}, host={self.host.name!r})"

    @property
    def field_indexer(self) -> InformerCache:
        return self.cache

    async def index_field(self, kind: Any, field: str, extract: Callable[[Any], list[str]]) -> None:
        """Index ``field`` on the host's cache (once for every namespace cluster); lists here select
        by it within this namespace."""
        await self.cache.index_field(kind, field, extract)

    def event_recorder(self, component: str) -> EventRecorder:
        recorder = self._scoped_recorders.get(component)
        if recorder is None:
            recorder = self._scoped_recorders[component] = ScopedRecorder(
                self.host.event_recorder(component), self.namespace
            )
        return cast("EventRecorder", recorder)

    async def start(self) -> None:
        """Mark the cluster started; the host is the provider's to start."""
        self._started = True

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        return await self.cache.wait_for_cache_sync(timeout)

    async def stop(self) -> None:
        """Mark the cluster stopped; the host keeps running for the other namespaces."""
        self._stopped = True
