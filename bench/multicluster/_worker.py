"""The measured process of the scaling benchmark (B3/B4): mcr, or the raw-reader floor.

``python -m bench.multicluster._worker --mode mcr|floor --clusters K --dir DIR``: engages the
first K servers listed in ``DIR/fleet.json`` (server ``i % len(fleet)`` for cluster ``i``, each
cluster with its own client objects, connection and watch), prints one JSON line with engage time
and RSS, then serves commands (one JSON line each on stdin, one answer on stdout):

- ``{"op": "expect", "phase": P, "count": N, "timeout": T}``: answers ``{"armed": P}`` at once,
  then, once N reconciles (mcr) / cached events (floor) of phase P happened (or T seconds passed),
  a summary: count, latency percentiles (event commit → reconcile, from ``data.t``), the
  ``time.time()`` of the last one, CPU seconds used meanwhile and RSS.

mcr mode: a :class:`mcr.Manager` over a :class:`mcr.providers.ClustersProvider`, clusters built
with :meth:`mcr.Cluster.from_kubeconfig` and added with ``provider.add``; one controller for
``v1/ConfigMap`` whose reconcile looks the cluster up and reads the object from the cache.

floor mode: per cluster one ``aiohttp.ClientSession`` (one shared ``SSLContext``, as mcr shares
one per CA), LIST then WATCH from the list's resourceVersion, ``iter_any`` + split + ``orjson`` into
a dict cache; the same GC thresholds as mcr's default :class:`mcr.cache.GCPolicy` and a
``gc.freeze()`` after the initial lists.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import ssl
import time
from pathlib import Path
from typing import Any

from bench.multicluster._proc import command_of, serve_commands

NS = "bench"


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Recorder:
    """Latencies per phase; ``expect`` arms a waiter for N observations of one phase."""

    def __init__(self) -> None:
        self.lat: dict[str, list[float]] = {}
        self.last: dict[str, float] = {}
        self._want: tuple[str, int, asyncio.Event] | None = None

    def record(self, data: dict[str, Any] | None) -> None:
        if not data or "p" not in data:
            return
        now = time.time()
        phase = data["p"]
        bucket = self.lat.setdefault(phase, [])
        bucket.append(now - float(data["t"]))
        self.last[phase] = now
        want = self._want
        if want is not None and want[0] == phase and len(bucket) >= want[1]:
            want[2].set()

    async def expect(self, phase: str, count: int, timeout: float) -> dict[str, Any]:
        done = asyncio.Event()
        self._want = (phase, count, done)
        if len(self.lat.get(phase, ())) >= count:
            done.set()
        cpu = time.process_time()
        lags: list[float] = []
        monitor = asyncio.create_task(_loop_lag(lags))
        pauses = GCPauses()
        gc.callbacks.append(pauses)
        print(json.dumps({"armed": phase}), flush=True)
        try:
            await asyncio.wait_for(done.wait(), timeout)
            complete = True
        except TimeoutError:
            complete = False
        finally:
            gc.callbacks.remove(pauses)
            self._want = None
            monitor.cancel()
            await asyncio.gather(monitor, return_exceptions=True)
        lat = self.lat.get(phase, [])
        return {
            "phase": phase,
            "complete": complete,
            "count": len(lat),
            "p50_ms": percentile(lat, 0.50) * 1e3,
            "p99_ms": percentile(lat, 0.99) * 1e3,
            "max_ms": max(lat, default=float("nan")) * 1e3,
            "last": self.last.get(phase, float("nan")),
            "cpu_s": time.process_time() - cpu,
            "loop_lag_p99_ms": percentile(lags, 0.99) * 1e3,
            "loop_lag_max_ms": max(lags, default=float("nan")) * 1e3,
            "gc": pauses.summary(),
            "rss": rss_bytes(),
        }


class GCPauses:
    """A ``gc.callbacks`` entry: how many collections of each generation ran, and their longest."""

    def __init__(self) -> None:
        self._start = 0.0
        self.count = [0, 0, 0]
        self.max_s = [0.0, 0.0, 0.0]
        self.total_s = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        took = time.perf_counter() - self._start
        gen = info["generation"]
        self.count[gen] += 1
        self.max_s[gen] = max(self.max_s[gen], took)
        self.total_s += took

    def summary(self) -> dict[str, Any]:
        return {
            "collections": self.count,
            "max_ms": [round(m * 1e3, 1) for m in self.max_s],
            "total_ms": round(self.total_s * 1e3, 1),
        }


async def _loop_lag(out: list[float]) -> None:
    """Append how late each 10 ms sleep wakes up: stalls of the event loop (runs until cancelled)."""
    loop = asyncio.get_running_loop()
    while True:
        start = loop.time()
        await asyncio.sleep(0.01)
        out.append(loop.time() - start - 0.01)


# -- mcr ------------------------------------------------------------------------------------------
async def run_mcr(paths: list[str], rec: Recorder) -> tuple[Any, Any]:
    from mcr.builder import controller_managed_by
    from mcr.cluster import Cluster
    from mcr.manager import Manager
    from mcr.manager.engagements import ClusterState
    from mcr.providers import ClustersProvider
    from mcr.reconcile import Request

    provider = ClustersProvider()
    mgr = Manager(provider=provider, metrics_bind_address="0")

    async def reconcile(req: Request) -> None:
        cluster = await mgr.get_cluster(req.cluster_name)
        obj = await cluster.client.get("v1/ConfigMap", req.name, namespace=req.namespace)
        rec.record(obj.get("data"))

    ctrl = controller_managed_by(mgr).named("bench-multicluster").for_("v1/ConfigMap").build(reconcile)
    task = asyncio.create_task(mgr.start(handle_signals=False), name="bench-manager")
    await asyncio.sleep(0.2)  # manager and provider running, no cluster yet
    gc.collect()
    rss0 = rss_bytes()
    start = time.perf_counter()
    for i, path in enumerate(paths):
        name = f"c{i}"
        await provider.add(name, Cluster.from_kubeconfig(path, name=name))
    added = time.perf_counter() - start
    k = len(paths)
    # Sync detection through the controller's own table, O(K) per poll. (Manager.clusters() asks
    # every controller for its whole table once per cluster, O(K²): about 1 s per call at K=1000,
    # measured below, which would slow the engagement it is supposed to observe.)
    poll = min(0.1, 0.002 * k)
    while sum(1 for state in ctrl.clusters().values() if state == "synced") < k:
        if task.done():
            task.result()
        await asyncio.sleep(poll)
    engaged = time.perf_counter() - start
    await asyncio.sleep(0.5)  # let post-sync work (GC freeze, first bookmarks) settle
    gc.collect()
    rss1 = rss_bytes()
    call = time.perf_counter()
    states = mgr.clusters()
    call = time.perf_counter() - call
    assert all(i.state == ClusterState.SYNCED for i in states)
    info = {"engage_s": engaged, "add_s": added, "rss0": rss0, "rss1": rss1, "manager_clusters_call_s": call}
    return task, info


# -- floor ----------------------------------------------------------------------------------------
class RawReader:
    """LIST + WATCH of ConfigMaps on one server into a dict cache (the floor client)."""

    def __init__(self, url: str, token: str, ssl_ctx: ssl.SSLContext, rec: Recorder) -> None:
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.ssl = ssl_ctx
        self.rec = rec
        self.cache: dict[str, Any] = {}
        self.synced = asyncio.Event()

    async def run(self) -> None:
        import aiohttp
        import orjson

        async with aiohttp.ClientSession(headers=self.headers) as session:
            async with session.get(f"{self.url}/api/v1/configmaps", ssl=self.ssl) as resp:
                resp.raise_for_status()
                body = orjson.loads(await resp.read())
            for obj in body["items"]:
                meta = obj["metadata"]
                self.cache[f"{meta['namespace']}/{meta['name']}"] = obj
            rv = body["metadata"]["resourceVersion"]
            self.synced.set()  # like an informer: synced once the list is cached; the watch resumes at rv
            params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
            timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
            async with session.get(
                f"{self.url}/api/v1/configmaps", params=params, ssl=self.ssl, timeout=timeout
            ) as resp:
                resp.raise_for_status()
                buf = b""
                cache = self.cache
                rec = self.rec
                async for chunk in resp.content.iter_any():
                    lines = (buf + chunk).split(b"\n")
                    buf = lines.pop()
                    for line in lines:
                        ev = orjson.loads(line)
                        kind = ev["type"]
                        if kind == "BOOKMARK":
                            continue
                        obj = ev["object"]
                        meta = obj["metadata"]
                        key = f"{meta['namespace']}/{meta['name']}"
                        if kind == "DELETED":
                            cache.pop(key, None)
                        else:
                            cache[key] = obj
                            rec.record(obj.get("data"))


async def run_floor(entries: list[dict[str, Any]], rec: Recorder) -> tuple[Any, Any]:
    import aiohttp  # noqa: F401  (imported before the baseline, as mcr's import is)
    import orjson  # noqa: F401  (imported before the baseline, as mcr's import is)

    gc.set_threshold(50_000, 20, 100)  # mcr's default GCPolicy thresholds
    await asyncio.sleep(0.2)
    gc.collect()
    rss0 = rss_bytes()
    start = time.perf_counter()
    ctx = ssl.create_default_context(cafile=entries[0]["ca_file"])
    readers = [RawReader(e["url"], e["token"], ctx, rec) for e in entries]
    tasks = [asyncio.create_task(r.run()) for r in readers]
    added = time.perf_counter() - start
    runner = asyncio.gather(*tasks)
    synced = asyncio.ensure_future(asyncio.gather(*(r.synced.wait() for r in readers)))
    pending: list[asyncio.Future[Any]] = [synced, runner]
    done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    if runner in done:
        synced.cancel()
        runner.result()  # a reader failed before every list was cached: raise its error
    engaged = time.perf_counter() - start
    gc.collect()
    gc.freeze()
    await asyncio.sleep(0.5)
    gc.collect()
    rss1 = rss_bytes()
    info = {"engage_s": engaged, "add_s": added, "rss0": rss0, "rss1": rss1}
    return runner, info


async def amain(mode: str, k: int, directory: Path) -> None:
    fleet = json.loads((directory / "fleet.json").read_text())
    entries = [fleet[i % len(fleet)] for i in range(k)]
    rec = Recorder()
    if mode == "mcr":
        task, info = await run_mcr([e["kubeconfig"] for e in entries], rec)
    else:
        task, info = await run_floor(entries, rec)
    print(json.dumps({"engaged": k, **info}), flush=True)

    async def expect(cmd: dict[str, Any]) -> dict[str, Any]:
        command_of(cmd, "expect")
        return await rec.expect(cmd["phase"], cmd["count"], cmd["timeout"])

    try:
        await serve_commands(expect)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.multicluster._worker")
    parser.add_argument("--mode", choices=("mcr", "floor"), required=True)
    parser.add_argument("--clusters", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args()
    import mcr

    mcr.run(_watched(amain(args.mode, args.clusters, args.dir)), loop=args.loop)


async def _watched(main: Any) -> None:
    """``main``, with the stall watchdog of :mod:`bench.multicluster._stalls` when
    ``BENCH_STALL_MS`` is set."""
    threshold = os.environ.get("BENCH_STALL_MS")
    if not threshold:
        await main
        return
    from bench.multicluster._stalls import Watchdog

    dog = Watchdog(asyncio.get_running_loop(), float(threshold) / 1e3)
    dog.start()
    try:
        await main
    finally:
        await dog.stop()


if __name__ == "__main__":
    main()
