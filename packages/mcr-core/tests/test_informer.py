"""Informers against a live API server: paginated sync, resume, relist, stalls, faults (R1-R11)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from mcr.cache import (
    BackoffPolicy,
    CacheOptions,
    DeletedFinalStateUnknown,
    InformerCache,
    NamespaceConfig,
    ResourceEventHandlerFuncs,
    WatchNote,
)
from mcr.cache.reader import field_index_name
from mcr.cache.reflector import (
    DECODE_SLICE,
    Reflector,
    WatchStalledError,
    _MalformedWatchError,
    strip_managed_fields,
)
from mcr.client import Client
from mcr.errors import GoneError
from mcr.metrics import REGISTRY
from mcr.rest.config import load_config
from mcr.rest.mapper import RESTMapper
from mcr.rest.transport import Transport
from mcr.testing import eventually, open_sockets

CM = "v1/ConfigMap"
# kube-controller-manager publishes it in every namespace; these caches leave it out
NOT_ROOT_CA = "metadata.name!=kube-root-ca.crt"


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

    async def make_cms(self, n: int, namespace: str = "default", prefix: str = "cm", **labels: str) -> None:
        sem = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            async with sem:
                await self.client.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": f"{prefix}{i}", "namespace": namespace, "labels": dict(labels)},
                        "data": {"i": str(i)},
                    }
                )

        await asyncio.gather(*(one(i) for i in range(n)))

    async def server_state(self, namespace: str | None = None) -> dict[str, str]:
        """``{"ns/name": resourceVersion}`` of every ConfigMap, read from the server."""
        items = await self.client.list(CM, namespace=namespace)
        return {
            f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in items
        }


def cache_state(objs: list[dict[str, Any]]) -> dict[str, str]:
    return {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
        for o in objs
    }


class Recorder:
    """An event handler that records what it is told."""

    def __init__(self) -> None:
        self.adds: list[tuple[str, str, bool]] = []
        self.updates: list[tuple[str, str, str]] = []
        self.deletes: list[tuple[str, bool]] = []

    @staticmethod
    def _key(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}"

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self.adds.append((self._key(obj), obj["metadata"]["resourceVersion"], is_initial_list))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.updates.append(
            (self._key(new), old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"])
        )

    def on_delete(self, obj: dict[str, Any] | DeletedFinalStateUnknown) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self.deletes.append((self._key(obj.obj), True))
        else:
            self.deletes.append((self._key(obj), False))

    def versions_of(self, key: str) -> list[str]:
        """Every resourceVersion this handler was handed for ``key``, in order."""
        out = [rv for k, rv, _ in self.adds if k == key]
        out += [new for k, _, new in self.updates if k == key]
        return out


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
        # Every connection is gone (TLS shutdowns included) before the test's loop closes.
        await eventually(lambda: open_sockets() <= sockets, message="a connection stayed open")


# --------------------------------------------------------------------------------------------
# Initial sync and handlers


def answers_read(cluster: str) -> float:
    """GET answers the transport of ``cluster`` has read whole (lists and gets; not watches)."""
    return sum(
        s.value
        for metric in REGISTRY.collect()
        if metric.name == "rest_client_response_size_bytes"
        for s in metric.samples
        if s.name.endswith("_count") and s.labels.get("cluster") == cluster and s.labels.get("verb") == "GET"
    )


async def test_initial_list_is_paginated_and_handlers_see_initial_adds(env: Env) -> None:
    await env.make_cms(12)  # (a real cluster has ConfigMaps of its own besides)
    cache = env.cache(page_size=5)
    await cache.start()
    informer = await cache.get_informer(CM)  # (discovery was done by make_cms)
    read = answers_read("test")
    rec = Recorder()
    reg = informer.add_event_handler(rec)
    assert await informer.wait_for_sync(10)
    assert informer.has_synced
    assert reg.has_synced
    pages = answers_read("test") - read
    on_server = await env.server_state()
    assert {f"default/cm{i}" for i in range(12)} <= on_server.keys()
    assert sorted(key for key, _, _ in rec.adds) == sorted(on_server)
    assert all(initial for _, _, initial in rec.adds)
    assert pages == -(-len(on_server) // 5)  # pages of 5, followed to the last
    assert cache_state(informer.list()) == on_server
    # List items gain kind/apiVersion like watch objects; managedFields are dropped by default.
    obj = informer.get("default/cm3")
    assert obj is not None
    assert obj["kind"] == "ConfigMap"
    assert obj["apiVersion"] == "v1"
    assert "managedFields" not in obj["metadata"]


async def test_handler_added_after_sync_gets_synthetic_adds_then_live_events(env: Env) -> None:
    await env.make_cms(3)
    informer = await synced_configmaps(env)
    late = Recorder()
    reg = informer.add_event_handler(late)
    assert reg.has_synced
    assert sorted(k for k, _, initial in late.adds if initial) == sorted(await env.server_state())
    assert not [k for k, _, initial in late.adds if not initial]
    await env.client.patch(CM, "cm1", {"data": {"x": "y"}}, namespace="default")
    await env.client.delete(CM, "cm2", namespace="default")
    await eventually(lambda: late.deletes == [("default/cm2", False)])
    assert [k for k, _, _ in late.updates] == ["default/cm1"]
    reg.remove()
    await env.make_cms(1, prefix="after")
    await eventually(lambda: informer.get("default/after0") is not None)
    assert not any(k == "default/after0" for k, _, _ in late.adds)


async def test_a_failing_handler_does_not_stop_the_informer_or_other_handlers(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(obj: dict[str, Any], initial: bool) -> None:
        raise RuntimeError("handler bug")

    cache = env.cache()
    await cache.start()
    informer = await cache.get_informer(CM)
    informer.add_event_handler(ResourceEventHandlerFuncs(on_add=boom))
    rec = Recorder()
    informer.add_event_handler(rec)
    await env.make_cms(2)
    await eventually(
        lambda: sorted(k for k, _, initial in rec.adds if not initial) == ["default/cm0", "default/cm1"]
    )
    assert "handler bug" in caplog.text
    assert "failed on add" in caplog.text


# --------------------------------------------------------------------------------------------
# Batch delivery of watch events (``on_events``)


async def synced_configmaps(env: Env) -> Any:
    """A started cache's ConfigMap informer, synced."""
    cache = env.cache()
    await cache.start()
    informer = await cache.get_informer(CM)
    assert await informer.wait_for_sync(10)
    return informer


