"""B2: no-op reconcile throughput against the informer's raw event rate, in the same run.

An ``mcr-envtest`` server runs in a child process (pinned to CPU 0 when ``taskset`` exists; the
benchmark pins itself to CPU 1) holding N ConfigMaps. Each measurement uses a fresh
:class:`mcr.cluster.Cluster`. Two workloads, each with its floor:

- ``watch`` (PERFORMANCE.md's B2: B1's workload, a watch stream of N ConfigMaps cycling): the
  informer has synced (and the controller has reconciled the initial list) before the window;
  the window runs :data:`CYCLES` times through: ask the server to update every ConfigMap once
  (it commits them in runs of 200, yielding in between, so the stream arrives in bursts), wait
  for the last update event (floor) or the last reconcile (subject). A cycle starts when the
  previous one has been handled, so an update is never de-duplicated and a slow client (under
  a profiler) never falls so far behind that the server drops its watch;
- ``list`` (a cluster's initial list, the harder case: the informer's per-object cost is lowest
  there): from informer start (floor) or engagement (subject) until N events or reconciles.

Floor (PERFORMANCE.md's, B1's floor client): a raw reader of the same stream — aiohttp chunks split
into lines, ``orjson.loads``, a dict cache keyed by namespace/name. The ratio B2 is judged by is
the subject's rate over this floor's. Second figure: a counting event handler on mcr's own
ConfigMap informer, taking its batch deliveries (``on_adds``, ``on_events``) as the controller's
source does (the subject over mcr's informer, and the informer over the raw reader). Subject: a
Controller with ``Kind(ConfigMap)`` and a no-op async reconcile; its window includes flushing the
metrics recorded for those reconciles to Prometheus.

Third figure, a ceiling rather than a floor: :class:`_MinimalController` on the raw reader — the
least work any controller does per event (request, de-duplication, one worker, the request in a
context variable, a reconcile coroutine, two durations). ``minimal_ratio_cpu`` is the B2 that
controller reaches; ``subject_over_minimal`` is mcr's rate over its rate.

Both rates are reported per second of this process's CPU time (``time.process_time``), which
leaves out time spent waiting for the server (the server's speed is not what B2 measures and on
a shared machine it varies run to run), and per wall second. Each row also gives, per event and
measurement, the user and system CPU and the minor page faults (``getrusage``), and B2 in user
CPU alone (``ratio_user_cpu``): the kernel's share is mostly page faults, which depend on the
state of the process's allocator more than on the code measured. Floor and subject alternate (15
rounds by default), each after a full collection so that no round pays for the garbage of the
one before. Reported: the ratio of the median rates and the median of the per-round ratios.

All measurements of a run share this process (``processes="shared"``, B2's figure), so each
starts with an allocator that earlier ones have grown; ``processes="fresh"`` runs each in a new
interpreter instead, for comparison.

One row per GC policy (PERFORMANCE.md §3), every measurement of a row under the same collector
thresholds: ``mcr`` (the default; mcr's caches raise the thresholds while they run, see
:mod:`mcr.cache.gcpolicy`, and the raw reader and the minimal controller hold the same policy
for their measurement) and ``interpreter`` (the interpreter's thresholds for all: mcr's caches
with ``gc_policy=None``). Under the interpreter's thresholds the raw reader pays for young
collections that mcr's caches avoid, so a floor measured that way while the subject runs under
mcr's policy would flatter the subject.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, NamedTuple

SERVER_SCRIPT = r"""
import asyncio, json, sys, uuid
import mcr_envtest

