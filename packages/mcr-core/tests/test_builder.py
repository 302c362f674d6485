"""Builder validation and wiring (no server needed: nothing is started)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from mcr.builder import controller_managed_by
from mcr.controller import Controller
from mcr.handler import EnqueueRequestForOwner, EnqueueRequestsFromMapFunc
from mcr.manager import Manager
from mcr.predicate import GenerationChanged, LabelChanged
from mcr.providers.clusters import ClustersProvider
from mcr.reconcile import Request
from mcr.source import Channel, Kind

_counter = 0


def unique(prefix: str) -> str:
    global _counter
    _counter += 1
    return f"{prefix}-{_counter}"


async def noop(req: Request) -> None:
    return None


def kinds(ctrl: Controller) -> list[Kind]:
    return list(ctrl._kinds)


def test_for_only_once() -> None:
    b = controller_managed_by(Manager(metrics_bind_address="0")).for_("v1/ConfigMap")
    with pytest.raises(ValueError, match="only be called once"):
        b.for_("v1/Secret")


def test_owns_needs_for() -> None:
    b = controller_managed_by(Manager(metrics_bind_address="0")).named(unique("x")).owns("v1/ConfigMap")
    with pytest.raises(ValueError, match="owns\\(\\) can only be used together with for_\\(\\)"):
        b.complete(noop)


def test_name_or_for_required() -> None:
    b = controller_managed_by(Manager(metrics_bind_address="0")).watches("v1/ConfigMap")
    with pytest.raises(ValueError, match="one of for_\\(\\) or named\\(\\) must be called"):
        b.complete(noop)


def test_at_least_one_watch() -> None:
    b = controller_managed_by(Manager(metrics_bind_address="0")).named(unique("empty"))
    with pytest.raises(ValueError, match="no watches configured"):
        b.complete(noop)


def test_reconciler_required() -> None:
    b = controller_managed_by(Manager(metrics_bind_address="0")).named(unique("r")).for_("v1/Secret")
    with pytest.raises(ValueError, match="non-nil reconciler"):
        b.complete(None)


def test_default_name_is_lowercased_kind_and_must_be_unique() -> None:
    mgr = Manager(metrics_bind_address="0")
    ctrl = controller_managed_by(mgr).for_("apps/v1/ReplicaSet").complete(noop)
    assert ctrl.name == "replicaset"
    with pytest.raises(ValueError, match="already exists"):
        controller_managed_by(mgr).for_("apps/v1/ReplicaSet").complete(noop)
    other = (
        controller_managed_by(mgr)
        .for_("apps/v1/ReplicaSet")
        .with_options(skip_name_validation=True)
        .complete(noop)
    )
    assert other.name == "replicaset"


def test_wiring_of_for_owns_watches_filters_and_options() -> None:
    mgr = Manager(metrics_bind_address="0")
    mapper = EnqueueRequestsFromMapFunc(lambda obj: [])
    gen, lab = GenerationChanged(), LabelChanged()
    ch = Channel(_never())
    ctrl = (
        controller_managed_by(mgr)
        .named(unique("wired"))
        .for_("example.com/v1/Widget", predicates=[gen])
        .owns("v1/ConfigMap", match_every_owner=True)
        .watches("v1/Secret", mapper, predicates=[lab])
        .watches(ch)
        .with_event_filter(lab)
        .with_options(max_concurrent_reconciles=3, cache_sync_timeout=5.0)
        .complete(noop)
    )
    assert ctrl.max_concurrent_reconciles == 3
    assert ctrl.cache_sync_timeout == 5.0
    for_, owns, watches = kinds(ctrl)
    assert for_.kind == "example.com/v1/Widget"
    assert for_.predicates == (lab, gen), "global filters run before the watch's own"
    assert isinstance(owns.handler, EnqueueRequestForOwner)
    assert (owns.handler.group, owns.handler.kind) == ("example.com", "Widget")
    assert owns.handler.only_controller is False
    assert watches.handler is mapper
    assert watches.predicates == (lab, lab)
    assert ctrl._channels == [ch]


async def _never() -> AsyncIterator[object]:
    await asyncio.Event().wait()
    yield None


@pytest.mark.parametrize(
    ("provider", "local", "remote"),
    [(False, True, False), (True, False, True)],
)
def test_engage_defaults_follow_the_provider(provider: bool, local: bool, remote: bool) -> None:
    mgr = Manager(provider=ClustersProvider() if provider else None, metrics_bind_address="0")
    ctrl = controller_managed_by(mgr).named(unique("topo")).for_("v1/ConfigMap").complete(noop)
    (src,) = kinds(ctrl)
    assert src.engage_local is local
    assert src.engage_provider is remote


def test_engage_options_per_watch_and_cluster_filter() -> None:
    mgr = Manager(provider=ClustersProvider(), metrics_bind_address="0")
    ctrl = (
        controller_managed_by(mgr)
        .named(unique("hub"))
        .for_("v1/ConfigMap", engage_with_local_cluster=True, engage_with_provider_clusters=False)
        .watches(
            "v1/Secret",
            engage_with_local_cluster=True,
            cluster_filter=lambda name, c: name.startswith("prod-"),
        )
        .complete(noop)
    )
    hub, spokes = kinds(ctrl)
    assert (hub.engage_local, hub.engage_provider) == (True, False)
    assert (spokes.engage_local, spokes.engage_provider) == (True, True)
    assert spokes.should_engage("", None)  # type: ignore[arg-type]  # the filter applies to provider clusters only
    assert spokes.should_engage("prod-1", None)  # type: ignore[arg-type]  # the filter reads only the name
    assert not spokes.should_engage("dev-1", None)  # type: ignore[arg-type]  # the filter reads only the name
    assert not hub.should_engage("prod-1", None)  # type: ignore[arg-type]  # the filter reads only the name
