"""B6: time from a cluster appearing to its first reconcile, against a raw LIST floor.

Runs in the benchmark's own process (pinned to CPU 1; the servers run in their own process on
CPU 0). Every run builds a new :class:`mcr.cluster.Cluster` (new client objects, new TLS
connection, new informer) for a server that already holds the objects:

- ``clusters-provider``: ``ClustersProvider.add(name, await Cluster.from_kubeconfig_async(...))`` →
  the first reconcile of that cluster (the cluster is removed again before the next run);
  for a cluster holding 1 ConfigMap and one holding ``big`` ConfigMaps (then also → all
  reconciled).
- ``file-provider``: a kubeconfig file renamed into the watched directory → first reconcile:
  noticed through the provider's directory watch (its default: inotify, then the watch's
  debounce), and with ``watch=False`` polling every 0.1 s and every 2 s (the provider's default
  interval; the poll wait is part of it).
- floor: a fresh ``aiohttp`` session + GET of the whole list + ``orjson`` decode (what any
  client must do before it can act on a new cluster), on the same servers.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import ssl
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.multicluster._worker import percentile
from mcr.testing import eventually


class FirstReconciles:
    """Records, per cluster name, when its first reconcile and its n-th reconcile happened."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first: dict[str, float] = {}
        self.waiters: dict[tuple[str, int], asyncio.Event] = {}

    def hit(self, cluster: str) -> None:
        n = self.counts.get(cluster, 0) + 1
        self.counts[cluster] = n
        if n == 1:
            self.first[cluster] = time.perf_counter()
        for (name, want), event in self.waiters.items():
            if name == cluster and n >= want:
                event.set()

    async def wait(self, cluster: str, n: int, timeout: float = 120.0) -> float:
        """Wait for ``n`` reconciles in ``cluster``; returns ``time.perf_counter()`` at that moment."""
        event = asyncio.Event()
        self.waiters[(cluster, n)] = event
        try:
            if self.counts.get(cluster, 0) < n:
                await asyncio.wait_for(event.wait(), timeout)
        finally:
            del self.waiters[(cluster, n)]
        return time.perf_counter()


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(values) * 1e3, 2),
        "p99_ms": round(percentile(values, 0.99) * 1e3, 2),
        "runs": len(values),
    }


async def _floor(entry: dict[str, Any], runs: int, page: int = 0) -> list[float]:
    """Seconds for a fresh session to LIST every ConfigMap into a dict (``page``: items per request)."""
    import aiohttp
    import orjson

    out: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        ctx = ssl.create_default_context(cafile=entry["ca_file"])
        headers = {"Authorization": f"Bearer {entry['token']}"}
        cache: dict[str, Any] = {}
        async with aiohttp.ClientSession(headers=headers) as session:
            params = {"limit": str(page)} if page else {}
            while True:
                async with session.get(f"{entry['url']}/api/v1/configmaps", params=params, ssl=ctx) as resp:
                    resp.raise_for_status()
                    body = orjson.loads(await resp.read())
                for o in body["items"]:
                    cache[f"{o['metadata']['namespace']}/{o['metadata']['name']}"] = o
                token = body["metadata"].get("continue")
                if not page or not token:
                    break
                params = {"limit": str(page), "continue": token}
            assert cache
            out.append(time.perf_counter() - start)
    return out


async def _clusters_provider(
    entry: dict[str, Any], runs: int, objects: int, cache_options: Any = None
) -> tuple[list[float], list[float], float]:
    """Engage latencies (first reconcile, all reconciled) of ``runs`` engagements after a cold one.

    The process's first engagement also pays one-time costs (lazy imports, the first TLS
    context and connection pool); it is returned separately (third item), not mixed into the
    distribution of the ``runs`` that follow.
    """
    from mcr.builder import controller_managed_by
    from mcr.cluster import Cluster
    from mcr.manager import Manager
    from mcr.providers import ClustersProvider
    from mcr.reconcile import Request

    provider = ClustersProvider()
    mgr = Manager(provider=provider, metrics_bind_address="0")
    seen = FirstReconciles()

    async def reconcile(req: Request) -> None:
        seen.hit(req.cluster_name)

    controller_managed_by(mgr).named("bench-engage").for_("v1/ConfigMap").complete(reconcile)
    task = asyncio.create_task(mgr.start(handle_signals=False))
    first: list[float] = []
    full: list[float] = []
    try:
        await asyncio.sleep(0.2)
        for r in range(-1, runs):  # run -1: the cold engagement
            name = f"engage-{objects}-{r}"
            start = time.perf_counter()
            cluster = await Cluster.from_kubeconfig_async(
                entry["kubeconfig"], name=name, cache_options=cache_options
            )
            await provider.add(name, cluster)
            await seen.wait(name, 1)
            first.append(seen.first[name] - start)
            if objects > 1:
                full.append(await seen.wait(name, objects) - start)
            await provider.remove(name)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return first[1:], full[1:], first[0]


