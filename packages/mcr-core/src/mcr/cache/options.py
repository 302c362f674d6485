"""What a cache watches and how: controller-runtime's cache ``Options`` in Python.

``CacheOptions`` holds the defaults for every kind (namespaces, selectors, transform, deep-copy
policy) and ``by_object`` overrides them per kind with :class:`ByObject`. A namespace listed in
``default_namespaces`` (or ``ByObject.namespaces``) may carry its own :class:`NamespaceConfig`.
Precedence, most specific first: the namespace's config, then the kind's ``ByObject``, then the
cache defaults. Cluster-scoped kinds ignore namespaces. ``sync_period`` (the resync period) is set
per cache or per kind, not per namespace: one informer serves all of a kind's namespaces.

Selectors are checked when the options are made: a label or field selector the API server would
refuse raises ``ValueError`` naming the option (and the kind or namespace it belongs to), instead
of a watch that is retried for ever against 400 Bad Request.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcr.cache.backoff import BackoffPolicy
from mcr.cache.gcpolicy import GCPolicy
from mcr.cache.reflector import ReflectorConfig, ScopeSpec, Transform, strip_managed_fields
from mcr.cache.selectors import check_field_selector, check_label_selector
from mcr.rest.kinds import GVK, gvk_of

__all__ = ["DEFAULT_SYNC_PERIOD", "ByObject", "CacheOptions", "NamespaceConfig", "strip_managed_fields"]

Obj = dict[str, Any]

DEFAULT_SYNC_PERIOD = 36000.0
"""controller-runtime's default ``SyncPeriod``: 10 hours, in seconds."""


def _check_sync_period(value: float | None, where: str) -> None:
    if value is not None and not value >= 0:
        raise ValueError(
            f"{where}: sync_period must be >= 0 seconds (0 or None disables resyncs), got {value!r}"
        )


def _check_namespaces(namespaces: Mapping[str, NamespaceConfig] | None, where: str) -> None:
    for ns, cfg in (namespaces or {}).items():
        if not isinstance(cfg, NamespaceConfig):
            raise TypeError(f"{where}[{ns!r}]: expected a NamespaceConfig, got {type(cfg).__name__}")


@dataclass(frozen=True, slots=True)
class NamespaceConfig:
    """Overrides for one namespace of a kind (``None`` fields inherit).

    A selector that does not parse raises ``ValueError`` here.
    """

    label_selector: str | None = None
    field_selector: str | None = None
    transform: Transform | None = None

    def __post_init__(self) -> None:
        check_label_selector(self.label_selector, "NamespaceConfig.label_selector")
        check_field_selector(self.field_selector, "NamespaceConfig.field_selector")


@dataclass(frozen=True, slots=True)
class ByObject:
    """Per-kind overrides of the cache defaults (``None`` fields inherit).

    ``namespaces``: the namespaces to cache for this kind (``{}`` or ``None``: inherit the
    defaults); ``unsafe_disable_deep_copy``: hand readers the cached objects themselves;
    ``sync_period``: this kind's resync period in seconds (``None``: inherit; 0: never resync).
    A selector that does not parse raises ``ValueError`` here.
    """

    namespaces: Mapping[str, NamespaceConfig] | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    transform: Transform | None = None
    unsafe_disable_deep_copy: bool | None = None
    sync_period: float | None = None

    def __post_init__(self) -> None:
        check_label_selector(self.label_selector, "ByObject.label_selector")
        check_field_selector(self.field_selector, "ByObject.field_selector")


