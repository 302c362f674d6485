"""``python -m bench core_runtime [--quick]``: queue cost per item and no-op reconcile throughput.

Measurements (each printed as a JSON line, then a table):

All times are CPU seconds of this process (``time.process_time``): on a shared 2-core machine
wall time mostly measures the neighbours.

- ``queue``: add + get + done per item on :class:`mcr.workqueue.WorkQueue` (metrics on), items
  spread over 10 clusters; floor: the same operations on a plain ``dict`` + ``deque``.
- ``histogram``: one observation of a batched histogram mirrored into a second one, kept
  (append, bucketed at flush), counted per bucket by a binary search, and counted the way mcr's
  worker does (``BatchedHistogram.slot``).
- ``pipeline``: events handed to the handler of a ``Kind`` source → queue → 1 worker → no-op
  async reconcile, in one event loop; reconciles/s.
- ``worker``: the queue and worker alone, requests added 200 at a time (``add_many``, as a
  watch read's are), no-op reconcile, metrics flushed in the window; CPU ns per request.
- ``b2_watch``, ``b2_list``: a real ``mcr-envtest`` server in another process holding N
  ConfigMaps. Floor: PERFORMANCE.md's raw reader of the same stream (aiohttp chunks, orjson, a
  dict cache); second figure: mcr's informer with a counting handler. Subject: a Controller with
  a no-op reconcile engaged on the same cluster. ``watch``: one update of every object arriving
  on the watch (PERFORMANCE.md's B2); ``list``: the initial list. Both in the same run; goal
  ≥ 0.7x (see ``bench/core_runtime/b2.py``). One row per GC policy: ``b2_watch`` / ``b2_list``
  with every measurement under mcr's default GC policy (B2 itself), ``..._interpreter_gc`` with
  every measurement under the interpreter's thresholds (``--b2-gc`` picks one of them).
  ``--b2-processes fresh`` runs each measurement in a new interpreter instead of this process,
  for comparison (B2's figure is the default, ``shared``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import sys
import time
from collections import deque
from typing import Any

import mcr
from mcr.handler import EnqueueRequestForObject
from mcr.reconcile import Request
from mcr.workqueue import WorkQueue


def _emit(results: list[dict[str, Any]], **row: Any) -> None:
    results.append(row)
    print(json.dumps(row), flush=True)


async def bench_queue(n: int) -> dict[str, float]:
    """Per-item µs of add + get_nowait + done (in a running loop), mcr's queue vs a dict+deque floor."""
    items = [Request("ns", f"cm-{i}", f"c{i % 10}") for i in range(n)]

    q: WorkQueue[Request] = WorkQueue("bench-queue")
    start = time.process_time()
    for it in items:
        q.add(it)
    for _ in range(n):
        got = q.get_nowait()
        assert got is not None
        q.done(got)
    subject = (time.process_time() - start) / n
    q.flush_metrics()

    # Floor: the least a de-duplicating FIFO can do (membership dict + deque + processing set).
    queued: dict[Request, None] = {}
    order: deque[Request] = deque()
    processing: set[Request] = set()
    start = time.process_time()
    for it in items:
        if it not in queued and it not in processing:
            queued[it] = None
            order.append(it)
    for _ in range(n):
        it = order.popleft()
        del queued[it]
        processing.add(it)
        processing.discard(it)
    floor = (time.process_time() - start) / n
    return {"subject_us": subject * 1e6, "floor_us": floor * 1e6}


def bench_histogram(n: int) -> dict[str, float]:
    """Per-observation ns of a batched histogram mirrored into a second one, as a controller's
    reconcile time is into its queue's work duration: ``kept`` values (append now; at the flush
    one counting pass per bucket bound the values span, or a sort when they span many),
    ``bisect`` (counting per bucket as each value arrives: a binary search over both histograms'
    bounds and an increment) and ``slot``, mcr's worker path (:meth:`BatchedHistogram.slot`: a
    range check and an increment, the binary search only for a value outside the range of the
    one before; the sum added once, as the worker adds a run's elapsed time).

    Two series of reconcile-like durations: ``spread``, independent draws (exponential, mean
    30 µs) that change slot about every other value (the slot path's worst case), and ``steady``,
    back-to-back no-op reconciles (2-8 µs, one slot). Each figure includes the flush into
    Prometheus.
    """
    import random
    from bisect import bisect_left

    from mcr import metrics
    from mcr.metrics.batching import Batch

    rng = random.Random(1)
    series = {
        "spread": [rng.expovariate(1 / 3e-5) for _ in range(n)],
        "steady": [rng.uniform(2e-6, 8e-6) for _ in range(n)],
    }

    def mirrored(name: str) -> Any:
        batch = Batch()
        hist = batch.histogram(metrics.RECONCILE_TIME_SECONDS.labels(name, ""))
        hist.mirror(metrics.WORKQUEUE_WORK_DURATION_SECONDS.labels(name, name))
        return batch, hist

    def kept(values: list[float]) -> float:
        batch, hist = mirrored("bench-histogram-kept")
        append = hist.values.append
        start = time.process_time()
        for v in values:
            append(v)
        batch.flush()
        return time.process_time() - start

    def bisect(values: list[float]) -> float:
        batch, hist = mirrored("bench-histogram-bisect")
        bounds, counts = hist.bounds, hist.counts
        start = time.process_time()
        total = 0.0
        for v in values:
            counts[bisect_left(bounds, v)] += 1
            total += v
        hist.counted_sum += total
        batch.flush()
        return time.process_time() - start

    def slot(values: list[float]) -> float:
        batch, hist = mirrored("bench-histogram-slot")
        total_of_values = sum(values)
        counts, slot_of = hist.counts, hist.slot
        k, low, high = 0, 0.0, -1.0
        start = time.process_time()
        for v in values:
            if not low < v <= high:
                k, low, high = slot_of(v)
            counts[k] += 1
        hist.counted_sum += total_of_values
        batch.flush()
        return time.process_time() - start

    return {
        f"{way.__name__}_{name}_ns": way(values) / n * 1e9
        for name, values in series.items()
        for way in (kept, bisect, slot)
    }


