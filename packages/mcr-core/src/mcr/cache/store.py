"""The thread-free indexed store an informer keeps its objects in.

Objects are decoded JSON dicts keyed like client-go's ``MetaNamespaceKeyFunc``: ``"<ns>/<name>"``
for namespaced objects, ``"<name>"`` for cluster-scoped ones. Indexes map an index name to
``{value: {keys}}``; every write keeps them consistent. All methods are synchronous and run on the
event loop, so a caller never observes a half-applied write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

__all__ = [
    "NAMESPACE_INDEX",
    "IndexFunc",
    "Indexer",
    "IndexerConflictError",
    "meta_namespace_key",
    "namespace_index_func",
]

Obj = dict[str, Any]
IndexFunc = Callable[[Obj], list[str]]
"""Returns the values an object is indexed under (possibly none)."""

NAMESPACE_INDEX = "namespace"
"""The built-in index: an object's namespace (``""`` for cluster-scoped objects)."""


class IndexerConflictError(ValueError):
    """An index with this name already exists; index names are registered once per informer."""


def meta_namespace_key(obj: Mapping[str, Any]) -> str:
    """The store key of ``obj``: ``"<namespace>/<name>"``, or ``"<name>"`` when it has no namespace."""
    meta = obj["metadata"]
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def split_key(key: str) -> tuple[str, str]:
    """``"ns/name"`` → ``("ns", "name")``; ``"name"`` → ``("", "name")``."""
    ns, sep, name = key.partition("/")
    return (ns, name) if sep else ("", ns)


def namespace_index_func(obj: Obj) -> list[str]:
    """Index function of :data:`NAMESPACE_INDEX`."""
    return [obj["metadata"].get("namespace") or ""]


class Indexer:
    """A key → object map with secondary indexes.

    The store never copies: callers hand it objects they no longer mutate, and readers that hand
    objects to user code copy them first (the cache reader does, unless told not to).
    """

    __slots__ = ("_index_funcs", "_indices", "_items", "_ns_index")

    def __init__(
        self, indexers: Mapping[str, IndexFunc] | None = None, *, namespace_index: bool = False
    ) -> None:
        """``namespace_index`` maintains :data:`NAMESPACE_INDEX` from the keys: an object's
        namespace never changes, so updates of existing keys cost nothing there."""
        self._items: dict[str, Obj] = {}
        self._index_funcs: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        self._ns_index: dict[str, set[str]] | None = None
        if namespace_index:
            self._ns_index = self._indices[NAMESPACE_INDEX] = {}
        if indexers:
            self.add_indexers(indexers)

    # -- indexes -----------------------------------------------------------------------------
    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Register indexes and build them over the objects already stored.

        Raises :class:`IndexerConflictError` (and registers none of them) if a name is taken.
        """
        for name in indexers:
            if name in self._indices:
                raise IndexerConflictError(f"indexer {name!r} already exists")
        for name, fn in indexers.items():
            self._index_funcs[name] = fn
            index: dict[str, set[str]] = {}
            self._indices[name] = index
            for key, obj in self._items.items():
                for value in fn(obj):
                    index.setdefault(value, set()).add(key)

    @property
    def index_names(self) -> list[str]:
        return list(self._indices)

    def by_index(self, index_name: str, value: str) -> list[Obj]:
        """Objects whose ``index_name`` values include ``value``; ``KeyError`` for an unknown index."""
        try:
            index = self._indices[index_name]
        except KeyError:
            raise KeyError(f"index {index_name!r} does not exist") from None
        keys = index.get(value)
        if not keys:
            return []
        items = self._items
        return [items[k] for k in keys]

    def index_keys(self, index_name: str, value: str) -> set[str]:
        """Keys whose ``index_name`` values include ``value`` (a copy)."""
        try:
            return set(self._indices[index_name].get(value, ()))
        except KeyError:
            raise KeyError(f"index {index_name!r} does not exist") from None

    def index_values(self, index_name: str) -> list[str]:
        return list(self._indices[index_name])

    # -- reads -------------------------------------------------------------------------------
    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def keys(self) -> list[str]:
        return list(self._items)

    def values(self) -> list[Obj]:
        return list(self._items.values())

    def items(self) -> Iterable[tuple[str, Obj]]:
        return self._items.items()

    def plain(self) -> dict[str, Obj] | None:
        """The key → object dict itself while no index function is registered, else ``None``.

        For a hot path that replaces the objects of keys already stored: such a write keeps every
        index consistent (the namespace index depends on the keys alone). Any other write (a new
        key, a removal) must go through :meth:`put` or :meth:`pop`.
        """
        return None if self._index_funcs else self._items

    # -- writes ------------------------------------------------------------------------------
    def put(self, key: str, obj: Obj) -> Obj | None:
        """Store ``obj`` under ``key``; returns the object it replaced (or ``None``)."""
        old = self._items.get(key)
        self._items[key] = obj
        if old is None and self._ns_index is not None:
            ns = split_key(key)[0]
            bucket = self._ns_index.get(ns)
            if bucket is None:
                self._ns_index[ns] = {key}
            else:
                bucket.add(key)
        if self._index_funcs:
            self._reindex(key, old, obj)
        return old

    def pop(self, key: str) -> Obj | None:
        """Remove ``key``; returns the removed object (``None`` if absent)."""
        old = self._items.pop(key, None)
        if old is None:
            return None
        if self._ns_index is not None:
            ns = split_key(key)[0]
            bucket = self._ns_index.get(ns)
            if bucket is not None:
                bucket.discard(key)
                if not bucket:
                    del self._ns_index[ns]
        if self._index_funcs:
            self._reindex(key, old, None)
        return old

    def clear(self) -> None:
        self._items.clear()
        for index in self._indices.values():
            index.clear()

    def _reindex(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for name, fn in self._index_funcs.items():
            old_values = fn(old) if old is not None else ()
            new_values = fn(new) if new is not None else ()
            if old_values == new_values:
                continue
            index = self._indices[name]
            for value in old_values:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in new_values:
                bucket = index.get(value)
                if bucket is None:
                    index[value] = {key}
                else:
                    bucket.add(key)
