"""Informers of namespace clusters: views of the host's informers, one namespace each.

Every namespace cluster of a provider shares the host's informer of a kind. One
:class:`NamespaceDispatch` is registered on that informer, and hands each event to the handlers of
the event's namespace only (a dict lookup, not one filter per namespace cluster); objects reach
those handlers in namespace ``default``. A namespace cluster's informer is a
:class:`ScopedInformer`: it holds no objects, only its handlers' registrations.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from mcr.cache import DeletedFinalStateUnknown, Informer, Registration, ResourceEventHandler
from mcr_provider_namespace._scope import VIEW_NAMESPACE, with_namespace

__all__ = ["NamespaceDispatch", "ScopedInformer"]

log = logging.getLogger("mcr.providers.namespace")

Obj = dict[str, Any]


def _view(obj: Obj) -> Obj:
    return with_namespace(obj, VIEW_NAMESPACE)  # type: ignore[no-any-return]


def _namespace(obj: Obj | DeletedFinalStateUnknown) -> str:
    if isinstance(obj, DeletedFinalStateUnknown):
        obj = obj.obj
    return str((obj.get("metadata") or {}).get("namespace") or "")


class NamespaceDispatch:
    """The one handler a provider registers on a host informer of a namespaced kind."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer
        self._handlers: defaultdict[str, list[Registration]] = defaultdict(list)
        self._registration = informer.add_event_handler(self)

    def close(self) -> None:
        """Stop receiving the host informer's events."""
        self._registration.remove()

    def add(
        self, namespace: str, handler: ResourceEventHandler, remove: Callable[[Registration], None]
    ) -> Registration:
        """Register ``handler`` for ``namespace``; it first receives the namespace's cached objects."""
        reg = Registration(handler, remove)
        objs = [_view(o) for o in self.informer.list(namespace)]
        if objs:
            on_adds = getattr(handler, "on_adds", None)
            try:
                if on_adds is not None:
                    on_adds(objs, True)
                else:
                    for obj in objs:
                        handler.on_add(obj, True)
            except Exception:
                log.exception("namespace %r: event handler %r failed on the replay", namespace, handler)
        reg.synced = self.informer.has_synced
        self._handlers[namespace].append(reg)
        return reg

    def discard(self, namespace: str, reg: Registration) -> None:
        regs = self._handlers.get(namespace)
        if regs is not None:
            regs[:] = [r for r in regs if r is not reg]
            if not regs:
                del self._handlers[namespace]

    def mark_synced(self, namespace: str) -> None:
        for reg in self._handlers.get(namespace, ()):
            reg.synced = True

    @property
    def namespaces(self) -> int:
        """How many namespaces have handlers (for bookkeeping checks)."""
        return len(self._handlers)

    # -- the host informer's handler -------------------------------------------------------------

    def on_add(self, obj: Obj, is_initial_list: bool) -> None:
        regs = self._handlers.get(_namespace(obj))
        if regs:
            view = _view(obj)
            for reg in tuple(regs):
                _call(reg, "on_add", view, is_initial_list)

    def on_update(self, old: Obj, new: Obj) -> None:
        regs = self._handlers.get(_namespace(new))
        if regs:
            old_view, new_view = (_view(old), _view(new)) if old is not new else (_view(new),) * 2
            for reg in tuple(regs):
                _call(reg, "on_update", old_view, new_view)

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        regs = self._handlers.get(_namespace(obj))
        if regs:
            view: Obj | DeletedFinalStateUnknown = (
                DeletedFinalStateUnknown(f"{VIEW_NAMESPACE}/{obj.key.partition('/')[2]}", _view(obj.obj))
                if isinstance(obj, DeletedFinalStateUnknown)
                else _view(obj)
            )
            for reg in tuple(regs):
                _call(reg, "on_delete", view)


def _call(reg: Registration, method: str, *args: Any) -> None:
    try:
        getattr(reg.handler, method)(*args)
    except Exception:
        log.exception("event handler %r failed on %s", reg.handler, method.removeprefix("on_"))


class ScopedInformer:
    """One namespace's view of a host informer (see the module docs).

    ``add_event_handler`` replays the namespace's cached objects (in namespace ``default``), then
    delivers its changes; ``wait_for_sync`` waits for the host informer. For a cluster-scoped kind
    the host informer itself is used: its objects are shared by every namespace cluster.
    """

    def __init__(self, dispatch: NamespaceDispatch, namespace: str) -> None:
        self._dispatch = dispatch
        self._namespace = namespace
        self.namespaced = True

    def __repr__(self) -> str:
        return f"ScopedInformer({self._dispatch.informer!r}, namespace={self._namespace!r})"

    @property
    def gvk(self) -> Any:
        return self._dispatch.informer.gvk

    @property
    def has_synced(self) -> bool:
        return self._dispatch.informer.has_synced

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        synced = await self._dispatch.informer.wait_for_sync(timeout)
        if synced:
            self._dispatch.mark_synced(self._namespace)
        return synced

    def add_event_handler(self, handler: ResourceEventHandler) -> Registration:
        namespace = self._namespace
        return self._dispatch.add(namespace, handler, lambda reg: self._dispatch.discard(namespace, reg))

    def get(self, key: str) -> Obj | None:
        name = key.partition("/")[2] if "/" in key else key
        obj = self._dispatch.informer.get(f"{self._namespace}/{name}")
        return None if obj is None else _view(obj)

    def list(self, namespace: str | None = None) -> list[Obj]:
        if namespace not in (None, "", VIEW_NAMESPACE):
            return []
        return [_view(o) for o in self._dispatch.informer.list(self._namespace)]
