"""The fences a controller obeys: a cluster's, which a coordinator publishes while it runs the
cluster, and the leadership's. A controller watching a real server reconciles under a Tenure the
test confirms and lets lapse; a "paused process" is the event loop blocked past the tenure's end,
right after a reconcile's next step became due (what SIGSTOP does to a replica, in one process)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcr.cluster import Cluster
from mcr.controller import Controller
from mcr.manager.coordinator import Tenure, fence_cluster
from mcr.reconcile import Request
from mcr.rest.config import RestConfig
from mcr.source import Kind
from mcr.testing import eventually

CM = "v1/ConfigMap"
_serial = itertools.count()


@pytest.fixture
async def cluster(apiserver: Any) -> AsyncIterator[Cluster]:
    c = Cluster(RestConfig.from_kubeconfig(apiserver.kubeconfig), name="fenced")
    await c.start()
    yield c
    await c.stop()


async def configmap(cluster: Cluster, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
    await cluster.api_reader.create(body)


class Run:
    """A controller watching ConfigMaps of ``cluster``; each reconcile records its start, then
    waits for ``gate`` (when set) and records that it went on."""

    def __init__(self, cluster: Cluster, *, leadership: Tenure | None = None) -> None:
        self.cluster = cluster
        self.log: list[tuple[str, str]] = []
        self.gate: asyncio.Future[None] | None = None
        self.ctrl = Controller(f"fenced-{next(_serial)}", self.reconcile)
        self.ctrl.watch(Kind(CM))
        if leadership is not None:
            self.ctrl.fence(leadership)
        self.tasks: list[asyncio.Task[None]] = []

    async def reconcile(self, req: Request) -> None:
        self.log.append(("start", req.name))
        if self.gate is not None and req.name.startswith("gated"):
            try:
                await self.gate
            except asyncio.CancelledError:
                self.log.append(("cancelled", req.name))
                raise
            self.log.append(("went on", req.name))

    async def __aenter__(self) -> Run:
        self.tasks = [
            asyncio.create_task(self.ctrl.start()),
            asyncio.create_task(self.ctrl.engage("fenced", self.cluster)),
        ]
        await eventually(lambda: self.ctrl.clusters() == {"fenced": "synced"}, timeout=15)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in reversed(self.tasks):
            task.cancel()
            await asyncio.wait([task])

    async def drained(self, *names: str) -> None:
        """Wait until the cache holds ``names`` and the controller has nothing left to do."""
        informer = await self.cluster.cache.get_informer(CM)

        def idle() -> bool:
            cached = all(informer.get(f"default/{n}") is not None for n in names)
            return cached and not self.ctrl.queue.processing() and len(self.ctrl.queue) == 0

        await eventually(idle, timeout=10, message=f"{names} handed to the controller")


def fenced_cluster(cluster: Cluster) -> Tenure:
    tenure = Tenure("fence of cluster 'fenced'")
    assert tenure.confirm(time.monotonic() + 60)
    fence_cluster("fenced", cluster, tenure)
    return tenure


async def test_a_lapsed_fence_cancels_the_clusters_reconciles_and_starts_none(cluster: Cluster) -> None:
    tenure = fenced_cluster(cluster)
    async with Run(cluster) as run:
        run.gate = asyncio.get_running_loop().create_future()
        await configmap(cluster, "before")
        await eventually(lambda: ("start", "before") in run.log, timeout=10)
        await configmap(cluster, "gated")
        await eventually(lambda: ("start", "gated") in run.log, timeout=10)
        tenure.lapse()  # another replica took the fence, or its deadline passed
        await eventually(lambda: ("cancelled", "gated") in run.log, timeout=5)
        await configmap(cluster, "after")
        await run.drained("after")
        assert ("start", "after") not in run.log
        assert ("went on", "gated") not in run.log


@pytest.mark.parametrize("fence", ["cluster", "leadership"])
async def test_a_paused_process_takes_no_further_fenced_step(cluster: Cluster, fence: str) -> None:
    loop = asyncio.get_running_loop()
    tenure = fenced_cluster(cluster) if fence == "cluster" else Tenure("leader lease")
    if fence == "leadership":
        assert tenure.confirm(time.monotonic() + 60)
    async with Run(cluster, leadership=tenure if fence == "leadership" else None) as run:
        gate = run.gate = loop.create_future()
        await configmap(cluster, "gated")
        await eventually(lambda: ("start", "gated") in run.log, timeout=10)
        run.ctrl.queue.add(Request("default", "queued", "fenced"))  # behind the one in flight
        # As if the last renewal had been confirmed long ago: valid for 0.2 s more, and the timer
        # that lapses it is not due before the process resumes.
        tenure.valid_until = time.monotonic() + 0.2

        def pause() -> None:
            gate.set_result(None)  # the reconcile's next step is due now...
            time.sleep(0.4)  # ...and the process stops until its fence has run out

        loop.call_soon(pause)
        ended = {("cancelled", "gated"), ("went on", "gated")}
        await eventually(lambda: ended & set(run.log), timeout=5, message="the gated reconcile ended")
        await run.drained("gated")
        assert ("went on", "gated") not in run.log, "a step ran after the fence's end"
        assert ("cancelled", "gated") in run.log
        assert ("start", "queued") not in run.log, "a reconcile started after the fence's end"
