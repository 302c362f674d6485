"""Fairness (issue 5, item 4(f)): a 10,000-item backlog in one cluster must not delay another.

Cluster A holds (or receives) ``backlog`` ConfigMaps; the reconciler is slow-ish (``await
asyncio.sleep(0.001)`` per item, ``workers`` concurrent reconciles), so A's backlog takes seconds
to drain. While it drains, the server modifies ConfigMaps of cluster B at a steady rate; the
delay of each B event (commit → reconcile, from ``data.t``) is measured. Two backlog shapes:

- ``initial-list``: A's objects exist before A is engaged (its informer's initial list);
- ``watch``: A is engaged empty, then the objects are created (watch events, normal priority).

Subject: mcr's Controller (per-cluster queues served round-robin). Baseline: the same informers
(mcr's cluster caches) feeding one de-duplicating FIFO served by the same number of workers with
the same reconcile — what a queue without per-cluster fairness does.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from bench.multicluster._proc import Child
from bench.multicluster._worker import percentile
from mcr.testing import eventually

SLEEP_S = 0.001


class _Fifo:
    """A de-duplicating FIFO fed by informer handlers of several clusters (the unfair baseline)."""

    def __init__(self) -> None:
        self.order: deque[tuple[str, str, str]] = deque()
        self.queued: set[tuple[str, str, str]] = set()
        self.ready = asyncio.Event()

    def add(self, key: tuple[str, str, str]) -> None:
        if key not in self.queued:
            self.queued.add(key)
            self.order.append(key)
            self.ready.set()

    async def get(self) -> tuple[str, str, str]:
        while not self.order:
            self.ready.clear()
            await self.ready.wait()
        key = self.order.popleft()
        self.queued.discard(key)
        return key


class _Handler:
    def __init__(self, cluster: str, fifo: _Fifo) -> None:
        self.cluster = cluster
        self.fifo = fifo

    def _add(self, obj: Any) -> None:
        meta = obj["metadata"]
        self.fifo.add((self.cluster, meta.get("namespace", ""), meta["name"]))

    def on_add(self, obj: Any, is_initial_list: bool) -> None:
        self._add(obj)

    def on_update(self, old: Any, new: Any) -> None:
        self._add(new)

    def on_delete(self, obj: Any) -> None:
        return None


async def _run_case(
    servers: Child,
    entries: list[dict[str, Any]],
    *,
    subject: str,
    shape: str,
    backlog: int,
    workers: int,
    touches: int,
    rate: float,
) -> dict[str, Any]:
    from mcr.cluster import Cluster

    a_done = 0
    a_drained_at = float("inf")
    b_events: list[tuple[float, float]] = []  # (commit time, delay) of each B event

    def note(cluster: str, data: dict[str, Any] | None) -> None:
        nonlocal a_done, a_drained_at
        if cluster == "a":
            a_done += 1
            if a_done == backlog:
                a_drained_at = time.time()
        elif data and data.get("p") == "ft":
            committed = float(data["t"])
            b_events.append((committed, time.time() - committed))

    if shape == "initial-list":
        await asyncio.to_thread(servers.ask, {"op": "create", "servers": [0], "per": backlog, "phase": "fa"})
    await asyncio.to_thread(servers.ask, {"op": "create", "servers": [1], "per": 50, "phase": "fb"})

    clusters = {
        "a": await Cluster.from_kubeconfig_async(entries[0]["kubeconfig"], name="a"),
        "b": await Cluster.from_kubeconfig_async(entries[1]["kubeconfig"], name="b"),
    }
    stop: Callable[[], Awaitable[None]]
    if subject == "mcr":
        stop = await _start_mcr(clusters, workers, note)
    else:
        stop = await _start_fifo(clusters, workers, note)
    try:
        if shape == "watch":
            await asyncio.to_thread(
                servers.ask, {"op": "create", "servers": [0], "per": backlog, "phase": "fa"}
            )
        start = time.time()
        touch = {"op": "modify", "servers": [1], "per": 50, "count": touches, "rate": rate}
        await asyncio.to_thread(servers.ask, {**touch, "phase": "ft", "prefix": "fb"})
        await eventually(
            lambda: len(b_events) >= touches and a_done >= backlog,
            timeout=120,
            message=f"{touches} events of cluster B and {backlog} of A reconciled",
        )
    finally:
        await stop()
        await asyncio.to_thread(servers.ask, {"op": "wipe"})
    # B events committed while A still had a backlog (what fairness is about)
    b_during = [delay for committed, delay in b_events if committed < a_drained_at]
    return {
        "bench": "fairness",
        "subject": subject,
        "backlog": f"{backlog} CMs in A, {shape}",
        "workers": workers,
        "b_events": len(b_events),
        "b_during_backlog": len(b_during),
        "b_p50_ms": round(percentile(b_during, 0.5) * 1e3, 1),
        "b_p99_ms": round(percentile(b_during, 0.99) * 1e3, 1),
        "a_drain_s": round(a_drained_at - start, 2) if a_drained_at != float("inf") else None,
    }


async def _start_mcr(
    clusters: dict[str, Any], workers: int, note: Callable[[str, dict[str, Any] | None], None]
) -> Callable[[], Awaitable[None]]:
    from mcr.builder import controller_managed_by
    from mcr.manager import Manager
    from mcr.providers import ClustersProvider
    from mcr.reconcile import Request

    provider = ClustersProvider()
    mgr = Manager(provider=provider, metrics_bind_address="0")

    async def reconcile(req: Request) -> None:
        cluster = clusters[req.cluster_name]
        obj = await cluster.client.get("v1/ConfigMap", req.name, namespace=req.namespace)
        note(req.cluster_name, obj.get("data"))
        await asyncio.sleep(SLEEP_S)

    (
        controller_managed_by(mgr)
        .named("bench-fairness")
        .for_("v1/ConfigMap")
        .with_options(max_concurrent_reconciles=workers)
        .complete(reconcile)
    )
    task = asyncio.create_task(mgr.start(handle_signals=False))
    for name, cluster in clusters.items():
        await provider.add(name, cluster)
    from mcr.manager.engagements import ClusterState

    await eventually(
        lambda: all(i.state == ClusterState.SYNCED for i in mgr.clusters()) and len(mgr.clusters()) == 2,
        timeout=60,
        interval=0.01,
        message="clusters a and b synced",
    )

    async def stop() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    return stop


async def _start_fifo(
    clusters: dict[str, Any], workers: int, note: Callable[[str, dict[str, Any] | None], None]
) -> Callable[[], Awaitable[None]]:
    fifo = _Fifo()
    for name, cluster in clusters.items():
        await cluster.start()
        informer = await cluster.cache.get_informer("v1/ConfigMap")
        informer.add_event_handler(_Handler(name, fifo))
    for cluster in clusters.values():
        await cluster.wait_for_cache_sync(60)

    async def work() -> None:
        while True:
            name, ns, obj_name = await fifo.get()
            obj = await clusters[name].client.get("v1/ConfigMap", obj_name, namespace=ns)
            note(name, obj.get("data"))
            await asyncio.sleep(SLEEP_S)

    tasks = [asyncio.create_task(work()) for _ in range(workers)]

    async def stop() -> None:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for cluster in clusters.values():
            await cluster.stop()

    return stop


async def run_fairness(servers: Child, entries: list[dict[str, Any]], quick: bool) -> list[dict[str, Any]]:
    """mcr and the FIFO baseline, for both backlog shapes."""
    backlog = 2_000 if quick else 10_000
    rows = []
    for shape in ("initial-list", "watch"):
        for subject in ("mcr", "fifo"):
            rows.append(
                await _run_case(
                    servers,
                    entries,
                    subject=subject,
                    shape=shape,
                    backlog=backlog,
                    workers=4,
                    touches=40,
                    rate=20.0,
                )
            )
    return rows
