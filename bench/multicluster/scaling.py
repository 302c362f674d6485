"""B3 (scaling curve) and B4 (memory per engaged cluster): mcr against the raw-reader floor.

For each cluster count K, two fresh measured processes run in turn against the same servers
(pinned to CPU 1; the servers' process is pinned to CPU 0): the raw-reader floor, then mcr (see
:mod:`bench.multicluster._worker`). Each process

1. engages K clusters holding no benchmark objects: engage time and ΔRSS / K (B4: idle, HTTPS,
   one kind);
2. burst: the server process creates ``total`` ConfigMaps spread evenly over the K clusters as
   fast as it can; aggregate reconciles (events) per wall second from the first commit to the last
   reconcile, per CPU second of the measured process, and the (saturated) latency percentiles;
3. paced: ``rate`` modifications per second in total, round-robin over the clusters, for a few
   seconds: event→reconcile latency p50/p99 below saturation;
4. RSS per cluster with the burst's objects cached.

Between the two processes the server wipes the objects, so both see identical work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.multicluster._proc import Child


@dataclass(frozen=True)
class ScalingPlan:
    counts: tuple[int, ...]
    total: int  # burst events per K, split over the K clusters
    rate: int  # paced events per second (all clusters together)
    paced_s: float
    loop: str = "asyncio"  # the measured processes' event loop (mcr.run)


def _one(servers: Child, directory: str, mode: str, k: int, plan: ScalingPlan) -> dict[str, Any]:
    worker = Child(
        "bench.multicluster._worker",
        ["--mode", mode, "--clusters", str(k), "--dir", directory, "--loop", plan.loop],
        1,
    )
    try:
        engaged = worker.recv()
        targets = list(range(k))
        per = plan.total // k
        burst_phase = f"b{k}{mode}"
        worker.send({"op": "expect", "phase": burst_phase, "count": per * k, "timeout": 180})
        worker.recv()  # armed
        servers.send({"op": "create", "servers": targets, "per": per, "phase": burst_phase})
        made = servers.recv()
        burst = worker.recv()
        count = int(plan.rate * plan.paced_s)
        paced_phase = f"p{k}{mode}"
        worker.send({"op": "expect", "phase": paced_phase, "count": count, "timeout": plan.paced_s + 60})
        worker.recv()
        servers.send(
            {
                "op": "modify",
                "servers": targets,
                "per": per,
                "count": count,
                "rate": plan.rate,
                "phase": paced_phase,
                "prefix": burst_phase,
            }
        )
        servers.recv()
        paced = worker.recv()
    finally:
        worker.close()
    servers.send({"op": "wipe"})
    servers.recv()
    wall = burst["last"] - made["t0"]
    return {
        "bench": "B3/B4",
        "mode": mode,
        "clusters": k,
        "engage_s": round(engaged["engage_s"], 3),
        "manager_clusters_call_ms": round(engaged.get("manager_clusters_call_s", float("nan")) * 1e3, 1),
        "idle_kib_per_cluster": round((engaged["rss1"] - engaged["rss0"]) / k / 1024, 1),
        "burst_events": burst["count"],
        "burst_complete": burst["complete"],
        "server_commit_per_s": round(made["n"] / max(made["t1"] - made["t0"], 1e-9)),
        "per_wall_s": round(burst["count"] / wall),
        "per_cpu_s": round(burst["count"] / max(burst["cpu_s"], 1e-9)),
        "burst_p99_ms": round(burst["p99_ms"], 1),
        "paced_rate": plan.rate,
        "paced_complete": paced["complete"],
        "paced_p50_ms": round(paced["p50_ms"], 1),
        "paced_p99_ms": round(paced["p99_ms"], 1),
        "paced_loop_lag_max_ms": round(paced["loop_lag_max_ms"], 1),
        # Collections per generation during the paced phase and the longest of each: what the
        # loop-lag maximum is made of when the collector causes it.
        "paced_gc_collections": paced["gc"]["collections"],
        "paced_gc_max_ms": paced["gc"]["max_ms"],
        "loaded_kib_per_cluster": round((burst["rss"] - engaged["rss0"]) / k / 1024, 1),
    }


def run_scaling(servers: Child, directory: str, plan: ScalingPlan) -> list[dict[str, Any]]:
    """One floor row and one mcr row per cluster count, printed as JSON lines as they finish."""
    import json

    rows: list[dict[str, Any]] = []
    for k in plan.counts:
        for mode in ("floor", "mcr"):
            row = _one(servers, directory, mode, k, plan)
            print(json.dumps(row), flush=True)
            rows.append(row)
    summary = k_scaling(rows)
    if summary is not None:
        print(json.dumps(summary), flush=True)
        rows.append(summary)
    return rows


def k_scaling(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """B3's K-scaling figure: how much of its K=min throughput mcr keeps at K=max, over the same
    figure of the raw-reader floor measured in the same run (goal >= 0.5).

    Throughput is events (floor) or reconciles (mcr) per CPU second of the burst. ``None`` with
    fewer than two cluster counts.
    """
    rate = {(row["mode"], row["clusters"]): row["per_cpu_s"] for row in rows if row.get("bench") == "B3/B4"}
    counts = sorted({k for _, k in rate})
    if len(counts) < 2:
        return None
    lo, hi = counts[0], counts[-1]
    mcr = rate[("mcr", hi)] / rate[("mcr", lo)]
    floor = rate[("floor", hi)] / rate[("floor", lo)]
    return {
        "bench": "B3-K",
        "from_clusters": lo,
        "to_clusters": hi,
        "mcr_kept": round(mcr, 3),
        "floor_kept": round(floor, 3),
        "ratio": round(mcr / floor, 3),
    }
