"""The server process of the multicluster benchmarks: a fleet of ``mcr-envtest`` servers.

``python -m bench.multicluster._servers --servers N --dir DIR`` starts N HTTPS servers in one
event loop (the :class:`mcr_envtest.Fleet` that ``mcr-envtest fleet up`` runs), writes
``DIR/fleet.json`` (``[{"url", "token", "ca_file", "kubeconfig"}]``, one entry per server) and the
``cluster-<i>.kubeconfig`` files, prints ``{"ready": N, "start_s": ...}`` and then executes one
JSON command per stdin line, answering each with one JSON line on stdout. EOF on stdin stops it.

Commands write straight into the servers' stores (``Store.commit``), the same code path an API
write ends in, so one process can produce tens of thousands of watch events per second; every
ConfigMap written carries ``data.p`` (phase), ``data.s`` (sequence) and ``data.t`` (``time.time()``
at commit), from which the subject computes event→reconcile latency:

- ``{"op": "create", "servers": [i, ...], "per": O, "phase": P}``: O ConfigMaps ``P-<j>`` in
  namespace ``bench`` of each listed server, interleaved across servers, as fast as possible.
- ``{"op": "modify", "servers": [...], "per": O, "count": C, "rate": R, "phase": P}``: C
  modifications at R per second in total, round-robin over the servers, touching object
  ``<prefix>-<j>`` (``prefix`` names the objects to modify, default ``b``) with ``j`` cycling over O.
- ``{"op": "wipe"}``: delete every ConfigMap in namespace ``bench`` of every server.
- ``{"op": "scenario", "server": i, "per": O, "count": C, "rate": R, "phase": P, "prefix": X,
  "fault": F, "fault_at": S}``: a ``modify`` of one server during which, ``S`` seconds in, the fault
  ``F`` strikes it: ``closed`` (every watch stream ends), ``expired`` (the watch history is dropped,
  then the streams end: resuming gets 410 Expired) or ``restart`` (the server stops and starts
  again on its port, keeping its objects). The answer adds ``t_fault`` and ``last``, the sequence
  number of each object's final write (``last[j]`` for ``X-<j>``).

Answers carry ``t0``/``t1`` (``time.time()`` of the first and last commit) and ``n`` (commits).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

from bench.multicluster._proc import serve_commands
from mcr_envtest import Fleet

NS = "bench"
_YIELD_EVERY = 200  # commits between yields, so the watch streams flush while a burst is written


def _configmap(name: str, phase: str, seq: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": str(uuid.uuid4()),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "bench", "phase": phase},
        },
        "data": {"p": phase, "s": str(seq), "t": repr(time.time()), "payload": "x" * 512},
    }


class Host:
    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def _commit(self, server: int, name: str, phase: str, seq: int) -> None:
        store = self.fleet.servers[server].store
        assert store is not None
        store.commit("", "configmaps", _configmap(name, phase, seq))

    async def create(self, servers: list[int], per: int, phase: str) -> dict[str, Any]:
        t0 = time.time()
        n = 0
        for j in range(per):
            for i in servers:
                self._commit(i, f"{phase}-{j}", phase, n)
                n += 1
                if n % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)
        return {"t0": t0, "t1": time.time(), "n": n}

    async def modify(
        self, servers: list[int], per: int, count: int, rate: float, phase: str, prefix: str
    ) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        t0 = time.time()
        n = 0
        k = len(servers)
        while n < count:
            due = min(count, int((loop.time() - start) * rate) + 1)
            while n < due:
                self._commit(servers[n % k], f"{prefix}-{(n // k) % per}", phase, n)
                n += 1
            await asyncio.sleep(0.002)
        return {"t0": t0, "t1": time.time(), "n": n}

    async def scenario(self, cmd: dict[str, Any]) -> dict[str, Any]:
        server = self.fleet.servers[cmd["server"]]
        stream = asyncio.create_task(
            self.modify([cmd["server"]], cmd["per"], cmd["count"], cmd["rate"], cmd["phase"], cmd["prefix"])
        )
        try:
            await asyncio.sleep(cmd["fault_at"])
            t_fault = time.time()
            fault = cmd["fault"]
            if fault == "closed":
                server.faults.close_watches()
            elif fault == "expired":
                server.faults.compact()
                server.faults.close_watches()
            elif fault == "restart":
                await server.restart(keep_state=True)
            else:
                raise ValueError(f"unknown fault {fault!r}")
            done = await stream
        finally:
            stream.cancel()
            await asyncio.gather(stream, return_exceptions=True)
        per, n = cmd["per"], done["n"]
        last = {j: max(range(j, n, per)) for j in range(min(per, n))}
        return {**done, "t_fault": t_fault, "last": last}

    def wipe(self) -> dict[str, Any]:
        n = 0
        for srv in self.fleet.servers:
            store = srv.store
            assert store is not None
            names = [o["metadata"]["name"] for o in store.list_objects("", "configmaps", NS)]
            for name in names:
                store.remove("", "configmaps", NS, name)
                n += 1
        return {"n": n}

    async def handle(self, cmd: dict[str, Any]) -> dict[str, Any]:
        op = cmd["op"]
        if op == "create":
            return await self.create(cmd["servers"], cmd["per"], cmd["phase"])
        if op == "modify":
            return await self.modify(
                cmd["servers"], cmd["per"], cmd["count"], cmd["rate"], cmd["phase"], cmd.get("prefix", "b")
            )
        if op == "wipe":
            return self.wipe()
        if op == "scenario":
            return await self.scenario(cmd)
        raise ValueError(f"unknown command {op!r} in {cmd!r}")


async def serve(n: int, directory: Path) -> None:
    start = time.perf_counter()
    fleet = Fleet(n, kubeconfig_dir=directory, https=True, history_size=60_000, real=False)
    await fleet.start()
    try:
        info = [
            {"url": s.url, "token": s.admin_token, "ca_file": s.ca_file, "kubeconfig": str(p)}
            for s, p in zip(fleet.servers, fleet.kubeconfig_paths, strict=True)
        ]
        (directory / "fleet.json").write_text(json.dumps(info))
        print(json.dumps({"ready": n, "start_s": time.perf_counter() - start}), flush=True)
        host = Host(fleet)
        await serve_commands(host.handle)
    finally:
        await fleet.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.multicluster._servers")
    parser.add_argument("--servers", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.servers, args.dir))


if __name__ == "__main__":
    main()
