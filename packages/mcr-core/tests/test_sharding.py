"""Sharding: rendezvous hashing and fence names; replicas in one process (membership, owners in
Manager.clusters(), metrics, leader election). The multi-process guarantees are in
test_sharding_processes.py."""

from __future__ import annotations

import asyncio
import itertools
import math
import statistics
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from mcr import metrics
from mcr.builder import controller_managed_by
from mcr.cluster import Cluster
from mcr.manager import Manager
from mcr.providers import ClustersProvider
from mcr.rest.config import RestConfig
from mcr.sharding import ShardedCoordinator, fence_name, owner, score
from mcr.testing import eventually

FAST = {"lease_duration": 2.0, "renew_period": 0.5, "retry_period": 0.2, "peer_ttl": 2.0}


def test_weighted_rendezvous_shares_clusters_by_weight_and_moves_few() -> None:
    clusters = [f"cluster-{i}" for i in range(6000)]
    peers = {"a": 1.0, "b": 1.0, "c": 2.0}
    owners = {c: owner(c, peers) for c in clusters}
    shares = Counter(owners.values())
    # Shares follow the weights (1:1:2) within 3 %.
    assert abs(shares["c"] / len(clusters) - 0.5) < 0.03, shares
    assert abs(shares["a"] / len(clusters) - 0.25) < 0.03, shares
    # Stable: the same inputs give the same owners, whatever the dict order.
    assert {c: owner(c, dict(reversed(list(peers.items())))) for c in clusters} == owners
    # A peer joining takes clusters only for itself; one leaving gives away only its own.
    joined = {c: owner(c, {**peers, "d": 1.0}) for c in clusters}
    assert all(joined[c] in (owners[c], "d") for c in clusters)
    assert abs(sum(joined[c] == "d" for c in clusters) / len(clusters) - 0.2) < 0.03
    left = {c: owner(c, {"a": 1.0, "c": 2.0}) for c in clusters}
    assert all(left[c] == owners[c] for c in clusters if owners[c] != "b")
    assert owner("x", {}) is None


def test_scores_are_finite_for_huge_weights_and_invalid_weights_are_refused() -> None:
    # -ln(u)/w never overflows: no multiply of a 64-bit hash by the weight, u never 0 or 1.
    values = [score(f"c{i}", "p", 1e300) for i in range(1000)] + [
        score(f"c{i}", "p", 1e-300) for i in range(10)
    ]
    assert all(math.isfinite(v) and v > 0 for v in values)
    heavy = Counter(owner(f"c{i}", {"light": 1.0, "heavy": 1e9}) for i in range(2000))
    assert heavy["heavy"] == 2000
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="weight must be a positive number"):
            score("c", "p", bad)
    # The exponential scores of one peer have mean 1/w (a sanity check of the distribution).
    assert abs(statistics.mean(score(f"c{i}", "p", 2.0) for i in range(20000)) - 0.5) < 0.02


