"""The cache of a namespace cluster: the host's cache, seen from namespace ``default``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcr.cache import InformerCache
from mcr.rest.kinds import gvk_of
from mcr_provider_namespace._informer import NamespaceDispatch, ScopedInformer
from mcr_provider_namespace._scope import Scope

__all__ = ["ScopedCache", "SharedViews"]


class SharedViews:
    """What every namespace cluster of one provider shares: one dispatch per host informer, and the
    field indexes already added to the host (each is added once, whatever the number of clusters).
    """

    def __init__(self, host: InformerCache) -> None:
        self.host = host
        self._dispatch: dict[Any, NamespaceDispatch] = {}
        self._indexes: dict[tuple[Any, str], Callable[[Any], list[str]]] = {}

    async def dispatch(self, kind: Any, *, start: bool = True) -> NamespaceDispatch | None:
        """The dispatch of ``kind``'s host informer (``None`` for a cluster-scoped kind)."""
        informer = await self.host.get_informer(kind, start=start)
        if not informer.namespaced:
            return None
        found = self._dispatch.get(informer.gvk)
        if found is None or found.informer is not informer:
            found = self._dispatch[informer.gvk] = NamespaceDispatch(informer)
        return found

    async def index_field(self, kind: Any, field: str, extract: Callable[[Any], list[str]]) -> None:
        key = (gvk_of(kind), field)
        known = self._indexes.get(key)
        if known is extract:
            return
        if known is not None:
            raise ValueError(
                f"field index {field!r} of {key[0]} is already defined on the host with another function; "
                "namespace clusters share the host's indexes"
            )
        await self.host.index_field(kind, field, extract)
        self._indexes[key] = extract

    def close(self) -> None:
        for dispatch in self._dispatch.values():
            dispatch.close()
        self._dispatch.clear()


class ScopedCache:
    """One namespace of the host's cache (see :class:`~mcr_provider_namespace.NamespaceCluster`).

    Starting and stopping it do nothing: the host's cache is the provider's to run.
    """

    def __init__(self, shared: SharedViews, scope: Scope) -> None:
        self._shared = shared
        self._scope = scope

    def __repr__(self) -> str:
        return f"ScopedCache(namespace={self._scope.namespace!r})"

    @property
    def started(self) -> bool:
        return bool(self._shared.host.started)

    async def start(self) -> None:
        """Nothing to start: the host cache runs for every namespace cluster."""

    async def stop(self) -> None:
        """Nothing to stop: the host cache runs for every namespace cluster."""

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        return await self._shared.host.wait_for_cache_sync(timeout)

    async def get_informer(self, kind: Any, *, start: bool = True) -> Any:
        dispatch = await self._shared.dispatch(kind, start=start)
        if dispatch is None:
            return await self._shared.host.get_informer(kind, start=start)
        return ScopedInformer(dispatch, self._scope.namespace)

    async def index_field(self, kind: Any, field: str, extract: Callable[[Any], list[str]]) -> None:
        await self._shared.index_field(kind, field, extract)

    async def get(self, kind: Any, name: str, namespace: str | None = None) -> Any:
        target, ns = await self._scope.inbound(kind, namespace, f"{kind} {name}", write=False)
        return self._scope.outbound(await self._shared.host.get(target, name, namespace=ns))

    async def list(self, kind: Any, *, namespace: str | None = None, **selectors: Any) -> list[Any]:
        target, ns = await self._scope.inbound(kind, namespace, f"list of {kind}", write=False)
        return [
            self._scope.outbound(o) for o in await self._shared.host.list(target, namespace=ns, **selectors)
        ]
