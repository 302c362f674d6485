"""LeaderElector against a real API server: one leader, hand-over, lease fields, loss on partition."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import orjson
import pytest

from mcr.errors import ConflictError
from mcr.manager import LeaderElectionLostError, LeaderElector
from mcr.manager.leaderelection import format_micro_time
from mcr.rest.config import load_config
from mcr.rest.transport import Transport
from mcr.testing import eventually
from mcr_envtest import ServerThread

LEASE = "/apis/coordination.k8s.io/v1/namespaces/default/leases/le-test"
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

FAST = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.2}


def _elector(transport: Transport, identity: str, **kw: Any) -> LeaderElector:
    return LeaderElector(transport, name="le-test", namespace="default", identity=identity, **{**FAST, **kw})


async def _lease(t: Transport) -> dict[str, Any]:
    spec: dict[str, Any] = (await t.request("GET", LEASE)).json()["spec"]
    return spec


def test_timings_are_validated() -> None:
    with pytest.raises(ValueError, match="lease_duration"):
        LeaderElector(None, name="x", namespace="d", identity="i", lease_duration=5, renew_deadline=5)  # type: ignore[arg-type]  # deliberately wrong: the test checks the error
    with pytest.raises(ValueError, match="retry_period"):
        LeaderElector(None, name="x", namespace="d", identity="i", renew_deadline=2, retry_period=2)  # type: ignore[arg-type]  # deliberately wrong: the test checks the error
    with pytest.raises(ValueError, match="namespace"):
        LeaderElector(None, name="x", namespace="", identity="i")  # type: ignore[arg-type]  # deliberately wrong: the test checks the error
    assert MICRO.match(format_micro_time())


async def test_one_leader_then_release_hands_over(apiserver: ServerThread) -> None:
    config = load_config(apiserver.kubeconfig)
    async with config.transport() as ta, config.transport() as tb, config.transport() as reader:
        a = _elector(ta, "a", release_on_cancel=True)
        b = _elector(tb, "b", release_on_cancel=True)
        task_a = asyncio.create_task(a.run())
        await eventually(a.elected.is_set, timeout=5)
        task_b = asyncio.create_task(b.run())
        try:
            # b keeps campaigning while a renews: for several lease durations it never wins.
            deadline = time.monotonic() + 3 * FAST["lease_duration"]
            while time.monotonic() < deadline:
                assert not b.elected.is_set()
                assert (await _lease(reader))["holderIdentity"] == "a"
                await asyncio.sleep(0.1)
            spec = await _lease(reader)
            assert spec["leaseTransitions"] == 0
            assert spec["leaseDurationSeconds"] == 2
            assert MICRO.match(spec["renewTime"]), spec["renewTime"]
            assert MICRO.match(spec["acquireTime"]), spec["acquireTime"]

            # a stops (release on cancel): b takes over well before the lease would have expired.
            stopped = time.monotonic()
            task_a.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task_a
            assert not a.elected.is_set()
            await eventually(b.elected.is_set, timeout=FAST["lease_duration"] + FAST["retry_period"] * 3)
            assert time.monotonic() - stopped < FAST["lease_duration"]
            spec = await _lease(reader)
            assert spec["holderIdentity"] == "b"
            assert spec["leaseTransitions"] == 1
        finally:
            task_b.cancel()
            await asyncio.gather(task_a, task_b, return_exceptions=True)


async def test_without_release_standby_waits_for_expiry(apiserver: ServerThread) -> None:
    config = load_config(apiserver.kubeconfig)
    async with config.transport() as ta, config.transport() as tb:
        a = _elector(ta, "a")
        b = _elector(tb, "b")
        task_a = asyncio.create_task(a.run())
        await eventually(a.elected.is_set, timeout=5)
        task_b = asyncio.create_task(b.run())
        try:
            await asyncio.sleep(0.5)  # let b observe a's record before a goes away
            task_a.cancel()
            await asyncio.gather(task_a, return_exceptions=True)
            stopped = time.monotonic()
            await eventually(b.elected.is_set, timeout=FAST["lease_duration"] * 3)
            waited = time.monotonic() - stopped
            # Not released: b had to see the record unchanged for a whole lease duration.
            assert waited >= FAST["lease_duration"] - 0.6, waited
            assert waited <= FAST["lease_duration"] + 4 * FAST["retry_period"] * 2.2, waited
        finally:
            task_b.cancel()
            await asyncio.gather(task_b, return_exceptions=True)


@pytest.mark.envtest_only("fails the Lease renewals with mcr-envtest's faults")
async def test_renew_failures_lose_leadership(apiserver: ServerThread) -> None:
    config = load_config(apiserver.kubeconfig)
    async with config.transport() as ta:
        a = _elector(ta, "a")
        task_a = asyncio.create_task(a.run())
        await eventually(a.elected.is_set, timeout=5)
        # Partition: every lease write fails from now on.
        apiserver.faults.fail_next(10_000, status=503, methods=("PUT",), path_contains="leases/le-test")
        started = time.monotonic()
        try:
            with pytest.raises(LeaderElectionLostError, match="leader election lost"):
                await asyncio.wait_for(task_a, timeout=10)
        finally:
            apiserver.faults.clear()
        lost_after = time.monotonic() - started
        assert lost_after <= FAST["renew_deadline"] + 2 * FAST["retry_period"] + 0.5, lost_after
        assert not a.elected.is_set()


async def test_lease_taken_by_another_holder_is_lost(apiserver: ServerThread) -> None:
    config = load_config(apiserver.kubeconfig)
    async with config.transport() as ta, config.transport() as writer:
        a = _elector(ta, "a")
        task_a = asyncio.create_task(a.run())
        await eventually(a.elected.is_set, timeout=5)
        while True:  # the holder renews meanwhile (every retry period): read it again on a conflict
            lease = (await writer.request("GET", LEASE)).json()
            lease["spec"]["holderIdentity"] = "intruder"
            lease["spec"]["renewTime"] = format_micro_time()
            try:
                await writer.request("PUT", LEASE, body=orjson.dumps(lease), content_type="application/json")
                break
            except ConflictError:
                continue
        with pytest.raises(LeaderElectionLostError, match="intruder"):
            await asyncio.wait_for(task_a, timeout=5)
