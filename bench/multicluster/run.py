"""``python -m bench multicluster [--quick] [--counts=1,10] [--events=N] [--skip-scaling|engage|fairness]``.

Starts one server process (``bench.multicluster._servers``: a :class:`mcr_envtest.Fleet` of HTTPS
servers, pinned to CPU 0), pins itself to CPU 1, then runs

1. B6, engage latency (:mod:`bench.multicluster.engage`), in this process;
2. fairness under a 10k backlog (:mod:`bench.multicluster.fairness`), in this process;
3. B3/B4, the scaling curve (:mod:`bench.multicluster.scaling`), each point in fresh measured
   processes (floor, then mcr) pinned to CPU 1.

Full run: K = 1, 10, 100, 1000 clusters, one server per cluster (1000 servers in the one server
process), 20,000 burst events per K (PERFORMANCE.md's 50,000 take the server process 30-50 s
per point at K=1000, which does not fit the 6-minute budget); ``--quick``: K = 1, 10, 100 and
10,000 events. ``--loop uvloop`` runs every measurement, floor and mcr, on uvloop (``mcr.run``).
Every result is one JSON line; a summary table follows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mcr
from bench.multicluster._proc import Child
from bench.multicluster.scaling import ScalingPlan, run_scaling


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench multicluster", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="K up to 100, 10k events: about a minute")
    parser.add_argument("--max-clusters", type=int, default=None, help="largest K of the scaling curve")
    parser.add_argument("--counts", default=None, help="the scaling curve's K values, e.g. --counts=1,1000")
    parser.add_argument("--events", type=int, default=None, help="burst events per K (20,000; quick 10,000)")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-engage", action="store_true")
    parser.add_argument("--skip-fairness", action="store_true")
    parser.add_argument(
        "--loop", choices=("asyncio", "uvloop"), default="asyncio", help="event loop of every measurement"
    )
    args, _ = parser.parse_known_args(argv)  # options meant for other benchmarks are ignored
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    counts: tuple[int, ...] = (1, 10, 100) if args.quick else (1, 10, 100, 1000)
    if args.max_clusters:
        counts = tuple(k for k in (1, 10, 100, 1000, 10_000) if k <= args.max_clusters)
    if args.counts:
        counts = tuple(int(k) for k in args.counts.split(","))
    plan = ScalingPlan(
        counts=counts,
        total=args.events or (10_000 if args.quick else 20_000),
        rate=1_000,
        paced_s=2.0 if args.quick else 3.0,
        loop=args.loop,
    )
    env = {
        "python": platform.python_version(),
        "loop": args.loop,
        "gc_thresholds_default": list(gc.get_threshold()),
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    print(json.dumps({"env": env}), flush=True)
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {1})
    directory = Path(tempfile.mkdtemp(prefix="mcr-bench-multicluster-"))
    started = time.perf_counter()
    servers = Child(
        "bench.multicluster._servers", ["--servers", str(max(max(counts), 2)), "--dir", str(directory)], 0
    )
    rows: list[dict[str, Any]] = []
    try:
        ready = servers.recv()
        print(
            json.dumps({"servers": ready["ready"], "server_start_s": round(ready["start_s"], 1)}), flush=True
        )
        entries = json.loads((directory / "fleet.json").read_text())
        if not args.skip_engage:
            rows += mcr.run(_engage(servers, entries, quick=args.quick), loop=args.loop)
        if not args.skip_fairness:
            from bench.multicluster.fairness import run_fairness

            for row in mcr.run(run_fairness(servers, entries, args.quick), loop=args.loop):
                print(json.dumps(row), flush=True)
                rows.append(row)
        if not args.skip_scaling:
            rows += run_scaling(servers, str(directory), plan)
    finally:
        servers.close()
        shutil.rmtree(directory, ignore_errors=True)
    _table(rows)
    print(f"\nwall time {time.perf_counter() - started:.0f} s")
    return 0


async def _engage(servers: Child, entries: list[dict[str, Any]], quick: bool) -> list[dict[str, Any]]:
    from bench.multicluster.engage import run_engage

    big = 2_000 if quick else 10_000
    await asyncio.to_thread(servers.ask, {"op": "create", "servers": [0], "per": 1, "phase": "e1"})
    await asyncio.to_thread(servers.ask, {"op": "create", "servers": [1], "per": big, "phase": "ebig"})
    try:
        rows = await run_engage(entries[0], entries[1], big, quick)
    finally:
        await asyncio.to_thread(servers.ask, {"op": "wipe"})
    for row in rows:
        print(json.dumps(row), flush=True)
    return rows


def _table(rows: list[dict[str, Any]]) -> None:
    print()
    for bench in ("B6", "fairness", "B3/B4", "B3-K"):
        for row in rows:
            if row.get("bench") == bench:
                fields = ", ".join(f"{k}={v}" for k, v in row.items() if k != "bench")
                print(f"{bench:9} {fields}")


if __name__ == "__main__":
    sys.exit(main())
