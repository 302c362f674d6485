"""Moving objects between a namespace cluster's view (namespace ``default``) and the host."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from mcr.errors import MCRError
from mcr.rest.kinds import gvk_of, is_model_class
from mcr.rest.mapper import RESTMapper

__all__ = ["VIEW_NAMESPACE", "NamespaceScopeError", "Scope"]

VIEW_NAMESPACE = "default"
"""The one namespace a namespace cluster has: its objects live in the host namespace it is named after."""


class NamespaceScopeError(MCRError, ValueError):
    """An operation a namespace cluster cannot do: another namespace, or a cluster-scoped write."""


def is_object(x: object) -> bool:
    """Whether ``x`` is an object (a dict or a model instance) rather than a kind."""
    return isinstance(x, Mapping) or (not isinstance(x, type) and is_model_class(type(x)))


def namespace_of(obj: Any) -> str | None:
    if isinstance(obj, Mapping):
        meta = obj.get("metadata")
        return meta.get("namespace") if isinstance(meta, Mapping) else None
    meta = getattr(obj, "metadata", None)
    return getattr(meta, "namespace", None) if meta is not None else None


def with_namespace(obj: Any, namespace: str) -> Any:
    """A copy of ``obj`` in ``namespace`` (shallow: only the object and its metadata are new)."""
    if isinstance(obj, Mapping):
        meta = obj.get("metadata")
        return {**obj, "metadata": {**(meta if isinstance(meta, Mapping) else {}), "namespace": namespace}}
    clone = copy.copy(obj)
    clone.metadata = copy.copy(obj.metadata)
    clone.metadata.namespace = namespace
    return clone


class Scope:
    """One namespace cluster's translation rules.

    Namespaced objects of the view live in namespace ``default``; the host keeps them in
    ``namespace``. Cluster-scoped objects are the host's own (shared by every namespace cluster):
    they can be read, not written.
    """

    def __init__(self, cluster_name: str, namespace: str, rest_mapper: RESTMapper) -> None:
        self.cluster_name = cluster_name
        self.namespace = namespace
        self.rest_mapper = rest_mapper

    def check(self, namespace: str | None, what: str) -> None:
        """Refuse a namespace other than the view's own (``None`` and ``""`` mean the view's)."""
        if namespace not in (None, "", VIEW_NAMESPACE):
            raise NamespaceScopeError(
                f"cluster {self.cluster_name!r} (namespace {self.namespace!r} of the host) has only "
                f"namespace {VIEW_NAMESPACE!r}: {what} names namespace {namespace!r}"
            )

    async def namespaced(self, kind_or_obj: Any) -> bool:
        kind = (
            type(kind_or_obj)
            if is_object(kind_or_obj) and not isinstance(kind_or_obj, Mapping)
            else kind_or_obj
        )
        if isinstance(kind, Mapping):
            kind = gvk_of(kind)
        return bool((await self.rest_mapper.resolve(kind)).namespaced)

    async def inbound(
        self, kind_or_obj: Any, namespace: str | None, what: str, *, write: bool
    ) -> tuple[Any, str | None]:
        """``(kind_or_obj, namespace)`` as the host sees them; raises for what the view cannot do."""
        self.check(namespace, what)
        if is_object(kind_or_obj):
            self.check(namespace_of(kind_or_obj), what)
        if not await self.namespaced(kind_or_obj):
            if write:
                raise NamespaceScopeError(
                    f"cluster {self.cluster_name!r}: {what} is cluster-scoped, shared by every namespace "
                    "cluster of the host; write it through the host cluster"
                )
            return kind_or_obj, None
        if is_object(kind_or_obj):
            kind_or_obj = with_namespace(kind_or_obj, self.namespace)
        return kind_or_obj, self.namespace

    def outbound(self, obj: Any) -> Any:
        """``obj`` as the view sees it (namespace ``default`` for objects of the host namespace)."""
        if namespace_of(obj) == self.namespace:
            return with_namespace(obj, VIEW_NAMESPACE)
        return obj
