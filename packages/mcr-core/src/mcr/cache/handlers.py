"""Event handlers an informer notifies, and the tombstone it hands over for unseen deletes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DeletedFinalStateUnknown",
    "EventHandler",
    "EventHandlerFuncs",
    "Registration",
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
class EventHandler(Protocol):
    """Receives an informer's notifications, synchronously, on the event loop.

    Handlers must return quickly and never block (enqueue work instead); they receive the
    cache's own objects and must not mutate them. An exception from a handler is logged with the
    informer's kind and does not stop the informer or other handlers.

    A handler may also define ``on_adds(objs: list, is_initial_list: bool)``: the informer then
    hands it the adds of a whole list (initial list, relist, or the replay at registration) in
    one call, in list order, instead of one ``on_add`` per object — the store already holds every
    object of that list when it is called. An exception from ``on_adds`` is logged once; the
    handler is responsible for not losing the rest of the batch.

    Likewise ``on_events(notes: list[WatchNote])``: the informer then hands it the changes it
    applied from one read of a watch stream (often many events) in one call, in order, instead of
    one ``on_add``/``on_update``/``on_delete`` per event; the notes carry no previous state, so a
    handler that needs it (to compare old and new) should not define ``on_events``. A
    ``"MODIFIED"`` note always changed the resourceVersion (resyncs still arrive as
    ``on_update(obj, obj)``, relists as ``on_adds``, ``on_update`` and ``on_delete``). The store
    already holds the state after the last of the notes when it is called. An exception from
    ``on_events`` is logged once.
    """

    def on_add(self, obj: Obj, is_initial_list: bool) -> None: ...

    def on_update(self, old: Obj, new: Obj) -> None: ...

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None: ...


def _noop_add(obj: Obj, is_initial_list: bool) -> None:
    return None


def _noop_update(old: Obj, new: Obj) -> None:
    return None


def _noop_delete(obj: Obj | DeletedFinalStateUnknown) -> None:
    return None


@dataclass(slots=True)
class EventHandlerFuncs:
    """An :class:`EventHandler` from plain functions; missing ones ignore their event."""

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

    handler: EventHandler
    _remove: Callable[[Registration], None] = field(repr=False)
    synced: bool = False
    removed: bool = False

    @property
    def has_synced(self) -> bool:
        return self.synced

    def remove(self) -> None:
        if not self.removed:
            self.removed = True
            self._remove(self)
