"""Manager lifecycle: runnable groups, stop order, grace period, errors, cancellation."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mcr.manager import Manager, RunnableFunc, ShutdownTimeoutError
from mcr.testing import eventually, running


class Tracked:
    """A runnable that records when it starts and stops; optionally drains for ``drain`` seconds."""

    def __init__(self, name: str, journal: list[str], *, leader: bool = True, drain: float = 0.0) -> None:
        self.name = name
        self.journal = journal
        self.need_leader_election = leader
        self.drain = drain
        self.running = False

    async def start(self) -> None:
        self.running = True
        self.journal.append(f"start {self.name}")
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            self.journal.append(f"stopping {self.name}")
            if self.drain:
                await asyncio.sleep(self.drain)  # drain in-flight work; a second cancel cuts it short
            raise
        finally:
            self.running = False
            self.journal.append(f"stopped {self.name}")


class Provider:
    """A ProviderRunnable that engages nothing; records its own stop."""

    def __init__(self, journal: list[str]) -> None:
        self.journal = journal
        self.aware: Any = None

    async def start(self, aware: Any) -> None:
        self.aware = aware
        self.journal.append("start provider")
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            self.journal.append("stopped provider")

    async def get(self, name: str) -> Any:
        raise LookupError(name)

    async def index_field(self, kind: Any, field: str, extract: Any) -> None:
        return None


async def _run(mgr: Manager) -> asyncio.Task[None]:
    task = asyncio.create_task(mgr.start(handle_signals=False))
    await eventually(mgr.elected.is_set, timeout=5)
    return task


async def test_stop_order_runnables_then_leaders_then_provider() -> None:
    journal: list[str] = []
    provider = Provider(journal)
    mgr = Manager(provider=provider, metrics_bind_address="0")  # type: ignore[arg-type]  # a journaling stand-in provider
    mgr.add(Tracked("leader", journal, leader=True))
    mgr.add(Tracked("other", journal, leader=False))
    task = await _run(mgr)
    await eventually(lambda: {"start leader", "start other", "start provider"} <= set(journal), timeout=5)
    assert provider.aware is mgr  # the manager is what providers engage
    mgr.stop()
    await asyncio.wait_for(task, 5)
    stops = [e for e in journal if e.startswith("stopped")]
    assert stops == ["stopped other", "stopped leader", "stopped provider"]


async def test_runnable_added_after_start_runs_and_failure_stops_the_manager() -> None:
    journal: list[str] = []
    mgr = Manager(metrics_bind_address="0")
    other = Tracked("other", journal)
    mgr.add(other)
    task = await _run(mgr)

    async def boom() -> None:
        raise ValueError("runnable exploded")

    await eventually(lambda: other.running, timeout=5)
    mgr.add(RunnableFunc(boom, name="boom"))
    with pytest.raises(ValueError, match="runnable exploded"):
        await asyncio.wait_for(task, 5)
    assert not other.running
    assert journal[-1] == "stopped other"


async def test_grace_period_exceeded_raises_and_still_stops_everything() -> None:
    journal: list[str] = []
    mgr = Manager(metrics_bind_address="0", graceful_shutdown_timeout=0.3)
    slow = Tracked("slow", journal, drain=30)
    mgr.add(slow)
    task = await _run(mgr)
    await eventually(lambda: slow.running, timeout=5)
    began = time.monotonic()
    mgr.stop()
    with pytest.raises(ShutdownTimeoutError, match=r"grace period of 0.3s: .*slow"):
        await asyncio.wait_for(task, 10)
    assert time.monotonic() - began < 3
    assert not slow.running  # aborted after the grace period, not left behind


async def test_drain_within_grace_period_returns_normally() -> None:
    journal: list[str] = []
    mgr = Manager(metrics_bind_address="0", graceful_shutdown_timeout=5)
    mgr.add(Tracked("drainer", journal, drain=0.3))
    task = await _run(mgr)
    await eventually(lambda: "start drainer" in journal, timeout=5)
    mgr.stop()
    await asyncio.wait_for(task, 5)
    assert journal[-1] == "stopped drainer"


async def test_zero_grace_period_does_not_wait_for_drains() -> None:
    journal: list[str] = []
    mgr = Manager(metrics_bind_address="0", graceful_shutdown_timeout=0)
    mgr.add(Tracked("drainer", journal, drain=30))
    task = await _run(mgr)
    await eventually(lambda: "start drainer" in journal, timeout=5)
    began = time.monotonic()
    mgr.stop()
    await asyncio.wait_for(task, 10)  # no error: nothing is awaited past the (zero) grace period
    assert time.monotonic() - began < 2
    assert journal[-1] == "stopped drainer"


async def test_cancelling_start_shuts_down_and_reraises() -> None:
    journal: list[str] = []
    mgr = Manager(metrics_bind_address="0")
    mgr.add(Tracked("x", journal))
    task = await _run(mgr)
    await eventually(lambda: "start x" in journal, timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert journal[-1] == "stopped x"
    with pytest.raises(RuntimeError, match="already started"):
        await mgr.start(handle_signals=False)


async def test_without_leader_election_the_manager_counts_as_elected() -> None:
    engaged: list[str] = []

    class PureAware:
        need_leader_election = False

        async def engage(self, name: str, cluster: Any) -> None:
            engaged.append(name)
            await asyncio.get_running_loop().create_future()

    mgr = Manager(metrics_bind_address="0")
    mgr.add(PureAware())
    task = await _run(mgr)
    try:
        assert mgr.elected.is_set()  # without leader election the manager counts as elected
        assert engaged == []  # no local cluster and nothing engaged yet
        assert mgr.clusters() == []
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 5)


async def test_testing_running_stops_the_manager_and_raises_its_failure() -> None:
    journal: list[str] = []
    mgr = Manager(metrics_bind_address="0")
    other = Tracked("other", journal)
    mgr.add(other)
    async with running(mgr):
        await eventually(lambda: other.running, timeout=5)
    assert not other.running, "leaving the block stops the manager"

    async def boom() -> None:
        raise ValueError("runnable exploded")

    failing = Manager(metrics_bind_address="0")
    failing.add(RunnableFunc(boom, name="boom"))
    with pytest.raises(ValueError, match="runnable exploded"):
        async with running(failing):
            await asyncio.sleep(0.2)
    with pytest.raises(KeyError, match="the block's own error wins"):
        async with running(Manager(metrics_bind_address="0")):
            raise KeyError("the block's own error wins")


async def test_stop_before_start_runs_is_remembered() -> None:
    journal: list[str] = []
    mgr = Manager(metrics_bind_address="0")
    early = Tracked("early", journal)
    mgr.add(early)
    task = asyncio.create_task(mgr.start(handle_signals=False))
    mgr.stop()  # before the task has run at all
    await asyncio.wait_for(task, 5)  # without the remembered stop, start() would run until cancelled
    assert not early.running