async def main(n):
    async with mcr_envtest.Server(https=True, history_size=1000) as srv:
        uids = [str(uuid.uuid4()) for _ in range(n)]

        def commit(i, round_):
            srv.store.commit("", "configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"cm-{i}", "namespace": "bench", "uid": uids[i],
                             "creationTimestamp": "2026-01-01T00:00:00Z",
                             "labels": {"app": "bench", "index": str(i % 100)}},
                "data": {"key": "x" * 512, "round": str(round_)},
            })

        for i in range(n):
            commit(i, 0)
        print(json.dumps({"kubeconfig": srv.kubeconfig_path}), flush=True)
        loop = asyncio.get_running_loop()
        round_ = 0
        # Each line on stdin: update every ConfigMap once. EOF: exit.
        while await loop.run_in_executor(None, sys.stdin.readline):
            round_ += 1
            for i in range(n):
                commit(i, round_)
                if i % 200 == 199:
                    await asyncio.sleep(0)

asyncio.run(main(int(sys.argv[1])))
"""


class _Server:
    """The child process serving the ConfigMaps; :meth:`update_all` starts rounds of updates.

    ``control`` is the file descriptor of the server's stdin (another process given it can
    drive the server too).
    """

    def __init__(self, kubeconfig: str, control: int) -> None:
        self.kubeconfig = kubeconfig
        self.control = control

    def update_all(self) -> None:
        os.write(self.control, b"update\n")


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
        assert proc.stdin is not None
        yield _Server(json.loads(line)["kubeconfig"], proc.stdin.fileno())
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _Counter:
    """Counts events until ``n``: initial-list adds, or live updates (``live=True``)."""

    def __init__(self, n: int, *, live: bool = False) -> None:
        self.n = n  # may be raised between rounds (then clear ``done``)
        self.live = live
        self.count = 0
        self.done = asyncio.Event()

    def _seen(self, k: int) -> None:
        self.count += k
        if self.count >= self.n:
            self.done.set()

    def on_add(self, obj: Any, is_initial_list: bool) -> None:
        if is_initial_list != self.live:
            self._seen(1)

    def on_adds(self, objs: list[Any], is_initial_list: bool) -> None:
        # The informer's batch delivery of a list, which the controller's source uses too.
        if is_initial_list != self.live:
            self._seen(len(objs))

    def on_update(self, old: Any, new: Any) -> None:
        if self.live:
            self._seen(1)

    def on_events(self, notes: list[Any]) -> None:
        # The informer's batch delivery of a watch read, which the controller's source uses too.
        if self.live:
            self._seen(len(notes))

    def on_delete(self, obj: Any) -> None:
        return None


class Rates(NamedTuple):
    """One measurement: events per CPU second (user + system) and per wall second, and per
    event the microseconds of user and of system CPU and the minor page faults."""

    cpu: float
    wall: float
    user_us: float
    sys_us: float
    faults: float


GC_POLICIES = ("mcr", "interpreter")
"""The rows of a run: every measurement under mcr's default GC policy, or all under the interpreter's."""


def _gc_policy(policy: str) -> Any:
    """The :class:`mcr.cache.GCPolicy` a row's measurements hold (``None``: the interpreter's GC)."""
    from mcr.cache import GCPolicy

    if policy not in GC_POLICIES:
        raise ValueError(f"GC policy must be one of {GC_POLICIES}, not {policy!r}")
    return GCPolicy() if policy == "mcr" else None


def _cluster(server: _Server, name: str, policy: str) -> Any:
    """A fresh :class:`mcr.cluster.Cluster` of ``server`` whose cache holds ``policy``."""
    from mcr.cache import CacheOptions
    from mcr.cluster import Cluster

    options = CacheOptions(gc_policy=_gc_policy(policy))
    return Cluster.from_kubeconfig(server.kubeconfig, name=name, cache_options=options)


CYCLES = 3
"""Updates of every object in one ``watch`` window (a longer window averages out more noise)."""


class _Window:
    """CPU and wall clocks, and this process's resource usage, from construction to :meth:`rates`."""

    def __init__(self) -> None:
        self.usage = resource.getrusage(resource.RUSAGE_SELF)
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def rates(self, n: int) -> Rates:
        cpu, wall = time.process_time() - self.cpu, time.perf_counter() - self.wall
        usage, before = resource.getrusage(resource.RUSAGE_SELF), self.usage
        return Rates(
            n / cpu,
            n / wall,
            (usage.ru_utime - before.ru_utime) / n * 1e6,
            (usage.ru_stime - before.ru_stime) / n * 1e6,
            (usage.ru_minflt - before.ru_minflt) / n,
        )


