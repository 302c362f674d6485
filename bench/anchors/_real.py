"""The server process of the anchors' real-lane row: one real kube-apiserver (mcr-envtest's real
mode), written to over its API.

``python -m bench.anchors._real --dir DIR``: starts ``mcr_envtest.Fleet(1, real=True)`` (the
binaries from ``KUBEBUILDER_ASSETS`` or mcr's build cache), writes ``DIR/fleet.json`` like
:mod:`bench.multicluster._servers`, prints ``{"ready": 1, "start_s": ...}`` and serves the same
commands for server 0, through HTTPS requests (32 in flight) instead of store commits:
``create`` (POST), ``modify`` (merge patch of ``data``; ``rate`` is ignored: as fast as the server
takes them) and ``wipe`` (delete collection). Namespace ``bench`` is created at start. EOF on stdin
stops it and the control plane. When the control plane cannot start (no binaries), the first line
is ``{"skipped": reason}`` and the process ends.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import time
from pathlib import Path
from typing import Any

from bench.multicluster._proc import serve_commands
from mcr_envtest import Fleet
from mcr_envtest.real import AssetsError, ControlPlaneError, RealModeError

NS = "bench"
_IN_FLIGHT = 32


class Writer:
    def __init__(self, url: str, token: str, ca_file: str) -> None:
        import aiohttp

        self.url = url
        self.ssl = ssl.create_default_context(cafile=ca_file)
        self.session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {token}"}, connector=aiohttp.TCPConnector(limit=_IN_FLIGHT)
        )

    async def close(self) -> None:
        await self.session.close()

    async def _send(self, method: str, path: str, body: dict[str, Any], ctype: str) -> None:
        async with self.session.request(
            method, self.url + path, data=json.dumps(body), headers={"Content-Type": ctype}, ssl=self.ssl
        ) as resp:
            if resp.status >= 300 and resp.status != 409:
                raise RuntimeError(f"{method} {path}: HTTP {resp.status}: {(await resp.text())[:200]}")
            await resp.read()

    async def _many(self, calls: list[tuple[str, str, dict[str, Any], str]]) -> dict[str, Any]:
        t0 = time.time()
        queue = iter(calls)

        async def worker() -> None:
            for call in queue:
                await self._send(*call)

        await asyncio.gather(*(worker() for _ in range(_IN_FLIGHT)))
        return {"t0": t0, "t1": time.time(), "n": len(calls)}

    @staticmethod
    def _data(phase: str, seq: int) -> dict[str, str]:
        return {"p": phase, "s": str(seq), "t": repr(time.time()), "payload": "x" * 512}

    async def create(self, per: int, phase: str) -> dict[str, Any]:
        path = f"/api/v1/namespaces/{NS}/configmaps"
        calls = [
            (
                "POST",
                path,
                {
                    "metadata": {"name": f"{phase}-{j}", "labels": {"app": "bench"}},
                    "data": self._data(phase, j),
                },
                "application/json",
            )
            for j in range(per)
        ]
        return await self._many(calls)

    async def modify(self, per: int, count: int, phase: str, prefix: str) -> dict[str, Any]:
        calls = [
            (
                "PATCH",
                f"/api/v1/namespaces/{NS}/configmaps/{prefix}-{n % per}",
                {"data": self._data(phase, n)},
                "application/merge-patch+json",
            )
            for n in range(count)
        ]
        return await self._many(calls)

    async def wipe(self) -> dict[str, Any]:
        async with self.session.delete(f"{self.url}/api/v1/namespaces/{NS}/configmaps", ssl=self.ssl) as resp:
            await resp.read()
        return {"n": -1}

    async def handle(self, cmd: dict[str, Any]) -> dict[str, Any]:
        op = cmd["op"]
        if op == "create":
            return await self.create(cmd["per"], cmd["phase"])
        if op == "modify":
            return await self.modify(cmd["per"], cmd["count"], cmd["phase"], cmd.get("prefix", "b"))
        if op == "wipe":
            return await self.wipe()
        raise ValueError(f"unknown command {op!r} in {cmd!r}")


async def serve(directory: Path) -> None:
    start = time.perf_counter()
    fleet = Fleet(1, kubeconfig_dir=directory, https=True, real=True)
    try:
        await fleet.start()
    except (AssetsError, ControlPlaneError, RealModeError) as exc:
        print(json.dumps({"skipped": f"{type(exc).__name__}: {exc}"[:300]}), flush=True)
        return
    try:
        s = fleet.servers[0]
        info = [
            {
                "url": s.url,
                "token": s.admin_token,
                "ca_file": s.ca_file,
                "kubeconfig": str(fleet.kubeconfig_paths[0]),
            }
        ]
        (directory / "fleet.json").write_text(json.dumps(info))
        writer = Writer(s.url, s.admin_token, s.ca_file)
        try:
            await writer._send("POST", "/api/v1/namespaces", {"metadata": {"name": NS}}, "application/json")
            print(json.dumps({"ready": 1, "start_s": time.perf_counter() - start}), flush=True)
            await serve_commands(writer.handle)
        finally:
            await writer.close()
    finally:
        await fleet.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.anchors._real")
    parser.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.dir))


if __name__ == "__main__":
    main()
