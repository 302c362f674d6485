"""Cache benchmarks B1 (watch ingest), B5 (memory per cached object), B6 (initial sync).

``python -m bench core_cache [--objects N] [--https]``. An ``mcr-envtest`` server runs in a
subprocess (its own GIL); it is seeded with N ConfigMaps (default 10,000), each then patched
(every other one), so its watch history holds 1.5N events. Every result is a ratio to a floor measured in the
same run against the same server (PERFORMANCE.md §3):

* B6: informer start → has_synced, against a raw aiohttp GET of the whole list + orjson into a
  dict keyed by namespace/name (goal ≤ 1.5x).
* B1: events/s from a watch replaying the 1.5N history events into an informer that already
  caches the N objects (a counting handler registered), against a raw reader (aiohttp
  ``iter_any`` + split + orjson + dict cache, same N objects cached) (goal ≥ 0.8x). Run with the
  interpreter's default GC and with mcr's GC policy (:mod:`mcr.cache.gcpolicy`).
* B5: traced memory (tracemalloc) of the synced cache per object, against the same list decoded
  into plain dicts (goal ≤ 1.3x), with ``transform=None`` (same content as the floor) and with the
  default transform (managedFields dropped).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson

from mcr.cache import CacheOptions, GCPolicy, Informer, NamespaceConfig, ResourceEventHandlerFuncs
from mcr.cache.reflector import Reflector, ReflectorConfig, resource_path
from mcr.rest.config import load_config
from mcr.rest.kinds import GVK, GVR
from mcr.rest.transport import Transport

NS = "bench"
GVK_CM = GVK("", "v1", "ConfigMap")
GVR_CM = GVR("", "v1", "configmaps")
PATH = resource_path(GVR_CM, NS)


# -- the server process --------------------------------------------------------------------------
class ServerProcess:
    """``mcr-envtest serve`` in a subprocess (``bench.core_cache._server`` if it is not installed)."""

    def __init__(self, history_size: int, https: bool) -> None:
        exe = os.path.join(os.path.dirname(sys.executable), "mcr-envtest")
        if not os.path.exists(exe):
            exe = shutil.which("mcr-envtest") or ""
        self.fallback = not exe
        if exe:
            cmd = [exe, "serve", "--port", "0", "--history-size", str(history_size)]
            if not https:
                cmd.append("--http")
        else:
            cmd = [sys.executable, "-m", "bench.core_cache._server", "--history-size", str(history_size)]
            if https:
                cmd.append("--https")
        if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
            cmd = ["taskset", "-c", "0", *cmd]  # server on core 0, the subject pins itself to core 1
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark server did not start (exit code {self.proc.poll()}): {cmd}")
        if self.fallback:
            info = json.loads(line)
            self.url: str = info["url"]
            self.kubeconfig: str = info["kubeconfig"]
        else:  # "mcr-envtest serving <url>; kubeconfig: <path>"
            head, _, path = line.strip().partition("; kubeconfig: ")
            self.url = head.rsplit(" ", 1)[-1]
            self.kubeconfig = path

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        if not self.fallback:
            self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- seeding --------------------------------------------------------------------------------------
def configmap(i: int) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"cm-{i:05d}",
                "namespace": NS,
                "labels": {"app": f"app-{i % 50}", "tier": "backend", "release": "stable"},
                "annotations": {"bench.mcr.dev/note": "x" * 64},
            },
            "data": {"config.yaml": "key: value\n" * 12, "mode": "fast", "index": str(i)},
        }
    )


async def seed(transport: Transport, n: int) -> tuple[str, str]:
    """Create the namespace and N ConfigMaps, then patch each once. Returns (rv before, rv after)."""
    ns = orjson.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await transport.request("POST", "/api/v1/namespaces", body=ns, content_type="application/json")
    before = orjson.loads((await transport.request("GET", PATH)).body)["metadata"]["resourceVersion"]
    sem = asyncio.Semaphore(32)

    async def create(i: int) -> None:
        async with sem:
            await transport.request("POST", PATH, body=configmap(i), content_type="application/json")

    async def patch(i: int) -> None:
        async with sem:
            body = orjson.dumps({"data": {"mode": "patched"}})
            await transport.request(
                "PATCH", f"{PATH}/cm-{i:05d}", body=body, content_type="application/merge-patch+json"
            )

    await asyncio.gather(*(create(i) for i in range(n)))
    await asyncio.gather(*(patch(i) for i in range(0, n, 2)))
    after = orjson.loads((await transport.request("GET", PATH, query={"limit": "1"})).body)
    return before, after["metadata"]["resourceVersion"]


# -- floors ---------------------------------------------------------------------------------------
class Raw:
    """The floor client: one aiohttp session, orjson, a plain dict cache."""

    def __init__(self, url: str, headers: dict[str, str], ssl: Any) -> None:
        self.url = url
        self.headers = headers
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ssl), read_bufsize=2**18, trust_env=False
        )

    async def list(self, page_size: int = 0) -> dict[str, dict[str, Any]]:
        """The whole collection (in pages of ``page_size`` when > 0) as a dict by namespace/name."""
        out: dict[str, dict[str, Any]] = {}
        query: dict[str, str] = {"limit": str(page_size)} if page_size else {}
        while True:
            async with self.session.get(self.url + PATH, params=query, headers=self.headers) as resp:
                body = await resp.read()
            page = orjson.loads(body)
            for o in page["items"]:
                out[f"{o['metadata']['namespace']}/{o['metadata']['name']}"] = o
            token = page["metadata"].get("continue")
            if not token:
                return out
            query["continue"] = token

    async def watch(self, cache: dict[str, dict[str, Any]], rv: str, n: int) -> tuple[float, float]:
        """Read N events from ``rv`` into ``cache``; (wall, client CPU) seconds to the Nth event."""
        query = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        t0, c0 = time.perf_counter(), time.process_time()
        seen = 0
        buf = b""
        loads = orjson.loads
        async with self.session.get(self.url + PATH, params=query, headers=self.headers) as resp:
            async for chunk in resp.content.iter_any():
                parts = (buf + chunk).split(b"\n")
                buf = parts.pop()
                for line in parts:
                    ev = loads(line)
                    obj = ev["object"]
                    meta = obj["metadata"]
                    if ev["type"] == "DELETED":
                        cache.pop(f"{meta['namespace']}/{meta['name']}", None)
                    else:
                        cache[f"{meta['namespace']}/{meta['name']}"] = obj
                    seen += 1
                if seen >= n:
                    return time.perf_counter() - t0, time.process_time() - c0
        raise RuntimeError(f"watch ended after {seen} of {n} events")

    async def close(self) -> None:
        await self.session.close()


# -- subjects -------------------------------------------------------------------------------------
def new_informer(transport: Transport, transform: Any = "default", page_size: int = 500) -> Informer:
    opts = CacheOptions(default_namespaces={NS: NamespaceConfig()}, gc_policy=None, page_size=page_size)
    if transform != "default":
        opts.default_transform = transform
    return Informer(
        transport,
        GVK_CM,
        GVR_CM,
        namespaced=True,
        scopes=opts.scopes_for(GVK_CM),
        config=opts.reflector_config(),
    )


async def informer_sync(
    transport: Transport, transform: Any = "default", page_size: int = 500
) -> tuple[tuple[float, float], Informer]:
    """Start a fresh informer and wait for its sync: ((wall, client CPU) seconds, informer)."""
    informer = new_informer(transport, transform, page_size)
    t0, c0 = time.perf_counter(), time.process_time()
    informer.start()
    await informer.wait_for_sync(120)
    elapsed = time.perf_counter() - t0, time.process_time() - c0
    await informer.stop()
    return elapsed, informer


async def informer_ingest(transport: Transport, informer: Informer, rv: str, n: int) -> tuple[float, float]:
    """Replay N events from ``rv`` into a synced informer; (wall, client CPU) seconds.

    Events at a resourceVersion the informer already holds may be dropped (no handler call),
    so the end is detected by the reflector's count of events, checked on each notification (the
    last replayed event is a MODIFIED one, which is always notified).
    """
    done = asyncio.Event()
    reflector = Reflector(
        transport,
        PATH,
        informer,
        scope=NS,
        kind="ConfigMap",
        api_version="v1",
        transform=informer.scopes[0].transform,
        config=ReflectorConfig(),
    )
    notified = 0

    def on_event(*_: Any) -> None:
        nonlocal notified
        notified += 1
        if reflector.events >= n:
            done.set()

    reg = informer.add_event_handler(
        ResourceEventHandlerFuncs(on_add=on_event, on_update=on_event, on_delete=on_event)
    )
    reflector.resource_version = rv
    t0, c0 = time.perf_counter(), time.process_time()
    task = asyncio.create_task(reflector.watch_once())
    try:
        await asyncio.wait_for(done.wait(), 120)
        return time.perf_counter() - t0, time.process_time() - c0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        reg.remove()


async def median(fn: Callable[[], Awaitable[tuple[float, float]]], reps: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``reps`` runs."""
    runs = []
    for _ in range(reps):
        gc.collect()  # a previous run's informer (a reference cycle) must not weigh on this one
        runs.append(await fn())
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def ms(t: tuple[float, float]) -> tuple[float, float]:
    """(wall, CPU) seconds → (wall, CPU) milliseconds, rounded."""
    return round(t[0] * 1000, 1), round(t[1] * 1000, 1)


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def gc_variants(body: bytes, reps: int) -> dict[str, float]:
    """Median client CPU (ms) of ``orjson.loads`` + dict-by-name of one list body per GC setting."""
    saved = gc.get_threshold()
    variants = {
        "default": (saved, False),
        "thresholds": ((50_000, 20, 100), False),
        "thresholds+freeze": ((50_000, 20, 100), True),
    }
    out: dict[str, float] = {}
    try:
        for cached in (0, 5):
            for name, (thresholds, freeze) in variants.items():
                gc.unfreeze()
                gc.collect()
                gc.set_threshold(*thresholds)
                ballast = [orjson.loads(body) for _ in range(cached)]  # other caches' objects
                if freeze:
                    gc.collect()
                    gc.freeze()
                times, keep = [], []
                for _ in range(max(reps, 3)):
                    c0 = time.process_time()
                    items = orjson.loads(body)["items"]
                    keep.append({o["metadata"]["name"]: o for o in items})
                    times.append(time.process_time() - c0)
                label = f"{name}, {cached * len(keep[0])} more cached"
                out[label] = round(statistics.median(times) * 1000, 1)
                del ballast, keep
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved)
    return out


