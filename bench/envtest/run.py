"""The envtest benchmark scenarios; see the package docstring."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

NS_PATH = "/api/v1/namespaces/default/configmaps"


def _emit(results: list[dict[str, Any]], **row: Any) -> None:
    results.append(row)
    print(json.dumps(row), flush=True)


@contextmanager
def _server(workdir: Path, profile: Path | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Start ``mcr-envtest serve`` in its own process; yield (url, kubeconfig); stop it on exit."""
    exe = shutil.which("mcr-envtest", path=str(Path(sys.executable).parent)) or shutil.which("mcr-envtest")
    kubeconfig_path = workdir / "kubeconfig"
    serve = ["serve", "--history-size", "400000", "--kubeconfig", str(kubeconfig_path)]
    if profile is not None:
        code = (
            "import cProfile, sys; from mcr_envtest.cli import main; "
            f"sys.argv = ['mcr-envtest', *{serve!r}]; "
            f"cProfile.run('main()', {str(profile)!r})"
        )
        cmd = [sys.executable, "-c", code]
    elif exe is not None:
        cmd = [exe, *serve]
    else:
        cmd = [sys.executable, "-c", "from mcr_envtest.cli import main; raise SystemExit(main())", *serve]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "serving" not in line:
            raise RuntimeError(f"mcr-envtest serve did not start: {line!r}")
        url = line.split("serving ", 1)[1].split(";", 1)[0].strip()
        yield url, yaml.safe_load(kubeconfig_path.read_text())
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@asynccontextmanager
async def _session(kubeconfig: dict[str, Any], limit: int) -> AsyncIterator[aiohttp.ClientSession]:
    cluster = kubeconfig["clusters"][0]["cluster"]
    user = kubeconfig["users"][0]["user"]
    ctx: ssl.SSLContext | bool = False
    if "certificate-authority-data" in cluster:
        ctx = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
    headers = {"Authorization": f"Bearer {user['token']}"} if "token" in user else {}
    connector = aiohttp.TCPConnector(limit=limit, ssl=ctx)
    async with aiohttp.ClientSession(cluster["server"], connector=connector, headers=headers) as session:
        yield session


def _cm(i: int) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i:06d}", "labels": {"app": "bench", "shard": str(i % 10)}},
            "data": {"a": "x" * 200, "b": str(i), "c": "y" * 300},
        }
    )


async def _create(session: aiohttp.ClientSession, start: int, n: int, concurrency: int) -> float:
    """Create n ConfigMaps with ``concurrency`` requests in flight; returns creates/s."""
    next_i = start
    end = start + n

    async def worker() -> None:
        nonlocal next_i
        while next_i < end:
            i = next_i
            next_i += 1
            async with session.post(NS_PATH, data=_cm(i), headers={"Content-Type": "application/json"}) as r:
                if r.status != 201:
                    raise RuntimeError(f"create cm-{i:06d}: HTTP {r.status}: {await r.text()}")
                await r.read()

    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for _ in range(concurrency):
            tg.create_task(worker())
    return n / (time.perf_counter() - t0)


async def _list(session: aiohttp.ClientSession, limit: int | None) -> tuple[float, int, str]:
    """Full list (following continue tokens when ``limit``); returns (seconds, items, rv)."""
    t0 = time.perf_counter()
    items = 0
    token = ""
    rv = ""
    while True:
        params = {"limit": str(limit)} if limit else {}
        if token:
            params["continue"] = token
        async with session.get(NS_PATH, params=params) as r:
            body = orjson.loads(await r.read())
        items += len(body["items"])
        rv = rv or body["metadata"]["resourceVersion"]
        token = body["metadata"].get("continue", "")
        if not token:
            return time.perf_counter() - t0, items, rv


async def _current_rv(session: aiohttp.ClientSession) -> str:
    async with session.get(NS_PATH, params={"limit": "1"}) as r:
        rv: str = orjson.loads(await r.read())["metadata"]["resourceVersion"]
    return rv


