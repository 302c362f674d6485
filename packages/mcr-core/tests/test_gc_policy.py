"""The cache's GC policy: raised thresholds while caches run, a freeze after each sync, opt-outs."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import pytest

from mcr.cache import CacheOptions, GCPolicy, InformerCache
from mcr.config import load_config
from mcr.restmapper import RESTMapper
from mcr.testing import eventually


def open_sockets() -> int:
    """Sockets this process holds (the in-process test server's included)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            continue
    return count


@pytest.fixture(autouse=True)
def clean_gc() -> Iterator[None]:
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
    policy = GCPolicy(freeze_after_sync=True)
    cache = InformerCache(transport, RESTMapper(transport), CacheOptions(gc_policy=policy))
    try:
        await cache.start()
        assert gc.get_freeze_count() == 0
        await cache.list("v1/ConfigMap")
        assert gc.get_freeze_count() > 0
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