def test_fence_names_are_valid_short_and_distinct() -> None:
    names = ["a_b", "a-b", "A-B", "/tmp/fleet/m1.kubeconfig+kind-m1", "x" * 300, "ns/name", "Ünïcode", "---"]
    fences = [fence_name("mcr-shard", n) for n in names]
    assert len(set(fences)) == len(names)
    for f in fences:
        assert len(f) <= 63
        assert f[0].isalnum()
        assert f[-1].isalnum()
        assert set(f) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")
    assert fence_name("mcr-shard", "zoo").startswith("mcr-shard-zoo-")
    assert fence_name("mcr-shard", "zoo") == fence_name("mcr-shard", "zoo")
    with pytest.raises(ValueError, match="too long"):
        fence_name("p" * 60, "x")


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="renew_period"):
        ShardedCoordinator(lease_duration=1.0, renew_period=1.0)
    with pytest.raises(ValueError, match=r"renew_deadline \(10\.0\) must be shorter than lease_duration"):
        ShardedCoordinator(lease_duration=10.0, renew_deadline=10.0)
    with pytest.raises(ValueError, match=r"renew_period \(3\.0\) must be shorter than renew_deadline \(3"):
        ShardedCoordinator(lease_duration=10.0, renew_deadline=3.0, renew_period=3.0)
    for option in ("lease_duration", "renew_deadline", "renew_period", "retry_period", "peer_ttl"):
        for bad in (0.0, -1.0, float("nan"), float("inf")):
            with pytest.raises(ValueError, match=f"{option} must be a positive number of seconds"):
                ShardedCoordinator(**{option: bad})
    with pytest.raises(ValueError, match="drain_timeout must be"):
        ShardedCoordinator(drain_timeout=-1.0)
    with pytest.raises(ValueError, match="weight must be positive"):
        ShardedCoordinator(weight=0)
    with pytest.raises(TypeError, match="sharder must be a function"):
        ShardedCoordinator(sharder="alpha")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="identity 'alpha' differs from the peer registry's \\('beta'\\)"):
        ShardedCoordinator(identity="alpha", peer_registry=Membership({}).registry("beta"))
    c = ShardedCoordinator()
    assert c.peer_ttl == c.lease_duration
    assert c.renew_deadline == pytest.approx(10.0)  # client-go's 10 s of a 15 s lease
    assert c.peer_lease_name.startswith("mcr-peer-")
    assert ShardedCoordinator(peer_registry=Membership({}).registry("beta")).identity == "beta"


class Membership:
    """A membership the test decides: every replica's registry reads the same mapping."""

    def __init__(self, peers: dict[str, float]) -> None:
        self.peers = peers
        self.listeners: list[Any] = []

    def registry(self, identity: str) -> Any:
        membership = self

        class Registry:
            def __init__(self) -> None:
                self.identity = identity

            def peers(self) -> dict[str, float]:
                return dict(membership.peers)

            async def run(self, changed: Any) -> None:
                membership.listeners.append(changed)
                changed()
                await asyncio.get_running_loop().create_future()

        return Registry()

    def change(self, peers: dict[str, float]) -> None:
        self.peers = peers
        for changed in self.listeners:
            changed()


_serial = itertools.count()


async def _replica(
    host: Any, members: list[Any], identity: str, coordinator: dict[str, Any] | None = None, **manager: Any
) -> tuple[Manager, list[str]]:
    provider = ClustersProvider()
    for i, server in enumerate(members):
        await provider.add(f"member-{i}", Cluster.from_kubeconfig(server.kubeconfig, name=f"member-{i}"))
    options = {"identity": identity, **(coordinator or {})}
    if "peer_registry" in options:
        del options["identity"]
    sharded = ShardedCoordinator(namespace="default", **FAST, **options)
    mgr = Manager(
        RestConfig.from_kubeconfig(host.kubeconfig),
        provider=provider,
        coordinator=sharded,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        identity=identity,
        **manager,
    )
    seen: list[str] = []

    async def reconcile(req: Any) -> None:
        seen.append(req.cluster_name)

    controller_managed_by(mgr).named(f"sharded-{identity}-{next(_serial)}").for_("v1/Namespace").complete(
        reconcile
    )
    return mgr, seen


def _owners(mgr: Manager) -> dict[str, tuple[str | None, bool]]:
    return {i.name: (i.owner, i.running) for i in mgr.clusters() if i.name}


async def test_two_replicas_split_the_clusters_and_report_owners(fleet: Any) -> None:
    servers = fleet(5).servers
    host, members = servers[0], servers[1:]
    a, seen_a = await _replica(host, members, "alpha")
    b, seen_b = await _replica(host, members, "beta")
    tasks = [asyncio.create_task(m.start(handle_signals=False)) for m in (a, b)]
    try:
        expected = {f"member-{i}": owner(f"member-{i}", {"alpha": 1.0, "beta": 1.0}) for i in range(4)}

        def split() -> bool:
            return all(
                _owners(m) == {n: (o, o == me) for n, o in expected.items()}
                for m, me in ((a, "alpha"), (b, "beta"))
            )

        await eventually(split, timeout=20, message="owners agreed and running where owned")
        coordinator = a.coordinator
        assert isinstance(coordinator, ShardedCoordinator)
        assert coordinator.peers() == {"alpha": 1.0, "beta": 1.0}
        assert coordinator.owned() == sorted(n for n, o in expected.items() if o == "alpha")
        await eventually(lambda: {c for c in seen_a} == set(coordinator.owned()), timeout=20)
        assert not set(seen_a) & set(seen_b), "a cluster reconciled on both replicas"
        assert metrics.REGISTRY.get_sample_value("mcr_sharding_peers") == 2
        assert metrics.REGISTRY.get_sample_value("mcr_sharding_acquisitions_total") >= len(expected)
    finally:
        for m in (a, b):
            m.stop()
        await asyncio.gather(*tasks)


