"""Resource event handlers an informer notifies, and the tombstone it hands over for unseen deletes.

client-go's names: a :class:`ResourceEventHandler` receives an informer's adds, updates and
deletes (not to be confused with :class:`mcr.handler.EventHandler`, which maps events to requests).
A handler that also implements :class:`ListBatchHandler` and/or :class:`WatchBatchHandler` takes
lists and watch reads in one call each; the informer checks which once, at registration.
``EventHandler`` and ``EventHandlerFuncs`` are deprecated aliases of :class:`ResourceEventHandler`
and :class:`ResourceEventHandlerFuncs`.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DeletedFinalStateUnknown",
    "ListBatchHandler",
    "Registration",
    "ResourceEventHandler",
    "ResourceEventHandlerFuncs",
    "WatchBatchHandler",
    "WatchNote",
]

log = logging.getLogger("mcr.cache")

Obj = dict[str, Any]

WatchNote = tuple[str, Obj, str, str]
"""One change an informer applied from a watch, as handed to ``on_events``:
``(event_type, obj, namespace, name)`` with ``event_type`` ``"ADDED"``, ``"MODIFIED"`` or
``"DELETED"``, ``obj`` the object's new (for a delete: last) state, and its namespace (``""`` for a
cluster-scoped object) and name as the informer read them to key its store. The previous state is
not kept for it: the store frees a replaced object at once. A handler that needs only the keys
(to enqueue them) takes them from the note: by the time a read's notes are handed over, most of
its objects have left the CPU caches, and reading their metadata again costs a cache miss each."""


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown:
    """Handed to ``on_delete`` when an object vanished while the informer was not watching.

    The informer learned of the delete by relisting (after a 410 or a lost stream), so it never
    saw the object's final state: ``obj`` is the last state the cache held and ``key`` its store
    key (``"<ns>/<name>"`` or ``"<name>"``).
    """

    key: str
    obj: Obj


@runtime_checkable
class ResourceEventHandler(Protocol):
    """Receives an informer's notifications, synchronously, on the event loop.

    Handlers must return quickly and never block (enqueue work instead); they receive the
    cache's own objects and must not mutate them. An exception from a handler is logged with the
    informer's kind and does not stop the informer or other handlers.
    """

    def on_add(self, obj: Obj, is_initial_list: bool) -> None: ...

    def on_update(self, old: Obj, new: Obj) -> None: ...

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None: ...


@runtime_checkable
class ListBatchHandler(Protocol):
    """A handler that takes the adds of a whole list in one call.

    The informer then hands it the adds of each list (initial list, relist, or the replay at
    registration) in one ``on_adds`` call, in list order, instead of one ``on_add`` per object;
    the store already holds every object of that list when it is called. An exception from
    ``on_adds`` is logged once; the handler is responsible for not losing the rest of the batch.
    """

    def on_adds(self, objs: list[Obj], is_initial_list: bool) -> None: ...


@runtime_checkable
class WatchBatchHandler(Protocol):
    """A handler that takes the changes of one watch read in one call.

    The informer then hands it the changes it applied from one read of a watch stream (often
    many events) in one ``on_events`` call, in order, instead of one
    ``on_add``/``on_update``/``on_delete`` per event. The notes carry no previous state, so a
    handler that needs it (to compare old and new) should not implement this. A ``"MODIFIED"``
    note always changed the resourceVersion (resyncs still arrive as ``on_update(obj, obj)``,
    relists as ``on_adds``/``on_add``, ``on_update`` and ``on_delete``). The store already holds
    the state after the last of the notes when it is called. An exception from ``on_events`` is
    logged once.
    """

    def on_events(self, notes: list[WatchNote]) -> None: ...


def _noop_add(obj: Obj, is_initial_list: bool) -> None:
    return None


def _noop_update(old: Obj, new: Obj) -> None:
    return None


def _noop_delete(obj: Obj | DeletedFinalStateUnknown) -> None:
    return None


@dataclass(slots=True)
class ResourceEventHandlerFuncs:
    """A :class:`ResourceEventHandler` from plain functions; missing ones ignore their event."""

    on_add: Callable[[Obj, bool], None] = _noop_add
    on_update: Callable[[Obj, Obj], None] = _noop_update
    on_delete: Callable[[Obj | DeletedFinalStateUnknown], None] = _noop_delete


@dataclass(eq=False, slots=True)
class Registration:
    """The handle :meth:`Informer.add_event_handler` returns.

    ``has_synced`` turns true once this handler has been handed every object of the informer's
    first complete list (for a handler added after sync: at registration, after the replay).
    ``remove()`` stops further notifications; calling it again does nothing.
    """

    handler: ResourceEventHandler
    _remove: Callable[[Registration], None] = field(repr=False)
    synced: bool = False
    removed: bool = False
    on_adds: Callable[[list[Obj], bool], None] | None = field(default=None, repr=False)
    """The handler's :meth:`ListBatchHandler.on_adds` if it has one (found at registration)."""
    on_events: Callable[[list[WatchNote]], None] | None = field(default=None, repr=False)
    """The handler's :meth:`WatchBatchHandler.on_events` if it has one (found at registration)."""

    @classmethod
    def of(cls, handler: ResourceEventHandler, remove: Callable[[Registration], None]) -> Registration:
        """The registration of ``handler``, with the batch paths it implements."""
        return cls(
            handler,
            remove,
            on_adds=handler.on_adds if isinstance(handler, ListBatchHandler) else None,
            on_events=handler.on_events if isinstance(handler, WatchBatchHandler) else None,
        )

    @property
    def has_synced(self) -> bool:
        return self.synced

    def remove(self) -> None:
        if not self.removed:
            self.removed = True
            self._remove(self)


_DEPRECATED = {"EventHandler": ResourceEventHandler, "EventHandlerFuncs": ResourceEventHandlerFuncs}


def deprecated_alias(module: str, name: str) -> Any:
    """The object behind a deprecated name of ``module``, with a ``DeprecationWarning`` naming the
    new one; ``AttributeError`` for any other name (a module's ``__getattr__``)."""
    new = _DEPRECATED.get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated; use {module}.{new.__name__}", DeprecationWarning, stacklevel=3
    )
    return new


def __getattr__(name: str) -> Any:
    return deprecated_alias(__name__, name)
