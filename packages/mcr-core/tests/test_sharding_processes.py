"""Three manager processes share a fleet with the ShardedCoordinator (real Leases over HTTPS).

One scenario, observed from outside: the fence Leases on the host server (sampled every 50 ms)
and every replica's reconcile log. It checks, over the whole run, that no cluster was ever
reconciled by two replicas at overlapping times, and at each step that every cluster has a live
owner: convergence of 3 replicas, a SIGKILLed replica's clusters re-homed within 2 x the lease
duration, a new replica taking exactly the clusters rendezvous hashing gives it (about a third),
and a SIGTERMed replica handing its clusters over without waiting for expiry.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from mcr.cluster import Cluster
from mcr.sharding import owner
from mcr.testing import eventually

WORKER = Path(__file__).with_name("sharding_worker.py")
LEASE_DURATION = 2.0  # sharding_worker.TIMINGS
CLUSTERS = 9

pytestmark = pytest.mark.slow


class Fences:
    """Samples the fence Leases of the host: holder per cluster, over time."""

    def __init__(self, host: Cluster) -> None:
        self.host = host
        self.samples: list[tuple[float, dict[str, str]]] = []

    async def run(self) -> None:
        while True:
            leases = await self.host.api_reader.list(
                "coordination.k8s.io/v1/Lease",
                namespace="default",
                label_selector={"sharding.mcr.io/role": "fence"},
            )
            holders = {
                lease["metadata"]["annotations"]["sharding.mcr.io/cluster"]: lease["spec"].get(
                    "holderIdentity"
                )
                or ""
                for lease in leases
            }
            self.samples.append((time.time(), holders))
            await asyncio.sleep(0.05)

    def now(self) -> dict[str, str]:
        return self.samples[-1][1] if self.samples else {}


def start_worker(host: Path, fleet_dir: Path, identity: str, log: Path) -> subprocess.Popen[bytes]:
    with log.with_suffix(f".{identity}.err").open("wb") as err:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, str(WORKER), str(host), str(fleet_dir), identity, str(log)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )


def reconciles(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []


def overlaps(entries: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs of reconciles of one cluster by different replicas whose intervals overlap."""
    by_cluster: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in entries:
        by_cluster[e["c"]].append(e)
    found = []
    for items in by_cluster.values():
        items.sort(key=lambda e: e["s"])
        for a, b in itertools.pairwise(items):
            if a["r"] != b["r"] and b["s"] < a["e"]:
                found.append((a, b))
    return found


