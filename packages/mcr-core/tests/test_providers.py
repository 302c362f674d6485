"""The utility providers (clusters, single, nop, multi) against a fleet of envtest servers."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mcr.cluster import Cluster
from mcr.errors import ClusterNotFoundError
from mcr.manager import Manager
from mcr.multicluster import Provider, ProviderRunnable
from mcr.providers import ClustersProvider, MultiProvider, NopProvider, ProviderFailedError, SingleProvider
from mcr.rest.config import RestConfig
from mcr.testing import RecordingAware, check_provider, eventually
from mcr.testing.conformance import cache_index_probe, index_extract

MakeCluster = Callable[[str], Cluster]


@pytest.fixture
async def make_cluster(fleet: Any) -> AsyncIterator[MakeCluster]:
    """Clusters for a fleet of 3 servers, round-robin; each call builds a new cluster object.

    Every cluster made is stopped at teardown (idempotent), so none leaks a connection even when
    a provider never took it over.
    """
    servers = fleet(3).servers
    cycle = itertools.cycle(servers)
    made: list[Cluster] = []

    def make(name: str) -> Cluster:
        cluster = Cluster.from_kubeconfig(next(cycle).kubeconfig, name=name)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        await cluster.stop()


@pytest.fixture
async def running() -> AsyncIterator[Callable[[Any, Any], asyncio.Task[None]]]:
    """Start providers in tasks that are cancelled and awaited at the end of the test."""
    tasks: list[asyncio.Task[None]] = []

    def start(provider: Any, aware: Any) -> asyncio.Task[None]:
        task = asyncio.create_task(provider.start(aware))
        tasks.append(task)
        return task

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def test_protocols_are_implemented() -> None:
    for provider in (ClustersProvider(), MultiProvider(), NopProvider()):
        assert isinstance(provider, Provider)
        assert isinstance(provider, ProviderRunnable)


async def test_clusters_conformance(make_cluster: MakeCluster) -> None:
    provider = ClustersProvider()
    await provider.add("first", make_cluster("first"))
    counter = itertools.count()

    async def add() -> str:
        name = f"added-{next(counter)}"
        await provider.add(name, make_cluster(name))
        return name

    async def change(name: str) -> None:
        assert await provider.add_or_replace(name, make_cluster(name))

    await check_provider(
        provider,
        existing=["first"],
        add_cluster=add,
        change_cluster=change,
        remove_cluster=provider.remove,
        index_probe=cache_index_probe,
    )


async def test_single_conformance(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("only")
    provider = SingleProvider("only", cluster, start_cluster=True)
    assert isinstance(provider, ProviderRunnable)
    await check_provider(provider, existing=["only"], index_probe=cache_index_probe)


async def test_multi_conformance(make_cluster: MakeCluster) -> None:
    provider = MultiProvider()
    inner = ClustersProvider()
    await provider.add_provider("inner", inner)
    await provider.add_provider("other", ClustersProvider())
    counter = itertools.count()

    async def add() -> str:
        name = f"c{next(counter)}"
        await inner.add(name, make_cluster(name))
        return f"inner#{name}"

    async def change(name: str) -> None:
        inner_name = name.split("#", 1)[1]
        assert await inner.add_or_replace(inner_name, make_cluster(inner_name))

    async def remove(name: str) -> None:
        assert await inner.remove(name.split("#", 1)[1])

    await check_provider(
        provider, add_cluster=add, change_cluster=change, remove_cluster=remove, index_probe=cache_index_probe
    )


async def test_nop_has_no_clusters(running: Any) -> None:
    provider = NopProvider()
    aware = RecordingAware()
    task = running(provider, aware)
    with pytest.raises(ClusterNotFoundError, match="'x'"):
        await provider.get("x")
    with pytest.raises(LookupError):
        await provider.get("")
    await provider.index_field("v1/ConfigMap", "f", lambda o: [])
    await asyncio.sleep(0)
    assert not task.done()
    assert aware.history == []


async def test_clusters_add_rules(make_cluster: MakeCluster, running: Any) -> None:
    provider = ClustersProvider()
    cluster = make_cluster("a")
    await provider.add("a", cluster)
    with pytest.raises(ValueError, match="'a' is already registered"):
        await provider.add("a", make_cluster("a"))
    assert await provider.add_or_replace("a", cluster) is False  # same object: nothing to do
    aware = RecordingAware()
    running(provider, aware)
    await eventually(lambda: "a" in aware.engaged)
    assert await provider.remove("a") is True
    assert await provider.remove("a") is False  # idempotent
    assert aware.history[0].ended
    assert provider.names() == []
    with pytest.raises(ClusterNotFoundError, match="'a'"):
        await provider.get("a")


async def test_clusters_start_twice_is_refused(running: Any) -> None:
    provider = ClustersProvider()
    running(provider, RecordingAware())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="already running"):
        await provider.start(RecordingAware())


async def test_failing_engage_drops_only_that_cluster(
    make_cluster: MakeCluster, running: Any, caplog: pytest.LogCaptureFixture
) -> None:
    class PickyAware(RecordingAware):
        async def engage(self, name: str, cluster: Cluster) -> None:
            if name == "bad":
                raise RuntimeError("cannot engage this one")
            await super().engage(name, cluster)

    provider = ClustersProvider()
    await provider.add("good", make_cluster("good"))
    await provider.add("bad", make_cluster("bad"))
    aware = PickyAware()
    with caplog.at_level(logging.ERROR, logger="mcr.providers"):
        running(provider, aware)
        await eventually(lambda: provider.names() == ["good"], message="bad cluster dropped")
    assert "good" in aware.engaged
    assert any("'bad'" in r.getMessage() for r in caplog.records)


async def test_multi_add_and_remove_providers_at_runtime(make_cluster: MakeCluster, running: Any) -> None:
    multi = MultiProvider()
    aware = RecordingAware()
    running(multi, aware)
    east, west = ClustersProvider(), ClustersProvider()
    await east.add("zoo", make_cluster("zoo"))
    await west.add("zoo", make_cluster("zoo"))
    await multi.add_provider("east", east)
    await multi.add_provider("west", west)
    await eventually(lambda: set(aware.engaged) == {"east#zoo", "west#zoo"})
    assert await multi.get("west#zoo") is aware.engaged["west#zoo"]

    with pytest.raises(ValueError, match="'east' is already"):
        await multi.add_provider("east", ClustersProvider())
    with pytest.raises(ValueError, match="separator"):
        await multi.add_provider("a#b", ClustersProvider())
    with pytest.raises(ClusterNotFoundError, match=r"no provider 'south'.*east, west"):
        await multi.get("south#zoo")
    with pytest.raises(ClusterNotFoundError):
        await multi.get("east#lion")

    # Removing a provider disengages exactly its clusters.
    assert await multi.remove_provider("east") is True
    assert set(aware.engaged) == {"west#zoo"}
    assert [e.ended for e in aware.engagements("east#zoo")] == [True]
    assert multi.provider_names() == ["west"]
    with pytest.raises(ClusterNotFoundError):
        await multi.get("east#zoo")
    assert await multi.remove_provider("east") is False


async def test_multi_removal_disengages_even_if_member_leaks(make_cluster: MakeCluster, running: Any) -> None:
    class LeakyProvider:
        """Engages from a task it never cancels (a misbehaving third-party provider)."""

        def __init__(self, cluster: Cluster) -> None:
            self.cluster = cluster
            self.leaked: asyncio.Task[None] | None = None

        async def get(self, name: str) -> Cluster:
            if name != "c":
                raise ClusterNotFoundError(name)
            return self.cluster

        async def index_field(self, kind: Any, field: str, extract: Any) -> None:
            await self.cluster.index_field(kind, field, extract)

        async def start(self, aware: Any) -> None:
            self.leaked = asyncio.create_task(aware.engage("c", self.cluster))
            await asyncio.Future()

    leaky = LeakyProvider(make_cluster("c"))
    multi = MultiProvider()
    await multi.add_provider("leaky", leaky)
    aware = RecordingAware()
    running(multi, aware)
    await eventually(lambda: "leaky#c" in aware.engaged)
    await multi.remove_provider("leaky")
    assert "leaky#c" not in aware.engaged
    assert leaky.leaked is not None
    assert leaky.leaked.cancelled()


class Quitter(NopProvider):
    """A member whose start fails at once."""

    async def start(self, aware: Any) -> None:
        raise RuntimeError("gave up")


async def test_multi_required_member_that_fails_fails_the_multi_provider(
    make_cluster: MakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    fine = ClustersProvider()
    await fine.add("c", make_cluster("c"))
    multi = MultiProvider()
    await multi.add_provider("fine", fine)
    await multi.add_provider("quitter", Quitter())
    aware = RecordingAware()
    with (
        caplog.at_level(logging.ERROR, logger="mcr.providers"),
        pytest.raises(
            ProviderFailedError,
            match="provider 'quitter' of the multi provider failed: RuntimeError: gave up",
        ) as err,
    ):
        await asyncio.wait_for(multi.start(aware), 20)
    assert err.value.provider_name == "quitter"
    assert isinstance(err.value.__cause__, RuntimeError)
    # Every other member was stopped and its clusters disengaged before start raised.
    assert aware.engaged == {}
    assert all(e.ended for e in aware.engagements("fine#c"))
    assert any("'quitter'" in r.getMessage() and "gave up" in r.getMessage() for r in caplog.records)
    assert multi.failures() == {"quitter": "RuntimeError: gave up"}


async def test_multi_optional_member_that_fails_is_reported_not_dropped_silently(
    make_cluster: MakeCluster, running: Any
) -> None:
    class Returner(NopProvider):
        async def start(self, aware: Any) -> None:
            return None

    fine = ClustersProvider()
    await fine.add("c", make_cluster("c"))
    multi = MultiProvider()
    await multi.add_provider("fine", fine)
    mgr = Manager(provider=multi, metrics_bind_address="0")
    assert await mgr.readyz.run("provider") is None
    aware = RecordingAware()
    task = running(multi, aware)
    await eventually(lambda: "fine#c" in aware.engaged)
    await multi.add_provider("quitter", Quitter(), required=False)
    await multi.add_provider("returner", Returner(), required=False)
    await eventually(lambda: len(multi.failures()) == 2, message="both failures recorded")
    assert multi.failures() == {
        "quitter": "RuntimeError: gave up",
        "returner": "its start() returned while it should run until cancelled",
    }
    assert multi.provider_names() == ["fine"]
    # The manager's readiness shows it, naming the providers; the rest of the fleet runs on.
    why = await mgr.readyz.run("provider")
    assert why is not None
    assert "provider 'quitter' failed: RuntimeError: gave up" in why
    assert "'returner'" in why
    assert not task.done()
    assert "fine#c" in aware.engaged
    # Removing (or adding again) a failed member forgets its failure.
    assert await multi.remove_provider("quitter") is False
    await multi.add_provider("returner", NopProvider(), required=False)
    assert multi.failures() == {}
    assert await mgr.readyz.run("provider") is None


async def test_multi_indexes_apply_to_later_providers(make_cluster: MakeCluster, running: Any) -> None:
    multi = MultiProvider()
    await multi.index_field("v1/ConfigMap", "conformance", index_extract)
    member = ClustersProvider()
    cluster = make_cluster("late")
    await member.add("late", cluster)
    await multi.add_provider("later", member)
    aware = RecordingAware()
    running(multi, aware)
    await eventually(lambda: "later#late" in aware.engaged)
    await eventually(lambda: cache_index_probe(cluster, "conformance"), message="index on the later member")


async def test_clusters_provider_owns_cluster_lifecycle(make_cluster: MakeCluster, running: Any) -> None:
    provider = ClustersProvider()
    first, second = make_cluster("a"), make_cluster("a")
    await provider.add("a", first)
    aware = RecordingAware()
    task = running(provider, aware)
    await eventually(lambda: aware.engaged.get("a") is first)
    assert first.started  # started before it was engaged
    assert await provider.add_or_replace("a", second)
    assert not first.started  # replaced: disengaged, then stopped (connections closed)
    await eventually(lambda: aware.engaged.get("a") is second)
    assert second.started
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not second.started
    assert [e.ended for e in aware.history] == [True, True]


async def test_clusters_started_by_the_caller_are_left_alone(make_cluster: MakeCluster, running: Any) -> None:
    provider = ClustersProvider(start_clusters=False)
    cluster = make_cluster("mine")
    async with cluster:
        await provider.add("mine", cluster)
        aware = RecordingAware()
        running(provider, aware)
        await eventually(lambda: "mine" in aware.engaged)
        await provider.remove("mine")
        assert aware.history[0].ended
        assert cluster.started  # still the caller's to stop
        namespaces = await cluster.api_reader.list("v1/Namespace")
        assert namespaces


async def test_clusters_concurrent_changes_stay_consistent(make_cluster: MakeCluster, running: Any) -> None:
    """Many tasks adding, replacing, removing, reading and indexing at once (upstream's stress test)."""
    provider = ClustersProvider()
    aware = RecordingAware()
    running(provider, aware)
    rng = random.Random(7)
    made: list[Cluster] = []
    indexed: set[str] = set()

    async def worker(seed: int) -> None:
        local = random.Random(seed)
        for _ in range(15):
            name = f"c{local.randrange(6)}"
            op = local.randrange(5)
            if op in (0, 1):
                cluster = make_cluster(name)
                made.append(cluster)
                await provider.add_or_replace(name, cluster)
            elif op == 2:
                await provider.remove(name)
            elif op == 3:
                with contextlib.suppress(ClusterNotFoundError):
                    await provider.get(name)
            else:
                field = f"f{local.randrange(3)}"
                if field in indexed:
                    with pytest.raises(ValueError, match="already indexed"):
                        await provider.index_field("v1/ConfigMap", field, index_extract)
                else:
                    indexed.add(field)
                    await provider.index_field("v1/ConfigMap", field, index_extract)
            await asyncio.sleep(0)

    await asyncio.gather(*(worker(rng.randrange(1 << 30)) for _ in range(20)))

    names = provider.names()
    await eventually(lambda: set(aware.engaged) == set(names), message="engaged set matches the provider")
    for name in names:
        assert aware.engaged[name] is await provider.get(name)
        assert len(aware.active(name)) == 1
    current = {id(aware.engaged[n]) for n in names}
    for cluster in made:
        # Every cluster that is no longer registered was disengaged and stopped (or never started).
        assert cluster.started == (id(cluster) in current)
    # Every registered cluster has every index, however the registrations interleaved.
    for name in names:
        for field in indexed:
            await eventually(lambda n=name, f=field: cache_index_probe(aware.engaged[n], f))


async def test_unreachable_cluster_is_engaged_and_indexed_once_reachable(
    fleet: Any, running: Any, caplog: pytest.LogCaptureFixture
) -> None:
    down, up = fleet(2).servers
    provider = ClustersProvider()
    await provider.index_field("v1/ConfigMap", "conformance", index_extract)
    down.stop()  # keeps its port and state; started again below
    config = RestConfig.from_kubeconfig(down.kubeconfig).copy(max_retries=0, connect_timeout=1.0)
    await provider.add("down", Cluster(config, name="down"))
    await provider.add("up", Cluster.from_kubeconfig(up.kubeconfig, name="up"))
    aware = RecordingAware()
    with caplog.at_level(logging.WARNING, logger="mcr.providers"):
        running(provider, aware)
        # Neither waits for the other; the unreachable one is engaged too (its aware reports it).
        await eventually(lambda: set(aware.engaged) == {"down", "up"}, timeout=20)
        await eventually(
            lambda: any("indexing cluster 'down' failed" in r.getMessage() for r in caplog.records)
        )
    assert await cache_index_probe(aware.engaged["up"], "conformance")
    down.start()
    await eventually(
        lambda: cache_index_probe(aware.engaged["down"], "conformance"),
        timeout=30,
        message="index applied once the cluster is reachable",
    )