async def _floor(server: _Server, n: int, *, watch: bool, cycles: int = CYCLES, policy: str = "mcr") -> Rates:
    cluster = _cluster(server, "b2-floor", policy)
    await cluster.start()
    try:
        counter = _Counter(n, live=watch)
        if not watch:
            window = _Window()
            informer = await cluster.cache.get_informer("v1/ConfigMap")
            informer.add_event_handler(counter)
            await asyncio.wait_for(counter.done.wait(), 300)
            return window.rates(n)
        informer = await cluster.cache.get_informer("v1/ConfigMap")
        await informer.wait_for_sync(300)
        informer.add_event_handler(counter)
        gc.collect()
        window = _Window()
        for cycle in range(1, cycles + 1):
            counter.n = n * cycle
            counter.done.clear()
            server.update_all()
            await asyncio.wait_for(counter.done.wait(), 300)
        return window.rates(n * cycles)
    finally:
        await cluster.stop()


_REQUEST: contextvars.ContextVar[tuple[str, str, str] | None] = contextvars.ContextVar("b2", default=None)


class _MinimalController:
    """The least a controller does per event, as a ceiling for B2 (not mcr; no floor of it).

    Each event's object becomes a ``(namespace, name, cluster)`` request, de-duplicated in a dict
    and a deque (an event for a request being reconciled marks it dirty); one worker task sets the
    request in a context variable, awaits a no-op reconcile coroutine and records the time queued
    and the time reconciling (sorted once at the end, as a histogram's flush would). No
    priorities, fairness, rate limiting, metric export, logging or hand-over: what mcr adds to
    this is the cost of those.
    """

    def __init__(self, counter: _Counter) -> None:
        self.counter = counter
        self.queued: dict[tuple[str, str, str], float] = {}
        self.order: deque[tuple[str, str, str]] = deque()
        self.processing: set[tuple[str, str, str]] = set()
        self.dirty: set[tuple[str, str, str]] = set()
        self.durations: list[float] = []
        self.ready = asyncio.Event()

    def add(self, meta: dict[str, Any]) -> None:
        req = (meta.get("namespace") or "", meta["name"], "")
        if req in self.processing:
            self.dirty.add(req)
        elif req not in self.queued:
            self.queued[req] = time.monotonic()
            self.order.append(req)

    async def run(self) -> None:
        queued, order, processing, durations = self.queued, self.order, self.processing, self.durations
        clock = time.monotonic
        set_request = _REQUEST.set

        async def reconcile(req: tuple[str, str, str]) -> None:
            return None

        while True:
            await self.ready.wait()
            self.ready.clear()
            while order:
                req = order.popleft()
                start = clock()
                durations.append(start - queued.pop(req))
                processing.add(req)
                set_request(req)
                await reconcile(req)
                end = clock()
                durations.append(end - start)
                processing.discard(req)
                if self.dirty and req in self.dirty:
                    self.dirty.discard(req)
                    queued[req] = end
                    order.append(req)
                self.counter.count += 1
            if self.counter.count >= self.counter.n:
                self.counter.done.set()


async def _minimal(
    server: _Server, n: int, *, watch: bool, cycles: int = CYCLES, policy: str = "mcr"
) -> Rates:
    """The raw reader feeding :class:`_MinimalController` (a ceiling: what B2 could reach)."""
    counter = _Counter(n)
    controller = _MinimalController(counter)
    worker = asyncio.create_task(controller.run())
    try:
        return await _raw(server, n, watch=watch, cycles=cycles, controller=controller, policy=policy)
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
        controller.durations.sort()