# -- the run --------------------------------------------------------------------------------------
async def run(n: int, https: bool, reps: int) -> dict[str, Any]:
    server = ServerProcess(history_size=2 * n + 100, https=https)
    results: dict[str, Any] = {
        "server": " ".join(server.cmd),
        "python": platform.python_version(),
        "loop": type(asyncio.get_running_loop()).__module__,
        "objects": n,
        "https": https,
        "gc_thresholds_default": gc.get_threshold(),
    }
    raw: Raw | None = None
    transport: Transport | None = None
    try:
        config = load_config(server.kubeconfig)
        transport = config.transport("bench")
        t0 = time.perf_counter()
        rv_before, _ = await seed(transport, n)
        results["seed_s"] = round(time.perf_counter() - t0, 1)
        headers = {"Authorization": await config.credentials.authorization() or ""}
        raw = Raw(config.host, headers, await config.ssl_context() or False)
        events = n + len(range(0, n, 2))  # the creates, then every other object patched once

        # -- B6 + B1 under default GC, then under the mcr policy -----------------------------------
        for label, policy in (("default_gc", None), ("mcr_gc_policy", GCPolicy())):
            gc.collect()
            if policy is not None:
                policy.acquire()
            try:

                async def raw_list(page_size: int = 0) -> tuple[float, float]:
                    t, c = time.perf_counter(), time.process_time()
                    await raw.list(page_size)
                    return time.perf_counter() - t, time.process_time() - c

                async def inf_sync(page_size: int = 500) -> tuple[float, float]:
                    return (await informer_sync(transport, page_size=page_size))[0]

                # envtest serves continue pages slowly (it rebuilds each page from its history), so
                # the paged variants run fewer times.
                paged_reps = max(1, reps - 1)
                list_floor = await median(raw_list, reps)
                paged_floor = await median(lambda: raw_list(500), paged_reps)
                sync = await median(inf_sync, paged_reps)
                sync_unpaged = await median(lambda: inf_sync(0), reps)

                # Both caches stay live through the ingest runs, so both pay the same GC.
                cache = await raw.list()
                informer = new_informer(transport)
                informer.start()
                await informer.wait_for_sync(120)
                await informer.stop()
                if policy is not None:
                    policy.after_sync()
                floors, ingests = [], []
                for _ in range(max(reps, 5)):
                    gc.collect()
                    floors.append(await raw.watch(cache, rv_before, events))
                    gc.collect()
                    ingests.append(await informer_ingest(transport, informer, rv_before, events))
                del cache, informer
                floor = statistics.median(f[0] for f in floors), statistics.median(f[1] for f in floors)
                ingest = statistics.median(i[0] for i in ingests), statistics.median(i[1] for i in ingests)
                results[label] = {
                    "B6_raw_list_ms": ms(list_floor),
                    "B6_raw_list_paged500_ms": ms(paged_floor),
                    "B6_informer_sync_ms": ms(sync),
                    "B6_informer_sync_unpaged_ms": ms(sync_unpaged),
                    "B6_ratio_wall": round(sync[0] / list_floor[0], 2),
                    "B6_ratio_wall_vs_paged": round(sync[0] / paged_floor[0], 2),
                    "B6_ratio_client_cpu": round(sync[1] / list_floor[1], 2),
                    "B1_floor_events_per_s_wall": round(events / floor[0]),
                    "B1_informer_events_per_s_wall": round(events / ingest[0]),
                    "B1_floor_events_per_client_cpu_s": round(events / floor[1]),
                    "B1_informer_events_per_client_cpu_s": round(events / ingest[1]),
                    "B1_ratio_wall": round(floor[0] / ingest[0], 2),
                    "B1_ratio_client_cpu": round(floor[1] / ingest[1], 2),
                }
            finally:
                if policy is not None:
                    policy.release()
                    gc.unfreeze()
            print(f"  {label}: {results[label]}", flush=True)

        # -- B5: memory per cached object ----------------------------------------------------------
        gc.collect()
        async with raw.session.get(raw.url + PATH, headers=headers) as resp:
            body = await resp.read()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        floor_cache = {
            f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in orjson.loads(body)["items"]
        }
        gc.collect()
        floor_bytes = (tracemalloc.get_traced_memory()[0] - base) / len(floor_cache)
        del floor_cache, body
        gc.collect()
        mem: dict[str, Any] = {"floor_bytes_per_object": round(floor_bytes)}
        for label, transform in (("no_transform", None), ("default_transform", "default")):
            gc.collect()
            base = tracemalloc.get_traced_memory()[0]
            rss0 = rss_mib()
            _, informer = await informer_sync(transport, transform)
            gc.collect()
            per = (tracemalloc.get_traced_memory()[0] - base) / len(informer)
            mem[f"{label}_bytes_per_object"] = round(per)
            mem[f"{label}_ratio"] = round(per / floor_bytes, 2)
            mem[f"{label}_rss_delta_mib"] = round(rss_mib() - rss0, 1)
            del informer
        tracemalloc.stop()
        results["B5"] = mem
        print(f"  B5: {mem}", flush=True)

        # -- GC policy: client CPU of decoding the list into dicts, with and without 50k more cached
        async with raw.session.get(raw.url + PATH, headers=headers) as resp:
            body = await resp.read()
        results["gc_list_decode_cpu_ms"] = gc_variants(body, reps)
        print(f"  GC: {results['gc_list_decode_cpu_ms']}", flush=True)
    finally:
        if raw is not None:
            await raw.close()
        if transport is not None:
            await transport.close()
        server.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench core_cache")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--https", action="store_true")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv or [])
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})
    t0 = time.perf_counter()
    results = asyncio.run(run(args.objects, args.https, args.reps))
    results["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    # B6 is judged against the same paged requests made by a bare client: the server's cost per
    # continue page dominates the wall time and is no property of the informer.
    policy = results["mcr_gc_policy"]
    ok = (
        policy["B1_ratio_client_cpu"] >= 0.8
        and policy["B6_ratio_wall_vs_paged"] <= 1.5
        and policy["B6_ratio_client_cpu"] <= 1.5
        and results["B5"]["no_transform_ratio"] <= 1.3
    )
    print("goals met" if ok else "GOALS NOT MET", flush=True)
    return 0
