"""Sources: Kind per cluster on a real informer (priorities, predicates, removal), Channel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcr.client import Client
from mcr.cluster import Cluster
from mcr.config import RestConfig
from mcr.handler import EnqueueRequestForObject
from mcr.predicate import predicate_from
from mcr.reconcile import Request
from mcr.source import Channel, GenericEvent, Kind
from mcr.testing import eventually
from mcr.workqueue import WorkQueue


def cm(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
    }


@pytest.fixture
async def env(apiserver: Any) -> AsyncIterator[tuple[Cluster, Client]]:
    cluster = Cluster.from_kubeconfig(apiserver.kubeconfig, name="src")
    transport = RestConfig.from_kubeconfig(apiserver.kubeconfig).transport(cluster_name="admin")
    await cluster.start()
    try:
        yield cluster, Client(transport)
    finally:
        await cluster.stop()
        await transport.close()


async def test_initial_list_is_low_priority_and_live_events_go_first(env: tuple[Cluster, Client]) -> None:
    cluster, admin = env
    for i in range(3):
        await admin.create(cm(f"old-{i}"))
    q: WorkQueue[Request] = WorkQueue()
    reg = await Kind("v1/ConfigMap").start_for_cluster("east", cluster, q, sync_timeout=10)
    try:
        await eventually(lambda: len(q) >= 3)
        await admin.create(cm("new"))
        await eventually(lambda: Request("default", "new", "east") in set(q._queued))
        assert q.get_nowait() == Request("default", "new", "east"), "a live event beats the initial list"
        rest = {q.get_nowait() for _ in range(len(q))}
        assert {Request("default", f"old-{i}", "east") for i in range(3)} <= rest
    finally:
        reg.remove()


async def test_predicates_filter_and_removal_stops_events(env: tuple[Cluster, Client]) -> None:
    cluster, admin = env
    q: WorkQueue[Request] = WorkQueue()
    only_watched = predicate_from(lambda o: o["metadata"].get("labels", {}).get("watch") == "yes")
    src = Kind("v1/ConfigMap", EnqueueRequestForObject(), only_watched)
    reg = await src.start_for_cluster("", cluster, q, sync_timeout=10)
    await admin.create(cm("ignored"))
    await admin.create(cm("watched", {"watch": "yes"}))
    await eventually(lambda: len(q) == 1)
    assert q.get_nowait() == Request("default", "watched")
    reg.remove()
    await admin.create(cm("after", {"watch": "yes"}))
    await admin.delete("v1/ConfigMap", "watched", namespace="default")
    await asyncio.sleep(0.3)
    assert len(q) == 0, "no events after the registration is removed"


async def test_channel_from_async_iterator_with_predicates() -> None:
    async def events() -> AsyncIterator[Any]:
        yield GenericEvent(cm("a", {"watch": "yes"}), "west")
        yield cm("b", {"watch": "yes"})  # a bare object: the local cluster
        yield GenericEvent(cm("c"), "west")  # filtered out

    q: WorkQueue[Request] = WorkQueue()
    only_watched = predicate_from(lambda o: o["metadata"].get("labels", {}).get("watch") == "yes")
    await Channel(events(), None, only_watched).run(q)
    assert [q.get_nowait(), q.get_nowait(), q.get_nowait()] == [
        Request("default", "a", "west"),
        Request("default", "b", ""),
        None,
    ]


async def test_channel_from_asyncio_queue_runs_until_cancelled() -> None:
    source: asyncio.Queue[Any] = asyncio.Queue()
    q: WorkQueue[Request] = WorkQueue()
    task = asyncio.create_task(Channel(source).run(q))
    source.put_nowait(GenericEvent(cm("x"), "c"))
    got = await asyncio.wait_for(q.get(), 2)
    assert got == Request("default", "x", "c")
    task.cancel()
    await asyncio.wait([task])
    assert task.cancelled()
