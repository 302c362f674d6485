"""B2: no-op reconcile throughput against the informer's raw event rate, in the same run.

An ``mcr-envtest`` server runs in a child process (pinned to CPU 0 when ``taskset`` exists; the
benchmark pins itself to CPU 1) holding N ConfigMaps. Each measurement uses a fresh
:class:`mcr.cluster.Cluster`, so its informer lists all N objects from scratch:

- floor: a counting event handler on the ConfigMap informer, taking the list in one ``on_adds``
  call as the controller's source does; events/s = N / (informer start → every event delivered);
- subject: a Controller with ``Kind(ConfigMap)`` and a no-op async reconcile engaged on the
  cluster; reconciles/s = N / (engage → N distinct reconciles done and their metrics flushed to
  Prometheus).

Both rates are reported per second of this process's CPU time (``time.process_time``), which
leaves out time spent waiting for the server (the server's list speed is not what B2 measures and
on a shared machine it varies run to run), and per wall second. Floor and subject alternate
(five rounds by default), each after a full collection so that no round pays for the garbage of
the one before; the median of each is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import shutil
import statistics
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

    def on_adds(self, objs: list[Any], is_initial_list: bool) -> None:
        # The informer's batch delivery of a list, which the controller's source uses too.
        self.count += len(objs)
        if self.count >= self.n:
            self.done.set()

    def on_update(self, old: Any, new: Any) -> None:
        return None

    def on_delete(self, obj: Any) -> None:
        return None


async def _floor(kubeconfig: str, n: int) -> tuple[float, float]:
    from mcr.cluster import Cluster

    cluster = Cluster.from_kubeconfig(kubeconfig, name="b2-floor")
    await cluster.start()
    try:
        counter = _Counter(n)
        start, cpu = time.perf_counter(), time.process_time()
        informer = await cluster.cache.get_informer("v1/ConfigMap")
        informer.add_event_handler(counter)
        await asyncio.wait_for(counter.done.wait(), 300)
        return n / (time.process_time() - cpu), n / (time.perf_counter() - start)
    finally:
        await cluster.stop()


async def _subject(kubeconfig: str, n: int) -> tuple[float, float]:
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
        start, cpu = time.perf_counter(), time.process_time()
        engagement = asyncio.create_task(ctrl.engage("b2", cluster))
        await asyncio.wait_for(done.wait(), 300)
        # Counted in the window: the metrics recorded for these reconciles (normally handed to
        # Prometheus by a timer a second later).
        ctrl.flush_metrics()
        elapsed, cpu_used = time.perf_counter() - start, time.process_time() - cpu
        engagement.cancel()
        await asyncio.wait([engagement])
        return n / cpu_used, n / elapsed
    finally:
        runner.cancel()
        await asyncio.wait([runner])
        await cluster.stop()


async def run_b2(n: int, rounds: int = 5) -> dict[str, float]:
    """Median floor and subject rates (per CPU second and per wall second) and their ratios (goal ≥ 0.7)."""
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {1})
    with _server(n) as kubeconfig:
        floors: list[tuple[float, float]] = []
        subjects: list[tuple[float, float]] = []
        for _ in range(rounds):
            # Each measurement starts without the previous one's garbage (a stopped cache is a
            # reference cycle): otherwise a full collection of it lands in a random window.
            gc.collect()
            floors.append(await _floor(kubeconfig, n))
            gc.collect()
            subjects.append(await _subject(kubeconfig, n))
    floor_cpu = statistics.median(f[0] for f in floors)
    subject_cpu = statistics.median(s[0] for s in subjects)
    floor_wall = statistics.median(f[1] for f in floors)
    subject_wall = statistics.median(s[1] for s in subjects)
    return {
        "informer_events_per_cpu_s": floor_cpu,
        "reconciles_per_cpu_s": subject_cpu,
        "ratio_cpu": subject_cpu / floor_cpu,
        "informer_events_per_wall_s": floor_wall,
        "reconciles_per_wall_s": subject_wall,
        "ratio_wall": subject_wall / floor_wall,
    }