async def test_with_leader_election_the_leader_owns_every_cluster(fleet: Any) -> None:
    servers = fleet(3).servers
    host, members = servers[0], servers[1:]
    le = {
        "leader_election": True,
        "leader_election_id": "sharded-le",
        "leader_election_namespace": "default",
        # Client-go's timings: the standby never takes over here, and a loaded machine can take
        # longer than a short deadline to answer a renewal (test_leader_* cover fast timings).
        "lease_duration": 15.0,
        "renew_deadline": 10.0,
        "retry_period": 0.5,
    }
    a, seen_a = await _replica(host, members, "first", **le)
    task_a = asyncio.create_task(a.start(handle_signals=False))
    await eventually(lambda: a.elected.is_set(), timeout=10)
    b, seen_b = await _replica(host, members, "second", **le)
    task_b = asyncio.create_task(b.start(handle_signals=False))
    try:
        await eventually(lambda: set(seen_a) == {"member-0", "member-1"}, timeout=20)
        coordinator = b.coordinator
        assert isinstance(coordinator, ShardedCoordinator)
        # The standby announces nothing, owns nothing, reconciles nothing.
        assert coordinator.peers() == {}
        assert coordinator.owned() == []
        assert seen_b == []
        assert {i.name: i.running for i in b.clusters() if i.name} == {"member-0": False, "member-1": False}
    finally:
        for m in (a, b):
            m.stop()
        await asyncio.gather(task_a, task_b)


async def _leases(host: Any, role: str) -> dict[str, str]:
    """The sharding Leases of ``role`` (``peer`` or ``fence``) on the host: name → holder."""
    async with Cluster.from_kubeconfig(host.kubeconfig, name="observer") as observer:
        leases = await observer.api_reader.list(
            "coordination.k8s.io/v1/Lease", namespace="default", label_selector={"sharding.mcr.io/role": role}
        )
    return {
        lease["metadata"]["name"]: (lease.get("spec") or {}).get("holderIdentity") or "" for lease in leases
    }


async def _split(replicas: dict[str, Manager], expected: dict[str, str | None]) -> None:
    def check() -> bool:
        return all(_owners(m) == {n: (o, o == me) for n, o in expected.items()} for me, m in replicas.items())

    await eventually(check, timeout=20, message=f"owners {expected} agreed and running where owned")


async def test_a_custom_sharder_decides_the_owners(fleet: Any) -> None:
    servers = fleet(4).servers
    host, members = servers[0], servers[1:]

    def pinned(cluster: str, peers: Mapping[str, float]) -> str | None:
        """member-0 on beta, the rest on alpha (while both are up)."""
        if not peers:
            return None
        if cluster == "member-0" and "beta" in peers:
            return "beta"
        return "alpha" if "alpha" in peers else min(peers)

    a, _ = await _replica(host, members, "alpha", {"sharder": pinned})
    b, _ = await _replica(host, members, "beta", {"sharder": pinned})
    tasks = [asyncio.create_task(m.start(handle_signals=False)) for m in (a, b)]
    try:
        await _split({"alpha": a, "beta": b}, {"member-0": "beta", "member-1": "alpha", "member-2": "alpha"})
        assert sorted((await _leases(host, "fence")).values()) == ["alpha", "alpha", "beta"]
        b.stop()
        await asyncio.wait_for(tasks[1], 30)
        await _split({"alpha": a}, {"member-0": "alpha", "member-1": "alpha", "member-2": "alpha"})
    finally:
        for m in (a, b):
            m.stop()
        await asyncio.gather(*tasks)


