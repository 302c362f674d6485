"""Periodic informer resync (controller-runtime's ``SyncPeriod``) against a live API server."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import mcr.cache.informer as informer_module
from mcr.builder import controller_managed_by
from mcr.cache import (
    ByObject,
    CacheOptions,
    DeletedFinalStateUnknown,
    InformerCache,
    ResourceEventHandlerFuncs,
)
from mcr.client import Client
from mcr.cluster import Cluster
from mcr.manager import Manager
from mcr.predicate import ResourceVersionChanged
from mcr.reconcile import Request
from mcr.rest.config import RestConfig, load_config
from mcr.rest.kinds import GVK
from mcr.rest.mapper import RESTMapper
from mcr.rest.transport import Transport
from mcr.source import Kind
from mcr.testing import eventually, open_sockets, running
from mcr.workqueue import LOW_PRIORITY

CM = "v1/ConfigMap"
CM_GVK = GVK("", "v1", "ConfigMap")
PERIOD = 0.2


@dataclass
class Env:
    srv: Any
    transport: Transport
    mapper: RESTMapper
    client: Client
    caches: list[InformerCache] = field(default_factory=list)

    def cache(self, **options: Any) -> InformerCache:
        cache = InformerCache(self.transport, self.mapper, CacheOptions(**options))
        self.caches.append(cache)
        return cache

    async def server_keys(self) -> list[str]:
        """``ns/name`` of every ConfigMap on the server, sorted (a real cluster has some of its own)."""
        return sorted(key_of(o) for o in await self.client.list(CM))

    async def make_cms(self, *names: str, namespace: str = "default") -> None:
        for name in names:
            await self.client.create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
            )


@pytest.fixture
async def env(apiserver: Any) -> AsyncIterator[Env]:
    sockets = open_sockets()
    transport = load_config(apiserver.kubeconfig).transport("test")
    mapper = RESTMapper(transport)
    e = Env(apiserver, transport, mapper, Client(transport, rest_mapper=mapper))
    try:
        yield e
    finally:
        for cache in e.caches:
            await cache.stop()
        await transport.close()
        await eventually(lambda: open_sockets() <= sockets, message="a connection stayed open")


def key_of(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


class Recorder:
    """Records every notification in order: ``("add"|"update"|"resync"|"delete", key)``.

    A ``"resync"`` is an update whose old and new object are the very same object.
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self.events.append(("add", key_of(obj)))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        assert key_of(old) == key_of(new)
        self.events.append(("resync" if old is new else "update", key_of(new)))

    def on_delete(self, obj: dict[str, Any] | DeletedFinalStateUnknown) -> None:
        self.events.append(("delete", key_of(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)))

    def resyncs(self) -> Counter[str]:
        return Counter(key for kind, key in self.events if kind == "resync")


def resync_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("resync ")]


# --------------------------------------------------------------------------------------------
# Options


def test_options_default_to_ten_hours_and_resolve_per_kind() -> None:
    assert CacheOptions().sync_period == 36000.0
    assert CacheOptions().sync_period_for(CM_GVK) == 36000.0
    assert CacheOptions(sync_period=None).sync_period_for(CM_GVK) is None
    assert CacheOptions(sync_period=0).sync_period_for(CM_GVK) is None
    by_kind = CacheOptions(sync_period=5.0, by_object={CM: ByObject(sync_period=0)})
    assert by_kind.sync_period_for(CM_GVK) is None
    assert by_kind.sync_period_for(GVK("", "v1", "Secret")) == 5.0
    only_cms = CacheOptions(sync_period=None, by_object={CM: ByObject(sync_period=7.0)})
    assert only_cms.sync_period_for(CM_GVK) == 7.0
    with pytest.raises(ValueError, match=r"CacheOptions: sync_period must be >= 0.*-1"):
        CacheOptions(sync_period=-1)
    with pytest.raises(ValueError, match=r"by_object\['v1/ConfigMap'\]: sync_period"):
        CacheOptions(by_object={CM: ByObject(sync_period=-0.5)})


def test_resync_delay_is_jittered_within_ten_percent() -> None:
    delays = [informer_module.resync_delay(100.0) for _ in range(200)]
    assert all(90.0 <= d <= 110.0 for d in delays)
    assert len(set(delays)) > 100  # drawn anew every period


# --------------------------------------------------------------------------------------------
# Informer


