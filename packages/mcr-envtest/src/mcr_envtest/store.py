"""Object storage with one global resourceVersion, a bounded watch history and watchers.

Objects are kept by (group, resource) → namespace → name; cluster-scoped objects use namespace
``""``. Every write (create, update, delete) consumes the next resourceVersion (RV) of a single
counter, stores the object with ``metadata.resourceVersion`` set, appends an :class:`Event` to the
history and hands it to the watchers of that resource. The JSON of each stored object is encoded
once (``Event.raw``) and shared by every reader and watcher.

Read API other modules rely on (e.g. the RBAC authorizer):

* ``store.get(group, resource, namespace, name) -> dict | None`` — the stored object; never
  mutate it (objects are replaced, not edited, on write).
* ``store.list_objects(group, resource, namespace=None) -> list[dict]`` — current objects of a
  resource, all namespaces when ``namespace`` is None, ordered by (namespace, name).
* ``store.by_uid(uid) -> (group, resource, namespace, name) | None``.

Paginated lists keep a small LRU of :class:`ListSnapshot` (``list_snapshot_get``/``_put``): the
sorted, filtered result of one list at one RV, so every continue page costs O(log n + page size)
instead of rebuilding the state at that RV. A state at an RV never changes, so an entry stays
valid until its RV falls below ``floor`` (history trimmed, :meth:`Store.compact`, :meth:`Store.load`),
when it is dropped and the list answers 410 as before.

The store is not thread-safe: it is used from the server's event loop only, and a write is a
plain synchronous call, so no reader ever sees a half-applied write.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from . import errors

__all__ = ["Event", "ListSnapshot", "Store", "Watcher"]

Key = tuple[str, str]  # (group, resource)
ObjKey = tuple[str, str, str, str]  # (group, resource, namespace, name)

# Resources kept in another resource's storage, as kube-apiserver keeps events.k8s.io Events with
# the core ones: the store answers for both under the storage key.
STORAGE_ALIASES: dict[Key, Key] = {("events.k8s.io", "events"): ("", "events")}


def storage_key(group: str, resource: str) -> Key:
    """The (group, resource) a resource's objects are stored and watched under."""
    return STORAGE_ALIASES.get((group, resource), (group, resource))


def seed_resource_version() -> int:
    """A starting RV above any RV a previous, state-losing run could have handed out.

    Microseconds since the epoch: a fresh store never reuses an older store's RVs as long as it
    wrote fewer than a million objects per second.
    """
    return time.time_ns() // 1000


@dataclass(slots=True, eq=False)
class Event:
    """One stored change: ``obj`` is the new state (for DELETED, the last state at the deletion's
    RV) and ``prev`` the state before (None for ADDED)."""

    rv: int
    type: str
    group: str
    resource: str
    namespace: str
    name: str
    obj: dict[str, Any]
    prev: dict[str, Any] | None
    raw: bytes
    _line: bytes | None = field(default=None)

    def line(self) -> bytes:
        """The watch line ``{"type":..,"object":..}\\n``, encoded once and shared."""
        if self._line is None:
            self._line = b'{"type":"' + self.type.encode() + b'","object":' + self.raw + b"}\n"
        return self._line