def _key_rv(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}", meta["resourceVersion"]


class EventLog:
    """Records live notifications in order as ``(type, key, resourceVersion)`` (initial adds aside)."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, str]] = []

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        if not is_initial_list:
            self.log.append(("ADDED", *_key_rv(obj)))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.log.append(("MODIFIED", *_key_rv(new)))

    def on_delete(self, obj: dict[str, Any] | DeletedFinalStateUnknown) -> None:
        assert not isinstance(obj, DeletedFinalStateUnknown)
        self.log.append(("DELETED", *_key_rv(obj)))


class BatchLog(EventLog):
    """Takes watch events through ``on_events``; counts the per-event calls it gets besides."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []
        self.direct = 0

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self.direct += not is_initial_list

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.direct += 1

    def on_delete(self, obj: dict[str, Any] | DeletedFinalStateUnknown) -> None:
        self.direct += 1

    def on_events(self, notes: list[WatchNote]) -> None:
        self.batches.append(len(notes))
        for event_type, obj, namespace, name in notes:
            # The key the note carries is the object's own (the log compares it with on_update's).
            meta = obj["metadata"]
            assert (namespace, name) == (meta.get("namespace") or "", meta["name"])
            key = f"{namespace}/{name}" if namespace else name
            self.log.append((event_type, key, meta["resourceVersion"]))


@pytest.mark.envtest_only(
    "commits bursts straight into mcr-envtest's store (commit_burst) so one read carries many events"
)
async def test_batch_handlers_get_each_watch_read_in_one_call_with_the_same_changes(
    env: Env, commit_burst: Callable[[list[str], int], None]
) -> None:
    await env.make_cms(3)
    informer = await synced_configmaps(env)
    per_event, batched = EventLog(), BatchLog()
    informer.add_event_handler(per_event)
    informer.add_event_handler(batched)
    names = [f"b{i}" for i in range(200)]
    commit_burst(names, 0)
    commit_burst(names, 1)
    for name in names[::2]:
        env.srv.store.remove("", "configmaps", "default", name)
    await env.client.patch(CM, "cm1", {"data": {"x": "y"}}, namespace="default")
    await eventually(lambda: len(per_event.log) == 501 and len(batched.log) == 501)
    assert batched.log == per_event.log, "the same changes in the same order"
    assert [t for t, _, _ in batched.log].count("ADDED") == 200
    assert [t for t, _, _ in batched.log].count("MODIFIED") == 201
    assert [t for t, _, _ in batched.log].count("DELETED") == 100
    assert batched.direct == 0, "watch events reach a batch handler through on_events only"
    assert sum(batched.batches) == 501
    assert max(batched.batches) > 1, "a read that carried several events went over in one call"
    assert informer.resource_version == batched.log[-1][2]
    # Resyncs still arrive one by one, as on_update(obj, obj).
    await informer.resync()
    assert batched.direct == len(informer.list())


