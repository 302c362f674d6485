"""A shared informer: one kind's objects kept in memory and handed to event handlers.

An :class:`Informer` owns an indexed store and one reflector per request scope (all namespaces,
or one per configured namespace). Every change the reflectors learn reaches the store and then
every registered handler, synchronously and in resourceVersion order, exactly once per
resourceVersion: a watch event whose resourceVersion equals the cached one is dropped, and a relist
reports only what differs from the cache (adds, updates with a new resourceVersion, deletes as
:class:`DeletedFinalStateUnknown` tombstones).

With a resync period, the informer also re-delivers every cached object to every handler as
``on_update(obj, obj)`` now and then (controller-runtime's ``SyncPeriod``), from its own memory,
without any API request: level-triggered controllers get to reconcile everything again.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mcr.cache.handlers import DeletedFinalStateUnknown, Registration, ResourceEventHandler, WatchNote
from mcr.cache.reflector import Reflector, ReflectorConfig, ScopeSpec, resource_path
from mcr.cache.store import NAMESPACE_INDEX, Indexer, IndexFunc

if TYPE_CHECKING:
    from mcr.rest.kinds import GVK, GVR
    from mcr.rest.transport import Transport

__all__ = ["RESYNC_CHUNK", "Informer", "ScopeSpec", "resync_delay"]

log = logging.getLogger("mcr.cache")

Obj = dict[str, Any]
ObjList = list[Obj]

RESYNC_CHUNK = 1000
"""A resync yields to the event loop after delivering this many objects."""


def resync_delay(period: float) -> float:
    """The wait before the next resync: ``period`` scaled by a factor drawn uniformly from [0.9, 1.1].

    controller-runtime draws its factor from the same range once per informer; mcr draws it
    anew for every period, so informers started together drift apart instead of resyncing in
    lock-step forever.
    """
    return period * random.uniform(0.9, 1.1)


class Informer:
    """Keeps the objects of one kind (within its scopes) and notifies handlers of changes.

    Lifecycle: :meth:`start` launches the reflectors (idempotent); :meth:`stop` cancels and
    awaits them (idempotent; the informer can be started again and relists). Reads
    (:meth:`get`, :meth:`list`, :meth:`by_index`) return the cache's own objects: callers must
    not mutate them (the :class:`~mcr.cache.InformerCache` reader copies for its callers).

    ``resync_period`` (seconds; ``None`` or 0: never) makes the running informer hand every cached
    object to every handler as ``on_update(obj, obj)`` once per period (jittered, see
    :func:`resync_delay`), starting one period after the informer has synced. The resync timer is
    one more task of the informer: :meth:`start` creates it and :meth:`stop` cancels it with the
    reflectors.
    """

    def __init__(
        self,
        transport: Transport,
        gvk: GVK,
        gvr: GVR,
        *,
        namespaced: bool,
        scopes: Sequence[ScopeSpec] = (ScopeSpec(),),
        config: ReflectorConfig | None = None,
        on_synced: Callable[[Informer], None] | None = None,
        resync_period: float | None = None,
    ) -> None:
        if resync_period is not None and not resync_period >= 0:
            raise ValueError(
                f"informer for {gvk.api_version}/{gvk.kind}: resync_period must be >= 0 seconds "
                f"(0 or None disables resyncs), got {resync_period!r}"
            )
        self.gvk = gvk
        self.gvr = gvr
        self.namespaced = namespaced
        self._transport = transport
        self._config = config if config is not None else ReflectorConfig()
        self._on_synced = on_synced
        self.resync_period = resync_period or None
        if not namespaced:
            # Cluster-scoped kinds ignore namespaces; keep the selectors of the first scope.
            first = scopes[0] if scopes else ScopeSpec()
            scopes = (ScopeSpec(None, first.label_selector, first.field_selector, first.transform),)
        self.scopes: tuple[ScopeSpec, ...] = tuple(scopes)
        self._store = Indexer(namespace_index=True)
        self._handlers: tuple[Registration, ...] = ()
        # Watch events go one by one to handlers without ``on_events`` and in one call per
        # stream read to those with it.
        self._event_handlers: tuple[Registration, ...] = ()
        self._batch_handlers: tuple[tuple[Registration, Callable[[list[WatchNote]], None]], ...] = ()
        self._batch: list[WatchNote] = []  # changes noted for the batch handlers
        self._joined: dict[Registration, int] | None = None  # batch handlers added meanwhile
        self._synced_scopes: set[str | None] = set()
        self._synced = asyncio.Event()
        self._reflectors: list[Reflector] = []
        self._tasks: list[asyncio.Task[None]] = []

    def __repr__(self) -> str:
        cluster = self._transport.cluster_name
        gvk = self.gvk
        return f"<Informer {gvk.api_version}/{gvk.kind} cluster={cluster!r} objects={len(self._store)}>"

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return bool(self._tasks)

    def start(self) -> None:
        """Start listing and watching, and the resync timer if configured (in background tasks this
        informer owns); no-op if running."""
        if self._tasks:
            return
        self._reflectors = []
        for scope in self.scopes:
            reflector = Reflector(
                self._transport,
                resource_path(self.gvr, scope.namespace),
                self,
                scope=scope.namespace,
                kind=self.gvk.kind,
                api_version=self.gvk.api_version,
                label_selector=scope.label_selector,
                field_selector=scope.field_selector,
                transform=scope.transform,
                config=self._config,
            )
            self._reflectors.append(reflector)
            task = asyncio.create_task(reflector.run(), name=f"reflector {reflector.description}")
            self._tasks.append(task)
        if self.resync_period is not None:
            gvk = self.gvk
            cluster = self._transport.cluster_name
            name = f"resync {gvk.api_version}/{gvk.kind} cluster={cluster!r}"
            self._tasks.append(asyncio.create_task(self._resync_loop(self.resync_period), name=name))

    async def stop(self) -> None:
        """Cancel every reflector and the resync timer, and wait for them (the watch connections
        are closed on return).

        The store keeps its objects; ``has_synced`` stays as it was. Safe to call repeatedly. The
        reflectors are cancelled before the first suspension, so even a cancelled ``stop()``
        leaves none running for long.
        """
        tasks = self.cancel()
        if tasks:
            await asyncio.wait(tasks)

    def cancel(self) -> list[asyncio.Task[None]]:
        """Cancel the reflectors and the resync timer without waiting; returns their tasks (for
        the caller to await)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        return tasks

    @property
    def has_synced(self) -> bool:
        """True once every scope's first list has been applied to the store and the handlers."""
        return self._synced.is_set()

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until :attr:`has_synced`; ``False`` if ``timeout`` seconds pass first."""
        if self._synced.is_set():
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._synced.wait()
        except TimeoutError:
            return False
        return True

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (of the first scope)."""
        return self._reflectors[0].resource_version if self._reflectors else ""

    @property
    def reflectors(self) -> list[Reflector]:
        """The reflectors of the current run (for diagnostics and tests)."""
        return list(self._reflectors)

    # -- resync ------------------------------------------------------------------------------
    async def _resync_loop(self, period: float) -> None:
        """Resync once per jittered ``period`` after the first sync, until cancelled."""
        await self._synced.wait()
        while True:
            await asyncio.sleep(resync_delay(period))
            await self.resync()

    async def resync(self) -> int:
        """Hand every cached object to every handler as ``on_update(obj, obj)``; returns how many.

        The objects are those cached when the call starts, each delivered at most once, in its
        state at delivery time. Every :data:`RESYNC_CHUNK` objects the call yields to the event
        loop, so watch events may be applied in between: an object deleted meanwhile is skipped
        (never delivered after its delete), one updated meanwhile is delivered in its new state.
        A failing handler is logged and does not stop the others. Cancellation stops the resync
        between two chunks.
        """
        store = self._store
        delivered = 0
        if not self._handlers:
            return 0
        for i, key in enumerate(list(store)):
            if i and not i % RESYNC_CHUNK:
                await asyncio.sleep(0)
            obj = store.get(key)
            if obj is None:
                continue
            self._notify_update(obj, obj, self._handlers)
            delivered += 1
        log.debug("%r resynced %d objects", self, delivered)
        return delivered

    # -- handlers ----------------------------------------------------------------------------
    def add_event_handler(self, handler: ResourceEventHandler) -> Registration:
        """Register ``handler``; it first receives ``on_add(obj, True)`` for every cached object.

        Later changes reach it in order. The registration's ``has_synced`` turns true once the
        handler has seen the informer's complete initial list.
        """
        reg = Registration.of(handler, self._remove_handler)
        objs = self._store.values()
        if objs:
            self._deliver_adds(reg, objs, True)
        reg.synced = self._synced.is_set()
        self._handlers = (*self._handlers, reg)
        on_events = reg.on_events
        if on_events is None:
            self._event_handlers = (*self._event_handlers, reg)
        else:
            self._batch_handlers = (*self._batch_handlers, (reg, on_events))
            if self._batch:
                # Added while changes are noted: the replay above showed the store as of now, so
                # the changes noted so far are not for it.
                if self._joined is None:
                    self._joined = {}
                self._joined[reg] = len(self._batch)
        return reg

    def _remove_handler(self, reg: Registration) -> None:
        self._handlers = tuple(h for h in self._handlers if h is not reg)
        self._event_handlers = tuple(h for h in self._event_handlers if h is not reg)
        self._batch_handlers = tuple(b for b in self._batch_handlers if b[0] is not reg)

    @property
    def handler_count(self) -> int:
        return len(self._handlers)

    def _call_add(self, reg: Registration, obj: Obj, initial: bool) -> None:
        try:
            reg.handler.on_add(obj, initial)
        except Exception:
            log.exception("%r: event handler %r failed on add", self, reg.handler)

    def _deliver_adds(self, reg: Registration, objs: ObjList, initial: bool) -> None:
        """Hand ``objs`` to one handler as adds: in one ``on_adds`` call if it has that method."""
        on_adds = reg.on_adds
        if on_adds is None:
            for obj in objs:
                self._call_add(reg, obj, initial)
            return
        try:
            on_adds(objs, initial)
        except Exception:
            log.exception("%r: event handler %r failed on a batch of %d adds", self, reg.handler, len(objs))

    def _notify_add(self, obj: Obj, initial: bool, handlers: tuple[Registration, ...]) -> None:
        for reg in handlers:
            try:
                reg.handler.on_add(obj, initial)
            except Exception:
                log.exception("%r: event handler %r failed on add", self, reg.handler)

    def _notify_update(self, old: Obj, new: Obj, handlers: tuple[Registration, ...]) -> None:
        for reg in handlers:
            try:
                reg.handler.on_update(old, new)
            except Exception:
                log.exception("%r: event handler %r failed on update", self, reg.handler)

    def _notify_delete(self, obj: Obj | DeletedFinalStateUnknown, handlers: tuple[Registration, ...]) -> None:
        for reg in handlers:
            try:
                reg.handler.on_delete(obj)
            except Exception:
                log.exception("%r: event handler %r failed on delete", self, reg.handler)

    # -- the reflector sink ------------------------------------------------------------------
    def watch_event(self, event_type: str, obj: Obj) -> None:
        """Apply one watch event to the store and notify handlers (the reflectors' hot path).

        Handlers without ``on_events`` are notified at once; for those with it the change is
        noted and handed over by :meth:`watch_read_done`.
        """
        meta = obj["metadata"]
        ns = meta.get("namespace") or ""
        name = meta["name"]
        key = f"{ns}/{name}" if ns else name
        store = self._store
        if event_type == "DELETED":
            # A delete of an object the cache does not hold was already reported (by a relist).
            if store.pop(key) is not None:
                if self._batch_handlers:
                    self._batch.append(("DELETED", obj, ns, name))
                if self._event_handlers:
                    self._notify_delete(obj, self._event_handlers)
            return
        old = store.put(key, obj)
        # The note goes first: a batch handler added by a per-event handler below has seen this
        # change in its replay.
        if old is None:
            if self._batch_handlers:
                self._batch.append(("ADDED", obj, ns, name))
            if self._event_handlers:
                self._notify_add(obj, False, self._event_handlers)
        elif old["metadata"].get("resourceVersion") != meta.get("resourceVersion"):
            if self._batch_handlers:
                self._batch.append(("MODIFIED", obj, ns, name))
            if self._event_handlers:
                self._notify_update(old, obj, self._event_handlers)
        # An event at the cached resourceVersion is a duplicate after a re-watch: drop it.

    def watch_changes(
        self, events: list[Any], start: int, strip: bool, *, dedupe: bool
    ) -> tuple[int, str | None, int]:
        """Apply ``events[start:]`` as :meth:`watch_event` would, in one pass, while they are
        ADDED or MODIFIED events of objects with metadata and a resourceVersion (``strip``: drop
        each object's ``managedFields`` first).

        An event at the resourceVersion already stored is dropped as a duplicate only with
        ``dedupe`` (the reflector asks for it while a stream may be replaying; without it, the
        replaced object is not read at all). Returns the index of the first event left alone
        (``len(events)`` if none was), the resourceVersion of the last event taken (applied or
        dropped; ``None``: none was) and the number of duplicates dropped. The reflector takes
        the other events (bookmarks, deletions, errors, malformed events) one by one.
        """
        store = self._store
        items = store.plain()
        notes = self._batch if self._batch_handlers else None
        handlers = self._event_handlers
        rv = None
        dropped = 0
        i = start
        try:
            for i in range(start, len(events)):  # the index is the result
                event = events[i]
                etype = event["type"]
                if etype != "MODIFIED" and etype != "ADDED":
                    return i, rv, dropped
                obj = event["object"]
                meta = obj["metadata"]
                new_rv = meta["resourceVersion"]
                if strip and "managedFields" in meta:  # (a check costs less than a pop that finds nothing)
                    del meta["managedFields"]
                ns = meta.get("namespace") or ""
                name = meta["name"]
                key = f"{ns}/{name}" if ns else name
                if items is not None and (old := items.get(key)) is not None:
                    items[key] = obj  # an existing key: no index changes
                else:
                    old = store.put(key, obj)
                rv = new_rv
                if old is None:
                    if notes is not None:
                        notes.append(("ADDED", obj, ns, name))
                    if not handlers:
                        continue
                    self._notify_add(obj, False, handlers)
                elif not dedupe or old["metadata"].get("resourceVersion") != new_rv:
                    if notes is not None:
                        notes.append(("MODIFIED", obj, ns, name))
                    if not handlers:
                        continue
                    self._notify_update(old, obj, handlers)
                else:
                    dropped += 1  # as in watch_event: at the cached resourceVersion, a duplicate
                    continue
                # A handler may have added or removed handlers, or indexes: look again.
                items = store.plain()
                notes = self._batch if self._batch_handlers else None
                handlers = self._event_handlers
        except (KeyError, TypeError, AttributeError):
            return i, rv, dropped  # not a well-formed event: the reflector reports it
        return len(events), rv, dropped

    def watch_read_done(self) -> None:
        """Hand the changes noted since the last call to each handler with ``on_events``.

        A handler removed meanwhile gets nothing; one added meanwhile (by another handler) gets
        the changes from its registration on.
        """
        notes = self._batch
        if not notes:
            return
        self._batch = []
        joined, self._joined = self._joined, None
        for reg, on_events in self._batch_handlers:
            mine = notes[joined[reg] :] if joined and reg in joined else notes
            if reg.removed or not mine:
                continue
            try:
                on_events(mine)
            except Exception:
                log.exception("%r: event handler %r failed on %d watch events", self, reg.handler, len(mine))

    def replace(self, scope: str | None, objs: list[Obj], resource_version: str) -> None:
        """Make the store's objects in ``scope`` equal ``objs`` and report the differences."""
        store = self._store
        initial = scope not in self._synced_scopes
        stale = set(store) if scope is None else store.index_keys(NAMESPACE_INDEX, scope)
        # The store is updated first, then handlers get the adds (in one call for those that
        # take batches), the updates and the deletes, each in list order.
        added: ObjList = []
        updated: list[tuple[Obj, Obj]] = []
        for obj in objs:
            meta = obj["metadata"]
            ns = meta.get("namespace")
            key = f"{ns}/{meta['name']}" if ns else meta["name"]
            old = store.put(key, obj)
            if old is None:
                added.append(obj)
            else:
                stale.discard(key)
                if old["metadata"].get("resourceVersion") != meta.get("resourceVersion"):
                    updated.append((old, obj))
        if added:
            for reg in self._handlers:
                self._deliver_adds(reg, added, initial)
        handlers = self._handlers
        for old, obj in updated:
            self._notify_update(old, obj, handlers)
        for key in stale:
            gone = store.pop(key)
            if gone is not None:
                self._notify_delete(DeletedFinalStateUnknown(key, gone), handlers)
        if initial:
            self._synced_scopes.add(scope)
            if len(self._synced_scopes) >= len(self.scopes) and not self._synced.is_set():
                self._synced.set()
                for reg in self._handlers:
                    reg.synced = True
                if self._on_synced is not None:
                    self._on_synced(self)

    # -- reads -------------------------------------------------------------------------------
    def get(self, key: str) -> Obj | None:
        """The cached object under ``"<ns>/<name>"`` (or ``"<name>"``), or ``None``."""
        return self._store.get(key)

    def list(self, namespace: str | None = None) -> ObjList:
        """Every cached object, or those of one namespace."""
        if namespace is None:
            return self._store.values()
        return self._store.by_index(NAMESPACE_INDEX, namespace)

    def by_index(self, index: str, value: str) -> ObjList:
        """Cached objects whose ``index`` values include ``value`` (``KeyError``: unknown index)."""
        return self._store.by_index(index, value)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indexes, built at once over the cached objects (``IndexerConflictError`` on a taken name)."""
        self._store.add_indexers(indexers)

    def __len__(self) -> int:
        return len(self._store)

    @property
    def store(self) -> Indexer:
        return self._store