async def _raw(
    server: _Server,
    n: int,
    *,
    watch: bool,
    cycles: int = CYCLES,
    controller: _MinimalController | None = None,
    policy: str = "mcr",
) -> Rates:
    """PERFORMANCE.md's floor client: aiohttp chunks split into lines, orjson, a dict cache.

    With ``controller``, each object also goes to it, and the rate is of its reconciles. The
    measurement holds ``policy``'s GC thresholds, as an mcr cache would while it runs.
    """
    held = _gc_policy(policy)
    if held is not None:
        held.acquire()
    try:
        return await _read(server, n, watch=watch, cycles=cycles, controller=controller)
    finally:
        if held is not None:
            held.release()


async def _read(
    server: _Server, n: int, *, watch: bool, cycles: int, controller: _MinimalController | None
) -> Rates:
    """:func:`_raw` under whatever GC thresholds are set."""
    import base64
    import ssl

    import aiohttp
    import orjson
    import yaml

    kc = yaml.safe_load(await asyncio.to_thread(Path(server.kubeconfig).read_text))
    cl, user = kc["clusters"][0]["cluster"], kc["users"][0]["user"]
    ctx = ssl.create_default_context(cadata=base64.b64decode(cl["certificate-authority-data"]).decode())
    url = f"{cl['server']}/api/v1/namespaces/bench/configmaps"
    cache: dict[str, Any] = {}
    loads = orjson.loads
    async with aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {user['token']}"}, connector=aiohttp.TCPConnector(ssl=ctx)
    ) as session:
        window = _Window()
        async with session.get(url) as resp:
            listed = loads(await resp.read())
        for obj in listed["items"]:
            m = obj["metadata"]
            cache[f"{m['namespace']}/{m['name']}"] = obj
            if controller is not None:
                controller.add(m)
        if controller is not None:
            controller.ready.set()
            await asyncio.wait_for(controller.counter.done.wait(), 300)
        if not watch:
            return window.rates(n)
        counter = controller.counter if controller is not None else _Counter(n)
        live = counter.count  # the reconciles of the list
        query = {
            "watch": "1",
            "resourceVersion": listed["metadata"]["resourceVersion"],
            "allowWatchBookmarks": "1",
        }

        connected = asyncio.Event()

        async def read() -> None:
            async with session.get(url, params=query, timeout=aiohttp.ClientTimeout(total=None)) as stream:
                connected.set()
                rest = b""
                async for chunk in stream.content.iter_any():
                    lines = (rest + chunk).split(b"\n")
                    rest = lines.pop()
                    for line in lines:
                        if not line:
                            continue
                        event = loads(line)
                        if event["type"] == "BOOKMARK":
                            continue
                        m = event["object"]["metadata"]
                        cache[f"{m['namespace']}/{m['name']}"] = event["object"]
                        if controller is None:
                            counter.count += 1
                        else:
                            controller.add(m)
                    if controller is not None:
                        controller.ready.set()
                    elif counter.count >= counter.n:
                        counter.done.set()

        reader = asyncio.create_task(read())
        try:
            # As the informers' watches, the stream is open before the window (and before the
            # first update: a slow start would otherwise outlive the server's history).
            await asyncio.wait_for(connected.wait(), 300)
            gc.collect()
            window = _Window()
            for cycle in range(1, cycles + 1):
                counter.n = live + n * cycle
                counter.done.clear()
                server.update_all()
                await asyncio.wait_for(counter.done.wait(), 300)
            return window.rates(n * cycles)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)


