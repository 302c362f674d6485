"""Two managers with leader election on one server: one reconciles, hand-over, loss on partition."""

from __future__ import annotations

import asyncio
import datetime
import itertools
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from mcr.builder import controller_managed_by
from mcr.manager import ClusterState, LeaderElectionLostError, Manager, RunnableFunc
from mcr.reconcile import Request
from mcr.rest.config import RestConfig, load_config
from mcr.rest.transport import Transport
from mcr.testing import eventually
from mcr_envtest import ServerThread

LEASE_ID = "mgr-le"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{LEASE_ID}"
_serial = itertools.count()
TIMINGS = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.2}


@dataclass
class Replica:
    name: str
    manager: Manager
    task: asyncio.Task[None] | None = None
    reconciles: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, object)


def _replica(config: RestConfig, name: str, *, release: bool = False) -> Replica:
    mgr = Manager(
        config,
        leader_election=True,
        leader_election_id=LEASE_ID,
        leader_election_namespace="default",
        leader_election_release_on_cancel=release,
        metrics_bind_address="0",
        identity=name,
        graceful_shutdown_timeout=5,
        **TIMINGS,
    )
    replica = Replica(name, mgr)

    async def reconcile(req: Request) -> None:
        start = time.time()
        await asyncio.sleep(0.01)
        replica.reconciles.append((start, time.time(), req.name))

    # Unique per test: a controller cut short by an abort may keep its name until collected.
    controller_managed_by(mgr).named(f"le-{name}-{next(_serial)}").for_("v1/ConfigMap").complete(reconcile)
    return replica


async def _create_configmaps(t: Transport, prefix: str, n: int) -> None:
    for i in range(n):
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{prefix}-{i}"}})
        await t.request(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            body=body.encode(),
            content_type="application/json",
        )


def _parse(ts: str) -> float:
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC).timestamp()


class LeaseHistory:
    """Polls the Lease and records every holder change (time seen, holder, acquireTime)."""

    def __init__(self, t: Transport) -> None:
        self.t = t
        self.changes: list[tuple[float, str, float]] = []

    async def run(self) -> None:
        while True:
            try:
                spec = (await self.t.request("GET", LEASE_PATH)).json()["spec"]
            except LookupError:
                spec = None
            if spec is not None:
                holder = spec.get("holderIdentity") or ""
                if not self.changes or self.changes[-1][1] != holder:
                    self.changes.append((time.time(), holder, _parse(spec["acquireTime"])))
            await asyncio.sleep(0.02)


@pytest.fixture
async def lease_history(apiserver: ServerThread) -> AsyncIterator[LeaseHistory]:
    async with load_config(apiserver.kubeconfig).transport() as t:
        history = LeaseHistory(t)
        task = asyncio.create_task(history.run())
        yield history
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _never_two_leaders(a: Replica, b: Replica, history: LeaseHistory) -> None:
    """Every reconcile of a replica lies inside its own leadership as recorded on the Lease."""
    holders = [h for _, h, _ in history.changes if h]
    assert holders[:2] == [a.name, b.name], history.changes
    b_acquired = next(acq for _, h, acq in history.changes if h == b.name)
    assert a.reconciles, "the first leader never reconciled"
    assert b.reconciles, "the second leader never reconciled"
    assert max(end for _, end, _ in a.reconciles) <= b_acquired, "old leader reconciled after hand-over"
    assert min(start for start, _, _ in b.reconciles) >= b_acquired, "standby reconciled before it led"


async def test_only_the_leader_reconciles_and_hands_over_on_stop(
    apiserver: ServerThread, lease_history: LeaseHistory
) -> None:
    config = load_config(apiserver.kubeconfig)
    a = _replica(config, "replica-a")
    b = _replica(config, "replica-b")
    async with config.transport() as t:
        a.task = asyncio.create_task(a.manager.start(handle_signals=False))
        await eventually(a.manager.elected.is_set, timeout=10)
        b.task = asyncio.create_task(b.manager.start(handle_signals=False))
        try:
            await _create_configmaps(t, "one", 5)
            await eventually(lambda: len({n for *_, n in a.reconciles}) >= 5, timeout=10)
            await asyncio.sleep(3 * TIMINGS["lease_duration"])  # b campaigns the whole time, in vain
            assert not b.manager.elected.is_set()
            assert b.reconciles == []

            a.manager.stop()  # graceful stop, no release: b waits for the lease to expire
            stopped = time.monotonic()
            await asyncio.wait_for(a.task, 10)
            await eventually(b.manager.elected.is_set, timeout=10)
            took = time.monotonic() - stopped
            # lease duration + one jittered retry, plus a's stop and a loaded machine
            assert took <= TIMINGS["lease_duration"] + TIMINGS["retry_period"] * 2.2 + 2.0, took
            await _create_configmaps(t, "two", 3)
            await eventually(
                lambda: {f"two-{i}" for i in range(3)} <= {n for *_, n in b.reconciles}, timeout=10
            )
            _never_two_leaders(a, b, lease_history)
        finally:
            for r in (a, b):
                r.manager.stop()
            await asyncio.gather(*(r.task for r in (a, b) if r.task), return_exceptions=True)