@dataclass(slots=True)
class CacheOptions:
    """Options of an :class:`~mcr.cache.InformerCache`.

    * ``default_namespaces``: cache only these namespaces (one watch per namespace); ``None``
      caches all namespaces with one watch.
    * ``default_label_selector`` / ``default_field_selector``: server-side filters of every watch.
    * ``default_transform``: applied to every object before it is cached (default: drop
      ``managedFields``; ``None`` keeps objects as received).
    * ``default_unsafe_disable_deep_copy``: readers get the cached objects themselves (never
      mutate them) instead of copies.
    * ``by_object``: per-kind overrides, keyed by anything :func:`mcr.rest.kinds.gvk_of` accepts.
    * ``page_size``: list page size (client-go: 500; 0 lists in one response).
    * ``stall_timeout``: seconds without any watch data or bookmark before the watch is restarted.
    * ``watch_timeout``: the server-side watch timeout is drawn from this range (client-go: 5-10 min).
    * ``backoff``: retry delays of lists and watches.
    * ``sync_timeout``: how long a read waits for a lazily started informer to sync before
      raising :class:`~mcr.cache.CacheSyncTimeoutError` (controller-runtime: 2 min).
    * ``reader_fail_on_missing_informer``: reads of a kind without an informer raise
      :class:`~mcr.cache.InformerNotFoundError` instead of starting one.
    * ``gc_policy``: the garbage-collector policy applied while this cache runs (see
      :mod:`mcr.cache.gcpolicy`); ``None`` leaves the interpreter's GC alone.
    * ``sync_period``: seconds between resyncs of each informer (controller-runtime's
      ``SyncPeriod``, default 10 h): every cached object is handed again to the informer's
      handlers as an update whose old and new object are the same, from memory, without an API
      request, so controllers reconcile every object again. Each wait is ``sync_period`` times a
      factor drawn uniformly from [0.9, 1.1], so informers do not resync at once; the first
      resync comes one period after the informer synced. ``None`` or 0 disables resyncs;
      ``ByObject.sync_period`` overrides it per kind. A negative value raises ``ValueError``.
    """

    default_namespaces: Mapping[str, NamespaceConfig] | None = None
    default_label_selector: str | None = None
    default_field_selector: str | None = None
    default_transform: Transform | None = strip_managed_fields
    default_unsafe_disable_deep_copy: bool = False
    by_object: Mapping[Any, ByObject] = field(default_factory=dict)
    page_size: int = 500
    stall_timeout: float = 60.0
    watch_timeout: tuple[float, float] = (300.0, 600.0)
    allow_watch_bookmarks: bool = True
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    sync_timeout: float = 120.0
    reader_fail_on_missing_informer: bool = False
    gc_policy: GCPolicy | None = field(default_factory=GCPolicy.default)
    sync_period: float | None = DEFAULT_SYNC_PERIOD

    def __post_init__(self) -> None:
        _check_sync_period(self.sync_period, "CacheOptions")
        check_label_selector(self.default_label_selector, "CacheOptions.default_label_selector")
        check_field_selector(self.default_field_selector, "CacheOptions.default_field_selector")
        _check_namespaces(self.default_namespaces, "CacheOptions.default_namespaces")
        for key, by in self.by_object.items():
            where = f"CacheOptions.by_object[{key!r}]"
            if not isinstance(by, ByObject):
                raise TypeError(f"{where}: expected a ByObject, got {type(by).__name__}")
            _check_sync_period(by.sync_period, where)
            _check_namespaces(by.namespaces, f"{where}.namespaces")

    def reflector_config(self) -> ReflectorConfig:
        return ReflectorConfig(
            page_size=self.page_size,
            stall_timeout=self.stall_timeout,
            watch_timeout=self.watch_timeout,
            allow_watch_bookmarks=self.allow_watch_bookmarks,
            backoff=self.backoff,
        )

    def by_gvk(self) -> dict[GVK, ByObject]:
        """``by_object`` with its keys resolved to GVKs (``ValueError`` names a bad key)."""
        return {gvk_of(k): v for k, v in self.by_object.items()}

    def scopes_for(self, gvk: GVK) -> tuple[ScopeSpec, ...]:
        """The request scopes of ``gvk``'s informer under these options."""
        by = self.by_gvk().get(gvk, ByObject())
        label = by.label_selector if by.label_selector is not None else self.default_label_selector
        field_sel = by.field_selector if by.field_selector is not None else self.default_field_selector
        transform = by.transform if by.transform is not None else self.default_transform
        namespaces = by.namespaces if by.namespaces else self.default_namespaces
        if not namespaces:
            return (ScopeSpec(None, label, field_sel, transform),)
        scopes = []
        for ns, cfg in namespaces.items():
            scopes.append(
                ScopeSpec(
                    ns or None,
                    cfg.label_selector if cfg.label_selector is not None else label,
                    cfg.field_selector if cfg.field_selector is not None else field_sel,
                    cfg.transform if cfg.transform is not None else transform,
                )
            )
        return tuple(scopes)

    def sync_period_for(self, gvk: GVK) -> float | None:
        """The resync period of ``gvk``'s informer in seconds; ``None`` when it never resyncs."""
        by = self.by_gvk().get(gvk)
        period = by.sync_period if by is not None and by.sync_period is not None else self.sync_period
        return period or None

    def disables_deep_copy(self, by: ByObject | None) -> bool:
        """Whether readers of a kind configured by ``by`` (``None``: a kind not in ``by_object``)
        hand out the cached objects themselves instead of copies."""
        if by is not None and by.unsafe_disable_deep_copy is not None:
            return by.unsafe_disable_deep_copy
        return self.default_unsafe_disable_deep_copy

    def unsafe_disable_deep_copy_for(self, gvk: GVK) -> bool:
        """Deprecated: ``disables_deep_copy(by_gvk().get(gvk))``; removed in a later release."""
        warnings.warn(
            "CacheOptions.unsafe_disable_deep_copy_for is deprecated; use "
            "CacheOptions.disables_deep_copy(options.by_gvk().get(gvk))",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.disables_deep_copy(self.by_gvk().get(gvk))
