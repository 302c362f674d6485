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


class CPU:
    """CPU seconds used by the server process (from /proc) and by this client process.

    On a shared 2-core machine wall-clock rates swing with the load of other processes; the CPU
    spent per event by the server is the stable figure, and ``1 / cpu_per_event`` is what one
    uncontended core would sustain.
    """

    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid
        self._tick = os.sysconf("SC_CLK_TCK")

    def server(self) -> float:
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / self._tick

    def sample(self) -> tuple[float, float]:
        usage = os.times()
        return self.server(), usage.user + usage.system


@contextmanager
def _server(workdir: Path, profile: Path | None) -> Iterator[tuple[CPU, dict[str, Any]]]:
    """Start ``mcr-envtest serve`` in its own process; yield (cpu meter, kubeconfig); stop it on exit."""
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
        yield CPU(proc.pid), yaml.safe_load(kubeconfig_path.read_text())
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


class _Meter:
    """Wall time and server/client CPU of one scenario."""

    def __init__(self, cpu: CPU) -> None:
        self.cpu = cpu

    def __enter__(self) -> _Meter:
        self.t0 = time.perf_counter()
        self.s0, self.c0 = self.cpu.sample()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        s1, c1 = self.cpu.sample()
        self.server_cpu, self.client_cpu = s1 - self.s0, c1 - self.c0

    def per(self, count: int) -> dict[str, float]:
        """Server and client CPU microseconds per unit, and the server's one-core capacity."""
        server_us = self.server_cpu / count * 1e6
        return {
            "server_cpu_us": round(server_us, 1),
            "client_cpu_us": round(self.client_cpu / count * 1e6, 1),
            "server_capacity_per_second": round(1e6 / server_us) if server_us > 0 else 0,
        }


async def _scenarios(
    cpu: CPU, kubeconfig: dict[str, Any], opts: argparse.Namespace, results: list[dict[str, Any]]
) -> None:
    n = opts.objects
    async with _session(kubeconfig, limit=200) as session:
        rv0 = await _current_rv(session)
        with _Meter(cpu) as m:
            rate = await _create(session, 0, n, 32)
        _emit(results, scenario="create", count=n, per_second=round(rate), **m.per(n))
        for limit in (None, 500):
            with _Meter(cpu) as m:
                runs = [await _list(session, limit) for _ in range(3)]
            secs = statistics.median(r[0] for r in runs)
            name = "list" if limit is None else f"list limit={limit}"
            _emit(results, scenario=name, count=runs[0][1], ms=round(secs * 1000, 1), **m.per(3 * runs[0][1]))
        for scenario, params in (("watch-initial", {}), ("watch-replay", {"resourceVersion": rv0})):
            for k in opts.watchers:
                # Many watchers read only the start of their stream, keeping the run short.
                each = min(n, max(1, opts.events_budget // k))
                with _Meter(cpu) as m:
                    rate = await _fan_in(session, k, params, each)
                _emit(
                    results,
                    scenario=scenario,
                    watchers=k,
                    count=k * each,
                    per_second=round(rate),
                    **m.per(k * each),
                )
        rv = await _current_rv(session)
        start = n
        for k in opts.watchers:
            with _Meter(cpu) as m:
                delivered, writes = await _live(session, k, rv, opts.live_writes, start)
            start += opts.live_writes
            rv = await _current_rv(session)
            _emit(
                results,
                scenario="watch-live",
                watchers=k,
                count=k * opts.live_writes,
                writes_per_second=round(writes),
                per_second=round(delivered),
                **m.per(k * opts.live_writes),
            )


def _summary(results: list[dict[str, Any]]) -> str:
    lines = [
        f"{'scenario':<18} {'watchers':>8} {'count':>9} {'wall rate /s':>13} {'server µs':>10} "
        f"{'server 1-core /s':>17} {'client µs':>10}",
    ]
    for row in results:
        rate = f"{row['per_second']:,}" if "per_second" in row else f"{row['ms']} ms"
        lines.append(
            f"{row['scenario']:<18} {row.get('watchers', ''):>8} {row['count']:>9,} {rate:>13} "
            f"{row['server_cpu_us']:>10} {row['server_capacity_per_second']:>17,} {row['client_cpu_us']:>10}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run every scenario once; prints JSON lines, then a table. Returns 0, or raises on failure."""
    parser = argparse.ArgumentParser(prog="python -m bench envtest")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every scenario")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--live-writes", type=int, default=1_000)
    parser.add_argument("--events-budget", type=int, default=300_000, help="events read per watch scenario")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the server process to this file")
    opts, _unknown = parser.parse_known_args(argv or [])
    opts.watchers = [1, 10, 100]
    if opts.quick:
        opts.objects, opts.live_writes, opts.watchers, opts.events_budget = 500, 100, [1, 10], 5_000
    results: list[dict[str, Any]] = []
    load = os.getloadavg()[0]
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load {load:.1f}; "
        "server: mcr-envtest serve (HTTPS), client: aiohttp + orjson",
        flush=True,
    )
    t0 = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="bench-envtest-") as tmp,
        _server(Path(tmp), opts.profile) as (cpu, cfg),
    ):
        asyncio.run(_scenarios(cpu, cfg, opts, results))
    print(f"\nenvtest benchmark finished in {time.perf_counter() - t0:.0f} s (load {os.getloadavg()[0]:.1f})")
    print(_summary(results))
    return 0
