"""The measured process of B7: mcr, or the raw-reader floor, following one cluster through faults.

``python -m bench.watch_faults._subject --mode mcr|floor --kubeconfig F --url U --token T --ca C``
caches the ConfigMaps of one server and records every write it sees (``data.p`` phase, ``data.s``
sequence number, ``data.t`` commit time, as the scaling bench's server process writes them). It
prints ``{"ready": ...}`` once synced, then answers one JSON command per stdin line:

``{"op": "settle", "phase": P, "last": {j: seq}, "per": O, "t_fault": T, "timeout": S}``: waits
until, for every object ``j``, a write with sequence ``last[j]`` (its final one) was seen, or ``S``
seconds passed; answers ``lost`` (objects whose final write was never seen), ``resume_s`` (from
``t_fault`` to the first write committed after it being seen), ``settle_s`` (from the last write
to the last object seen final) and the CPU seconds used.

mcr: a Manager over one cluster with one controller for ``v1/ConfigMap`` whose reconcile reads the
object from the cache, as the scaling bench's worker does; its informer resumes, relists and
reconnects by itself. floor: aiohttp + orjson, LIST then WATCH from the list's resourceVersion;
at the end of a stream it watches again from the last resourceVersion it saw, on 410 Expired it
lists again, on a connection error it retries every 0.1 s: the least a correct client does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import time
from typing import Any

from bench.multicluster._proc import command_of, serve_commands
from bench.multicluster._worker import Recorder


class Seen(Recorder):
    """Per phase: the highest sequence number seen per object, and when writes committed after a
    moment were first seen."""

    def __init__(self, per: int) -> None:
        super().__init__()
        self.per = per
        self.top: dict[str, dict[int, int]] = {}
        self.after: list[tuple[float, float]] = []  # (commit time, seen time) of each write
        self.changed = asyncio.Event()

    def record(self, data: dict[str, Any] | None) -> None:
        if not data or "p" not in data or "s" not in data:
            return
        seq = int(data["s"])
        top = self.top.setdefault(data["p"], {})
        j = seq % self.per
        if seq > top.get(j, -1):
            top[j] = seq
        self.after.append((float(data["t"]), time.time()))
        self.changed.set()

    async def settle(self, cmd: dict[str, Any]) -> dict[str, Any]:
        cpu = time.process_time()
        last = {int(j): int(seq) for j, seq in cmd["last"].items()}
        top = self.top.setdefault(cmd["phase"], {})
        deadline = time.monotonic() + float(cmd["timeout"])

        def missing() -> list[int]:
            return [j for j, seq in last.items() if top.get(j, -1) < seq]

        while missing() and time.monotonic() < deadline:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                break
        t_fault = float(cmd["t_fault"])
        resumed = [seen for committed, seen in self.after if committed > t_fault]
        newest = max((committed for committed, _ in self.after), default=float("nan"))
        final_seen = max((seen for _, seen in self.after), default=float("nan"))
        self.after.clear()
        return {
            "lost": len(missing()),
            "objects": len(last),
            "resume_s": (min(resumed) - t_fault) if resumed else None,
            "settle_s": final_seen - newest,
            "cpu_s": time.process_time() - cpu,
        }


async def run_mcr(kubeconfig: str, seen: Seen) -> Any:
    from bench.multicluster._worker import run_mcr as start

    task, _ = await start([kubeconfig], seen)
    return task


async def run_floor(url: str, token: str, ca: str, seen: Seen) -> Any:
    reader = Floor(url, token, ssl.create_default_context(cafile=ca), seen)
    task = asyncio.create_task(reader.run())
    await reader.synced.wait()
    return task


class Floor:
    """The raw reader, with what a correct client needs to survive the three faults."""

    def __init__(self, url: str, token: str, ctx: ssl.SSLContext, seen: Seen) -> None:
        self.url, self.ctx, self.seen = url, ctx, seen
        self.headers = {"Authorization": f"Bearer {token}"}
        self.cache: dict[str, Any] = {}
        self.synced = asyncio.Event()

    async def run(self) -> None:
        import aiohttp
        import orjson

        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with aiohttp.ClientSession(headers=self.headers, timeout=timeout) as session:
            rv: str | None = None
            while True:
                try:
                    if rv is None:
                        rv = await self._list(session, orjson.loads)
                    rv = await self._watch(session, rv, orjson.loads)
                except (aiohttp.ClientError, OSError):
                    await asyncio.sleep(0.1)

    async def _list(self, session: Any, loads: Any) -> str:
        async with session.get(f"{self.url}/api/v1/configmaps", ssl=self.ctx) as resp:
            resp.raise_for_status()
            body = loads(await resp.read())
        self.cache = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in body["items"]}
        for obj in body["items"]:
            self.seen.record(obj.get("data"))
        self.synced.set()
        rv: str = body["metadata"]["resourceVersion"]
        return rv

    async def _watch(self, session: Any, rv: str, loads: Any) -> str | None:
        """Watch from ``rv`` until the stream ends; the resourceVersion to resume from, ``None``
        to list again (410 Expired)."""
        params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        async with session.get(f"{self.url}/api/v1/configmaps", params=params, ssl=self.ctx) as resp:
            if resp.status == 410:
                return None
            resp.raise_for_status()
            buf = b""
            async for chunk in resp.content.iter_any():
                lines = (buf + chunk).split(b"\n")
                buf = lines.pop()
                for line in lines:
                    ev = loads(line)
                    kind, obj = ev["type"], ev["object"]
                    if kind == "ERROR":
                        return None if obj.get("code") == 410 else rv
                    rv = obj["metadata"]["resourceVersion"]
                    if kind == "BOOKMARK":
                        continue
                    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
                    if kind == "DELETED":
                        self.cache.pop(key, None)
                    else:
                        self.cache[key] = obj
                        self.seen.record(obj.get("data"))
        return rv


async def amain(args: argparse.Namespace) -> None:
    seen = Seen(args.per)
    if args.mode == "mcr":
        task = await run_mcr(args.kubeconfig, seen)
    else:
        task = await run_floor(args.url, args.token, args.ca, seen)
    print(json.dumps({"ready": args.mode}), flush=True)

    async def settle(cmd: dict[str, Any]) -> dict[str, Any]:
        return await seen.settle(command_of(cmd, "settle"))

    try:
        await serve_commands(settle)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.watch_faults._subject")
    parser.add_argument("--mode", choices=("mcr", "floor"), required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--per", type=int, required=True)
    args = parser.parse_args()
    import mcr

    mcr.run(amain(args))


if __name__ == "__main__":
    main()