async def _file_provider(entry: dict[str, Any], runs: int, interval: float, *, watch: bool) -> list[float]:
    from mcr.builder import controller_managed_by
    from mcr.manager import Manager
    from mcr.reconcile import Request
    from mcr_provider_file import FileProvider

    directory = Path(tempfile.mkdtemp(prefix="mcr-bench-files-"))
    staging = Path(tempfile.mkdtemp(prefix="mcr-bench-staging-"))
    provider = FileProvider(directories=[directory], poll_interval=interval, watch=watch)
    mgr = Manager(provider=provider, metrics_bind_address="0")
    seen = FirstReconciles()

    async def reconcile(req: Request) -> None:
        seen.hit(req.cluster_name)

    bench_ctrl = controller_managed_by(mgr).named("bench-engage-file").for_("v1/ConfigMap").build(reconcile)
    task = asyncio.create_task(mgr.start(handle_signals=False))
    out: list[float] = []
    rng = random.Random(5)
    content = await asyncio.to_thread(Path(entry["kubeconfig"]).read_bytes)
    try:
        await asyncio.sleep(0.2)
        for r in range(runs):
            path = directory / f"run-{r}.kubeconfig"
            tmp = staging / path.name
            tmp.write_bytes(content)
            name = f"{path}+{_context_name(content)}"
            # The previous run ended right after the provider noticed the removal: without a
            # random pause every file would appear at the same phase of the poll cycle (the
            # worst case) or of the watch's debounce.
            await asyncio.sleep(rng.uniform(0, interval))
            start = time.perf_counter()
            os.replace(tmp, path)  # the file appears complete, as a careful writer makes it
            await seen.wait(name, 1, timeout=interval * 3 + 60)
            out.append(seen.first[name] - start)
            path.unlink()

            def disengaged(gone: str = name) -> bool:  # the default binds this run's name
                return gone not in bench_ctrl.clusters()

            await eventually(
                disengaged,
                timeout=60,
                interval=0.01,
                message=f"{name} disengaged",
            )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
    return out


def _context_name(kubeconfig: bytes) -> str:
    for line in kubeconfig.decode().splitlines():
        if line.startswith("current-context:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    raise ValueError("kubeconfig without current-context")


async def run_engage(
    small: dict[str, Any], large: dict[str, Any], big: int, quick: bool
) -> list[dict[str, Any]]:
    """Rows for B6; ``small`` holds 1 ConfigMap, ``large`` holds ``big``."""
    runs_small = 20 if quick else 100
    runs_large = 2 if quick else 5
    rows: list[dict[str, Any]] = []
    first, _, cold = await _clusters_provider(small, runs_small, 1)
    floor = await _floor(small, runs_small)
    rows.append(
        {
            "bench": "B6",
            "path": "ClustersProvider.add, 1 CM",
            **_summary(first),
            "cold_first_ms": round(cold * 1e3, 1),
            "floor": _summary(floor),
        }
    )
    # The same with the cache's GC policy off (no raised collector thresholds while caches run).
    from mcr.cache import CacheOptions

    first, _, cold = await _clusters_provider(small, runs_small, 1, CacheOptions(gc_policy=None))
    rows.append(
        {
            "bench": "B6",
            "path": "ClustersProvider.add, 1 CM, gc_policy=None",
            **_summary(first),
            "cold_first_ms": round(cold * 1e3, 1),
        }
    )
    first, full, _ = await _clusters_provider(large, runs_large, big)
    floor = await _floor(large, runs_large)
    paged = await _floor(large, runs_large, page=500)  # pages as mcr's reflector (and client-go) list
    rows.append(
        {
            "bench": "B6",
            "path": f"ClustersProvider.add, {big} CMs",
            **_summary(first),
            "all_reconciled_p50_ms": round(statistics.median(full) * 1e3, 1),
            "floor": _summary(floor),
            "floor_paged_500": _summary(paged),
        }
    )
    file_paths = (
        ("file provider, directory watch, 1 CM", True, 0.1, 10 if quick else 30),
        ("file provider, polling every 0.1 s, 1 CM", False, 0.1, 10 if quick else 30),
        ("file provider, polling every 2.0 s, 1 CM", False, 2.0, 0 if quick else 5),
    )
    for path, watch, interval, runs in file_paths:
        if runs:
            out = await _file_provider(small, runs, interval, watch=watch)
            rows.append({"bench": "B6", "path": path, **_summary(out), "floor": None})
    return rows
