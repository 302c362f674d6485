"""The client of a namespace cluster: the host's client, seen from namespace ``default``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcr.client import Client
from mcr_provider_namespace._scope import VIEW_NAMESPACE, Scope, is_object

__all__ = ["ScopedClient"]


def _what(kind_or_obj: Any, name: str | None = None) -> str:
    if is_object(kind_or_obj):
        d = kind_or_obj if isinstance(kind_or_obj, Mapping) else {}
        kind = d.get("kind") or type(kind_or_obj).__name__
        meta = d.get("metadata") or {}
        return f"{kind} {meta.get('name') or name or '?'}"
    return f"{kind_or_obj} {name or ''}".rstrip()


class ScopedClient:
    """Reads, writes and subresources of one host namespace, presented in namespace ``default``.

    Every method mirrors :class:`mcr.Client`'s. Namespaced objects given in ``default`` (or with no
    namespace) are written to the host namespace and returned in ``default``; another namespace
    raises :class:`~mcr_provider_namespace.NamespaceScopeError`, as does a write of a cluster-scoped
    object (those are shared by every namespace cluster). Cluster-scoped objects can be read.
    Lists of a namespaced kind list the host namespace only. ``subresource`` names a subresource
    client with the same rules (``status`` is a property).
    """

    def __init__(self, host: Client, scope: Scope, subresource: str | None = None) -> None:
        self._host = host
        self._scope = scope
        self._sub = subresource

    def __repr__(self) -> str:
        sub = f", subresource={self._sub!r}" if self._sub else ""
        return f"ScopedClient(cluster={self._scope.cluster_name!r}, namespace={self._scope.namespace!r}{sub})"

    @property
    def cluster_name(self) -> str:
        return self._scope.cluster_name

    @property
    def rest_mapper(self) -> Any:
        return self._host.rest_mapper

    @property
    def status(self) -> ScopedClient:
        return self.subresource("status")

    def subresource(self, name: str) -> ScopedClient:
        return ScopedClient(self._host, self._scope, name)

    @property
    def api_reader(self) -> ScopedClient:
        return ScopedClient(self._host.api_reader, self._scope, self._sub)

    @property
    def _target(self) -> Any:
        return self._host.subresource(self._sub) if self._sub else self._host

    # -- reads -----------------------------------------------------------------------------------

    async def get(self, kind_or_obj: Any, name: str | None = None, *, namespace: str | None = None) -> Any:
        target, ns = await self._scope.inbound(kind_or_obj, namespace, _what(kind_or_obj, name), write=False)
        if self._sub:
            return self._scope.outbound(await self._target.get(target, name, namespace=ns))
        return self._scope.outbound(await self._host.get(target, name or "", namespace=ns))

    async def list(self, kind: Any, *, namespace: str | None = None, **options: Any) -> list[Any]:
        target, ns = await self._scope.inbound(kind, namespace, f"list of {kind}", write=False)
        return [self._scope.outbound(o) for o in await self._host.list(target, namespace=ns, **options)]

    async def list_object(self, kind: Any, *, namespace: str | None = None, **options: Any) -> dict[str, Any]:
        target, ns = await self._scope.inbound(kind, namespace, f"list of {kind}", write=False)
        out = await self._host.list_object(target, namespace=ns, **options)
        return {**out, "items": [self._scope.outbound(o) for o in out.get("items") or ()]}

    # -- writes ----------------------------------------------------------------------------------

    async def create(
        self, obj: Any, body: Any = None, *, namespace: str | None = None, **options: Any
    ) -> Any:
        target, ns = await self._scope.inbound(obj, namespace, _what(obj), write=True)
        if self._sub:
            # A subresource body (an Eviction, say) names the object's namespace too.
            if isinstance(body, Mapping) and isinstance(body.get("metadata"), Mapping) and ns is not None:
                self._scope.check(body["metadata"].get("namespace"), _what(obj))
                body = {**body, "metadata": {**body["metadata"], "namespace": ns}}
            return self._scope.outbound(await self._target.create(target, body, **options))
        return self._scope.outbound(await self._host.create(target, namespace=ns, **options))

    async def update(self, obj: Any, **options: Any) -> Any:
        target, _ = await self._scope.inbound(obj, None, _what(obj), write=True)
        return self._scope.outbound(await self._target.update(target, **options))

    async def apply(self, obj: Any, *, namespace: str | None = None, **options: Any) -> Any:
        target, ns = await self._scope.inbound(obj, namespace, _what(obj), write=True)
        return self._scope.outbound(await self._target.apply(target, namespace=ns, **options))

    async def patch(
        self,
        kind_or_obj: Any,
        name: str | None = None,
        patch: Any = None,
        *,
        namespace: str | None = None,
        **options: Any,
    ) -> Any:
        what = _what(kind_or_obj, name)
        target, ns = await self._scope.inbound(kind_or_obj, namespace, what, write=True)
        if isinstance(patch, Mapping) and isinstance(patch.get("metadata"), Mapping):
            # An apply (or merge) body may name the view's namespace: it means the host namespace.
            self._scope.check(patch["metadata"].get("namespace"), what)
            if "namespace" in patch["metadata"] and ns is not None:
                patch = {**patch, "metadata": {**patch["metadata"], "namespace": ns}}
        return self._scope.outbound(await self._target.patch(target, name, patch, namespace=ns, **options))

    async def delete(
        self, kind_or_obj: Any, name: str | None = None, *, namespace: str | None = None, **options: Any
    ) -> None:
        target, ns = await self._scope.inbound(kind_or_obj, namespace, _what(kind_or_obj, name), write=True)
        await self._host.delete(target, name, namespace=ns, **options)

    async def delete_all_of(self, kind: Any, *, namespace: str | None = None, **options: Any) -> None:
        target, ns = await self._scope.inbound(kind, namespace or VIEW_NAMESPACE, f"{kind}", write=True)
        await self._host.delete_all_of(target, namespace=ns, **options)
