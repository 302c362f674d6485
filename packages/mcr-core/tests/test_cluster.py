"""Cluster: parts wired together, cache-backed reads, and a stop that leaves nothing behind."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any
from urllib.parse import urlsplit

import pytest

from mcr.cache import CacheOptions, NamespaceConfig
from mcr.cluster import Cluster
from mcr.controller import Controller
from mcr.errors import ConfigError, MCRError
from mcr.reconcile import Request
from mcr.source import Kind
from mcr.testing import eventually, open_sockets

CM = "v1/ConfigMap"


def _port(apiserver: Any) -> int:
    """The API server's port: the connections a stopped cluster must have closed go there."""
    port: int | None = urlsplit(str(apiserver.kubeconfig["clusters"][0]["cluster"]["server"])).port
    assert port is not None
    return port


def own_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}


async def test_from_kubeconfig_wires_cached_client_and_uncached_reader(apiserver: Any) -> None:
    async with Cluster.from_kubeconfig(apiserver.kubeconfig_path, name="east") as cluster:
        assert cluster.name == "east"
        assert cluster.transport.cluster_name == "east"
        assert cluster.field_indexer is cluster.cache
        await cluster.client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}
        )
        # The cache-backed client converges; the api_reader sees the write at once.
        assert (await cluster.api_reader.get(CM, "a"))["data"] == {"k": "v"}
        await eventually(lambda: cluster.client.get(CM, "a"))
        await cluster.index_field(CM, "data.k", lambda o: [o.get("data", {}).get("k", "")])
        assert [o["metadata"]["name"] for o in await cluster.client.list(CM, field_selector="data.k=v")] == [
            "a"
        ]
        assert await cluster.wait_for_cache_sync(5)
        recorder = cluster.event_recorder("tester")
        assert cluster.event_recorder("tester") is recorder
        obj = await cluster.client.get(CM, "a")
        recorder.event(obj, "Normal", "Tested", "the cluster records events")

        async def recorded() -> bool:
            events = await cluster.api_reader.list("events.k8s.io/v1/Event", namespace="default")
            return any(e.get("reason") == "Tested" for e in events)

        await eventually(recorded)


async def test_stop_leaves_no_task_and_no_connection(apiserver: Any) -> None:
    port = _port(apiserver)
    sockets_before = open_sockets(peer_port=port)
    tasks_before = own_tasks()
    cluster = Cluster.from_kubeconfig(
        apiserver.kubeconfig,
        name="leak-check",
        cache_options=CacheOptions(
            default_namespaces={"default": NamespaceConfig(), "kube-system": NamespaceConfig()}
        ),
    )
    await cluster.start()
    await cluster.client.list(CM)  # two namespace watches
    await cluster.client.list("v1/Secret", namespace="default")  # two more
    cluster.event_recorder("leak").event(
        await cluster.api_reader.get("v1/Namespace", "default"), "Normal", "Check", "recorder worker runs"
    )
    connector = cluster.transport.connector
    assert connector is not None
    await eventually(lambda: len(connector._acquired) == 4)  # each open watch holds a connection
    assert len(own_tasks() - tasks_before) >= 4
    assert open_sockets(peer_port=port) > sockets_before
    await cluster.stop()
    await cluster.stop()  # idempotent
    assert own_tasks() - tasks_before == set()
    assert cluster.transport.closed
    assert not connector._acquired
    await eventually(lambda: open_sockets(peer_port=port) == sockets_before, message="a socket stayed open")
    with pytest.raises(MCRError, match="leak-check"):
        await cluster.start()


class _Probe(dict):  # type: ignore[type-arg]  # a dict that can be weakly referenced
    pass


async def test_stopped_cluster_is_freed_without_the_cycle_collector(apiserver: Any) -> None:
    """A stopped cluster's cache, informers and objects go with the last reference to the cluster.

    The GC policy raises the collector's thresholds, so full collections are rare: a reference
    cycle anywhere between cluster, cache, informers, reflectors and clients would keep a
    disengaged cluster's objects in memory long after it is gone.
    """
    seen: list[Request] = []

    async def reconcile(req: Request) -> None:
        seen.append(req)

    ctrl = Controller("freed-cluster", reconcile, skip_name_validation=True)
    ctrl.watch(Kind(CM))
    runner = asyncio.create_task(ctrl.start())
    gc.collect()
    gc.disable()
    try:
        cluster = Cluster.from_kubeconfig(apiserver.kubeconfig, name="freed")
        await cluster.start()
        await cluster.client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept", "namespace": "default"}}
        )
        engagement = asyncio.create_task(ctrl.engage("freed", cluster))
        await eventually(lambda: Request("default", "kept", "freed") in seen)
        assert cluster.client.status.subresource == "status"
        informer = await cluster.cache.get_informer(CM)
        probe = _Probe()
        informer.store._items["probe"] = probe
        refs = [weakref.ref(x) for x in (cluster, cluster.cache, informer, cluster.client, probe)]
        engagement.cancel()
        await asyncio.wait([engagement])
        await cluster.stop()
        del cluster, informer, probe, engagement
        alive = [r() for r in refs]
        assert alive == [None] * len(refs), f"kept alive by a reference cycle: {alive}"
    finally:
        gc.enable()
        runner.cancel()
        await asyncio.wait([runner])


async def test_cancelled_stop_still_closes_everything(apiserver: Any) -> None:
    port = _port(apiserver)
    sockets_before = open_sockets(peer_port=port)
    tasks_before = own_tasks()
    cluster = Cluster.from_kubeconfig(apiserver.kubeconfig, name="cancel")
    await cluster.start()
    await cluster.client.list(CM)
    for delay in (0, 0, 0.001):  # cancel the caller again and again while it stops
        stopping = asyncio.create_task(cluster.stop())
        await asyncio.sleep(delay)
        stopping.cancel()
        await asyncio.gather(stopping, return_exceptions=True)
    await cluster.stop()  # waits for the shutdown the cancelled callers started
    assert cluster.transport.closed
    assert own_tasks() - tasks_before == set()
    await eventually(lambda: open_sockets(peer_port=port) == sockets_before, message="a socket stayed open")


def test_bad_kubeconfig_names_the_context() -> None:
    with pytest.raises(ConfigError, match="nope"):
        Cluster.from_kubeconfig(
            {"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": []}, context="nope"
        )
