"""The mcr side of the anchors: the same command protocol as the Go program in ``bench/go``.

``python -m bench.anchors._worker --fleet DIR/fleet.json --clusters K --reconcile noop|get
[--first] [--loop asyncio|uvloop]``: a :class:`mcr.Manager` over a
:class:`mcr.providers.ClustersProvider` with one ``v1/ConfigMap`` controller; cluster ``i`` is
fleet entry ``i % len(fleet)``, built with :meth:`mcr.Cluster.from_kubeconfig` (its own client,
connection and informer). The first output line reports the engagement (every cluster synced, or
with ``--first`` every cluster reconciled once): wall and CPU seconds, RSS before and after.

Then each ``{"op": "expect", "phase": P, "count": N, "timeout": T, "quiet": Q}`` is answered with
``{"armed": P}`` at once and a summary once N reconciles of phase P happened in total, T seconds
passed, or (with Q) no reconcile of P came for Q seconds after the first one since the command.
Phase ``"*"`` counts every reconcile (the only phase of the no-op reconcile, which does not read
the object). EOF on stdin stops it.

With ``MCR_ANCHOR_PROFILE_DIR=DIR`` set, each ``expect`` is profiled by py-spy (``MCR_ANCHOR_PYSPY``
or ``py-spy`` on ``PATH``, run on CPU 0; ``MCR_ANCHOR_PYSPY_ARGS``, by default ``--rate 250
--nonblocking``: ``--native`` shows C frames but pauses the process for each sample, which
distorts latency) into ``DIR/mcr-<loop>-<phase>-<pid>.txt`` (collapsed stacks), covering that
command's wait; the Go program writes its pprof profiles beside them (``bench/go``). With
``MCR_ANCHOR_SLOW=MS`` the loop runs in asyncio's debug mode and logs to stderr every callback
that held it longer than ``MS`` milliseconds (debug mode costs CPU: not for figures).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench.multicluster._proc import command_of, serve_commands
from bench.multicluster._worker import percentile, rss_bytes


class Recorder:
    """Reconcile counts and latencies per phase (``"*"``: all); wakes the one armed waiter."""

    def __init__(self) -> None:
        self.lat: dict[str, list[float]] = {}
        self.n: dict[str, int] = {}
        self.last: dict[str, float] = {}
        self.first: set[str] = set()
        self._want: tuple[str, int, asyncio.Event] | None = None

    def hit(self, cluster: str, phase: str, sent: float) -> None:
        now = time.time()
        self.first.add(cluster)
        for p in ("*", phase) if phase else ("*",):
            if not math.isnan(sent):
                self.lat.setdefault(p, []).append(now - sent)
            n = self.n.get(p, 0) + 1
            self.n[p] = n
            self.last[p] = now
            want = self._want
            if want is not None and want[0] == p and n >= want[1]:
                want[2].set()

    async def expect(self, phase: str, count: int, timeout: float, quiet: float | None) -> dict[str, Any]:
        done = asyncio.Event()
        self._want = (phase, count, done)
        if self.n.get(phase, 0) >= count:
            done.set()
        cpu = time.process_time()
        diag = _Diagnostics() if os.environ.get("MCR_ANCHOR_DIAG") else None
        profiler = await _start_profile(phase)
        print(json.dumps({"armed": phase}), flush=True)
        deadline = time.monotonic() + timeout
        complete = False
        armed_at = seen = self.n.get(phase, 0)
        seen_at = time.monotonic()
        try:
            while True:
                step = min(quiet or 1.0, 1.0, max(0.0, deadline - time.monotonic()))
                try:
                    await asyncio.wait_for(done.wait(), step)
                    complete = True
                    break
                except TimeoutError:
                    pass
                now, n = time.monotonic(), self.n.get(phase, 0)
                if n != seen:
                    seen, seen_at = n, now
                elif quiet is not None and n > armed_at and now - seen_at >= quiet:
                    break
                if now >= deadline:
                    break
        finally:
            self._want = None
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                await profiler.wait()
            if diag is not None:
                print(json.dumps({"phase": phase, **await diag.stop()}), file=sys.stderr, flush=True)
        lat = self.lat.get(phase, [])
        return {
            "phase": phase,
            "complete": complete,
            "count": self.n.get(phase, 0),
            "p50_ms": percentile(lat, 0.50) * 1e3,
            "p99_ms": percentile(lat, 0.99) * 1e3,
            "max_ms": max(lat, default=math.nan) * 1e3,
            "last": self.last.get(phase, math.nan),
            "cpu_s": time.process_time() - cpu,
            "rss": rss_bytes(),
        }


async def _start_profile(phase: str) -> asyncio.subprocess.Process | None:
    """py-spy recording this process into ``MCR_ANCHOR_PROFILE_DIR``, or None when it is unset.

    The caller stops it with SIGINT (py-spy then writes its file) and awaits it."""
    directory = os.environ.get("MCR_ANCHOR_PROFILE_DIR")
    if not directory:
        return None
    spy = os.environ.get("MCR_ANCHOR_PYSPY") or shutil.which("py-spy")
    if spy is None:
        raise RuntimeError("MCR_ANCHOR_PROFILE_DIR is set but py-spy is not found (set MCR_ANCHOR_PYSPY)")
    loop_name = "uvloop" if "uvloop" in type(asyncio.get_running_loop()).__module__ else "asyncio"
    name = phase.replace("*", "all").replace("/", "_")
    out = Path(directory) / f"mcr-{loop_name}-{name}-{os.getpid()}.txt"
    extra = os.environ.get("MCR_ANCHOR_PYSPY_ARGS", "--rate 250 --nonblocking").split()
    argv = [spy, "record", "--pid", str(os.getpid()), *extra, "--format", "raw", "--output", str(out)]
    if shutil.which("taskset"):
        argv = ["taskset", "-c", "0", *argv]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    await asyncio.sleep(0.3)  # attached before the phase's events come
    return proc


class _Diagnostics:
    """With ``MCR_ANCHOR_DIAG`` set: the event loop's lateness (a 10 ms sleep, repeated) and every
    garbage collection's generation and duration while one ``expect`` waits, for telling stalls
    of the loop apart from collections. Written to stderr; costs CPU, so off by default."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.gcs: list[tuple[int, float]] = []
        self._gc_start = 0.0
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.create_task(self._lag())

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gcs.append((info["generation"], time.perf_counter() - self._gc_start))

    async def _lag(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(0.01)
            self.lags.append(loop.time() - start - 0.01)

    async def stop(self) -> dict[str, Any]:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        gc.callbacks.remove(self._on_gc)
        out: dict[str, Any] = {
            "loop_lag_p99_ms": percentile(self.lags, 0.99) * 1e3,
            "loop_lag_max_ms": max(self.lags, default=math.nan) * 1e3,
            "stalls_over_20ms": sum(1 for x in self.lags if x > 0.02),
        }
        for gen in (0, 1, 2):
            times = [d for g, d in self.gcs if g == gen]
            out[f"gc{gen}_n"] = len(times)
            out[f"gc{gen}_max_ms"] = max(times, default=0.0) * 1e3
            out[f"gc{gen}_over_20ms"] = sum(1 for d in times if d > 0.02)
        return out


async def amain(fleet: list[dict[str, Any]], k: int, mode: str, first: bool) -> None:
    from mcr.builder import controller_managed_by
    from mcr.cluster import Cluster
    from mcr.manager import Manager
    from mcr.providers import ClustersProvider
    from mcr.reconcile import Request

    paths = [fleet[i % len(fleet)]["kubeconfig"] for i in range(k)]
    rec = Recorder()
    provider = ClustersProvider()
    mgr = Manager(provider=provider, metrics_bind_address="0")

    async def noop(req: Request) -> None:
        rec.hit(req.cluster_name, "", math.nan)

    async def get(req: Request) -> None:
        cluster = await mgr.get_cluster(req.cluster_name)
        obj = await cluster.client.get("v1/ConfigMap", req.name, namespace=req.namespace)
        data = obj.get("data") or {}
        try:
            sent = float(data["t"])
        except (KeyError, ValueError):
            sent = math.nan
        rec.hit(req.cluster_name, str(data.get("p", "")), sent)

    slow = os.environ.get("MCR_ANCHOR_SLOW")
    if slow:
        import logging

        logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
        running = asyncio.get_running_loop()
        running.set_debug(True)
        running.slow_callback_duration = float(slow) / 1e3
    ctrl = (
        controller_managed_by(mgr)
        .named("bench-anchor")
        .for_("v1/ConfigMap")
        .build(noop if mode == "noop" else get)
    )
    task = asyncio.create_task(mgr.start(handle_signals=False), name="bench-anchor-manager")
    try:
        await asyncio.sleep(0.2)  # manager and provider running, no cluster yet
        gc.collect()
        rss0 = rss_bytes()
        cpu0 = time.process_time()
        start = time.perf_counter()
        for i, path in enumerate(paths):
            name = f"c{i}"
            await provider.add(name, Cluster.from_kubeconfig(path, name=name))
        added = time.perf_counter() - start
        poll = min(0.1, 0.002 * k)
        while True:
            if task.done():
                task.result()
                raise RuntimeError("the manager stopped during engagement")
            if first:
                if len(rec.first) >= k:
                    break
            elif sum(1 for state in ctrl.clusters().values() if state == "synced") >= k:
                break
            await asyncio.sleep(poll)
        engaged = time.perf_counter() - start
        engage_cpu = time.process_time() - cpu0
        await asyncio.sleep(0.5)  # let post-sync work (GC freeze, first bookmarks) settle
        gc.collect()
        info = {
            "engaged": k,
            "engage_s": engaged,
            "engage_cpu_s": engage_cpu,
            "add_s": added,
            "rss0": rss0,
            "rss1": rss_bytes(),
        }
        print(json.dumps(info), flush=True)

        async def expect(cmd: dict[str, Any]) -> dict[str, Any]:
            command_of(cmd, "expect")
            reply = await rec.expect(cmd["phase"], cmd["count"], cmd["timeout"], cmd.get("quiet"))
            return {
                k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in reply.items()
            }

        await serve_commands(expect)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.anchors._worker")
    parser.add_argument("--fleet", type=Path, required=True)
    parser.add_argument("--clusters", type=int, required=True)
    parser.add_argument("--reconcile", choices=("noop", "get"), default="get")
    parser.add_argument("--first", action="store_true")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args()
    import mcr

    mcr.run(
        amain(json.loads(args.fleet.read_text()), args.clusters, args.reconcile, args.first), loop=args.loop
    )


if __name__ == "__main__":
    main()