async def test_three_replicas_share_the_fleet_exclusively(fleet: Any, tmp_path: Path) -> None:
    servers = fleet(CLUSTERS + 1).servers
    host_server, members = servers[0], servers[1:]
    # Cluster names are the kubeconfig paths: a fixed directory makes them, and so the hashing's
    # outcome, the same on every run.
    fleet_dir = Path(tempfile.gettempdir()) / "mcr-sharding-test-fleet"
    shutil.rmtree(fleet_dir, ignore_errors=True)
    fleet_dir.mkdir()
    for i, server in enumerate(members):
        shutil.copy(server.kubeconfig_path, fleet_dir / f"m{i}.kubeconfig")
    host_file = Path(host_server.kubeconfig_path)
    log = tmp_path / "reconciles.jsonl"
    host = Cluster.from_kubeconfig(host_server.kubeconfig, name="host")
    clients = [Cluster.from_kubeconfig(s.kubeconfig, name=f"m{i}") for i, s in enumerate(members)]
    names: dict[str, str] = {}  # cluster name as the file provider gives it -> client index
    workers: dict[str, subprocess.Popen[bytes]] = {}
    fences = Fences(host)

    async def touch() -> None:
        n = 0
        while True:
            for c in clients:
                tick = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "tick", "namespace": "default"},
                }
                await c.api_reader.apply({**tick, "data": {"n": str(n)}}, field_manager="test", force=True)
            n += 1
            await asyncio.sleep(0.3)

    def live_owned(alive: set[str]) -> bool:
        holders = fences.now()
        return len(holders) == CLUSTERS and all(h in alive for h in holders.values())

    sampler = asyncio.create_task(fences.run())
    toucher = asyncio.create_task(touch())
    try:
        for identity in ("replica-a", "replica-b", "replica-c"):
            workers[identity] = start_worker(host_file, fleet_dir, identity, log)
        alive = {"replica-a", "replica-b", "replica-c"}
        await eventually(lambda: live_owned(alive), timeout=60, message="3 replicas own every cluster")
        clusters = sorted(fences.now())
        peers3 = {p: 1.0 for p in alive}
        # A replica that settled before the others announced themselves took every cluster; they
        # move to their owners once it sees the others.
        await eventually(
            lambda: fences.now() == {c: owner(c, peers3) for c in clusters},
            timeout=30,
            message="ownership follows rendezvous hashing",
        )
        assert set(fences.now().values()) == alive, "each replica owns some of the 9 clusters"
        await eventually(lambda: {e["c"] for e in reconciles(log)} >= set(clusters), timeout=30)

        # 3 -> 2: SIGKILL; its clusters are re-homed within 2 x the lease duration.
        victim = "replica-a"
        its_clusters = [c for c, h in fences.now().items() if h == victim]
        workers[victim].send_signal(signal.SIGKILL)
        workers[victim].wait()
        killed_at = time.time()
        alive.discard(victim)
        await eventually(
            lambda: live_owned(alive), timeout=4 * LEASE_DURATION, message="re-homed after SIGKILL"
        )
        rehomed_at = next(
            t for t, h in fences.samples if t > killed_at and all(h.get(c) in alive for c in its_clusters)
        )
        assert rehomed_at - killed_at <= 2 * LEASE_DURATION, (rehomed_at - killed_at, its_clusters)

        # 2 -> 3: the newcomer takes exactly the clusters hashing gives it, about a third.
        before = dict(fences.now())
        workers["replica-d"] = start_worker(host_file, fleet_dir, "replica-d", log)
        alive.add("replica-d")
        expected = {c: owner(c, {p: 1.0 for p in alive}) for c in clusters}
        await eventually(lambda: fences.now() == expected, timeout=30, message="rebalanced onto replica-d")
        moved = {c for c in clusters if before[c] != expected[c]}
        assert moved == {c for c in clusters if expected[c] == "replica-d"}
        assert CLUSTERS / 6 <= len(moved) <= CLUSTERS / 2, moved

        # Graceful stop: SIGTERM hands over at once (released, not expired).
        leaving = "replica-b"
        its_clusters = [c for c, h in fences.now().items() if h == leaving]
        workers[leaving].send_signal(signal.SIGTERM)
        stopped_at = time.time()
        assert workers[leaving].wait(timeout=30) == 0
        alive.discard(leaving)
        await eventually(
            lambda: live_owned(alive), timeout=4 * LEASE_DURATION, message="handed over on SIGTERM"
        )
        handed_at = next(
            t for t, h in fences.samples if t > stopped_at and all(h.get(c) in alive for c in its_clusters)
        )
        assert handed_at - stopped_at < LEASE_DURATION + 1.0, handed_at - stopped_at
        await asyncio.sleep(0.5)  # a few more reconciles by the new owners
    finally:
        toucher.cancel()
        sampler.cancel()
        await asyncio.gather(toucher, sampler, return_exceptions=True)
        for proc in workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
        for c in [host, *clients]:
            await c.stop()

    # Over the whole run: never two replicas reconciling one cluster at the same time, and at
    # every sample each fence has exactly one holder (a Lease holds one) that was a started replica.
    entries = reconciles(log)
    assert entries, "the replicas reconciled"
    assert overlaps(entries) == []
    started = {"replica-a", "replica-b", "replica-c", "replica-d", ""}
    assert all(set(h.values()) <= started for _, h in fences.samples)
    del names
