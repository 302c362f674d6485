"""The conformance suite itself: it passes a correct provider and catches each kind of violation."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcr.cluster import Cluster
from mcr.errors import ClusterNotFoundError
from mcr.providers import ClustersProvider
from mcr.providers.tasks import cancel_and_wait
from mcr.testing import RecordingAware, check_provider, eventually

MADE: list[Cluster] = []


@pytest.fixture
async def servers(fleet: Any) -> AsyncIterator[list[Any]]:
    yield list(fleet(2).servers)
    while MADE:  # clusters a broken provider never stopped
        await MADE.pop().stop()


def scripted(provider: ClustersProvider, servers: list[Any]) -> dict[str, Any]:
    """add/change/remove callbacks for a ClustersProvider over ``servers``."""
    counter = itertools.count()

    def make(name: str) -> Cluster:
        cluster = Cluster.from_kubeconfig(servers[next(counter) % len(servers)].kubeconfig, name=name)
        MADE.append(cluster)
        return cluster

    async def add() -> str:
        name = f"c{next(counter)}"
        await provider.add(name, make(name))
        return name

    async def change(name: str) -> None:
        await provider.add_or_replace(name, make(name))

    return {"add_cluster": add, "change_cluster": change, "remove_cluster": provider.remove, "timeout": 3.0}


async def test_recording_aware_holds_until_cancelled(servers: list[Any]) -> None:
    aware = RecordingAware()
    cluster = Cluster.from_kubeconfig(servers[0].kubeconfig, name="a")
    MADE.append(cluster)
    task = asyncio.create_task(aware.engage("a", cluster))
    await eventually(lambda: aware.engaged.get("a") is cluster)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert aware.engaged == {}
    assert [(e.name, e.cluster, e.ended) for e in aware.history] == [("a", cluster, True)]


async def test_a_correct_provider_passes(servers: list[Any]) -> None:
    provider = ClustersProvider()
    await check_provider(provider, **scripted(provider, servers))


async def test_needs_some_cluster() -> None:
    with pytest.raises(ValueError, match="existing clusters or add_cluster"):
        await check_provider(ClustersProvider())


class KeepsRemovedEngaged(ClustersProvider):
    def __init__(self) -> None:
        super().__init__()
        self.orphans: list[asyncio.Task[None]] = []  # the engagements it failed to end, for cleanup

    async def remove(self, name: str) -> bool:
        entry = self._clusters._entries.pop(name)  # forgets the name but never cancels the engagement
        if entry.task is not None:
            self.orphans.append(entry.task)
        return True


class WrongNotFoundError(ClustersProvider):
    async def get(self, name: str) -> Cluster:
        try:
            return await super().get(name)
        except ClusterNotFoundError:
            raise KeyError(name) from None


class IndexesOnlyCurrentClusters(ClustersProvider):
    async def index_field(self, kind: Any, field: str, extract: Any) -> None:
        for name in self.names():
            await (await self.get(name)).index_field(kind, field, extract)


class SwallowsCancellation(ClustersProvider):
    async def start(self, aware: Any) -> None:
        try:
            await super().start(aware)
        except asyncio.CancelledError:
            return


class IgnoresChanges(ClustersProvider):
    async def add_or_replace(self, name: str, cluster: Cluster) -> bool:
        return False


@pytest.mark.parametrize(
    ("broken", "complaint"),
    [
        (KeepsRemovedEngaged, "disengaged after removal"),
        (WrongNotFoundError, "not a ClusterNotFoundError"),
        (IndexesOnlyCurrentClusters, "field index applied to cluster"),
        (SwallowsCancellation, "swallowed its cancellation"),
        (IgnoresChanges, "re-engaged after a change"),
    ],
)
async def test_violations_are_caught(
    broken: type[ClustersProvider], complaint: str, servers: list[Any]
) -> None:
    provider = broken()
    try:
        with pytest.raises(AssertionError, match=complaint):
            await check_provider(provider, **scripted(provider, servers))
    finally:
        # The broken provider leaves engagements running; end them before the test's loop closes.
        await cancel_and_wait(getattr(provider, "orphans", []))
