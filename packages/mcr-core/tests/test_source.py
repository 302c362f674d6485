"""Sources: Kind per cluster on a real informer (priorities, predicates, removal), Channel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mcr.client import Client
from mcr.cluster import Cluster
from mcr.handler import EnqueueRequestForObject
from mcr.predicate import predicate_from
from mcr.reconcile import Request
from mcr.rest.config import RestConfig
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


# How a test's changes reach the server: committed back to back straight into mcr-envtest's store
# (a stream read then carries several events for sure), or written concurrently through the API.
WRITERS = [
    pytest.param(
        "store",
        marks=pytest.mark.envtest_only("commits bursts straight into mcr-envtest's store"),
    ),
    "api",
]


@pytest.mark.parametrize("writer", WRITERS)
async def test_each_kind_of_watch_change_is_enqueued_at_normal_priority(
    env: tuple[Cluster, Client], apiserver: Any, commit_burst: Callable[[list[str], int], None], writer: str
) -> None:
    """Bursts of adds, updates and deletes (several per stream read, as ``on_events`` batches)
    reach the queue the same way through the bulk path (no predicates) and the per-event path."""
    cluster, admin = env

    async def put(names: list[str], round_: int) -> None:
        if writer == "store":
            commit_burst(names, round_)
            return
        objs = [{**cm(name), "data": {"round": str(round_)}} for name in names]
        if round_ == 0:
            await asyncio.gather(*(admin.create(o) for o in objs))
        else:
            await asyncio.gather(*(admin.patch(o, patch={"data": o["data"]}) for o in objs))

    async def remove(names: list[str]) -> None:
        if writer == "store":
            for name in names:
                apiserver.store.remove("", "configmaps", "default", name)
            return
        await asyncio.gather(*(admin.delete("v1/ConfigMap", name, namespace="default") for name in names))

    fast: WorkQueue[Request] = WorkQueue()
    filtered: WorkQueue[Request] = WorkQueue()
    not_w3 = predicate_from(lambda o: o["metadata"]["name"] != "w3")
    regs = [
        await Kind("v1/ConfigMap").start_for_cluster("east", cluster, fast, sync_timeout=10),
        await Kind("v1/ConfigMap", EnqueueRequestForObject(), not_w3).start_for_cluster(
            "east", cluster, filtered, sync_timeout=10
        ),
    ]
    informer = await cluster.cache.get_informer("v1/ConfigMap")
    names = [f"w{i}" for i in range(8)]

    def take_all(q: WorkQueue[Request]) -> dict[Request, int]:
        out = {item: info[0] for item, info in q._queued.items()}
        while (item := q.get_nowait()) is not None:
            q.done(item)
        return out

    def data_round(name: str) -> str | None:
        obj = informer.get(f"default/{name}")
        return None if obj is None else obj["data"]["round"]

    everyone = {Request("default", name, "east"): 0 for name in names}
    but_w3 = {r: p for r, p in everyone.items() if r.name != "w3"}
    try:
        take_all(fast), take_all(filtered)  # the ConfigMaps listed at start (a real cluster has some)
        await put(names, 0)  # adds
        await eventually(lambda: all(data_round(n) == "0" for n in names))
        assert take_all(fast) == everyone
        assert take_all(filtered) == but_w3
        await put(names, 1)  # updates
        await eventually(lambda: all(data_round(n) == "1" for n in names))
        assert take_all(fast) == everyone
        assert take_all(filtered) == but_w3
        await remove(names)  # deletes
        await eventually(lambda: all(data_round(n) is None for n in names))
        assert take_all(fast) == everyone
        assert take_all(filtered) == but_w3
    finally:
        for reg in regs:
            reg.remove()


@pytest.mark.parametrize("writer", WRITERS)
async def test_watch_bursts_of_cluster_scoped_objects_enqueue_requests_without_a_namespace(
    env: tuple[Cluster, Client], apiserver: Any, writer: str
) -> None:
    """The bulk path makes requests from the keys the informer's notes carry: a cluster-scoped
    object's request has namespace ``""``, the same as the per-event path (a predicate) makes."""
    cluster, admin = env
    fast: WorkQueue[Request] = WorkQueue()
    per_event: WorkQueue[Request] = WorkQueue()
    regs = [
        await Kind("v1/Namespace").start_for_cluster("east", cluster, fast, sync_timeout=10),
        await Kind("v1/Namespace", None, predicate_from(lambda o: True)).start_for_cluster(
            "east", cluster, per_event, sync_timeout=10
        ),
    ]
    informer = await cluster.cache.get_informer("v1/Namespace")
    names = [f"scope-{i}" for i in range(6)]

    def drain(q: WorkQueue[Request]) -> set[Request]:
        out = set()
        while (item := q.get_nowait()) is not None:
            q.done(item)
            out.add(item)
        return out

    try:
        drain(fast), drain(per_event)  # the namespaces listed at start (low priority)
        for round_ in range(2):  # adds, then updates, each committed back to back
            spaces = [
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": n, "labels": {"round": str(round_)}},
                }
                for n in names
            ]
            if writer == "store":
                for ns in spaces:
                    apiserver.store.commit("", "namespaces", ns)
            elif round_ == 0:
                await asyncio.gather(*(admin.create(ns) for ns in spaces))
            else:
                await asyncio.gather(*(admin.patch(ns, patch={"metadata": ns["metadata"]}) for ns in spaces))
            await eventually(
                lambda r=str(round_): all(
                    (o := informer.get(n)) is not None and o["metadata"]["labels"]["round"] == r
                    for n in names
                )
            )
            expected = {Request("", name, "east") for name in names}
            assert drain(fast) == expected
            assert drain(per_event) == expected
    finally:
        for reg in regs:
            reg.remove()


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