@pytest.mark.envtest_only("commits objects with managedFields straight into mcr-envtest's store in one burst")
async def test_watch_updates_reach_the_store_and_batch_handlers_without_managed_fields(
    env: Env, commit_burst: Callable[[list[str], int], None]
) -> None:
    """The default transform drops ``managedFields`` on the watch's batch path too (a burst of
    updates applied in one pass), whether the server sent them or not."""
    informer = await synced_configmaps(env)
    log = BatchLog()
    informer.add_event_handler(log)
    names = [f"mf{i}" for i in range(20)]
    commit_burst(names, 0)
    for name in names:  # the same objects, now carrying managedFields from the server
        env.srv.store.commit(
            "",
            "configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "uid": f"uid-{name}",
                    "managedFields": [{"manager": "bench", "operation": "Update", "apiVersion": "v1"}],
                },
                "data": {"round": "1"},
            },
        )
    await eventually(
        lambda: all((o := informer.get(f"default/{n}")) and o["data"]["round"] == "1" for n in names)
    )
    assert log.direct == 0, "the burst came through on_events"
    assert sum(log.batches) == 40
    for name in names:
        obj = informer.get(f"default/{name}")
        assert obj is not None
        assert "managedFields" not in obj["metadata"], name


def _tagged(obj: dict[str, Any]) -> dict[str, Any]:
    """A transform other than the default: reflectors then apply events one at a time."""
    obj["metadata"].setdefault("annotations", {})["seen"] = "yes"
    return obj


@pytest.mark.envtest_only(
    "commits bursts straight into mcr-envtest's store (commit_burst) so one read carries many events"
)
async def test_one_read_mixing_adds_updates_and_deletes_applies_them_in_order(
    env: Env, commit_burst: Callable[[list[str], int], None]
) -> None:
    """Runs of adds and updates in a read are applied in one pass; the deletes between them one
    by one. Informers with an index, or with a transform of their own (applied one event at a
    time), end in the same state after the same notifications."""
    plain = env.cache(default_field_selector=NOT_ROOT_CA)
    indexed = env.cache(default_field_selector=NOT_ROOT_CA)
    transformed = env.cache(default_field_selector=NOT_ROOT_CA, default_transform=_tagged)
    logs: list[tuple[EventLog, BatchLog]] = []
    informers = []
    for cache in (plain, indexed, transformed):
        await cache.start()
        if cache is indexed:
            await cache.index_field(CM, "data.round", lambda obj: [obj.get("data", {}).get("round", "")])
        informer = await cache.get_informer(CM)
        assert await informer.wait_for_sync(10)
        per_event, batched = EventLog(), BatchLog()
        informer.add_event_handler(per_event)
        informer.add_event_handler(batched)
        logs.append((per_event, batched))
        informers.append(informer)
    store = env.srv.store
    names = [f"m{i}" for i in range(6)]
    commit_burst(names, 0)  # six adds
    store.remove("", "configmaps", "default", "m1")
    commit_burst(["m0", "m2"], 1)  # two updates
    store.remove("", "configmaps", "default", "m3")
    commit_burst(["m1", "m6"], 1)  # m1 again, and a new one
    store.remove("", "configmaps", "default", "m6")
    expected = (
        [("ADDED", f"default/{n}") for n in names]
        + [("DELETED", "default/m1"), ("MODIFIED", "default/m0"), ("MODIFIED", "default/m2")]
        + [("DELETED", "default/m3"), ("ADDED", "default/m1"), ("ADDED", "default/m6")]
        + [("DELETED", "default/m6")]
    )
    await eventually(lambda: all(len(b.log) == len(expected) for _, b in logs))
    m1 = store.get("", "configmaps", "default", "m1")
    assert m1 is not None
    last_rv = m1["metadata"]["resourceVersion"]
    for (per_event, batched), informer in zip(logs, informers, strict=True):
        assert [(t, key) for t, key, _ in per_event.log] == expected
        assert batched.log == per_event.log
        assert batched.direct == 0
        assert sorted(informer_keys(informer)) == [
            "default/m0",
            "default/m1",
            "default/m2",
            "default/m4",
            "default/m5",
        ]
        assert int(informer.resource_version) > int(last_rv)  # the delete of m6 came last
        rounds_by_name = {obj["metadata"]["name"]: obj["data"]["round"] for obj in informer.list()}
        assert rounds_by_name == {"m0": "1", "m1": "1", "m2": "1", "m4": "0", "m5": "0"}
    assert all(obj["metadata"]["annotations"]["seen"] == "yes" for obj in informers[2].list()), (
        "the transform ran on every object"
    )
    rounds = {obj["metadata"]["name"] for obj in informers[1].by_index(field_index_name("data.round"), "1")}
    assert rounds == {"m0", "m1", "m2"}, "updates kept the index up to date"