async def test_a_custom_peer_registry_decides_the_membership(fleet: Any) -> None:
    servers = fleet(5).servers
    host, members = servers[0], servers[1:]
    membership = Membership({"alpha": 1.0, "beta": 1.0})
    a, _ = await _replica(host, members, "alpha", {"peer_registry": membership.registry("alpha")})
    b, _ = await _replica(host, members, "beta", {"peer_registry": membership.registry("beta")})
    tasks = [asyncio.create_task(m.start(handle_signals=False)) for m in (a, b)]
    try:
        both = {f"member-{i}": owner(f"member-{i}", {"alpha": 1.0, "beta": 1.0}) for i in range(4)}
        await _split({"alpha": a, "beta": b}, both)
        assert await _leases(host, "peer") == {}, "the registry, not peer Leases, tells the members"
        assert len(await _leases(host, "fence")) == 4, "the clusters are still fenced"
        membership.change({"alpha": 1.0})  # beta leaves (by the registry's word): alpha takes over
        await _split({"alpha": a, "beta": b}, dict.fromkeys(both, "alpha"))
        assert set((await _leases(host, "fence")).values()) <= {"alpha", ""}
    finally:
        for m in (a, b):
            m.stop()
        await asyncio.gather(*tasks)


async def test_without_per_cluster_leases_ownership_follows_the_sharder_alone(fleet: Any) -> None:
    servers = fleet(5).servers
    host, members = servers[0], servers[1:]
    unfenced = {"per_cluster_lease": False}
    a, seen_a = await _replica(host, members, "alpha", unfenced)
    b, seen_b = await _replica(host, members, "beta", unfenced)
    tasks = [asyncio.create_task(m.start(handle_signals=False)) for m in (a, b)]
    try:
        both = {f"member-{i}": owner(f"member-{i}", {"alpha": 1.0, "beta": 1.0}) for i in range(4)}
        await _split({"alpha": a, "beta": b}, both)
        await eventually(lambda: set(seen_b) == {n for n, o in both.items() if o == "beta"}, timeout=20)
        assert await _leases(host, "fence") == {}, "no fence Leases"
        assert set(await _leases(host, "peer")) == {
            ShardedCoordinator(identity=i).peer_lease_name for i in ("alpha", "beta")
        }
        b.stop()
        await asyncio.wait_for(tasks[1], 30)
        await _split({"alpha": a}, dict.fromkeys(both, "alpha"))
        await eventually(lambda: set(seen_a) == set(both), timeout=20)
    finally:
        for m in (a, b):
            m.stop()
        await asyncio.gather(*tasks)


@pytest.mark.envtest_only("slows the hub's answers down (fault injection)")
async def test_a_cluster_moved_while_its_fence_was_being_taken_is_handed_over(fleet: Any) -> None:
    servers = fleet(5).servers
    host, members = servers[0], servers[1:]
    both = {f"member-{i}": owner(f"member-{i}", {"alpha": 1.0, "beta": 1.0}) for i in range(4)}
    assert "alpha" in both.values(), "some cluster goes to alpha once it joins"
    membership = Membership({"beta": 1.0})
    a, _ = await _replica(host, members, "alpha", {"peer_registry": membership.registry("alpha")})
    b, _ = await _replica(host, members, "beta", {"peer_registry": membership.registry("beta")})
    tasks = [asyncio.create_task(m.start(handle_signals=False)) for m in (a, b)]
    try:
        host.faults.latency(0.4)  # each fence takes two slow requests to acquire
        sharded = b.coordinator
        assert isinstance(sharded, ShardedCoordinator)
        await eventually(lambda: sharded.owner_of("member-0") == "beta", timeout=20)
        # beta is taking every fence now; alpha joins meanwhile, and nothing changes after.
        membership.change({"alpha": 1.0, "beta": 1.0})
        await _split({"alpha": a, "beta": b}, both)
    finally:
        host.faults.latency(0)
        for m in (a, b):
            m.stop()
        await asyncio.gather(*tasks)