async def _subject(
    server: _Server, n: int, *, watch: bool, cycles: int = CYCLES, policy: str = "mcr"
) -> Rates:
    from mcr.controller import Controller
    from mcr.reconcile import Request
    from mcr.source import Kind

    seen = 0
    target = n
    done = asyncio.Event()

    async def reconcile(req: Request) -> None:
        nonlocal seen
        seen += 1
        if seen == target:
            done.set()

    cluster = _cluster(server, "b2-subject", policy)
    await cluster.start()
    ctrl = Controller("b2-noop", reconcile, skip_name_validation=True)
    ctrl.watch(Kind("v1/ConfigMap"))
    runner = asyncio.create_task(ctrl.start())
    engagement: asyncio.Task[None] | None = None
    try:
        window = _Window()
        engagement = asyncio.create_task(ctrl.engage("b2", cluster))
        await asyncio.wait_for(done.wait(), 300)
        if watch:
            # The initial list is reconciled; now the window: one update of every object.
            ctrl.flush_metrics()
            gc.collect()
            window = _Window()
            for cycle in range(1, cycles + 1):
                done.clear()
                target = n + n * cycle
                server.update_all()
                await asyncio.wait_for(done.wait(), 300)
        # Counted in the window: the metrics recorded for these reconciles (normally handed to
        # Prometheus by a timer a second later).
        ctrl.flush_metrics()
        return window.rates(target - (n if watch else 0))
    finally:
        if engagement is not None:
            engagement.cancel()
            await asyncio.wait([engagement])
        runner.cancel()
        await asyncio.wait([runner])
        await cluster.stop()


def _summary(runs: dict[str, list[Rates]]) -> dict[str, float]:
    """A row's figures from the rounds of each of :data:`MEASUREMENTS`."""
    raws, floors, subjects, minimals = runs["raw"], runs["informer"], runs["subject"], runs["minimal"]
    raw_cpu = statistics.median(r.cpu for r in raws)
    minimal_cpu = statistics.median(m.cpu for m in minimals)
    floor_cpu = statistics.median(f.cpu for f in floors)
    subject_cpu = statistics.median(s.cpu for s in subjects)
    floor_wall = statistics.median(f.wall for f in floors)
    subject_wall = statistics.median(s.wall for s in subjects)
    paired = sorted(s.cpu / r.cpu for r, s in zip(raws, subjects, strict=True))
    row = {
        "raw_reader_events_per_cpu_s": raw_cpu,
        "informer_events_per_cpu_s": floor_cpu,
        "reconciles_per_cpu_s": subject_cpu,
        "ratio_cpu": subject_cpu / raw_cpu,
        "ratio_cpu_paired_median": statistics.median(paired),
        "ratio_cpu_paired_min": paired[0],
        "ratio_cpu_paired_max": paired[-1],
        "ratio_cpu_vs_informer": subject_cpu / floor_cpu,
        "minimal_controller_per_cpu_s": minimal_cpu,
        "minimal_ratio_cpu": minimal_cpu / raw_cpu,
        "subject_over_minimal": subject_cpu / minimal_cpu,
        "informer_ratio_to_raw": floor_cpu / raw_cpu,
        "raw_reader_events_per_wall_s": statistics.median(r.wall for r in raws),
        "informer_events_per_wall_s": floor_wall,
        "reconciles_per_wall_s": subject_wall,
        "ratio_wall_vs_informer": subject_wall / floor_wall,
        # B2 in user CPU alone (the kernel's share, mostly page faults, differs between readers).
        "ratio_user_cpu": statistics.median(r.user_us for r in raws)
        / statistics.median(s.user_us for s in subjects),
    }
    for name, rounds in runs.items():
        row[f"{name}_user_us_per_event"] = statistics.median(r.user_us for r in rounds)
        row[f"{name}_sys_us_per_event"] = statistics.median(r.sys_us for r in rounds)
        row[f"{name}_minor_faults_per_event"] = statistics.median(r.faults for r in rounds)
    return row


MEASUREMENTS = {"raw": _raw, "informer": _floor, "subject": _subject, "minimal": _minimal}
"""Each round's measurements, in the order they run."""

PROCESSES = ("shared", "fresh")
"""Where measurements run: all in this process (the default), or each in a new interpreter."""

ROOT = Path(__file__).resolve().parents[2]