async def test_watch_changes_stops_at_the_first_event_it_does_not_apply(env: Env) -> None:
    """Bookmarks, deletions and malformed events are left to the reflector, at their index."""
    informer = await synced_configmaps(env)

    def cm(name: str, rv: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": "default", "resourceVersion": rv, "managedFields": [{}]}
        return {"type": "ADDED", "object": {"metadata": meta}}

    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "900"}}}
    no_metadata = {"type": "MODIFIED", "object": {"kind": "ConfigMap"}}
    no_name = {"type": "MODIFIED", "object": {"metadata": {"resourceVersion": "903"}}}
    events = [cm("w1", "901"), bookmark, cm("w2", "902"), no_metadata, no_name, cm("w3", "904")]
    assert informer.watch_changes(events, 0, True, dedupe=True) == (1, "901", 0)
    assert informer.watch_changes(events, 1, True, dedupe=True) == (1, None, 0)
    assert informer.watch_changes(events, 2, False, dedupe=True) == (3, "902", 0)
    assert informer.watch_changes(events, 3, True, dedupe=True) == (3, None, 0)
    assert informer.watch_changes(events, 4, True, dedupe=True) == (4, None, 0)
    assert informer.watch_changes(events, 5, True, dedupe=True) == (6, "904", 0)
    # The same change again: a duplicate when asked to look for them, else applied again.
    assert informer.watch_changes(events, 5, True, dedupe=True) == (6, "904", 1)
    assert informer.watch_changes(events, 5, True, dedupe=False) == (6, "904", 0)
    stored = {obj["metadata"]["name"]: obj["metadata"] for obj in informer.list()}
    assert "managedFields" not in stored["w1"]
    assert "managedFields" not in stored["w3"]
    assert "managedFields" in stored["w2"], "strip=False keeps them"


async def test_a_stream_is_checked_for_replayed_changes_until_a_read_brings_none(env: Env) -> None:
    """A re-opened watch may replay what the informer applied: from its first read until a read
    whose changes held no duplicate, changes at the stored resourceVersion are dropped."""
    await env.make_cms(1)
    informer = await synced_configmaps(env)
    log = BatchLog()
    informer.add_event_handler(log)
    stored = informer.list()[0]
    rv = stored["metadata"]["resourceVersion"]
    reflector = Reflector(
        env.transport,
        "/api/v1/configmaps",
        informer,
        scope=None,
        kind="ConfigMap",
        api_version="v1",
        transform=strip_managed_fields,
    )

    def read(version: str) -> None:
        obj = {**stored, "metadata": {**stored["metadata"], "resourceVersion": version}}
        reflector._apply([{"type": "MODIFIED", "object": obj}])
        informer.watch_read_done()

    read(rv)  # the stream's first read replays the stored version: dropped
    read(rv)  # still replaying
    assert log.log == []
    read("9000001")  # a new version: applied, and the stream is past any replay
    read("9000001")  # (a conforming server never sends a version twice in one stream)
    assert [version for _, _, version in log.log] == ["9000001", "9000001"]
    assert informer.list()[0]["metadata"]["resourceVersion"] == "9000001"