async def _watch(
    session: aiohttp.ClientSession, params: dict[str, str], want: int, ready: asyncio.Event | None = None
) -> int:
    """Read one watch stream until ``want`` non-bookmark events arrived; returns the count."""
    seen = 0
    tail = b""
    async with session.get(
        NS_PATH, params={"watch": "1", **params}, timeout=aiohttp.ClientTimeout(total=600)
    ) as r:
        if r.status != 200:
            raise RuntimeError(f"watch: HTTP {r.status}: {await r.text()}")
        if ready is not None:
            ready.set()
        async for chunk in r.content.iter_any():
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                ev = orjson.loads(line)
                if ev["type"] != "BOOKMARK":
                    seen += 1
            if seen >= want:
                return seen
    raise RuntimeError(f"watch ended after {seen} of {want} events")


async def _fan_in(session: aiohttp.ClientSession, watchers: int, params: dict[str, str], want: int) -> float:
    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for _ in range(watchers):
            tg.create_task(_watch(session, params, want))
    return watchers * want / (time.perf_counter() - t0)


async def _live(
    session: aiohttp.ClientSession, watchers: int, rv: str, writes: int, start: int
) -> tuple[float, float]:
    """K watchers from ``rv``; a writer creates ``writes`` objects; returns (delivered ev/s, writes/s)."""
    readies = [asyncio.Event() for _ in range(watchers)]
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(_watch(session, {"resourceVersion": rv}, writes, ready)) for ready in readies]
        for ready in readies:
            await ready.wait()
        t0 = time.perf_counter()
        write_rate = await _create(session, start, writes, 32)
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - t0
    return watchers * writes / elapsed, write_rate


async def _scenarios(
    kubeconfig: dict[str, Any], opts: argparse.Namespace, results: list[dict[str, Any]]
) -> None:
    n = opts.objects
    async with _session(kubeconfig, limit=200) as session:
        rv0 = await _current_rv(session)
        rate = await _create(session, 0, n, 32)
        _emit(results, scenario="create", objects=n, concurrency=32, per_second=round(rate))
        for limit in (None, 500):
            runs = [await _list(session, limit) for _ in range(3)]
            secs = statistics.median(r[0] for r in runs)
            _emit(
                results,
                scenario="list",
                objects=runs[0][1],
                limit=limit or 0,
                ms=round(secs * 1000, 1),
                objects_per_second=round(runs[0][1] / secs),
            )
        for k in opts.watchers:
            rate = await _fan_in(session, k, {}, n)
            _emit(
                results,
                scenario="watch-initial",
                watchers=k,
                events_per_watcher=n,
                events_per_second=round(rate),
            )
        for k in opts.watchers:
            rate = await _fan_in(session, k, {"resourceVersion": rv0}, n)
            _emit(
                results,
                scenario="watch-replay",
                watchers=k,
                events_per_watcher=n,
                events_per_second=round(rate),
            )
        rv = await _current_rv(session)
        start = n
        for k in opts.watchers:
            delivered, writes = await _live(session, k, rv, opts.live_writes, start)
            start += opts.live_writes
            rv = await _current_rv(session)
            _emit(
                results,
                scenario="watch-live",
                watchers=k,
                writes=opts.live_writes,
                writes_per_second=round(writes),
                events_per_second=round(delivered),
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench envtest")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every scenario")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--live-writes", type=int, default=2_000)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the server process to this file")
    opts, _unknown = parser.parse_known_args(argv or [])
    opts.watchers = [1, 10, 100]
    if opts.quick:
        opts.objects, opts.live_writes, opts.watchers = 500, 100, [1, 10]
    results: list[dict[str, Any]] = []
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; server: mcr-envtest serve (HTTPS)",
        flush=True,
    )
    t0 = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="bench-envtest-") as tmp,
        _server(Path(tmp), opts.profile) as (_url, cfg),
    ):
        asyncio.run(_scenarios(cfg, opts, results))
    print(f"\nenvtest benchmark finished in {time.perf_counter() - t0:.0f} s")
    print(f"{'scenario':<15} {'watchers':>8} {'result':>30}")
    for row in results:
        if row["scenario"] in ("create",):
            print(f"{'create':<15} {'':>8} {row['per_second']:>22,} objects/s")
        elif row["scenario"] == "list":
            what = f"{row['objects']:,} items" + (f" limit={row['limit']}" if row["limit"] else "")
            print(f"{'list':<15} {'':>8} {row['ms']:>12} ms ({what})")
        else:
            print(f"{row['scenario']:<15} {row['watchers']:>8} {row['events_per_second']:>23,} events/s")
    return 0