async def _in_child(name: str, server: _Server, n: int, *, watch: bool, policy: str, loop: str) -> Rates:
    """One measurement in a new interpreter (``python -m bench.core_runtime.b2``), given the
    server's control descriptor; the child inherits this process's CPU affinity."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.core_runtime.b2",
        name,
        "watch" if watch else "list",
        policy,
        str(n),
        server.kubeconfig,
        str(server.control),
        loop,
        cwd=ROOT,
        pass_fds=(server.control,),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(
            f"b2 child measuring {name} exited with code {proc.returncode}: {err.decode()[-2000:]}"
        )
    return Rates(*json.loads(out))


async def run_b2(
    n: int,
    rounds: int = 15,
    policies: tuple[str, ...] = GC_POLICIES,
    *,
    processes: str = "shared",
    loop: str = "asyncio",
) -> dict[str, dict[str, Any]]:
    """Per workload (``watch``, ``list``) and GC policy: median floor, subject and
    minimal-controller rates and their ratios (goal ≥ 0.7).

    Keys: the workload for the ``mcr`` policy (the default configuration: B2 itself), the
    workload and ``_interpreter_gc`` for the other row. Each row names its policy and thresholds.

    ``processes="fresh"`` runs every measurement in a new interpreter on event loop ``loop``
    (as pyperf runs its values), for comparison with the default, where they all share this
    process: a fresh interpreter's allocator has not grown its heap yet, and the raw reader pays
    for that in page faults (see the mcr-core README).
    """
    for policy in policies:
        _gc_policy(policy)  # an unknown policy fails before the server starts
    if processes not in PROCESSES:
        raise ValueError(f"processes must be one of {PROCESSES}, not {processes!r}")
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {1})
    results: dict[str, dict[str, Any]] = {}
    with _server(n) as server:
        for workload in ("watch", "list"):
            watch = workload == "watch"
            for policy in policies:
                runs: dict[str, list[Rates]] = {name: [] for name in MEASUREMENTS}
                for _ in range(rounds):
                    # In this process each measurement starts without the previous one's garbage
                    # (a stopped cache is a reference cycle): otherwise a full collection of it
                    # lands in a random window.
                    for name, measure in MEASUREMENTS.items():
                        if processes == "fresh":
                            rates = await _in_child(name, server, n, watch=watch, policy=policy, loop=loop)
                        else:
                            gc.collect()
                            rates = await measure(server, n, watch=watch, policy=policy)
                        runs[name].append(rates)
                held = _gc_policy(policy)
                row: dict[str, Any] = {
                    "gc_policy": policy,
                    "gc_thresholds": list(held.thresholds if held is not None else gc.get_threshold()),
                    "processes": processes,
                }
                row.update(_summary(runs))
                results[workload if policy == "mcr" else f"{workload}_interpreter_gc"] = row
    return results


def _child(argv: list[str]) -> int:
    """``python -m bench.core_runtime.b2 MEASUREMENT WORKLOAD POLICY N KUBECONFIG FD LOOP``: one
    measurement (see :func:`_in_child`); prints its :class:`Rates` as a JSON list."""
    import mcr

    usage = (
        "usage: python -m bench.core_runtime.b2 MEASUREMENT WORKLOAD POLICY N KUBECONFIG FD LOOP "
        f"(MEASUREMENT one of {', '.join(MEASUREMENTS)}; WORKLOAD watch or list; POLICY one of "
        f"{', '.join(GC_POLICIES)}); run by run_b2(processes='fresh')"
    )
    if len(argv) != 7:
        print(f"{usage}: got {len(argv)} arguments", file=sys.stderr)
        return 2
    name, workload, policy, n, kubeconfig, fd, loop = argv
    measure = MEASUREMENTS.get(name)
    if measure is None or workload not in ("watch", "list") or policy not in GC_POLICIES:
        print(f"{usage}: got {name!r} {workload!r} {policy!r}", file=sys.stderr)
        return 2
    rates = mcr.run(
        measure(_Server(kubeconfig, int(fd)), int(n), watch=workload == "watch", policy=policy), loop=loop
    )
    print(json.dumps(list(rates)))
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