class Watcher:
    """A subscription to the events of one resource, fed by the store, drained by one reader.

    Events are buffered in order; :meth:`next_batch` waits for at least one. After :meth:`close`
    (stop, fault, CRD removal, overflow) :attr:`closed` is true and ``next_batch`` returns what is
    left, then empty lists.
    """

    def __init__(self, store: Store, key: Key, max_pending: int) -> None:
        self._store = store
        self.key = key
        self.pending: list[Event] = []
        self.closed = False
        self.overflowed = False
        self._max_pending = max_pending
        self._waiter: asyncio.Future[None] | None = None

    def push(self, ev: Event) -> None:
        if self.closed:
            return
        self.pending.append(ev)
        if len(self.pending) > self._max_pending:
            self.overflowed = True
            self.close()
            return
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def close(self) -> None:
        """Stop receiving; a waiting reader wakes up. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self._store._unregister(self)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def next_batch(self, timeout: float | None) -> list[Event]:
        """The buffered events (waiting up to ``timeout`` s for one); [] on timeout or when closed."""
        if not self.pending and not self.closed:
            loop = asyncio.get_running_loop()
            self._waiter = loop.create_future()
            try:
                if timeout is None:
                    await self._waiter
                else:
                    await asyncio.wait_for(self._waiter, timeout)
            except TimeoutError:
                pass
            finally:
                self._waiter = None
        batch, self.pending = self.pending, []
        return batch


@dataclass(slots=True, eq=False)
class ListSnapshot:
    """The matched objects of one list at one RV, ordered by (namespace, name).

    ``keys[i]`` is the (namespace, name) of ``entries[i]``; ``raw`` is None when the object's JSON
    was not at hand. Shared by every page of that list: never mutate it.
    """

    keys: list[tuple[str, str]]
    entries: list[tuple[dict[str, Any], bytes | None]]
    last: tuple[str, str] | None = None  # the last key listed, matched or not


class Store:
    """In-memory objects, the global RV counter, the bounded history and the watchers.

    ``history_size`` bounds the number of kept events; a watch or continue token older than the
    oldest kept event is answered with 410 Expired. ``listeners`` are called synchronously with
    every committed event (used by the garbage collector and the CRD controller to schedule work).
    """

    def __init__(self, history_size: int = 10000, *, rv: int | None = None) -> None:
        self.history_size = max(1, history_size)
        self.rv = seed_resource_version() if rv is None else rv
        self.floor = self.rv  # the oldest RV a watch may start from
        self._objects: dict[Key, dict[str, dict[str, tuple[dict[str, Any], bytes]]]] = {}
        self._uids: dict[str, ObjKey] = {}
        self._dependents: dict[str, set[ObjKey]] = {}
        self._history: deque[Event] = deque()
        self._watchers: dict[Key, set[Watcher]] = {}
        self.listeners: list[Callable[[Event], None]] = []
        self.max_watch_pending = 1_000_000
        self.list_cache_size = 8
        # etcd's default --max-request-bytes: a larger object is refused as etcd would
        self.max_object_bytes: int | None = 1536 * 1024
        self._list_cache: OrderedDict[tuple[int, Any], ListSnapshot] = OrderedDict()

    # ----------------------------------------------------------------- reads
    def get(self, group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object, or None. Do not mutate it."""
        group, resource = storage_key(group, resource)
        entry = self._objects.get((group, resource), {}).get(namespace, {}).get(name)
        return entry[0] if entry else None

    def get_raw(self, group: str, resource: str, namespace: str, name: str) -> bytes | None:
        """The stored object's JSON bytes, or None."""
        group, resource = storage_key(group, resource)
        entry = self._objects.get((group, resource), {}).get(namespace, {}).get(name)
        return entry[1] if entry else None

    def list_objects(self, group: str, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Current objects ordered by (namespace, name); every namespace when ``namespace`` is None."""
        return [obj for obj, _ in self.list_entries(group, resource, namespace)]

    def list_entries(
        self, group: str, resource: str, namespace: str | None = None
    ) -> list[tuple[dict[str, Any], bytes]]:
        """Like :meth:`list_objects` with each object's encoded JSON."""
        group, resource = storage_key(group, resource)
        by_ns = self._objects.get((group, resource), {})
        out: list[tuple[dict[str, Any], bytes]] = []
        namespaces = [namespace] if namespace is not None else sorted(by_ns)
        for ns in namespaces:
            items = by_ns.get(ns)
            if items:
                out.extend(items[n] for n in sorted(items))
        return out

    def count(self, group: str, resource: str, namespace: str | None = None) -> int:
        """Number of stored objects of a resource (in one namespace when given)."""
        group, resource = storage_key(group, resource)
        by_ns = self._objects.get((group, resource), {})
        if namespace is not None:
            return len(by_ns.get(namespace, {}))
        return sum(len(v) for v in by_ns.values())

    def by_uid(self, uid: str) -> ObjKey | None:
        """The key of the object with this uid, or None."""
        return self._uids.get(uid)

    def dependents(self, owner_uid: str) -> list[ObjKey]:
        """Keys of objects with an ownerReference to ``owner_uid``."""
        return sorted(self._dependents.get(owner_uid, ()))

    def resources(self) -> list[Key]:
        """Every (group, resource) holding objects."""
        return [k for k, v in self._objects.items() if any(v.values())]

    def state_at(self, group: str, resource: str, namespace: str | None, rv: int) -> list[dict[str, Any]]:
        """The objects of a resource as they were at ``rv`` (ordered), rebuilt from the history.

        Raises StatusError 410 Expired when ``rv`` is older than the kept history.
        """
        return [obj for obj, _ in self.entries_at(group, resource, namespace, rv)]

    def entries_at(
        self, group: str, resource: str, namespace: str | None, rv: int
    ) -> list[tuple[dict[str, Any], bytes | None]]:
        """Like :meth:`state_at` with each object's JSON (None for a state older than the current one).

        Raises StatusError 410 Expired when ``rv`` is older than the kept history.
        """
        if rv < self.floor:
            raise errors.expired(f"too old resource version: {rv} ({self.floor})")
        group, resource = storage_key(group, resource)
        current: dict[tuple[str, str], tuple[dict[str, Any], bytes | None]] = {
            (e[0]["metadata"].get("namespace", ""), e[0]["metadata"]["name"]): e
            for e in self.list_entries(group, resource, namespace)
        }
        for ev in reversed(self._history):
            if ev.rv <= rv:
                break
            if ev.group != group or ev.resource != resource:
                continue
            if namespace is not None and ev.namespace != namespace:
                continue
            k = (ev.namespace, ev.name)
            if ev.prev is None:
                current.pop(k, None)
            else:
                current[k] = (ev.prev, None)
        return [current[k] for k in sorted(current)]

    def list_snapshot_get(self, rv: int, key: Any) -> ListSnapshot | None:
        """The cached list result for (``rv``, ``key``), or None (also when ``rv`` is expired)."""
        if rv < self.floor:
            self._prune_list_cache()
            return None
        snap = self._list_cache.get((rv, key))
        if snap is not None:
            self._list_cache.move_to_end((rv, key))
        return snap

    def list_snapshot_put(self, rv: int, key: Any, snap: ListSnapshot) -> None:
        """Keep ``snap`` as the list result for (``rv``, ``key``), evicting the least recently used.

        Ignored when ``rv`` is expired or later than the current RV (a state that may still change).
        """
        self._prune_list_cache()
        if rv < self.floor or rv > self.rv or self.list_cache_size <= 0:
            return
        self._list_cache[(rv, key)] = snap
        self._list_cache.move_to_end((rv, key))
        while len(self._list_cache) > self.list_cache_size:
            self._list_cache.popitem(last=False)

    def list_snapshot_count(self) -> int:
        """Number of cached list results (for tests and diagnostics)."""
        return len(self._list_cache)

    def _prune_list_cache(self) -> None:
        floor = self.floor
        for k in [k for k in self._list_cache if k[0] < floor]:
            del self._list_cache[k]

    # ----------------------------------------------------------------- writes
    def commit(self, group: str, resource: str, obj: dict[str, Any]) -> Event:
        """Store ``obj`` (created or replaced) at the next RV; the store takes ownership of ``obj``.

        Sets ``metadata.resourceVersion``; returns the ADDED or MODIFIED event. An object whose
        JSON exceeds :attr:`max_object_bytes` raises StatusError 500 ("etcdserver: request is too
        large") and changes nothing.
        """
        group, resource = storage_key(group, resource)
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        name = meta["name"]
        by_ns = self._objects.setdefault((group, resource), {})
        items = by_ns.setdefault(ns, {})
        old_entry = items.get(name)
        prev = old_entry[0] if old_entry else None
        old_rv = meta.get("resourceVersion")
        meta["resourceVersion"] = str(self.rv + 1)
        raw = orjson.dumps(obj)
        if self.max_object_bytes is not None and len(raw) > self.max_object_bytes:
            if old_rv is None:
                meta.pop("resourceVersion")
            else:
                meta["resourceVersion"] = old_rv
            if not items:
                del by_ns[ns]
            raise errors.storage_too_large()
        self.rv += 1
        items[name] = (obj, raw)
        key: ObjKey = (group, resource, ns, name)
        if prev is not None:
            self._unindex(prev, key)
        self._index(obj, key)
        ev = Event(
            self.rv, "MODIFIED" if prev is not None else "ADDED", group, resource, ns, name, obj, prev, raw
        )
        self._emit(ev)
        return ev

    def remove(self, group: str, resource: str, namespace: str, name: str) -> Event | None:
        """Delete an object at the next RV; returns the DELETED event (None if absent)."""
        group, resource = storage_key(group, resource)
        items = self._objects.get((group, resource), {}).get(namespace)
        if not items or name not in items:
            return None
        prev, _ = items.pop(name)
        if not items:
            del self._objects[(group, resource)][namespace]
        self.rv += 1
        last = dict(prev)
        last["metadata"] = dict(prev["metadata"], resourceVersion=str(self.rv))
        self._unindex(prev, (group, resource, namespace, name))
        ev = Event(self.rv, "DELETED", group, resource, namespace, name, last, prev, orjson.dumps(last))
        self._emit(ev)
        return ev

    def _index(self, obj: dict[str, Any], key: ObjKey) -> None:
        meta = obj["metadata"]
        uid = meta.get("uid")
        if uid:
            self._uids[uid] = key
        for ref in meta.get("ownerReferences") or ():
            ouid = ref.get("uid")
            if ouid:
                self._dependents.setdefault(ouid, set()).add(key)

    def _unindex(self, obj: dict[str, Any], key: ObjKey) -> None:
        meta = obj["metadata"]
        uid = meta.get("uid")
        if uid and self._uids.get(uid) == key:
            del self._uids[uid]
        for ref in meta.get("ownerReferences") or ():
            ouid = ref.get("uid")
            deps = self._dependents.get(ouid) if ouid else None
            if deps is not None:
                deps.discard(key)
                if not deps:
                    del self._dependents[ouid]

    def _emit(self, ev: Event) -> None:
        h = self._history
        h.append(ev)
        while len(h) > self.history_size:
            self.floor = h.popleft().rv
        for w in tuple(self._watchers.get((ev.group, ev.resource), ())):
            w.push(ev)
        for listener in self.listeners:
            listener(ev)

    # ----------------------------------------------------------------- watch
    def watch(self, group: str, resource: str, since: int | None) -> tuple[Watcher, list[Event]]:
        """Subscribe to a resource; with ``since``, also return the kept events after that RV.

        Raises StatusError 410 Expired when ``since`` is older than the kept history.
        """
        if since is not None and since < self.floor:
            raise errors.expired(f"too old resource version: {since} ({self.floor})")
        group, resource = storage_key(group, resource)
        w = Watcher(self, (group, resource), self.max_watch_pending)
        self._watchers.setdefault((group, resource), set()).add(w)
        backlog: list[Event] = []
        if since is not None and since < self.rv:
            for ev in self._iter_since(since):
                if ev.group == group and ev.resource == resource:
                    backlog.append(ev)
        return w, backlog

    def _iter_since(self, since: int) -> Iterator[Event]:
        h = self._history
        # find the first event after `since` scanning from the right (recent RVs are the common case)
        i = len(h)
        while i > 0 and h[i - 1].rv > since:
            i -= 1
        for j in range(i, len(h)):
            yield h[j]

    def _unregister(self, w: Watcher) -> None:
        ws = self._watchers.get(w.key)
        if ws is not None:
            ws.discard(w)

    def close_watchers(self, key: Key | None = None) -> int:
        """Close every watcher (of one resource when ``key`` is given); returns how many."""
        key = None if key is None else storage_key(*key)
        targets = [w for k, ws in self._watchers.items() if key is None or k == key for w in ws]
        for w in targets:
            w.close()
        return len(targets)

    def watcher_count(self) -> int:
        """Number of open watchers."""
        return sum(len(ws) for ws in self._watchers.values())

    def compact(self) -> None:
        """Drop the whole history: every RV before the current one now answers 410."""
        self._history.clear()
        self.floor = self.rv
        self._list_cache.clear()

    # ----------------------------------------------------------------- persistence
    def dump(self) -> dict[str, Any]:
        """A JSON-able snapshot: the RV counter and every object."""
        objects = []
        for (group, resource), by_ns in self._objects.items():
            for items in by_ns.values():
                for obj, _ in items.values():
                    objects.append({"group": group, "resource": resource, "object": obj})
        return {"resourceVersion": self.rv, "objects": objects}

    def load(self, data: dict[str, Any]) -> None:
        """Replace the contents with a :meth:`dump` snapshot (no events; history restarts empty)."""
        self._objects.clear()
        self._uids.clear()
        self._dependents.clear()
        self._history.clear()
        self._list_cache.clear()
        for item in data.get("objects", []):
            obj = item["object"]
            meta = obj["metadata"]
            ns = meta.get("namespace", "")
            key: ObjKey = (item["group"], item["resource"], ns, meta["name"])
            self._objects.setdefault((key[0], key[1]), {}).setdefault(ns, {})[key[3]] = (
                obj,
                orjson.dumps(obj),
            )
            self._index(obj, key)
        self.rv = max(int(data.get("resourceVersion", 0)), self.rv)
        self.floor = self.rv
