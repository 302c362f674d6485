"""Informers and the informer cache: each kind's objects kept in memory by list+watch.

See :class:`InformerCache` (what a :class:`mcr.Cluster` uses), :class:`Informer` (one kind),
:class:`CacheOptions` / :class:`ByObject` (what to cache) and :mod:`mcr.cache.gcpolicy`.
"""

from __future__ import annotations

from typing import Any

from mcr.cache.backoff import BackoffPolicy
from mcr.cache.errors import CacheNotStartedError, CacheSyncTimeoutError, InformerNotFoundError
from mcr.cache.gcpolicy import GCPolicy
from mcr.cache.handlers import (
    DeletedFinalStateUnknown,
    ListBatchHandler,
    Registration,
    ResourceEventHandler,
    ResourceEventHandlerFuncs,
    WatchBatchHandler,
    WatchNote,
    deprecated_alias,
)
from mcr.cache.informer import Informer
from mcr.cache.informer_cache import InformerCache
from mcr.cache.options import (
    DEFAULT_SYNC_PERIOD,
    ByObject,
    CacheOptions,
    NamespaceConfig,
    strip_managed_fields,
)
from mcr.cache.reader import CacheReader
from mcr.cache.reflector import ScopeSpec
from mcr.cache.store import NAMESPACE_INDEX, Indexer, IndexerConflictError, meta_namespace_key

__all__ = [
    "DEFAULT_SYNC_PERIOD",
    "NAMESPACE_INDEX",
    "BackoffPolicy",
    "ByObject",
    "CacheNotStartedError",
    "CacheOptions",
    "CacheReader",
    "CacheSyncTimeoutError",
    "DeletedFinalStateUnknown",
    "GCPolicy",
    "Indexer",
    "IndexerConflictError",
    "Informer",
    "InformerCache",
    "InformerNotFoundError",
    "ListBatchHandler",
    "NamespaceConfig",
    "Registration",
    "ResourceEventHandler",
    "ResourceEventHandlerFuncs",
    "ScopeSpec",
    "WatchBatchHandler",
    "WatchNote",
    "meta_namespace_key",
    "strip_managed_fields",
]


def __getattr__(name: str) -> Any:
    # EventHandler and EventHandlerFuncs: deprecated names of ResourceEventHandler(Funcs).
    return deprecated_alias(__name__, name)
