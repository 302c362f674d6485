"""Sources: where a controller's events come from.

- :class:`Kind` watches one kind **per engaged cluster**: on engagement it registers on that
  cluster's shared informer (``cluster.cache.get_informer(kind)``), and it removes exactly that
  registration when the cluster is disengaged. Which clusters it engages is set per source:
  the local cluster (``""``) and/or provider clusters, optionally filtered.
- :class:`Channel` feeds events from an async iterator or an ``asyncio.Queue``; it is not tied to
  a cluster (each event names its own).

Events pass the source's predicates (all must pass) before the handler sees them. Initial-list
adds and updates that did not change the resourceVersion (resyncs) are enqueued with
:data:`mcr.workqueue.LOW_PRIORITY`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcr.cache.handlers import DeletedFinalStateUnknown, Registration, WatchNote
from mcr.handler import (
    BulkQueue,
    EnqueueRequestForObject,
    EventHandler,
    Queue,
    request_for,
    requests_for,
    requests_for_notes,
)
from mcr.predicate import Predicate, meta
from mcr.workqueue import LOW_PRIORITY

if TYPE_CHECKING:
    from mcr.cluster import Cluster

__all__ = ["Channel", "ClusterFilter", "GenericEvent", "Kind", "SyncTimeoutError", "kind_name"]

log = logging.getLogger("mcr.source")

ClusterFilter = Callable[[str, "Cluster"], bool]
"""``fn(cluster_name, cluster) -> bool``: whether a provider cluster is engaged by a source."""


class SyncTimeoutError(TimeoutError):
    """A watch's informer did not sync within the cache sync timeout; names kind and cluster."""


def kind_name(kind: Any) -> str:
    """A readable name for a kind-like (model class, GVK or string), for logs and errors."""
    if isinstance(kind, str):
        return kind
    if isinstance(kind, type):
        return kind.__name__
    k = getattr(kind, "kind", None)
    if isinstance(k, str):
        group = getattr(kind, "group", "")
        return f"{k}.{group}" if group else k
    return repr(kind)


class Kind:
    """Watch ``kind`` in every engaged cluster this source selects, through ``handler``.

    ``engage_local``: watch the local cluster (``""``). ``engage_provider``: watch provider
    clusters (any other name), those for which ``cluster_filter(name, cluster)`` is true if given
    (the filter applies to provider clusters only, as upstream). ``handler`` defaults to
    :class:`mcr.handler.EnqueueRequestForObject`.
    """

    def __init__(
        self,
        kind: Any,
        handler: EventHandler | None = None,
        *predicates: Predicate,
        engage_local: bool = True,
        engage_provider: bool = True,
        cluster_filter: ClusterFilter | None = None,
    ) -> None:
        self.kind = kind
        self.handler: EventHandler = handler if handler is not None else EnqueueRequestForObject()
        self.predicates = tuple(predicates)
        self.engage_local = engage_local
        self.engage_provider = engage_provider
        self.cluster_filter = cluster_filter

    def __repr__(self) -> str:
        return f"Kind({kind_name(self.kind)})"

    def should_engage(self, cluster_name: str, cluster: Cluster) -> bool:
        """Whether this source watches ``cluster_name``."""
        if cluster_name == "":
            return self.engage_local
        if not self.engage_provider:
            return False
        return self.cluster_filter is None or bool(self.cluster_filter(cluster_name, cluster))

    async def start_for_cluster(
        self, cluster_name: str, cluster: Cluster, queue: Queue, *, sync_timeout: float | None
    ) -> Registration:
        """Register on ``cluster``'s informer for this kind and wait until it has synced.

        Returns the registration (``remove()`` it to stop). Raises what the cache raises for a
        kind the cluster does not serve (e.g. ``NoKindMatchError``), :class:`SyncTimeoutError`
        after ``sync_timeout`` seconds; on any failure or cancellation the registration is removed
        before the exception propagates.
        """
        prepare = getattr(self.handler, "prepare", None)
        if prepare is not None:
            await prepare(cluster_name, cluster)
        informer = await cluster.cache.get_informer(self.kind)
        registration = informer.add_event_handler(
            _cluster_events(cluster_name, self.handler, self.predicates, queue)
        )
        try:
            synced = await informer.wait_for_sync(sync_timeout)
            if not synced:
                raise SyncTimeoutError(
                    f"informer for {kind_name(self.kind)} in cluster {cluster_name!r} did not sync "
                    f"within {sync_timeout}s"
                )
        except BaseException:
            registration.remove()
            raise
        return registration


def _cluster_events(
    cluster_name: str, handler: EventHandler, predicates: tuple[Predicate, ...], queue: Queue
) -> _ClusterEvents:
    """The adapter for one (source, cluster): watch reads in one call only where they become one
    ``add_many``; otherwise the informer notifies the adapter per event, old state included."""
    bulk = _bulk_add(handler, predicates, queue) is not None
    return (_BulkClusterEvents if bulk else _ClusterEvents)(cluster_name, handler, predicates, queue)


