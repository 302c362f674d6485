"""B2: no-op reconcile throughput against the informer's raw event rate, in the same run.

An ``mcr-envtest`` server runs in a child process (pinned to CPU 0 when ``taskset`` exists; the
benchmark pins itself to CPU 1) holding N ConfigMaps. Each measurement uses a fresh
:class:`mcr.cluster.Cluster`, so its informer lists all N objects from scratch:

- floor: a counting event handler on the ConfigMap informer; events/s = N / (informer start →
  synced, every ``on_add`` delivered);
- subject: a Controller with ``Kind(ConfigMap)`` and a no-op async reconcile engaged on the
  cluster; reconciles/s = N / (engage → N distinct reconciles done).

Floor and subject alternate (floor, subject, floor, subject) and the best of each is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

SERVER_SCRIPT = r"""
import asyncio, json, sys, uuid
import mcr_envtest

async def main(n):
    async with mcr_envtest.Server(https=True, history_size=1000) as srv:
        for i in range(n):
            srv.store.commit("", "configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"cm-{i}", "namespace": "bench", "uid": str(uuid.uuid4()),
                             "creationTimestamp": "2026-01-01T00:00:00Z",
                             "labels": {"app": "bench", "index": str(i % 100)}},
                "data": {"key": "x" * 512},
            })
        print(json.dumps({"kubeconfig": srv.kubeconfig_path}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main(int(sys.argv[1])))
"""


@contextlib.contextmanager
def _server(n: int) -> Any:
    cmd = [sys.executable, "-c", SERVER_SCRIPT, str(n)]
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        cmd = ["taskset", "-c", "0", *cmd]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"envtest server for b2 exited early (code {proc.wait()})")
        yield json.loads(line)["kubeconfig"]
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _Counter:
    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0
        self.done = asyncio.Event()

    def on_add(self, obj: Any, is_initial_list: bool) -> None:
        self.count += 1
        if self.count == self.n:
            self.done.set()

    def on_update(self, old: Any, new: Any) -> None:
        return None

    def on_delete(self, obj: Any) -> None:
        return None


async def _floor(kubeconfig: str, n: int) -> float:
    from mcr.cluster import Cluster

    cluster = Cluster.from_kubeconfig(kubeconfig, name="b2-floor")
    await cluster.start()
    try:
        counter = _Counter(n)
        start = time.perf_counter()
        informer = await cluster.cache.get_informer("v1/ConfigMap")
        informer.add_event_handler(counter)
        await asyncio.wait_for(counter.done.wait(), 300)
        return n / (time.perf_counter() - start)
    finally:
        await cluster.stop()


async def _subject(kubeconfig: str, n: int) -> float:
    from mcr.cluster import Cluster
    from mcr.controller import Controller
    from mcr.reconcile import Request
    from mcr.source import Kind

    seen = 0
    done = asyncio.Event()

    async def reconcile(req: Request) -> None:
        nonlocal seen
        seen += 1
        if seen == n:
            done.set()

    cluster = Cluster.from_kubeconfig(kubeconfig, name="b2-subject")
    await cluster.start()
    ctrl = Controller("b2-noop", reconcile, skip_name_validation=True)
    ctrl.watch(Kind("v1/ConfigMap"))
    runner = asyncio.create_task(ctrl.start())
    try:
        start = time.perf_counter()
        engagement = asyncio.create_task(ctrl.engage("b2", cluster))
        await asyncio.wait_for(done.wait(), 300)
        elapsed = time.perf_counter() - start
        engagement.cancel()
        await asyncio.wait([engagement])
        return n / elapsed
    finally:
        runner.cancel()
        await asyncio.wait([runner])
        await cluster.stop()


async def run_b2(n: int) -> dict[str, float]:
    """Best-of-two floor and subject rates and their ratio (goal ≥ 0.7)."""
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {1})
    with _server(n) as kubeconfig:
        floors: list[float] = []
        subjects: list[float] = []
        for _ in range(2):
            floors.append(await _floor(kubeconfig, n))
            subjects.append(await _subject(kubeconfig, n))
    floor, subject = max(floors), max(subjects)
    return {"informer_events_per_s": floor, "reconciles_per_s": subject, "ratio": subject / floor}