async def test_short_sync_period_redelivers_every_object_from_memory(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    await env.make_cms("a", "b", "c")
    cache = env.cache(sync_period=PERIOD)
    await cache.start()
    informer = await cache.get_informer(CM)

    def boom(old: dict[str, Any], new: dict[str, Any]) -> None:
        raise RuntimeError("resync handler bug")

    informer.add_event_handler(ResourceEventHandlerFuncs(on_update=boom))
    rec = Recorder()
    informer.add_event_handler(rec)
    assert await informer.wait_for_sync(10)
    (reflector,) = informer.reflectors
    assert reflector.lists == 1

    keys = set(await env.server_keys())
    assert {"default/a", "default/b", "default/c"} <= keys
    await eventually(
        lambda: set(rec.resyncs()) == keys and min(rec.resyncs().values()) >= 3,
        timeout=5,
        message="every object resynced three times",
    )
    # Only resyncs: no other update, no add beyond the initial list, no delete.
    assert sorted(e for e in rec.events if e[0] != "resync") == [("add", k) for k in sorted(keys)]
    # Resyncs come from memory: no list after the first one (the watch stays the same).
    assert reflector.lists == 1
    # A failing handler is logged and the recorder behind it still got every resync.
    assert "resync handler bug" in caplog.text
    assert "failed on update" in caplog.text


async def test_a_deleted_object_is_not_resynced(env: Env) -> None:
    await env.make_cms("keep", "gone")
    cache = env.cache(sync_period=PERIOD)
    await cache.start()
    informer = await cache.get_informer(CM)
    rec = Recorder()
    informer.add_event_handler(rec)
    await eventually(lambda: rec.resyncs()["default/gone"] >= 1, timeout=5)
    await env.client.delete(CM, "gone", namespace="default")
    await eventually(lambda: ("delete", "default/gone") in rec.events, timeout=5)
    deleted_at = rec.events.index(("delete", "default/gone"))
    kept_before = rec.resyncs()["default/keep"]
    await eventually(lambda: rec.resyncs()["default/keep"] >= kept_before + 2, timeout=5)
    assert ("resync", "default/gone") not in rec.events[deleted_at:]


@pytest.mark.envtest_only("holds the watch back with faults.stall_watches so deleted objects stay cached")
async def test_delete_between_chunks_of_a_resync_is_not_delivered_after_it(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(informer_module, "RESYNC_CHUNK", 2)
    await env.make_cms(*(f"cm{i}" for i in range(6)))
    # kube-controller-manager's kube-root-ca.crt of every namespace left out: six objects, three chunks
    cache = env.cache(sync_period=None, default_field_selector="metadata.name!=kube-root-ca.crt")
    await cache.start()
    informer = await cache.get_informer(CM)
    rec = Recorder()
    informer.add_event_handler(rec)
    assert await informer.wait_for_sync(10)
    order = list(informer.store)
    assert len(order) == 6
    late = order[-2:]  # resynced in the last chunk
    # Delete them on the server while the watch is held back, so the informer still caches them.
    env.srv.faults.stall_watches(None)
    cached = {key: informer.get(key) for key in late}
    for key in late:
        await env.client.delete(CM, key.split("/")[1], namespace="default")

    resync = asyncio.create_task(informer.resync())
    await asyncio.sleep(0)  # the resync delivers its first chunk, then yields to the loop
    assert sorted(rec.resyncs()) == sorted(order[:2])
    # The reflector applies the deletes now, between two chunks (what the held-back watch sends).
    for key in late:
        obj = cached[key]
        assert obj is not None
        informer.watch_event("DELETED", obj)
    assert await resync == 4
    assert rec.resyncs() == Counter(order[:4])
    for key in late:
        assert ("resync", key) not in rec.events
        assert rec.events.count(("delete", key)) == 1

    # The real DELETED events arrive later and are not reported twice.
    env.srv.faults.stall_watches(0)
    await env.make_cms("marker")
    await eventually(lambda: ("add", "default/marker") in rec.events, timeout=10)
    for key in late:
        assert rec.events.count(("delete", key)) == 1
    assert sorted(o["metadata"]["name"] for o in informer.list()) == ["cm0", "cm1", "cm2", "cm3", "marker"]


async def test_disabled_by_none_zero_or_per_kind(env: Env) -> None:
    await env.make_cms("x")
    resyncing = env.cache(sync_period=PERIOD)
    disabled = [
        env.cache(sync_period=None),
        env.cache(sync_period=0),
        env.cache(sync_period=PERIOD, by_object={CM: ByObject(sync_period=0)}),
    ]
    recs: list[Recorder] = []
    for cache in [resyncing, *disabled]:
        await cache.start()
        informer = await cache.get_informer(CM)
        rec = Recorder()
        informer.add_event_handler(rec)
        recs.append(rec)
        assert await informer.wait_for_sync(10)
    on, *off = recs
    for cache in disabled:
        assert cache.informers()[CM_GVK].resync_period is None
    assert len(resync_tasks()) == 1
    # While the resyncing cache resyncs three times, the others never do.
    await eventually(lambda: on.resyncs()["default/x"] >= 3, timeout=5)
    keys = await env.server_keys()
    assert "default/x" in keys
    for rec in off:
        assert sorted(rec.events) == [("add", key) for key in keys]


async def test_stop_leaves_no_resync_task_across_restarts(env: Env) -> None:
    await env.make_cms("r")
    before = asyncio.all_tasks()
    cache = env.cache(sync_period=0.05)
    informer = await cache.get_informer(CM)
    rec = Recorder()
    informer.add_event_handler(rec)
    for round_ in range(1, 4):
        await cache.start()
        assert len(resync_tasks()) == 1

        def resynced(n: int = 2 * round_) -> bool:
            return rec.resyncs()["default/r"] >= n

        await eventually(resynced, timeout=5)
        await cache.stop()
        assert resync_tasks() == []
        assert asyncio.all_tasks() - before == set()
    # The informer itself, stopped and started directly, cancels and awaits its timer too.
    informer.start()
    informer.start()  # idempotent: still one timer
    assert len(resync_tasks()) == 1
    await informer.stop()
    await informer.stop()
    assert resync_tasks() == []
    assert asyncio.all_tasks() - before == set()


# --------------------------------------------------------------------------------------------
# End to end: sources and controllers


class RecordingQueue:
    """A controller queue stand-in that records what a Kind source enqueues, with its priority."""

    def __init__(self) -> None:
        self.added: list[tuple[Request, int]] = []

    def add(self, item: Request, priority: int = 0) -> None:
        self.added.append((item, priority))


async def test_kind_source_enqueues_resyncs_at_low_priority_and_rv_predicate_drops_them(
    apiserver: Any, env: Env
) -> None:
    await env.make_cms("p")
    cluster = Cluster(
        RestConfig.from_kubeconfig(apiserver.kubeconfig), cache_options=CacheOptions(sync_period=PERIOD)
    )
    await cluster.start()
    try:
        plain, filtered = RecordingQueue(), RecordingQueue()
        regs = [
            await Kind(CM).start_for_cluster("", cluster, plain, sync_timeout=10),
            await Kind(CM, None, ResourceVersionChanged()).start_for_cluster(
                "", cluster, filtered, sync_timeout=10
            ),
        ]
        req = Request("default", "p", "")

        def of_p(queue: RecordingQueue) -> list[tuple[Request, int]]:
            return [(r, priority) for r, priority in queue.added if r == req]

        await eventually(lambda: len(of_p(plain)) >= 3, timeout=5, message="two resyncs enqueued")
        # Initial add and every resync at low priority (the cluster's own objects' too).
        assert {priority for _, priority in plain.added} == {LOW_PRIORITY}
        # A real change is enqueued at normal priority, and passes the predicate.
        await env.client.patch(CM, "p", {"data": {"k": "v"}}, namespace="default")
        await eventually(lambda: (req, 0) in plain.added, timeout=5)
        await eventually(lambda: (req, 0) in filtered.added, timeout=5)
        resyncs_seen = plain.added.count((req, LOW_PRIORITY))
        await eventually(lambda: plain.added.count((req, LOW_PRIORITY)) >= resyncs_seen + 2, timeout=5)
        # The ResourceVersionChanged source saw the same resyncs and dropped every one of them.
        assert of_p(filtered) == [(req, LOW_PRIORITY), (req, 0)]
        for reg in regs:
            reg.remove()
    finally:
        await cluster.stop()


async def test_controllers_reconcile_again_after_a_resync_unless_filtered(apiserver: Any, env: Env) -> None:
    await env.make_cms("one", "two")
    mgr = Manager(
        RestConfig.from_kubeconfig(apiserver.kubeconfig),
        metrics_bind_address="0",
        cluster_options={"cache_options": CacheOptions(sync_period=PERIOD)},
    )
    every: Counter[Request] = Counter()
    changed: Counter[Request] = Counter()

    async def reconcile_every(req: Request) -> None:
        every[req] += 1

    async def reconcile_changed(req: Request) -> None:
        changed[req] += 1

    controller_managed_by(mgr).named("resync-every").for_(CM).complete(reconcile_every)
    (
        controller_managed_by(mgr)
        .named("resync-changed")
        .for_(CM, predicates=[ResourceVersionChanged()])
        .complete(reconcile_changed)
    )
    reqs = [Request("default", "one", ""), Request("default", "two", "")]
    async with running(mgr):
        await eventually(lambda: all(changed[r] == 1 for r in reqs), timeout=8, message="initial reconciles")
        base = {r: every[r] for r in reqs}
        assert all(n >= 1 for n in base.values())
        await eventually(
            lambda: all(every[r] >= base[r] + 2 for r in reqs),
            timeout=8,
            message="each object reconciled again after resyncs",
        )
        # Both controllers share the informer, so the filtered one was offered the same resyncs.
        assert {r: changed[r] for r in reqs} == {r: 1 for r in reqs}