async def test_a_read_of_several_slices_is_applied_up_to_a_malformed_line(env: Any) -> None:
    """A read larger than a decoding slice is decoded slice by slice, in place; a line that is
    not JSON ends it there, after every event before it was applied."""
    await env.make_cms(1)
    informer = await synced_configmaps(env)
    log = BatchLog()
    informer.add_event_handler(log)
    stored = informer.list()[0]
    reflector = Reflector(
        env.transport, "/api/v1/configmaps", informer, scope=None, kind="ConfigMap", api_version="v1"
    )
    lines = []
    for i in range(3 * DECODE_SLICE // 1000):  # about 1 KiB a line: three slices and more
        obj = {**stored, "metadata": {**stored["metadata"], "resourceVersion": str(9000000 + i)}}
        obj["data"] = {"pad": "x" * 900}
        lines.append(orjson.dumps({"type": "MODIFIED", "object": obj}))
    block = bytearray(b"\n" + b"\n".join([*lines, b"{not json", lines[0]]) + b"\n")
    with pytest.raises(_MalformedWatchError, match="not JSON"):
        reflector._apply_read(block)
    informer.watch_read_done()
    versions = [version for _, _, version in log.log]
    assert versions == [str(9000000 + i) for i in range(len(lines))], "every event before the bad line"
    assert reflector.resource_version == str(9000000 + len(lines) - 1)


def informer_keys(informer: Any) -> list[str]:
    return [f"{obj['metadata']['namespace']}/{obj['metadata']['name']}" for obj in informer.list()]


@pytest.mark.envtest_only(
    "commits bursts straight into mcr-envtest's store (commit_burst) so one read carries many events"
)
async def test_a_failing_or_removed_batch_handler_loses_nothing_for_the_others(
    env: Env, caplog: pytest.LogCaptureFixture, commit_burst: Callable[[list[str], int], None]
) -> None:
    class Failing(BatchLog):
        def on_events(self, notes: list[WatchNote]) -> None:
            raise RuntimeError("batch handler bug")

    informer = await synced_configmaps(env)
    per_event, batched, removed = EventLog(), BatchLog(), BatchLog()
    informer.add_event_handler(Failing())
    removed_reg = informer.add_event_handler(removed)

    class Remover(EventLog):
        def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
            super().on_add(obj, is_initial_list)
            if obj["metadata"]["name"] == "r5":
                removed_reg.remove()

    # The remover is notified per event, so it removes the batch handler in the middle of a read:
    # from then on (that read's batch included) the removed handler gets nothing.
    informer.add_event_handler(Remover())
    informer.add_event_handler(per_event)
    informer.add_event_handler(batched)
    commit_burst([f"r{i}" for i in range(10)], 0)
    await eventually(lambda: len(per_event.log) == 10 and len(batched.log) == 10)
    commit_burst([f"s{i}" for i in range(10)], 0)
    await eventually(lambda: len(per_event.log) == 20 and len(batched.log) == 20)
    assert batched.log == per_event.log
    assert "batch handler bug" in caplog.text
    assert "failed on" in caplog.text
    assert "watch events" in caplog.text
    seen = [key for _, key, _ in removed.log]
    assert seen == [f"default/r{i}" for i in range(len(seen))]
    assert len(seen) < 5


@pytest.mark.envtest_only(
    "commits bursts straight into mcr-envtest's store (commit_burst) so one read carries many events"
)
async def test_handlers_removed_or_added_during_a_watch_read_miss_nothing_and_see_nothing_twice(
    env: Env, commit_burst: Callable[[list[str], int], None]
) -> None:
    informer = await synced_configmaps(env)

    class Late(BatchLog):
        def __init__(self) -> None:
            super().__init__()
            self.replayed: list[str] = []

        def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
            assert is_initial_list, "live adds come through on_events"
            self.replayed.append(_key_rv(obj)[0])

    late, stopped = Late(), EventLog()

    class Switcher(EventLog):
        """On r5 (in the middle of the burst's read): removes one handler, adds another."""

        def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
            super().on_add(obj, is_initial_list)
            if obj["metadata"]["name"] == "r5":
                stopped_reg.remove()
                informer.add_event_handler(late)

    switcher = Switcher()
    informer.add_event_handler(switcher)
    stopped_reg = informer.add_event_handler(stopped)
    names = [f"default/r{i}" for i in range(10)]
    commit_burst([name.split("/")[1] for name in names], 0)
    await eventually(lambda: len(switcher.log) == 10)
    assert [key for _, key, _ in stopped.log] == names[:6]
    live = [key for _, key, _ in late.log]
    replayed = [key for key in late.replayed if key in names]
    assert sorted(replayed + live) == sorted(names), "each object once: replayed or live"
    assert live == names[len(replayed) :]
    assert live, "the rest of the burst reached it through on_events"


# --------------------------------------------------------------------------------------------
# R1/R2: dropped and timed-out watches resume from the last resourceVersion


async def patch_loop(env: Env, name: str, n: int, during: Any = None) -> list[str]:
    """Patch ``name`` ``n`` times; returns the resourceVersions the writer got back."""
    written = []
    for i in range(n):
        obj = await env.client.patch(CM, name, {"data": {"n": str(i)}}, namespace="default")
        written.append(obj["metadata"]["resourceVersion"])
        if during is not None:
            await during(i)
    return written


async def test_watches_the_server_ends_resume_and_deliver_every_version_once(env: Env) -> None:
    # Each watch asks the server to end it after a second (timeoutSeconds=1).
    await env.make_cms(1)
    cache = env.cache(watch_timeout=(1.0, 1.0))
    await cache.start()
    informer = await cache.get_informer(CM)
    rec = Recorder()
    informer.add_event_handler(rec)
    assert await informer.wait_for_sync(10)
    reflector = informer.reflectors[0]
    first = rec.versions_of("default/cm0")
    written: list[str] = []
    deadline = time.monotonic() + 30
    while reflector.watches < 4 and time.monotonic() < deadline:
        obj = await env.client.patch(CM, "cm0", {"data": {"n": str(len(written))}}, namespace="default")
        written.append(obj["metadata"]["resourceVersion"])
        await asyncio.sleep(0.05)  # pacing: writes spread over several one-second watches
    assert reflector.watches >= 4
    await eventually(lambda: rec.versions_of("default/cm0")[-1:] == written[-1:])
    assert rec.versions_of("default/cm0") == first + written  # every version, in order, once
    assert reflector.lists == 1, "an ended watch must resume, not relist"
    assert cache_state(informer.list()) == await env.server_state()


@pytest.mark.envtest_only("ends watches with faults.watch_timeout and cuts them with faults.close_watches")
async def test_dropped_and_expiring_watches_resume_and_deliver_every_version_once(env: Env) -> None:
    await env.make_cms(1)
    cache = env.cache()
    await cache.start()
    informer = await cache.get_informer(CM)
    rec = Recorder()
    informer.add_event_handler(rec)
    assert await informer.wait_for_sync(10)
    env.srv.faults.watch_timeout(0.4)  # R1: every watch ends on its own after 0.4 s

    async def drop(i: int) -> None:
        if i % 15 == 7:
            await asyncio.to_thread(env.srv.faults.close_watches)  # R2: cut the stream

    first = rec.versions_of("default/cm0")
    written = await patch_loop(env, "cm0", 80, drop)
    await eventually(lambda: rec.versions_of("default/cm0")[-1:] == written[-1:])
    assert rec.versions_of("default/cm0") == first + written  # every version, in order, once
    reflector = informer.reflectors[0]
    assert reflector.lists == 1, "a dropped watch must resume, not relist"
    assert reflector.watches >= 5
    assert cache_state(informer.list()) == await env.server_state()


# --------------------------------------------------------------------------------------------
# R4/R7: 410 Expired relists; what vanished meanwhile surfaces as deletes


@pytest.mark.envtest_only(
    "holds the informer off with faults.fail_next while faults.compact expires its version"
)
async def test_expired_resource_version_relists_and_reports_what_changed(env: Env) -> None:
    await env.make_cms(4)
    cache = env.cache(backoff=BackoffPolicy(initial=0.05, cap=0.2))
    await cache.start()
    informer = await cache.get_informer(CM)
    rec = Recorder()
    informer.add_event_handler(rec)
    assert await informer.wait_for_sync(10)
    faults = env.srv.faults
    # Keep the informer from watching while the world changes, then expire its resourceVersion.
    faults.fail_next(10_000, 503, methods=("GET",), path_contains="/configmaps")
    await asyncio.to_thread(faults.close_watches)
    await env.client.delete(CM, "cm0", namespace="default")
    await env.client.patch(CM, "cm1", {"data": {"changed": "yes"}}, namespace="default")
    await env.make_cms(1, prefix="new")
    await asyncio.to_thread(faults.compact)
    await asyncio.sleep(0.3)  # let the informer hit the failing server a few times
    faults.clear()
    expected = await env.server_state()
    await eventually(lambda: cache_state(informer.list()) == expected, timeout=15)
    reflector = informer.reflectors[0]
    assert reflector.lists == 2
    assert isinstance(reflector.last_error, GoneError) or any(
        "410" in str(r.status) for r in faults.requests("GET", "/configmaps")
    )
    assert rec.deletes == [("default/cm0", True)]  # a tombstone: the final state was never seen
    assert [k for k, _, _ in rec.updates] == ["default/cm1"]
    assert [(k, initial) for k, _, initial in rec.adds if k == "default/new0"] == [("default/new0", False)]


@pytest.mark.envtest_only(
    "expires the informer's version again and again with faults.fail_next and faults.compact"
)
async def test_compaction_under_writes_never_duplicates_and_converges(env: Env) -> None:
    await env.make_cms(3)
    cache = env.cache(backoff=BackoffPolicy(initial=0.02, cap=0.1))
    await cache.start()
    informer = await cache.get_informer(CM)
    rec = Recorder()
    informer.add_event_handler(rec)
    assert await informer.wait_for_sync(10)

    faults = env.srv.faults
    reflector = informer.reflectors[0]

    async def expire(i: int) -> None:
        if i % 10 == 3:  # hold the informer off while writes go on ...
            faults.fail_next(10_000, 503, methods=("GET",), path_contains="/configmaps")
            await asyncio.to_thread(faults.close_watches)
        elif i % 10 == 6:  # ... then expire the version it holds
            lists = reflector.lists
            await asyncio.to_thread(faults.compact)
            faults.clear()
            await eventually(lambda: reflector.lists > lists)

    written = await patch_loop(env, "cm1", 60, expire)
    await eventually(lambda: rec.versions_of("default/cm1")[-1:] == written[-1:], timeout=15)
    seen = rec.versions_of("default/cm1")[1:]
    assert len(seen) == len(set(seen)), "a resourceVersion was delivered twice"
    assert set(seen) <= set(written)
    assert [int(v) for v in seen] == sorted(int(v) for v in seen)
    assert reflector.lists == 7
    assert len(seen) < len(written)  # versions written while expired are skipped, not replayed
    assert cache_state(informer.list()) == await env.server_state()


@pytest.mark.envtest_only("restarts the server with an empty store (restart(keep_state=False))")
async def test_server_restart_with_lost_state_relists_and_drops_stale_objects(env: Env) -> None:
    await env.make_cms(3)
    cache = env.cache(backoff=BackoffPolicy(initial=0.05, cap=0.2), default_field_selector=NOT_ROOT_CA)
    await cache.start()
    informer = await cache.get_informer(CM)
    rec = Recorder()
    informer.add_event_handler(rec)
    assert await informer.wait_for_sync(10)
    await asyncio.to_thread(env.srv.restart, False)  # R7: same port, empty store, newer RVs
    await eventually(lambda: len(informer.list()) == 0, timeout=15)
    assert sorted(rec.deletes) == [(f"default/cm{i}", True) for i in range(3)]
    await env.make_cms(1, prefix="fresh")
    await eventually(lambda: informer.get("default/fresh0") is not None)
    on_server = await env.server_state()
    assert cache_state(informer.list()) == {
        k: v for k, v in on_server.items() if not k.endswith("/kube-root-ca.crt")
    }


async def restart_and_patch(env: Env) -> tuple[Any, Recorder, list[str]]:
    """A synced ConfigMap informer across a restart of the server (its objects kept), and a patch
    of ``cm0`` after it; returns the informer, its recorder and cm0's versions before the restart."""
    await env.make_cms(2)
    cache = env.cache(backoff=BackoffPolicy(initial=0.05, cap=0.2))
    await cache.start()
    informer = await cache.get_informer(CM)
    rec = Recorder()
    informer.add_event_handler(rec)
    assert await informer.wait_for_sync(10)
    before = rec.versions_of("default/cm0")
    await asyncio.to_thread(env.srv.restart, True)  # R6: same port, same objects
    obj = await env.client.patch(CM, "cm0", {"data": {"after": "restart"}}, namespace="default")
    rv = obj["metadata"]["resourceVersion"]
    await eventually(lambda: rec.versions_of("default/cm0")[-1:] == [rv], timeout=30)
    return informer, rec, [*before, rv]


async def test_server_restart_with_kept_state_is_followed_and_deletes_nothing(env: Env) -> None:
    # kube-apiserver's watch cache starts afresh: the informer may relist (410) or resume.
    informer, rec, versions = await restart_and_patch(env)
    assert rec.deletes == []
    assert [v for v in rec.versions_of("default/cm0") if v in versions] == versions
    assert cache_state(informer.list()) == await env.server_state()


@pytest.mark.envtest_only(
    "mcr-envtest keeps its watch history over a restart; kube-apiserver's rebuilt watch cache answers"
    " 410 for older resourceVersions, so a relist is right there"
)
async def test_server_restart_with_kept_history_resumes_without_relist(env: Env) -> None:
    informer, rec, versions = await restart_and_patch(env)
    assert informer.reflectors[0].lists == 1
    assert rec.versions_of("default/cm0") == versions  # nothing handed twice
    assert rec.deletes == []
    assert cache_state(informer.list()) == await env.server_state()


# --------------------------------------------------------------------------------------------
# R3: stalled streams; R8/R9/R11: errors back off


@pytest.mark.envtest_only("silences open watches with faults.stall_watches")
async def test_stalled_watch_is_detected_and_restarted(env: Env) -> None:
    await env.make_cms(1)
    cache = env.cache(stall_timeout=0.3)
    await cache.start()
    informer = await cache.get_informer(CM)
    assert await informer.wait_for_sync(10)
    reflector = informer.reflectors[0]
    await eventually(lambda: env.srv.call(env.srv.store.watcher_count) == 1)  # the watch is open
    arrivals: list[tuple[str, int]] = []
    informer.add_event_handler(
        ResourceEventHandlerFuncs(
            on_update=lambda old, new: arrivals.append(
                (new["metadata"]["resourceVersion"], reflector.watches)
            )
        )
    )
    env.srv.faults.stall_watches(None)  # the server stops writing but keeps the sockets open
    watches = reflector.watches
    obj = await env.client.patch(CM, "cm0", {"data": {"during": "stall"}}, namespace="default")
    rv = obj["metadata"]["resourceVersion"]
    # Nothing arrives while the server is silent; each silent stream is abandoned and re-opened.
    await eventually(lambda: reflector.watches >= watches + 3, timeout=5)
    assert isinstance(reflector.last_error, WatchStalledError)
    assert arrivals == []
    env.srv.faults.stall_watches(0)
    await eventually(lambda: len(arrivals) == 1)
    assert arrivals[0][0] == rv
    assert arrivals[0][1] > watches  # delivered by a re-opened watch, not the stalled first one
    assert reflector.lists == 1


@pytest.mark.envtest_only(
    "answers watches with injected 429 and 500 (faults.fail_next) and reads the request log"
)
async def test_watch_errors_back_off_and_resume_without_relisting(env: Env) -> None:
    await env.make_cms(1)
    cache = env.cache(backoff=BackoffPolicy(initial=0.05, cap=0.2))
    await cache.start()
    informer = await cache.get_informer(CM)
    assert await informer.wait_for_sync(10)
    faults = env.srv.faults
    faults.fail_next(2, 429, methods=("GET",), path_contains="/configmaps")
    faults.fail_next(2, 500, text=True, methods=("GET",), path_contains="/configmaps")
    await asyncio.to_thread(faults.close_watches)
    await env.client.patch(CM, "cm0", {"data": {"after": "errors"}}, namespace="default")
    await eventually(lambda: (informer.get("default/cm0") or {}).get("data", {}).get("after") == "errors")
    statuses = [r.status for r in faults.requests("GET", "/configmaps")]
    assert statuses.count(429) == 2
    assert statuses.count(500) == 2
    assert informer.reflectors[0].lists == 1


@pytest.mark.envtest_only(
    "ends every watch at once with faults.watch_timeout(0) and counts them in the request log"
)
async def test_very_short_watches_back_off(env: Env) -> None:
    cache = env.cache(allow_watch_bookmarks=False)
    env.srv.faults.watch_timeout(0)  # R11: every watch closes at once with no event
    await cache.start()
    informer = await cache.get_informer(CM)
    assert await informer.wait_for_sync(10)
    await asyncio.sleep(2.0)  # measuring a request rate over a fixed window
    watches = [r for r in env.srv.faults.requests("GET", "/configmaps") if "watch=1" in r.query]
    assert 1 <= len(watches) <= 4, f"{len(watches)} watches in 2 s: no backoff"
    env.srv.faults.watch_timeout(None)


async def test_stop_closes_every_watch_and_task(env: Env) -> None:
    cache = env.cache(default_namespaces={"a": NamespaceConfig(), "b": NamespaceConfig()})
    await cache.start()
    informer = await cache.get_informer(CM)
    assert await informer.wait_for_sync(10)
    connector = env.transport.connector
    assert connector is not None
    # each open watch holds a connection of its own
    await eventually(lambda: len(connector._acquired) == 2)
    before = {t for t in asyncio.all_tasks() if t.get_name().startswith("reflector")}
    assert len(before) == 2
    await cache.stop()
    await cache.stop()  # idempotent
    assert all(t.done() for t in before)
    assert not connector._acquired  # every watch's connection was given back or closed
