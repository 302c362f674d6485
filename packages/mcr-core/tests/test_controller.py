"""Controller result semantics, concurrency and lifecycle, fed through a Channel source."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcr import metrics
from mcr.controller import Controller
from mcr.errors import TerminalError
from mcr.reconcile import Request, Result, current_cluster
from mcr.source import Channel, GenericEvent
from mcr.testing import eventually

_counter = 0


def unique(prefix: str) -> str:
    global _counter
    _counter += 1
    return f"{prefix}-{_counter}"


def cm(name: str, ns: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}


@contextlib.asynccontextmanager
async def running(ctrl: Controller) -> AsyncIterator[Controller]:
    task = asyncio.create_task(ctrl.start())
    try:
        yield ctrl
    finally:
        task.cancel()
        await asyncio.wait([task])
        assert task.cancelled(), "start() ends by re-raising the cancellation"


def with_channel(name: str, reconciler: object, **opts: Any) -> tuple[Controller, asyncio.Queue[Any]]:
    events: asyncio.Queue[Any] = asyncio.Queue()
    ctrl = Controller(name, reconciler, **opts)
    ctrl.watch(Channel(events))
    return ctrl, events


def sample(metric: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(metric, labels) or 0.0


async def test_success_forgets_and_counts() -> None:
    name = unique("ok")
    seen: list[tuple[Request, str]] = []

    async def reconcile(req: Request) -> None:
        seen.append((req, current_cluster()))

    ctrl, events = with_channel(name, reconcile)
    async with running(ctrl):
        events.put_nowait(GenericEvent(cm("a"), "east"))
        await eventually(lambda: len(seen) == 1)
        await eventually(
            lambda: (
                sample(
                    "controller_runtime_reconcile_total", controller=name, result="success", cluster="east"
                )
                == 1
            )
        )
    assert seen == [(Request("ns", "a", "east"), "east")]
    assert ctrl.queue.num_requeues(Request("ns", "a", "east")) == 0


async def test_successes_count_per_cluster_within_one_run() -> None:
    # Queued before the worker starts, the requests of two clusters come in runs that alternate
    # between them (round-robin): each success counts for its own cluster, a failure for none.
    name = unique("ok-runs")
    seen: list[Request] = []

    async def reconcile(req: Request) -> None:
        seen.append(req)
        if req.name == "e":
            raise TerminalError("not this one")

    ctrl, events = with_channel(name, reconcile)
    for obj, cluster in (("a", "east"), ("b", "west"), ("c", "east"), ("d", "west"), ("e", "east")):
        events.put_nowait(GenericEvent(cm(obj), cluster))
    events.put_nowait(GenericEvent(cm("f"), "west"))
    async with running(ctrl):
        await eventually(lambda: len(seen) == 6)
        ctrl.flush_metrics()

        def total(result: str, cluster: str) -> float:
            metric = "controller_runtime_reconcile_total"
            return sample(metric, controller=name, result=result, cluster=cluster)

        assert (total("success", "east"), total("success", "west")) == (2, 3)
        assert (total("error", "east"), total("error", "west")) == (1, 0)
    assert [r.cluster_name for r in seen] == ["east", "west"] * 3


async def test_errors_back_off_exponentially_from_5ms(caplog: pytest.LogCaptureFixture) -> None:
    name = unique("err")
    stamps: list[float] = []

    async def reconcile(req: Request) -> None:
        stamps.append(time.monotonic())
        if len(stamps) <= 6:
            raise RuntimeError(f"boom {len(stamps)}")

    ctrl, events = with_channel(name, reconcile)
    with caplog.at_level(logging.ERROR, logger="mcr.controller"):
        async with running(ctrl):
            events.put_nowait(cm("a"))
            await eventually(lambda: len(stamps) == 7, timeout=5)
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    for n, gap in enumerate(gaps):
        expected = 0.005 * 2**n
        assert expected - 0.002 <= gap <= expected + 0.15, (n, gaps)
    assert sample("controller_runtime_reconcile_errors_total", controller=name, cluster="") == 6
    assert sample("controller_runtime_reconcile_total", controller=name, result="error", cluster="") == 6
    assert sample("controller_runtime_reconcile_total", controller=name, result="success", cluster="") == 1
    assert ctrl.queue.num_requeues(Request("ns", "a")) == 0, "success forgets the backoff"
    assert not ctrl.queue.backed_off
    errors = [r for r in caplog.records if r.getMessage() == "reconciler error"]
    assert len(errors) == 6
    assert errors[0].exc_info is not None
    assert "boom 1" in str(errors[0].exc_info[1])


async def test_terminal_error_is_not_requeued() -> None:
    name = unique("terminal")
    calls = 0

    async def reconcile(req: Request) -> None:
        nonlocal calls
        calls += 1
        raise TerminalError("cannot ever work")

    ctrl, events = with_channel(name, reconcile)
    async with running(ctrl):
        events.put_nowait(GenericEvent(cm("a"), "c1"))
        await eventually(
            lambda: (
                sample("controller_runtime_terminal_reconcile_errors_total", controller=name, cluster="c1")
                == 1
            )
        )
        await asyncio.sleep(0.1)  # would be several retries by now if it were requeued
    assert calls == 1
    assert sample("controller_runtime_reconcile_errors_total", controller=name, cluster="c1") == 1
    assert ctrl.queue.waiting() == 0


async def test_requeue_after_reconciles_again_after_the_delay() -> None:
    name = unique("after")
    stamps: list[float] = []

    async def reconcile(req: Request) -> Result:
        stamps.append(time.monotonic())
        return Result(requeue_after=0.2) if len(stamps) == 1 else Result()

    ctrl, events = with_channel(name, reconcile)
    async with running(ctrl):
        events.put_nowait(cm("a"))
        await eventually(lambda: len(stamps) == 2, timeout=10)
    assert 0.2 <= stamps[1] - stamps[0] < 2.0  # not before the delay; the bound allows for a loaded machine
    assert (
        sample("controller_runtime_reconcile_total", controller=name, result="requeue_after", cluster="") == 1
    )


async def test_returning_something_else_is_an_error() -> None:
    name = unique("badresult")
    calls = 0

    async def reconcile(req: Request) -> Any:
        nonlocal calls
        calls += 1
        return True if calls == 1 else None

    ctrl, events = with_channel(name, reconcile)
    async with running(ctrl):
        events.put_nowait(cm("a"))
        await eventually(lambda: calls == 2)
    assert sample("controller_runtime_reconcile_total", controller=name, result="error", cluster="") == 1


async def test_a_key_is_never_reconciled_concurrently() -> None:
    name = unique("overlap")
    active: set[Request] = set()
    overlaps: list[Request] = []
    max_parallel = 0
    done = 0

    async def reconcile(req: Request) -> None:
        nonlocal max_parallel, done
        if req in active:
            overlaps.append(req)
        active.add(req)
        max_parallel = max(max_parallel, len(active))
        await asyncio.sleep(0.002)
        active.discard(req)
        done += 1

    ctrl, events = with_channel(name, reconcile, max_concurrent_reconciles=4)
    async with running(ctrl):
        for i in range(400):
            events.put_nowait(cm(f"k{i % 6}"))
            if i % 20 == 0:
                await asyncio.sleep(0.001)
        await eventually(lambda: len(ctrl.queue) == 0 and not ctrl.queue.processing(), timeout=10)
    assert overlaps == []
    assert max_parallel == 4, "four workers should have worked on different keys at once"
    assert sample("controller_runtime_max_concurrent_reconciles", controller=name) == 4


async def test_sync_reconciler_runs_in_a_thread_with_the_cluster_set() -> None:
    name = unique("sync")
    seen: list[tuple[str, bool]] = []
    loop_thread = threading.get_ident()

    def reconcile(req: Request) -> None:
        seen.append((current_cluster(), threading.get_ident() != loop_thread))

    ctrl, events = with_channel(name, reconcile)
    async with running(ctrl):
        events.put_nowait(GenericEvent(cm("a"), "west"))
        await eventually(lambda: seen)
    assert seen == [("west", True)]


async def test_reconciler_object_with_method() -> None:
    name = unique("obj")

    class R:
        def __init__(self) -> None:
            self.reqs: list[Request] = []

        async def reconcile(self, req: Request) -> Result | None:
            self.reqs.append(req)
            return None

    r = R()
    ctrl, events = with_channel(name, r)
    async with running(ctrl):
        events.put_nowait(cm("x"))
        await eventually(lambda: r.reqs == [Request("ns", "x")])


async def test_reconcile_timeout_counts_as_error_and_retries() -> None:
    name = unique("timeout")
    calls = 0

    async def reconcile(req: Request) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(10)

    ctrl, events = with_channel(name, reconcile, reconcile_timeout=0.05)
    async with running(ctrl):
        events.put_nowait(cm("a"))
        await eventually(lambda: calls == 2, timeout=10)
    assert sample("controller_runtime_reconcile_timeouts_total", controller=name, cluster="") == 1
    assert sample("controller_runtime_reconcile_errors_total", controller=name, cluster="") == 1


async def test_stop_drains_in_flight_reconciles() -> None:
    name = unique("drain")
    started = asyncio.Event()
    finished: list[Request] = []

    async def reconcile(req: Request) -> None:
        started.set()
        await asyncio.sleep(0.1)
        finished.append(req)

    ctrl, events = with_channel(name, reconcile)
    task = asyncio.create_task(ctrl.start())
    events.put_nowait(cm("a"))
    await asyncio.wait_for(started.wait(), 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == [Request("ns", "a")], "an in-flight reconcile finishes before start() returns"


def test_names_must_be_unique() -> None:
    async def reconcile(req: Request) -> None:
        return None

    name = unique("dup")
    first = Controller(name, reconcile)
    with pytest.raises(ValueError, match=f"{name!r} already exists"):
        Controller(name, reconcile)
    Controller(name, reconcile, skip_name_validation=True)
    assert first.name == name


def test_bad_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="max_concurrent_reconciles"):
        Controller(unique("bad"), lambda req: None, max_concurrent_reconciles=0)
    with pytest.raises(TypeError, match="reconciler"):
        Controller(unique("bad"), None)


async def test_logs_inside_a_reconcile_carry_controller_cluster_namespace_name() -> None:
    from mcr.log import ContextFilter

    name = unique("logs")
    records: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Capture()
    handler.addFilter(ContextFilter())
    user_log = logging.getLogger("user.reconciler")
    user_log.addHandler(handler)
    user_log.setLevel(logging.INFO)

    async def reconcile(req: Request) -> None:
        user_log.info("reconciling")

    ctrl, events = with_channel(name, reconcile)
    try:
        async with running(ctrl):
            events.put_nowait(GenericEvent(cm("obj", ns="team-a"), "east"))
            await eventually(lambda: records)
    finally:
        user_log.removeHandler(handler)
    (record,) = records
    fields = record.mcr  # type: ignore[attr-defined]  # set by ContextFilter
    assert {k: fields[k] for k in ("controller", "cluster", "namespace", "name")} == {
        "controller": name,
        "cluster": "east",
        "namespace": "team-a",
        "name": "obj",
    }
    outside = logging.LogRecord("x", logging.INFO, "", 0, "outside", (), None)
    ContextFilter().filter(outside)
    assert outside.cluster == ""  # type: ignore[attr-defined]  # nothing leaks out of the reconcile


async def test_a_backlog_in_one_cluster_does_not_starve_another() -> None:
    name = unique("fair")
    order: list[str] = []

    async def reconcile(req: Request) -> None:
        order.append(req.cluster_name)

    ctrl = Controller(name, reconcile)
    for i in range(10_000):
        ctrl.queue.add(Request("ns", f"a-{i}", "A"))
    ctrl.queue.add(Request("ns", "b-0", "B"))
    async with running(ctrl):
        await eventually(lambda: "B" in order, timeout=10)
    assert order.index("B") <= 2, order[:5]


async def test_a_single_worker_takes_runs_and_drain_drops_the_held_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Runs grow while they are quick (here: always), so the worker holds requests it has taken
    # but not started; a hand-over of their cluster (drain) must drop them, not reconcile them.
    monkeypatch.setattr("mcr.controller.controller.RUN_SECONDS", 60.0)
    seen: list[Request] = []
    gates = {"pre": asyncio.Event(), "a0": asyncio.Event()}
    started = {name: asyncio.Event() for name in gates}

    async def reconcile(req: Request) -> None:
        seen.append(req)
        if req.name in gates:
            started[req.name].set()
            await gates[req.name].wait()

    ctrl = Controller(unique("runs"), reconcile)
    async with running(ctrl):
        try:
            warm = [Request("ns", f"w{i}", "w") for i in range(200)]
            ctrl.queue.add_many(warm, cluster="w")
            await eventually(lambda: len(seen) == len(warm), timeout=5)
            assert seen == warm  # taken in order, each reconciled once
            ctrl.queue.add(Request("ns", "pre", "w"))
            await asyncio.wait_for(started["pre"].wait(), 5)
            held = [Request("ns", f"a{i}", "a") for i in range(10)]
            ctrl.queue.add_many(held, cluster="a")
            gates["pre"].set()
            await asyncio.wait_for(started["a0"].wait(), 5)
            assert len(ctrl.queue.processing()) == len(held), "the worker took the whole run"
            assert len(ctrl.queue) == 0
            drain = asyncio.create_task(ctrl.drain("a", timeout=5))
            await asyncio.sleep(0.05)
            assert not drain.done(), "drain waits for the reconcile in flight"
            gates["a0"].set()
            assert await drain
            await asyncio.sleep(0.05)
            assert [r.name for r in seen if r.cluster_name == "a"] == ["a0"]
            assert ctrl.queue.processing() == []
            # Enqueued after the hand-over (another cluster's events mapped to it): not reconciled.
            ctrl.queue.add(Request("ns", "late", "a"))
            ctrl.queue.add(Request("ns", "after", "w"))
            await eventually(lambda: seen[-1] == Request("ns", "after", "w"), timeout=5)
            assert [r.name for r in seen if r.cluster_name == "a"] == ["a0"]
        finally:
            for gate in gates.values():
                gate.set()  # else stopping the controller would wait for ever


async def test_several_workers_take_one_request_each() -> None:
    # With several workers a run would hold requests an idle worker could start: a slow
    # reconcile must not keep the next requests waiting.
    started = asyncio.Event()
    gate = asyncio.Event()
    seen: list[str] = []

    async def reconcile(req: Request) -> None:
        seen.append(req.name)
        if req.name == "slow":
            started.set()
            await gate.wait()

    ctrl = Controller(unique("one-each"), reconcile, max_concurrent_reconciles=2)
    async with running(ctrl):
        try:
            ctrl.queue.add_many([Request("ns", n, "c") for n in ("slow", "b", "c", "d")], cluster="c")
            await asyncio.wait_for(started.wait(), 5)
            await eventually(lambda: seen == ["slow", "b", "c", "d"], timeout=5)
        finally:
            gate.set()
