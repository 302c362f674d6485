"""The cache's GC policy: raised thresholds while caches run, a freeze after each sync, opt-outs."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from mcr.cache import CacheOptions, GCPolicy, InformerCache, gcpolicy
from mcr.rest.config import load_config
from mcr.rest.mapper import RESTMapper
from mcr.testing import eventually, open_sockets


@pytest.fixture(autouse=True)
def clean_gc() -> Iterator[None]:
    # The policy is process-wide: a cache an earlier test left running would hold it.
    assert gcpolicy._active == 0, "a cache started by an earlier test was never stopped"
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


async def test_default_policy_raises_thresholds_while_caches_run(apiserver: Any) -> None:
    before = gc.get_threshold()
    sockets = open_sockets()
    transport = load_config(apiserver.kubeconfig).transport("gc")
    cache = InformerCache(transport, RESTMapper(transport))
    other = InformerCache(transport, RESTMapper(transport))
    try:
        assert cache.options.gc_policy == GCPolicy()
        await cache.start()
        await other.start()
        assert gc.get_threshold() == (50_000, 20, 100)
        await cache.list("v1/ConfigMap")  # starts an informer and waits for its sync
        assert gc.get_freeze_count() == 0  # freezing is opt-in
        await other.stop()  # one of two users stopped: the thresholds stay
        assert gc.get_threshold() == (50_000, 20, 100)
    finally:
        await cache.stop()
        await transport.close()
        await eventually(lambda: open_sockets() <= sockets, message="a connection stayed open")
    assert gc.get_threshold() == before


async def test_freeze_after_sync_is_undone_when_the_cache_stops(apiserver: Any) -> None:
    sockets = open_sockets()
    transport = load_config(apiserver.kubeconfig).transport("gc")
    policy = GCPolicy(freeze_after_sync=True, freeze_min_objects=1)
    cache = InformerCache(transport, RESTMapper(transport), CacheOptions(gc_policy=policy))
    try:
        await cache.start()
        assert gc.get_freeze_count() == 0
        await cache.list("v1/Namespace")  # every server has namespaces: at least one object
        await eventually(lambda: gc.get_freeze_count() > 0)
    finally:
        await cache.stop()
        await transport.close()
        await eventually(lambda: open_sockets() <= sockets, message="a connection stayed open")
    assert gc.get_freeze_count() == 0


async def test_policy_can_be_turned_off_per_cache(apiserver: Any) -> None:
    gc.set_threshold(700, 10, 10)
    sockets = open_sockets()
    transport = load_config(apiserver.kubeconfig).transport("gc")
    cache = InformerCache(transport, RESTMapper(transport), CacheOptions(gc_policy=None))
    try:
        await cache.start()
        await cache.list("v1/ConfigMap")
        assert gc.get_threshold() == (700, 10, 10)
        assert gc.get_freeze_count() == 0
    finally:
        await cache.stop()
        await transport.close()
        await eventually(lambda: open_sockets() <= sockets, message="a connection stayed open")


def test_environment_turns_the_default_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCR_GC_POLICY", "off")
    assert GCPolicy.default() is None
    assert CacheOptions().gc_policy is None
    monkeypatch.setenv("MCR_GC_POLICY", "")
    assert GCPolicy.default() == GCPolicy(thresholds=(50_000, 20, 100), freeze_after_sync=False)


def test_thresholds_only_policy_never_freezes() -> None:
    policy = GCPolicy()
    policy.acquire()
    try:
        policy.after_sync()
        assert gc.get_freeze_count() == 0
    finally:
        policy.release()


@pytest.fixture
def full_collections() -> Iterator[list[int]]:
    """Every full (generation 2) collection that starts while the test runs, by whom it may."""
    started: list[int] = []

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            started.append(1)

    gc.callbacks.append(record)
    yield started
    gc.callbacks.remove(record)


async def test_default_policy_runs_no_collection_per_sync(
    apiserver: Any, full_collections: list[int]
) -> None:
    transport = load_config(apiserver.kubeconfig).transport("gc")
    cache = InformerCache(transport, RESTMapper(transport))
    try:
        await cache.start()
        for kind in ("v1/Namespace", "v1/ConfigMap", "v1/ServiceAccount"):
            await cache.list(kind)  # three informers sync
        assert full_collections == []
        assert gc.get_freeze_count() == 0
    finally:
        await cache.stop()
        await transport.close()


async def test_freezes_are_coalesced_and_scheduled_off_the_sync_path(
    apiserver: Any, full_collections: list[int]
) -> None:
    transport = load_config(apiserver.kubeconfig).transport("gc")
    policy = GCPolicy(freeze_after_sync=True, freeze_min_objects=1, freeze_interval=60)
    cache = InformerCache(transport, RESTMapper(transport), CacheOptions(gc_policy=policy))
    other = InformerCache(transport, RESTMapper(transport), CacheOptions(gc_policy=policy))
    try:
        await cache.start()
        await other.start()
        policy.after_sync(5)
        assert full_collections == []  # the sync callback only counts; the freeze runs later
        await eventually(lambda: gc.get_freeze_count() > 0)
        assert len(full_collections) == 1
        for kind in ("v1/Namespace", "v1/ConfigMap", "v1/ServiceAccount"):
            await cache.list(kind)  # three more syncs within the interval: one freeze, 60 s on
        await other.list("v1/Namespace")
        handle = gcpolicy._scheduled
        assert handle is not None
        assert handle.when() - asyncio.get_running_loop().time() > 50
        await other.stop()  # one of two caches stopped: no unfreeze, no collection now
        assert gc.get_freeze_count() > 0
        assert len(full_collections) == 1
    finally:
        await cache.stop()  # the last cache: the pending freeze is cancelled, the heap unfrozen
        await other.stop()
        await transport.close()
    assert gcpolicy._scheduled is None
    assert gc.get_freeze_count() == 0
    assert len(full_collections) == 1


async def test_few_objects_never_freeze_and_stopped_caches_count_towards_the_next_freeze(
    full_collections: list[int],
) -> None:
    policy = GCPolicy(freeze_after_sync=True, freeze_min_objects=100, freeze_interval=0)
    policy.acquire()
    policy.acquire()
    try:
        policy.after_sync(60)
        assert gcpolicy._scheduled is None  # below the minimum: nothing to gain from a freeze
        policy.release(60)  # a stopped cache's 60 objects: 120 since the last freeze
        await eventually(lambda: gc.get_freeze_count() > 0)
        assert len(full_collections) == 1
    finally:
        policy.release()
    assert gc.get_freeze_count() == 0