def _bulk_add(
    handler: EventHandler, predicates: tuple[Predicate, ...], queue: Queue
) -> Callable[..., None] | None:
    """The queue's ``add_many`` in the common case (the default handler, no predicates, a queue
    that takes lists), which turns a whole informer list or watch read into one call; else ``None``."""
    if not predicates and type(handler) is EnqueueRequestForObject and isinstance(queue, BulkQueue):
        return queue.add_many
    return None


class _ClusterEvents:
    """The informer-facing adapter of one (source, cluster): predicates, priority, handler.

    A :class:`~mcr.cache.ResourceEventHandler` and a :class:`~mcr.cache.ListBatchHandler`.
    """

    __slots__ = ("add_many", "cluster_name", "handler", "predicates", "queue")

    def __init__(
        self, cluster_name: str, handler: EventHandler, predicates: tuple[Predicate, ...], queue: Queue
    ) -> None:
        self.cluster_name = cluster_name
        self.handler = handler
        self.predicates = predicates
        self.queue = queue
        self.add_many = _bulk_add(handler, predicates, queue)

    def on_add(self, obj: Any, is_initial_list: bool) -> None:
        for p in self.predicates:
            if not p.create(obj):
                return
        self.handler.create(self.cluster_name, obj, self.queue, LOW_PRIORITY if is_initial_list else 0)

    def on_adds(self, objs: list[Any], is_initial_list: bool) -> None:
        """The adds of a whole list: one queue call for the common case, else ``on_add`` each."""
        if self.add_many is None:
            for obj in objs:
                try:
                    self.on_add(obj, is_initial_list)
                except Exception:
                    log.exception(
                        "event handler %r failed on add in cluster %r", self.handler, self.cluster_name
                    )
            return
        self._add_all(objs, LOW_PRIORITY if is_initial_list else 0)

    def _add_all(self, objs: list[Any], priority: int) -> None:
        """EnqueueRequestForObject for a list of objects, in one ``add_many``."""
        assert self.add_many is not None  # the callers checked
        try:
            requests = requests_for(self.cluster_name, objs)
        except (KeyError, TypeError):
            # Not the informer's plain dicts (a transform made models): one object at a time.
            requests = [req for obj in objs if (req := request_for(self.cluster_name, obj)) is not None]
        self.add_many(requests, priority, cluster=self.cluster_name)

    def on_update(self, old: Any, new: Any) -> None:
        for p in self.predicates:
            if not p.update(old, new):
                return
        unchanged = meta(old).get("resourceVersion") == meta(new).get("resourceVersion")
        self.handler.update(self.cluster_name, old, new, self.queue, LOW_PRIORITY if unchanged else 0)

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        for p in self.predicates:
            if not p.delete(obj):
                return
        self.handler.delete(self.cluster_name, obj, self.queue, 0)


class _BulkClusterEvents(_ClusterEvents):
    """The adapter for the common case (the default handler, no predicates, a queue that takes
    lists): also a :class:`~mcr.cache.WatchBatchHandler`, a watch read becoming one ``add_many``."""

    __slots__ = ()

    def on_events(self, notes: list[WatchNote]) -> None:
        """A watch read's changes.

        Every watch change (add, update with a new resourceVersion, delete) enqueues the
        object's key at normal priority, in one ``add_many``. The requests are made from the
        namespace and name each note carries: the objects themselves are not read again.
        """
        assert self.add_many is not None  # made only then
        self.add_many(requests_for_notes(self.cluster_name, notes), 0, cluster=self.cluster_name)


@dataclass(frozen=True, slots=True)
class GenericEvent:
    """An event from outside the cluster caches, for :class:`Channel`: an object and its cluster."""

    obj: Any
    cluster_name: str = ""


class Channel:
    """Feed events from ``events`` (an async iterator or an ``asyncio.Queue``) to ``handler``.

    Each item is a :class:`GenericEvent` or a bare object (then its cluster is ``""``). Items pass
    the predicates' ``generic`` check, then ``handler.generic``. The controller runs it once (not
    per cluster) from :meth:`mcr.controller.Controller.start`; it ends when the iterator is
    exhausted or on cancellation. A handler exception is logged and the next event is read.
    """

    def __init__(
        self,
        events: AsyncIterator[Any] | asyncio.Queue[Any],
        handler: EventHandler | None = None,
        *predicates: Predicate,
    ) -> None:
        self.events = events
        self.handler: EventHandler = handler if handler is not None else EnqueueRequestForObject()
        self.predicates = tuple(predicates)

    def __repr__(self) -> str:
        return f"Channel({self.events!r})"

    async def run(self, queue: Queue) -> None:
        """Consume events until the iterator ends; runs until cancelled for an ``asyncio.Queue``."""
        if isinstance(self.events, asyncio.Queue):
            source = self.events
            while True:
                self._deliver(await source.get(), queue)
        else:
            async for event in self.events:
                self._deliver(event, queue)

    def _deliver(self, event: Any, queue: Queue) -> None:
        if isinstance(event, GenericEvent):
            cluster_name, obj = event.cluster_name, event.obj
        else:
            cluster_name, obj = "", event
        for p in self.predicates:
            if not p.generic(obj):
                return
        try:
            self.handler.generic(cluster_name, obj, queue, 0)
        except Exception:
            log.exception("channel source %r: handler failed for an event in cluster %r", self, cluster_name)
