"""The fluent controller builder: ``controller_managed_by(mgr).for_(Kind).owns(Other).complete(fn)``.

Mirrors controller-runtime's builder (multicluster-runtime's fork): one ``for_`` kind whose objects
are reconciled, ``owns`` kinds whose changes enqueue their controlling owner, ``watches`` for
anything else, global event filters, controller options. Each watch chooses which clusters it
engages: by default the local cluster when the manager has no provider, the provider's clusters
when it has one (``engage_with_local_cluster`` / ``engage_with_provider_clusters`` to choose both
or either; ``cluster_filter`` narrows provider clusters).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcr.controller import ClusterFilter, Controller
from mcr.handler import EnqueueRequestForObject, EnqueueRequestForOwner, EventHandler
from mcr.predicate import Predicate
from mcr.rest.kinds import gvk_of
from mcr.source import Channel, Kind

__all__ = ["Builder", "controller_managed_by"]


class _Manager(Protocol):
    def add(self, runnable: Any) -> Any: ...

    def get_provider(self) -> Any: ...


@dataclass
class _Watch:
    kind: Any
    handler: EventHandler
    predicates: tuple[Predicate, ...]
    engage_local: bool | None
    engage_provider: bool | None
    cluster_filter: ClusterFilter | None


@dataclass
class _Spec:
    name: str | None = None
    for_: _Watch | None = None
    owns: list[_Watch] = field(default_factory=list)
    watches: list[_Watch] = field(default_factory=list)
    raw: list[Channel | Kind] = field(default_factory=list)
    filters: list[Predicate] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)


def _predicates(given: Iterable[Predicate] | Predicate, where: str) -> tuple[Predicate, ...]:
    """``given`` as a tuple, refusing anything that is not a predicate (``TypeError`` naming it).

    A label selector (a string or mapping) is refused with a pointer to
    :class:`~mcr.predicate.LabelSelectorPredicate`, which checks the selector when it is made.
    """
    # One predicate (or a selector) passed where several are expected is taken as one.
    items: tuple[Any, ...] = (given,) if isinstance(given, str | Mapping | Predicate) else tuple(given)
    for p in items:
        if isinstance(p, str | Mapping):
            raise TypeError(
                f"{where}: {p!r} is not a predicate; for a label selector pass "
                f"mcr.predicate.LabelSelectorPredicate({p!r})"
            )
        if not isinstance(p, Predicate):
            raise TypeError(
                f"{where}: {p!r} is not a predicate (an object with create, update, delete and generic)"
            )
    return items


class Builder:
    """Collects a controller's watches and options; :meth:`complete` builds and registers it.

    Misuse raises ``ValueError`` (``for_`` twice at once; the others at :meth:`complete`): ``owns``
    without ``for_``, neither ``named`` nor ``for_``, no watch at all. Predicates are checked where
    they are given: anything that is not a predicate raises ``TypeError`` naming the call.
    """

    def __init__(self, mgr: _Manager) -> None:
        self._mgr = mgr
        self._spec = _Spec()

    def named(self, name: str) -> Builder:
        """The controller's name (metrics, logs, uniqueness); default: the ``for_`` kind, lowercased."""
        self._spec.name = name
        return self

    def for_(
        self,
        kind: Any,
        *,
        predicates: Iterable[Predicate] = (),
        engage_with_local_cluster: bool | None = None,
        engage_with_provider_clusters: bool | None = None,
        cluster_filter: ClusterFilter | None = None,
    ) -> Builder:
        """Reconcile objects of ``kind``: every event enqueues the object itself. Only once."""
        if self._spec.for_ is not None:
            raise ValueError(
                "for_() should only be called once, could not assign multiple objects for reconciliation"
            )
        self._spec.for_ = _Watch(
            kind,
            EnqueueRequestForObject(),
            _predicates(predicates, f"for_({kind!r})"),
            engage_with_local_cluster,
            engage_with_provider_clusters,
            cluster_filter,
        )
        return self

    def owns(
        self,
        kind: Any,
        *,
        predicates: Iterable[Predicate] = (),
        match_every_owner: bool = False,
        engage_with_local_cluster: bool | None = None,
        engage_with_provider_clusters: bool | None = None,
        cluster_filter: ClusterFilter | None = None,
    ) -> Builder:
        """Enqueue the ``for_`` owner of ``kind`` objects.

        Only the controller owner reference counts unless ``match_every_owner``.
        """
        self._spec.owns.append(
            _Watch(
                kind,
                _OwnerPlaceholder(match_every_owner),
                _predicates(predicates, f"owns({kind!r})"),
                engage_with_local_cluster,
                engage_with_provider_clusters,
                cluster_filter,
            )
        )
        return self

    def watches(
        self,
        kind: Any,
        handler: EventHandler | None = None,
        *,
        predicates: Iterable[Predicate] = (),
        engage_with_local_cluster: bool | None = None,
        engage_with_provider_clusters: bool | None = None,
        cluster_filter: ClusterFilter | None = None,
    ) -> Builder:
        """Watch ``kind`` with ``handler`` (default: enqueue the object itself).

        ``kind`` may also be a ready :class:`mcr.source.Channel` or :class:`mcr.source.Kind`, added
        as is (the builder's event filters and engage options do not apply to it).
        """
        if isinstance(kind, Channel | Kind):
            if handler is not None:
                raise ValueError(f"watches({kind!r}): a ready source carries its own handler")
            self._spec.raw.append(kind)
            return self
        self._spec.watches.append(
            _Watch(
                kind,
                handler if handler is not None else EnqueueRequestForObject(),
                _predicates(predicates, f"watches({kind!r})"),
                engage_with_local_cluster,
                engage_with_provider_clusters,
                cluster_filter,
            )
        )
        return self

    def with_event_filter(self, *predicates: Predicate) -> Builder:
        """Predicates applied to every ``for_``/``owns``/``watches`` event, before their own."""
        self._spec.filters.extend(_predicates(predicates, "with_event_filter()"))
        return self

    def with_options(self, **options: Any) -> Builder:
        """Controller options (see :class:`mcr.controller.Controller`), e.g. ``max_concurrent_reconciles``."""
        if "reconciler" in options:
            raise ValueError("pass the reconciler to complete(), not with_options()")
        self._spec.options.update(options)
        return self

    def build(self, reconciler: object) -> Controller:
        """Build the controller, add it to the manager (``mgr.add``) and return it."""
        spec = self._spec
        if reconciler is None:
            raise ValueError("must provide a non-nil reconciler")
        if spec.owns and spec.for_ is None:
            raise ValueError("owns() can only be used together with for_()")
        if not spec.for_ and not spec.owns and not spec.watches and not spec.raw:
            raise ValueError(
                "there are no watches configured, controller will never get triggered. "
                "Use for_(), owns() or watches() to set them up"
            )
        name = spec.name
        if not name:
            if spec.for_ is None:
                raise ValueError("one of for_() or named() must be called")
            name = gvk_of(spec.for_.kind).kind.lower()
        has_provider = self._mgr.get_provider() is not None
        controller = Controller(name, reconciler, **spec.options)
        watches: list[_Watch] = []
        if spec.for_ is not None:
            watches.append(spec.for_)
        for w in spec.owns:
            assert spec.for_ is not None
            placeholder = w.handler
            assert isinstance(placeholder, _OwnerPlaceholder)
            owner = EnqueueRequestForOwner(spec.for_.kind, only_controller=not placeholder.match_every_owner)
            watches.append(
                _Watch(w.kind, owner, w.predicates, w.engage_local, w.engage_provider, w.cluster_filter)
            )
        watches.extend(spec.watches)
        for w in watches:
            controller.watch(
                Kind(
                    w.kind,
                    w.handler,
                    *spec.filters,
                    *w.predicates,
                    engage_local=(not has_provider) if w.engage_local is None else w.engage_local,
                    engage_provider=has_provider if w.engage_provider is None else w.engage_provider,
                    cluster_filter=w.cluster_filter,
                )
            )
        for src in spec.raw:
            controller.watch(src)
        self._mgr.add(controller)
        return controller

    def complete(self, reconciler: object) -> Controller:
        """Same as :meth:`build` (controller-runtime's spelling)."""
        return self.build(reconciler)


class _OwnerPlaceholder:
    """Stands in for the owner handler until ``build`` knows the ``for_`` kind."""

    def __init__(self, match_every_owner: bool) -> None:
        self.match_every_owner = match_every_owner

    def create(self, cluster_name: str, obj: Any, queue: Any, priority: int) -> None:
        raise AssertionError("placeholder handler used before build()")

    def update(self, cluster_name: str, old: Any, new: Any, queue: Any, priority: int) -> None:
        raise AssertionError("placeholder handler used before build()")

    def delete(self, cluster_name: str, obj: Any, queue: Any, priority: int) -> None:
        raise AssertionError("placeholder handler used before build()")

    def generic(self, cluster_name: str, obj: Any, queue: Any, priority: int) -> None:
        raise AssertionError("placeholder handler used before build()")


def controller_managed_by(mgr: _Manager) -> Builder:
    """Start building a controller that ``mgr`` runs and engages with its clusters."""
    return Builder(mgr)
