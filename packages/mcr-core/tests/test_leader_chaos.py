"""Chaos against three leader-elected replicas: the leader cut off from the hub, the leader frozen,
the hub frozen. Leader-only work never overlaps between replicas, and a replica does it only while
it is the leader Lease's latest holder.

The replicas are ``sharding_worker.py --chaos --leader`` processes (see chaos_fleet.py): each
reaches the hub, which holds the leader Lease and runs as a process of its own, through a TCP
proxy of its own. The leader runs a controller that needs leadership (it reconciles three clusters
every quarter second) and a leader-only runnable (a 20 ms piece of work every 50 ms); both log
their work on ``time.monotonic()``. A leader that loses its lease ends with status 3, as a pod
whose manager stopped would; the test starts a new replica in its place. The test watches the
leader Lease and reads it every 100 ms: its holder and ``acquireTime``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from mcr.testing import eventually, import_script

chaos = import_script(Path(__file__).with_name("chaos_fleet.py"))
worker = import_script(Path(__file__).with_name("sharding_worker.py"))

LEASE = 2.0
RENEW_DEADLINE = 1.3
TIMINGS = {"lease_duration": LEASE, "renew_deadline": RENEW_DEADLINE, "retry_period": 0.3}
CLUSTERS = 3
SLOTS = ("a", "b", "c")
START_SLACK = 0.1  # as in test_sharding_chaos.py
CANCEL_SLACK = 0.5
KEY = "<leader>"

pytestmark = pytest.mark.slow


hub = chaos.hub  # the fixture


@pytest.fixture
async def replicas(hub: Any, fleet: Any, tmp_path: Path) -> Any:
    member = fleet(1).servers[0]
    async with chaos.ChaosFleet(
        hub, member, tmp_path, clusters=CLUSTERS, timings=TIMINGS, slots=SLOTS, leader=True
    ) as f:
        for slot in SLOTS:
            f.start(slot)
        await led(f, since=0.0)
        yield f


def leader(f: Any) -> Any:
    """The replica holding the leader Lease (as last sampled), or ``None``."""
    holder = f.holders().get(KEY, "")
    return next((r for r in f.replicas.values() if r.identity == holder), None)


async def led(f: Any, *, since: float) -> Any:
    """Wait until a live replica leads and did all its leader work after ``since``; returns it."""

    def check() -> Any:
        r = leader(f)
        assert r is not None, f"no leader: {f.holders()}"
        assert r.alive(), f"the leader {r.identity} exited: {f.stderr(r)}"
        done = {e["c"] for e in f.entries() if e["r"] == r.identity and e["s"] >= since and not e.get("x")}
        assert len(done) == CLUSTERS + 1, f"{r.identity} did only {sorted(done)} since {since:.2f}"
        return r

    return await eventually(check, timeout=60, interval=0.2, message="a replica leads and works")


async def replace_lost(f: Any, old: Any) -> None:
    """The old leader ends with the status of lost leadership; a new replica takes its slot."""
    status = await eventually(lambda: old.proc.poll(), timeout=30, message=f"{old.identity} exited")
    assert status == worker.LOST_LEADERSHIP, f"{old.identity}: status {status}: {f.stderr(old)}"
    slot = next(s for s, r in f.replicas.items() if r is old)
    f.start(slot)


def assert_exclusive(f: Any) -> list[dict[str, Any]]:
    entries = chaos.as_worked(f.entries(), f.frozen())
    assert entries, "no leader work was done"
    both = chaos.overlaps(entries, global_=True)
    assert both == [], f"{len(both)} overlapping pieces of leader work, e.g. {both[:3]}"
    acquisitions = chaos.history(f.fence_samples())[KEY]
    stray = chaos.unfenced([{**e, "c": KEY} for e in entries], {KEY: acquisitions})
    assert stray == [], f"{len(stray)} pieces of leader work without the lease, e.g. {stray[:3]}"
    return entries


async def test_a_leader_cut_off_from_the_hub_stops_before_another_leads(replicas: Any) -> None:
    f = replicas
    cuts = []
    for i in range(8):
        old = await led(f, since=cuts[-1][2] if cuts else 0.0)
        mode = "reset" if i % 4 == 3 else "blackhole"
        cut = time.monotonic()
        old.proxy.cut(mode)
        new = await eventually(
            lambda: (r := leader(f)) is not None and r is not old and r,  # noqa: B023
            timeout=30,  # liveness only, bounded loosely: CI's 2 cores run other suites beside
            interval=0.1,
            message=f"cut {i}: another replica leads",
        )
        restored = time.monotonic()
        old.proxy.restore()
        cuts.append((old.identity, mode, cut, restored, new.identity))
        await replace_lost(f, old)
    await led(f, since=cuts[-1][3])

    entries = assert_exclusive(f)
    for identity, mode, cut, _, new in cuts:
        mine = [e for e in entries if e["r"] == identity]
        late = [e for e in mine if cut + RENEW_DEADLINE + START_SLACK < e["s"]]
        assert late == [], f"{mode} cut of {identity}: work after the renew deadline: {late[:3]}"
        hanging = [e for e in mine if cut + RENEW_DEADLINE + CANCEL_SLACK < e["e"]]
        assert hanging == [], f"{mode} cut of {identity}: work not cancelled: {hanging[:3]}"
        took = next(at for at, h in f.fence_samples() if at > cut and h.get(KEY, ("",))[0] == new)
        # The new leader waited a whole lease from the last renewal it saw (sent before the cut).
        assert took - cut >= LEASE - TIMINGS["retry_period"], (new, took - cut)
        assert any(e["r"] == new and took <= e["s"] <= took + 2 * LEASE for e in entries), (
            f"{new} did no leader work within 2 leases of taking over at {took:.3f}"
        )


async def test_a_frozen_leader_does_no_leader_work_after_it_resumes(replicas: Any) -> None:
    f = replicas
    freezes = []
    for i in range(8):
        old = await led(f, since=freezes[-1][2] if freezes else 0.0)
        stopped = old.freeze()
        await asyncio.sleep((1.5 if i % 2 == 0 else 5.0) * LEASE)  # how long the leader stays frozen
        continued = old.thaw(stopped)
        freezes.append((old.identity, stopped, continued, i % 2 == 1))
        await replace_lost(f, old)
    await led(f, since=freezes[-1][2])

    entries = assert_exclusive(f)
    for identity, stopped, continued, long in freezes:
        after = [e for e in entries if e["r"] == identity and e["s"] >= continued]
        assert after == [], f"{identity} worked after it resumed: {after[:3]}"
        # Frozen for 5 leases, a standby surely took over meanwhile (for 1.5 it may not have yet).
        taken = [h.get(KEY, ("",))[0] for at, h in f.fence_samples() if stopped < at < continued]
        assert not long or any(h not in (identity, "") for h in taken), f"nobody took over from {identity}"


async def test_a_frozen_hub_stops_the_leader_within_the_renew_deadline(replicas: Any) -> None:
    f = replicas
    old = await led(f, since=0.0)
    frozen = time.monotonic()
    for r in f.replicas.values():
        r.proxy.cut("blackhole")
    await asyncio.sleep(3 * LEASE)  # how long the hub stays unreachable
    back = time.monotonic()
    for r in f.replicas.values():
        r.proxy.restore()
    await replace_lost(f, old)
    await led(f, since=back)

    entries = assert_exclusive(f)
    late = [e for e in entries if frozen + RENEW_DEADLINE + START_SLACK < e["s"] < back]
    assert late == [], f"leader work started after the renew deadline: {late[:3]}"
    hanging = [e for e in entries if e["s"] < back and frozen + RENEW_DEADLINE + CANCEL_SLACK < e["e"] < back]
    assert hanging == [], f"leader work not cancelled: {hanging[:3]}"
