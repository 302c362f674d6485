"""Event handlers: turn informer events into reconcile requests.

A handler gets the name of the cluster the event came from and the queue to add to, so every
request it produces carries that cluster (``Request.cluster_name``). The built-ins match
controller-runtime's:

- :class:`EnqueueRequestForObject` — the object itself.
- :class:`EnqueueRequestForOwner` — the object's owner of a given kind, in the object's cluster.
- :class:`EnqueueRequestsFromMapFunc` — whatever ``fn(obj)`` returns; requests may name another
  cluster (cross-cluster enqueue), requests without a cluster get the event's.

Handlers run synchronously on the event loop and must not block. ``priority`` comes from the
source: :data:`mcr.workqueue.LOW_PRIORITY` for initial-list events and unchanged resyncs, else 0.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mcr.predicate import meta
from mcr.reconcile import Request, reset_current_request, set_current_request
from mcr.rest.kinds import gvk_of

if TYPE_CHECKING:
    from mcr.cache.handlers import WatchNote
    from mcr.cluster import Cluster

__all__ = [
    "BulkQueue",
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EventHandler",
    "Queue",
    "group_kind_of",
    "request_for",
    "requests_for",
    "requests_for_notes",
]

log = logging.getLogger("mcr.handler")

_new_request = tuple.__new__
_note_namespace = itemgetter(2)  # of a WatchNote: (event_type, obj, namespace, name)
_note_name = itemgetter(3)


class Queue(Protocol):
    """What a handler adds requests to (the controller's :class:`mcr.workqueue.WorkQueue`)."""

    def add(self, item: Request, priority: int = 0) -> None: ...


@runtime_checkable
class BulkQueue(Queue, Protocol):
    """A :class:`Queue` that also takes a list of one cluster's requests in one call.

    Sources hand whole informer lists and watch reads to such a queue (the controller's
    :class:`mcr.workqueue.WorkQueue` is one) instead of one ``add`` per object.
    """

    def add_many(self, items: list[Request], priority: int = 0, *, cluster: str | None = None) -> None: ...


@runtime_checkable
class EventHandler(Protocol):
    """Maps one event of one cluster to requests added to ``queue``.

    A handler may also define ``async def prepare(cluster_name, cluster)``; a source awaits it
    once per engagement before registering, to look up per-cluster facts (e.g. an owner kind's
    scope). Failing there fails (and retries) that watch in that cluster only.
    """

    def create(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None: ...

    def update(self, cluster_name: str, old: Any, new: Any, queue: Queue, priority: int) -> None: ...

    def delete(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None: ...

    def generic(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None: ...


def request_for(cluster_name: str, obj: Any) -> Request | None:
    """The request :class:`EnqueueRequestForObject` makes for ``obj`` (``None``: it has no name).

    The one place that maps an object to its own request; the informer's dicts take a short path.
    """
    m = obj.get("metadata") if type(obj) is dict else None
    if type(m) is not dict:
        m = meta(obj)
    name = m.get("name")
    if not name:
        return None
    # Request(namespace, name, cluster_name) without the namedtuple's Python-level __new__.
    return _new_request(Request, (m.get("namespace") or "", name, cluster_name))


def requests_for(cluster_name: str, objs: list[Any]) -> list[Request]:
    """:func:`request_for` of each of an informer's objects, in bulk.

    The objects must be dicts whose metadata has a name (an informer keys its store by it);
    anything else raises ``KeyError``/``TypeError``, and the caller falls back to :func:`request_for`.
    """
    new, cls = _new_request, Request
    return [
        new(cls, ((m := obj["metadata"]).get("namespace") or "", m["name"], cluster_name)) for obj in objs
    ]


def requests_for_notes(cluster_name: str, notes: list[WatchNote]) -> list[Request]:
    """The request :class:`EnqueueRequestForObject` makes for each of an informer's watch notes.

    Made from the namespace and name each note carries, without reading its object again.
    """
    # Request(namespace, name, cluster_name) per note, built in C (map and zip, no Python-level
    # step per note).
    return list(
        map(
            _new_request,
            repeat(Request, len(notes)),
            zip(map(_note_namespace, notes), map(_note_name, notes), repeat(cluster_name)),
        )
    )


class EnqueueRequestForObject:
    """Enqueues the event's object: ``Request(namespace, name, cluster_name=<event's cluster>)``.

    For updates, the new object's key (the key cannot change, so it is also the old one's).
    """

    __slots__ = ()

    def create(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None:
        req = request_for(cluster_name, obj)
        if req is not None:
            queue.add(req, priority)

    def update(self, cluster_name: str, old: Any, new: Any, queue: Queue, priority: int) -> None:
        req = request_for(cluster_name, new if new is not None else old)
        if req is not None:
            queue.add(req, priority)

    def delete(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None:
        self.create(cluster_name, obj, queue, priority)

    def generic(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None:
        self.create(cluster_name, obj, queue, priority)


def group_kind_of(kind: Any) -> tuple[str, str]:
    """``(group, kind)`` of a kind-like (model class, :class:`mcr.rest.kinds.GVK`, ``"group/v/Kind"``).

    Raises ``ValueError`` naming the input when it names no kind.
    """
    gvk = gvk_of(kind)
    return gvk.group, gvk.kind


class EnqueueRequestForOwner:
    """Enqueues the owner of kind ``owner_kind`` named in the object's ``ownerReferences``.

    With ``only_controller=True`` (the default) only the reference with ``controller: true``
    counts; otherwise every matching owner reference is enqueued. A reference matches when its
    API group and kind equal the owner kind's (the version is ignored). The owner is reconciled in
    the same cluster as the object; it lives in the object's namespace unless the owner kind is
    cluster-scoped there (looked up per cluster in :meth:`prepare`).
    """

    __slots__ = ("_cluster_scoped", "group", "kind", "only_controller", "owner_kind")

    def __init__(self, owner_kind: Any, *, only_controller: bool = True) -> None:
        self.owner_kind = owner_kind
        self.group, self.kind = group_kind_of(owner_kind)
        self.only_controller = only_controller
        self._cluster_scoped: dict[str, bool] = {}

    async def prepare(self, cluster_name: str, cluster: Cluster | None) -> None:
        """Look up whether the owner kind is cluster-scoped in ``cluster`` (if it has a REST mapper).

        Raises what the mapper raises (e.g. ``NoKindMatchError`` while the owner's CRD is missing).
        """
        mapper = getattr(cluster, "rest_mapper", None) if cluster is not None else None
        if mapper is None:
            return
        mapping = await mapper.mapping(gvk_of(self.owner_kind))
        self._cluster_scoped[cluster_name] = not bool(getattr(mapping, "namespaced", True))

    def _enqueue(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None:
        m = meta(obj)
        refs = m.get("ownerReferences") or m.get("owner_references") or ()
        if not refs:
            return
        namespace = "" if self._cluster_scoped.get(cluster_name, False) else (m.get("namespace") or "")
        for ref in refs:
            if not isinstance(ref, Mapping):
                ref = _ref_dict(ref)
            if ref.get("kind") != self.kind:
                continue
            api_version = ref.get("apiVersion") or ref.get("api_version") or ""
            group = api_version.rpartition("/")[0]
            if group != self.group:
                continue
            if self.only_controller and not ref.get("controller"):
                continue
            name = ref.get("name")
            if name:
                queue.add(Request(namespace, name, cluster_name), priority)

    def create(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None:
        self._enqueue(cluster_name, obj, queue, priority)

    def update(self, cluster_name: str, old: Any, new: Any, queue: Queue, priority: int) -> None:
        # Both: an owner that was removed from the references must learn it lost the object.
        if old is not None:
            self._enqueue(cluster_name, old, queue, priority)
        if new is not None:
            self._enqueue(cluster_name, new, queue, priority)

    def delete(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None:
        self._enqueue(cluster_name, obj, queue, priority)

    def generic(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None:
        self._enqueue(cluster_name, obj, queue, priority)


def _ref_dict(ref: Any) -> Mapping[str, Any]:
    to_dict = getattr(ref, "to_dict", None)
    d = to_dict() if callable(to_dict) else {}
    return d if isinstance(d, Mapping) else {}


MapFunc = Callable[[Any], Iterable[Request] | None]


class EnqueueRequestsFromMapFunc:
    """Enqueues the requests ``fn(obj)`` returns (for updates: of both the old and the new object).

    A returned request whose ``cluster_name`` is ``""`` is given the event's cluster; one naming
    another cluster is enqueued for that cluster (cross-cluster enqueue; the controller drops it
    if that cluster is not engaged). With ``preserve_cluster=True`` requests are taken exactly as
    returned, so ``""`` then means the local cluster. ``fn`` runs with
    :func:`mcr.current_cluster` returning the event's cluster. Items that are not a ``Request``
    with string fields are logged (naming ``fn`` and the object) and skipped; an exception from
    ``fn`` propagates to the source, which logs it.
    """

    __slots__ = ("fn", "preserve_cluster")

    def __init__(self, fn: MapFunc, *, preserve_cluster: bool = False) -> None:
        if not callable(fn):
            raise TypeError(f"EnqueueRequestsFromMapFunc needs a function, got {fn!r}")
        self.fn = fn
        self.preserve_cluster = preserve_cluster

    def _enqueue(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None:
        # current_cluster() (and log records) inside fn name the event's cluster.
        token = set_current_request(_new_request(Request, ("", "", cluster_name)))
        try:
            requests = self.fn(obj)
        finally:
            reset_current_request(token)
        if not requests:
            return
        for req in requests:
            fields: tuple[object, ...] = (
                (req.cluster_name, req.name, req.namespace) if isinstance(req, Request) else (None,)
            )
            if not all(isinstance(f, str) for f in fields):
                log.error(
                    "map function %s returned %r for %s in cluster %r: expected a Request with string "
                    "namespace, name and cluster_name; skipped",
                    getattr(self.fn, "__qualname__", self.fn),
                    req,
                    _describe(obj),
                    cluster_name,
                )
                continue
            if not req.cluster_name and not self.preserve_cluster and cluster_name:
                req = Request(req.namespace, req.name, cluster_name)
            queue.add(req, priority)

    def create(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None:
        self._enqueue(cluster_name, obj, queue, priority)

    def update(self, cluster_name: str, old: Any, new: Any, queue: Queue, priority: int) -> None:
        if old is not None:
            self._enqueue(cluster_name, old, queue, priority)
        if new is not None:
            self._enqueue(cluster_name, new, queue, priority)

    def delete(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None:
        self._enqueue(cluster_name, obj, queue, priority)

    def generic(self, cluster_name: str, obj: Any, queue: Queue, priority: int) -> None:
        self._enqueue(cluster_name, obj, queue, priority)


def _describe(obj: Any) -> str:
    m = meta(obj)
    ns, name = m.get("namespace") or "", m.get("name") or "?"
    return f"{ns}/{name}" if ns else str(name)