@pytest.mark.envtest_only("partitions the leader with mcr-envtest's faults")
async def test_partitioned_leader_stops_with_an_error_and_standby_takes_over(
    apiserver: ServerThread, lease_history: LeaseHistory
) -> None:
    config = load_config(apiserver.kubeconfig)
    a = _replica(config, "replica-a")
    b = _replica(config, "replica-b")
    async with config.transport() as t:
        a.task = asyncio.create_task(a.manager.start(handle_signals=False))
        await eventually(a.manager.elected.is_set, timeout=10)
        b.task = asyncio.create_task(b.manager.start(handle_signals=False))
        try:
            await _create_configmaps(t, "one", 3)
            await eventually(lambda: len(a.reconciles) >= 3, timeout=10)
            # Partition: lease writes fail (for both replicas) until the leader gave up.
            apiserver.faults.fail_next(
                100_000, status=503, methods=("PUT",), path_contains=f"leases/{LEASE_ID}"
            )
            started = time.monotonic()
            with pytest.raises(LeaderElectionLostError, match="leader election lost"):
                await asyncio.wait_for(a.task, 10)
            assert time.monotonic() - started <= TIMINGS["renew_deadline"] + 3 * TIMINGS["retry_period"] + 2.0
            assert not a.manager.elected.is_set()
            apiserver.faults.clear()
            await eventually(b.manager.elected.is_set, timeout=10)
            await _create_configmaps(t, "two", 2)
            await eventually(lambda: {"two-0", "two-1"} <= {n for *_, n in b.reconciles}, timeout=10)
            _never_two_leaders(a, b, lease_history)
        finally:
            apiserver.faults.clear()
            for r in (a, b):
                r.manager.stop()
            await asyncio.gather(*(r.task for r in (a, b) if r.task), return_exceptions=True)


async def test_release_on_cancel_hands_over_at_once(apiserver: ServerThread) -> None:
    config = load_config(apiserver.kubeconfig)
    a = _replica(config, "replica-a", release=True)
    b = _replica(config, "replica-b", release=True)
    everywhere: set[str] = set()
    for r in (a, b):

        async def run(name: str = r.name) -> None:
            everywhere.add(name)  # a runnable without leader election runs on every replica
            await asyncio.get_running_loop().create_future()

        r.manager.add(RunnableFunc(run, need_leader_election=False))
    a.task = asyncio.create_task(a.manager.start(handle_signals=False))
    await eventually(a.manager.elected.is_set, timeout=10)
    b.task = asyncio.create_task(b.manager.start(handle_signals=False))
    try:
        await eventually(lambda: everywhere == {"replica-a", "replica-b"}, timeout=5)
        assert not b.manager.elected.is_set()
        # The standby's controllers wait for leadership: its local cluster counts as pending.
        assert [(i.name, i.state) for i in b.manager.clusters()] == [("", ClusterState.PENDING)]
        await asyncio.sleep(0.5)
        a.task.cancel()  # cancellation: graceful stop, then the lease is released
        stopped = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await a.task
        await eventually(b.manager.elected.is_set, timeout=10)
        assert time.monotonic() - stopped < TIMINGS["lease_duration"]
        await eventually(lambda: [i.state for i in b.manager.clusters()] == [ClusterState.SYNCED], timeout=10)
    finally:
        b.manager.stop()
        await asyncio.gather(b.task, return_exceptions=True)


def test_leader_election_options_are_checked(apiserver: ServerThread) -> None:
    config = load_config(apiserver.kubeconfig)
    with pytest.raises(ValueError, match="leader_election_id"):
        Manager(config, leader_election=True, metrics_bind_address="0")
    with pytest.raises(ValueError, match="leader_election_namespace"):
        Manager(config, leader_election=True, leader_election_id="x", metrics_bind_address="0")
