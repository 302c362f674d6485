"""Utility providers driving a real Manager and controller (the manager is the Aware)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcr.builder import controller_managed_by
from mcr.cluster import Cluster
from mcr.errors import ClusterNotFoundError
from mcr.manager import Manager
from mcr.providers import ClustersProvider, MultiProvider
from mcr.reconcile import Request
from mcr.testing import eventually


@pytest.fixture
async def started() -> AsyncIterator[Any]:
    """``started(mgr)`` runs the manager in a task; stopped and awaited at teardown."""
    runs: list[tuple[Manager, asyncio.Task[None]]] = []

    def start(mgr: Manager) -> None:
        runs.append((mgr, asyncio.create_task(mgr.start(handle_signals=False))))

    yield start
    for mgr, task in runs:
        mgr.stop()
        await asyncio.wait_for(task, 30)


async def seed(server: Any, name: str) -> None:
    async with Cluster.from_kubeconfig(server.kubeconfig, name="seeder") as cluster:
        await cluster.client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
        )


def recording_manager(provider: Any) -> tuple[Manager, set[tuple[str, str]]]:
    mgr = Manager(provider=provider, metrics_bind_address="0")
    seen: set[tuple[str, str]] = set()

    async def reconcile(req: Request) -> None:
        seen.add((req.cluster_name, req.name))

    controller_managed_by(mgr).named("record-configmaps").for_("v1/ConfigMap").complete(reconcile)
    return mgr, seen


async def test_clusters_provider_with_manager(fleet: Any, started: Any) -> None:
    servers = fleet(2).servers
    for i, server in enumerate(servers):
        await seed(server, f"cm-{i}")
    provider = ClustersProvider()
    mgr, seen = recording_manager(provider)
    await provider.add("zoo", Cluster.from_kubeconfig(servers[0].kubeconfig, name="zoo"))
    started(mgr)
    await eventually(lambda: ("zoo", "cm-0") in seen, timeout=30)

    await provider.add("jungle", Cluster.from_kubeconfig(servers[1].kubeconfig, name="jungle"))
    await eventually(lambda: ("jungle", "cm-1") in seen, timeout=30)
    assert {info.name for info in mgr.clusters()} >= {"zoo", "jungle"}

    await provider.remove("zoo")
    await eventually(lambda: "zoo" not in {info.name for info in mgr.clusters()}, timeout=30)
    with pytest.raises(ClusterNotFoundError):
        await mgr.get_cluster("zoo")
    await seed(servers[1], "after")
    await eventually(lambda: ("jungle", "after") in seen, timeout=30)


async def test_multi_provider_with_manager(fleet: Any, started: Any) -> None:
    servers = fleet(2).servers
    for i, server in enumerate(servers):
        await seed(server, f"cm-{i}")
    east, west = ClustersProvider(), ClustersProvider()
    await east.add("zoo", Cluster.from_kubeconfig(servers[0].kubeconfig, name="east#zoo"))
    await west.add("zoo", Cluster.from_kubeconfig(servers[1].kubeconfig, name="west#zoo"))
    multi = MultiProvider()
    await multi.add_provider("east", east)
    mgr, seen = recording_manager(multi)
    started(mgr)
    await eventually(lambda: ("east#zoo", "cm-0") in seen, timeout=30)

    await multi.add_provider("west", west)  # at runtime
    await eventually(lambda: ("west#zoo", "cm-1") in seen, timeout=30)
    await multi.remove_provider("east")
    await eventually(lambda: "east#zoo" not in {info.name for info in mgr.clusters()}, timeout=30)
    assert "west#zoo" in {info.name for info in mgr.clusters()}
