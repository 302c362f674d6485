"""Chaos against three sharded replicas: cuts between a replica and the hub, frozen replicas, a
frozen hub. Never two replicas reconcile one cluster at the same time, and a replica reconciles a
cluster only while it is the fence's latest holder.

The replicas are ``sharding_worker.py --chaos`` processes (see chaos_fleet.py): each reaches the
hub, which holds the Leases and runs as a process of its own, through a TCP proxy of its own, and
reconciles each cluster it runs every quarter second. The test reads the hub directly: it watches the
fence Leases and reads them every 100 ms; their holders and ``acquireTime`` give, for every moment,
the replica that last took each fence. The proxy does to the real kube-apiserver what it does to
mcr-envtest, so these tests run in both lanes, but for the one that stops the hub's process.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from mcr.sharding import owner
from mcr.testing import eventually, import_script

chaos = import_script(Path(__file__).with_name("chaos_fleet.py"))

LEASE = 2.0
RENEW_DEADLINE = 1.3
TIMINGS = {
    "lease_duration": LEASE,
    "renew_deadline": RENEW_DEADLINE,
    "renew_period": 0.4,
    "retry_period": 0.2,
    "peer_ttl": LEASE,
    "drain_timeout": LEASE / 2,
}
CLUSTERS = 9
SLOTS = ("a", "b", "c")
# A reconcile's start is checked against the fence with no I/O in between, but the process can be
# scheduled out between the check and the line that logs the start; a cancellation reaches a
# reconcile in flight through the event loop. A loaded machine stretches both.
START_SLACK = 0.1
CANCEL_SLACK = 0.5

pytestmark = pytest.mark.slow


hub = chaos.hub  # the fixture


@pytest.fixture
async def replicas(hub: Any, fleet: Any, tmp_path: Path) -> Any:
    member = fleet(1).servers[0]
    async with chaos.ChaosFleet(hub, member, tmp_path, clusters=CLUSTERS, timings=TIMINGS, slots=SLOTS) as f:
        for slot in SLOTS:
            f.start(slot)
        await settled(f, since=0.0)
        yield f


async def settled(f: Any, *, since: float) -> None:
    """Wait until every fence is held by the replica hashing names among the live ones, and each
    cluster was reconciled by its holder after ``since``."""

    def check() -> bool:
        holders = f.holders()
        peers = dict.fromkeys(f.identities(), 1.0)
        assert len(holders) == CLUSTERS, f"{len(holders)} fences"
        wrong = {c: h for c, h in holders.items() if h != owner(c, peers)}
        assert not wrong, f"not yet with their owners: {wrong}"
        done = {(e["c"], e["r"]) for e in f.entries() if e["s"] >= since and not e.get("x")}
        missing = [c for c, h in holders.items() if (c, h) not in done]
        assert not missing, f"not reconciled since {since:.2f}: {missing}"
        return True

    failed = [r.identity for r in f.replicas.values() if not r.alive()]
    assert not failed, f"replicas exited: {failed}: {[f.stderr(r) for r in f.replicas.values()]}"
    await eventually(check, timeout=60, interval=0.2, message="the replicas settled")


def assert_exclusive(f: Any) -> list[dict[str, Any]]:
    entries = chaos.as_worked(f.entries(), f.frozen())
    assert entries, "nothing was reconciled"
    both = chaos.overlaps(entries)
    assert both == [], f"{len(both)} overlapping reconciles, e.g. {both[:3]}"
    stray = chaos.unfenced(entries, chaos.history(f.fence_samples()))
    why = f.explain(stray[0][0]) if stray else ""
    assert stray == [], f"{len(stray)} reconciles without the fence, e.g. {stray[:3]}\n{why}"
    return entries


async def test_a_replica_cut_off_from_the_hub_stops_before_its_clusters_move(replicas: Any) -> None:
    f = replicas
    cuts = []
    for i in range(20):
        victim = f.replicas[SLOTS[i % 3]]
        mode = "reset" if i % 4 == 3 else "blackhole"
        held = sorted(c for c, h in f.holders().items() if h == victim.identity)
        assert held, f"{victim.identity} holds no cluster"
        cut = time.monotonic()
        victim.proxy.cut(mode)
        # Until every cluster it held has moved to another replica (which takes a lease at least).
        await eventually(
            lambda: all(f.holders()[c] not in (victim.identity, "") for c in held),  # noqa: B023
            timeout=6 * LEASE,
            interval=0.1,
            message=f"cut {i}: the clusters of {victim.identity} moved",
        )
        restored = time.monotonic()
        victim.proxy.restore()
        cuts.append((victim.identity, mode, cut, restored, held))
        await settled(f, since=restored)

    entries = assert_exclusive(f)
    by_replica: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in entries:
        by_replica[e["r"]].append(e)
    for identity, mode, cut, restored, held in cuts:
        # The cut replica starts nothing after its last renewal's deadline, and what was in flight
        # then ends (cancelled) at once, whether or not the renewal ever returns.
        late = [e for e in by_replica[identity] if cut + RENEW_DEADLINE + START_SLACK < e["s"] < restored]
        assert late == [], f"{mode} cut of {identity}: reconciles after the renew deadline: {late[:3]}"
        hanging = [
            e
            for e in by_replica[identity]
            if e["s"] < cut + RENEW_DEADLINE and cut + RENEW_DEADLINE + CANCEL_SLACK < e["e"] < restored
        ]
        assert hanging == [], f"{mode} cut of {identity}: reconciles not cancelled: {hanging}"
        for c in held:
            taken = next(
                (at, h)
                for at, h in f.fence_samples()
                if at > cut and h.get(c, ("",))[0] not in (identity, "")
            )
            # The taker waited a whole lease from the last renewal it saw (sent before the cut).
            assert taken[0] - cut >= LEASE - TIMINGS["renew_period"], (c, taken[0] - cut)
            assert any(e["c"] == c and taken[0] <= e["s"] <= taken[0] + 2 * LEASE for e in entries), (
                f"{c} not reconciled within 2 leases of its takeover by {taken[1][c][0]} at {taken[0]:.3f}"
            )


async def test_a_frozen_replica_reconciles_nothing_it_lost(replicas: Any) -> None:
    f = replicas
    freezes = []
    for i in range(20):
        victim = f.replicas[SLOTS[i % 3]]
        pause = (1.5 if i % 2 == 0 else 3.0) * LEASE
        held = sorted(c for c, h in f.holders().items() if h == victim.identity)
        stopped = victim.freeze()
        await asyncio.sleep(pause)  # how long the process stays frozen
        continued = victim.thaw(stopped)
        if i % 2 == 1:  # frozen for 3 leases: its clusters surely moved meanwhile
            freezes.append((victim.identity, stopped, continued, held))
        await settled(f, since=continued)

    assert_exclusive(f)
    for identity, stopped, continued, held in freezes:
        moved = {
            c
            for c in held
            if any(
                stopped < at < continued and h.get(c, ("",))[0] not in (identity, "")
                for at, h in f.fence_samples()
            )
        }
        assert moved, f"nothing moved while {identity} was frozen"


async def hub_frozen(f: Any, freeze: Any, thaw: Any) -> None:
    """Freeze the hub for 3 leases: every replica stops within the renew deadline; all resume."""
    frozen = freeze()
    await asyncio.sleep(3 * LEASE)  # how long the hub stays frozen
    back = thaw()
    late = [e for e in f.entries() if frozen + RENEW_DEADLINE + START_SLACK < e["s"] < back]
    assert late == [], f"{len(late)} reconciles started after the renew deadline, e.g. {late[:3]}"
    hanging = [
        e for e in f.entries() if e["s"] < back and frozen + RENEW_DEADLINE + CANCEL_SLACK < e["e"] < back
    ]
    assert hanging == [], f"reconciles not cancelled: {hanging[:3]}"
    await settled(f, since=back)


async def test_a_frozen_hub_stops_every_replica_within_the_renew_deadline(replicas: Any) -> None:
    """The hub frozen as the replicas see it: no byte passes between them and it (every proxy cut)."""
    f = replicas

    def freeze() -> float:
        for r in f.replicas.values():
            r.proxy.cut("blackhole")
        return time.monotonic()

    def thaw() -> float:
        back = time.monotonic()
        for r in f.replicas.values():
            r.proxy.restore()
        return back

    for _ in range(2):
        await hub_frozen(f, freeze, thaw)
    assert_exclusive(f)


@pytest.mark.envtest_only("stops the hub's process; the real kube-apiserver runs in a child of it")
async def test_a_stopped_hub_process_stops_every_replica_within_the_renew_deadline(
    replicas: Any, hub: Any
) -> None:
    await hub_frozen(replicas, hub.freeze, hub.thaw)
    assert_exclusive(replicas)