async def bench_pipeline(n: int) -> dict[str, float]:
    """No-op reconciles/s when events arrive as fast as a handler can take them."""
    from mcr.controller import Controller

    done = 0
    finished = asyncio.Event()

    async def reconcile(req: Request) -> None:
        nonlocal done
        done += 1
        if done == n:
            finished.set()

    ctrl = Controller("bench-pipeline", reconcile, skip_name_validation=True)
    handler = EnqueueRequestForObject()
    objs = [{"metadata": {"name": f"cm-{i}", "namespace": "ns"}} for i in range(n)]
    task = asyncio.create_task(ctrl.start())
    start = time.process_time()
    for i in range(0, n, 1000):
        for obj in objs[i : i + 1000]:
            handler.create("", obj, ctrl.queue, 0)
        await asyncio.sleep(0)
    await finished.wait()
    elapsed = time.process_time() - start
    task.cancel()
    await asyncio.wait([task])
    return {"reconciles_per_s": n / elapsed, "per_item_us": elapsed / n * 1e6}


async def bench_worker(n: int, batch: int = 200) -> dict[str, float]:
    """CPU ns per request of a controller's queue and worker alone: requests arrive ``batch`` at
    a time through ``WorkQueue.add_many`` (as a watch read's do), one worker reconciles them with
    a no-op reconcile, and the window ends with the metrics flushed into Prometheus."""
    from mcr.controller import Controller

    seen = 0
    target = 0
    drained = asyncio.Event()

    async def reconcile(req: Request) -> None:
        nonlocal seen
        seen += 1
        if seen == target:
            drained.set()

    ctrl = Controller("bench-worker", reconcile, skip_name_validation=True)
    task = asyncio.create_task(ctrl.start())
    names = [f"cm-{i}" for i in range(10_000)]
    await asyncio.sleep(0)
    start = time.process_time()
    for first in range(0, n, batch):
        reqs = [Request("ns", names[(first + j) % len(names)], "c1") for j in range(batch)]
        target = first + batch
        drained.clear()
        ctrl.queue.add_many(reqs, 0, cluster="c1")
        await drained.wait()
    ctrl.flush_metrics()
    elapsed = time.process_time() - start
    task.cancel()
    await asyncio.wait([task])
    return {"per_request_ns": elapsed / seen * 1e9}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench core_runtime", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of a few seconds")
    parser.add_argument("--objects", type=int, default=None, help="ConfigMaps for b2 (default 10000)")
    parser.add_argument("--skip-b2", action="store_true", help="skip the benchmark that needs a server")
    parser.add_argument(
        "--loop", choices=["asyncio", "uvloop"], default="asyncio", help="event loop (mcr.run)"
    )
    parser.add_argument(
        "--b2-gc",
        choices=["both", "mcr", "interpreter"],
        default="both",
        help="b2 rows: every measurement under mcr's GC policy, under the interpreter's, or both",
    )
    parser.add_argument(
        "--b2-processes",
        choices=["shared", "fresh"],
        default="shared",
        help="b2 measurements all in this process (B2's figure), or each in a new interpreter",
    )
    args, _ = parser.parse_known_args(argv)  # options meant for other benchmarks are ignored
    results: list[dict[str, Any]] = []
    env = {
        "python": platform.python_version(),
        "loop": args.loop,
        "gc_thresholds": list(gc.get_threshold()),
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
    }
    print(json.dumps({"env": env}), flush=True)

    n_queue = 20_000 if args.quick else 200_000
    _emit(results, bench="queue", n=n_queue, **mcr.run(bench_queue(n_queue), loop=args.loop))
    n_hist = 20_000 if args.quick else 1_000_000
    _emit(results, bench="histogram", n=n_hist, **bench_histogram(n_hist))
    n_pipe = 10_000 if args.quick else 100_000
    _emit(results, bench="pipeline", n=n_pipe, **mcr.run(bench_pipeline(n_pipe), loop=args.loop))
    n_worker = 20_000 if args.quick else 200_000
    _emit(results, bench="worker", n=n_worker, **mcr.run(bench_worker(n_worker), loop=args.loop))
    if not args.skip_b2:
        from bench.core_runtime.b2 import GC_POLICIES, run_b2

        n_objects = args.objects or (2_000 if args.quick else 10_000)
        policies = GC_POLICIES if args.b2_gc == "both" else (args.b2_gc,)
        b2 = run_b2(n_objects, policies=policies, processes=args.b2_processes, loop=args.loop)
        for workload, row in mcr.run(b2, loop=args.loop).items():
            _emit(results, bench=f"b2_{workload}", n=n_objects, **row)

    print()
    print(f"{'bench':10} {'result':>50}")
    for row in results:
        fields = ", ".join(
            f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items() if k != "bench"
        )
        print(f"{row['bench']:10} {fields:>50}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
