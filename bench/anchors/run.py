"""``python -m bench anchors [--quick] [--rounds=N] [--counts=1,100,1000] [--skip-...]``.

mcr against the Go original (sigs.k8s.io/multicluster-runtime on controller-runtime, the program
in ``bench/go``, built on first use by :mod:`bench.anchors._gobuild`) on the same mcr-envtest
servers in the same run. One server process (``bench.multicluster._servers``, pinned to CPU 0)
hosts one HTTPS server per cluster; every measured process is fresh and pinned to CPU 1; within
a round the subjects alternate (mcr first in even rounds, Go first in odd ones), and each row
prints the median over rounds of each side, mcr/Go of the medians, and the spread (min-max) of
the per-round ratios.

Rows:

- ``B2``: one cluster holding ``b2_objects`` ConfigMaps, a no-op reconcile; after sync and the
  initial reconciles, 3 rounds that update every object; update events per CPU second of the
  measured process over the 3 rounds (the reconciles are counted too: a queue may coalesce
  updates of one object that come before its reconcile).
- per cluster count K (``counts``): every cluster holds one ConfigMap; the subject engages K
  clusters and waits for each one's first reconcile (``B6``: wall and CPU seconds); RSS growth
  per engaged cluster (``B4``; mcr on asyncio and uvloop); a burst of ``total`` ConfigMaps
  created over the K clusters (``B3``: reconciles per CPU second, reconcile reading the object
  from the cache); paced modifications at ``rate``/s (``B3`` p99 event→reconcile latency); RSS
  of the whole manager with the burst cached (``MEM``: at K = 100 that is 200 ConfigMaps per
  cluster with the default 20,000).
- ``kopf`` (:mod:`bench.anchors.kopf_bench`): K clusters as K kopf processes, as K kopf operators
  on threads of one process and as one mcr manager, the same burst: Σ RSS idle and loaded, CPU
  per event, events handled.
- ``B2real``: B2 against one real kube-apiserver (:mod:`bench.anchors._real`), mcr (asyncio)
  and Go, ``--real-rounds`` paired rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.anchors import _gobuild, _kopfenv
from bench.anchors._subjects import Subject, start
from bench.anchors.kopf_bench import run_kopf
from bench.multicluster._proc import Child


@dataclass(frozen=True)
class Plan:
    counts: tuple[int, ...]
    rounds: int
    b2_objects: int
    b2_updates: int
    total: int
    rate: int
    paced_s: float


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench anchors", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, every row: well under a minute")
    parser.add_argument("--rounds", type=int, default=None, help="paired rounds per row (3; quick 1)")
    parser.add_argument("--counts", default=None, help="cluster counts, e.g. 1,100,1000 (quick 1,4)")
    parser.add_argument("--skip-b2", action="store_true")
    parser.add_argument("--skip-fleet", action="store_true", help="skip the per-K rows (B3/B4/B6/MEM)")
    parser.add_argument("--skip-real", action="store_true", help="skip B2 on a real kube-apiserver")
    parser.add_argument("--real-rounds", type=int, default=1, help="paired rounds of the real-server B2 (1)")
    parser.add_argument(
        "--real-objects", type=int, default=None, help="ConfigMaps of the real-server B2 (10,000; quick 100)"
    )
    parser.add_argument("--skip-kopf", action="store_true", help="skip the kopf rows")
    parser.add_argument("--kopf-clusters", type=int, default=None, help="K of the kopf rows (100; quick 2)")
    parser.add_argument(
        "--kopf-events", type=int, default=None, help="burst events per cluster (20; quick 5)"
    )
    parser.add_argument("--no-uvloop", action="store_true", help="mcr on asyncio only")
    parser.add_argument("--no-go", action="store_true", help="mcr only (for profiling it; no ratios)")
    parser.add_argument(
        "--paced-s", type=float, default=None, help="seconds of the paced modifications per K (3; quick 1)"
    )
    args, _ = parser.parse_known_args(argv)  # options meant for other benchmarks are ignored
    return args


def _plan(args: argparse.Namespace) -> Plan:
    if args.quick:
        plan = Plan(counts=(1, 4), rounds=1, b2_objects=500, b2_updates=3, total=800, rate=400, paced_s=1.0)
    else:
        plan = Plan(
            counts=(1, 100, 1000),
            rounds=3,
            b2_objects=10_000,
            b2_updates=3,
            total=20_000,
            rate=1_000,
            paced_s=3.0,
        )
    if args.counts:
        plan = Plan(**{**plan.__dict__, "counts": tuple(int(k) for k in args.counts.split(","))})
    if args.rounds:
        plan = Plan(**{**plan.__dict__, "rounds": args.rounds})
    if args.paced_s:
        plan = Plan(**{**plan.__dict__, "paced_s": args.paced_s})
    return plan


def _order(subjects: list[Subject], round_: int) -> list[Subject]:
    return subjects if round_ % 2 == 0 else subjects[::-1]


def _ask(proc: Child, msg: dict[str, Any]) -> dict[str, Any]:
    return proc.ask(msg)


# -- B2 -------------------------------------------------------------------------------------------
def _b2_point(servers: Child, fleet: Path, subject: Subject, plan: Plan) -> dict[str, Any]:
    n = plan.b2_objects
    with start(subject, fleet, 1, "noop") as proc:
        engaged = proc.recv()
        proc.send({"op": "expect", "phase": "*", "count": n, "timeout": 120, "quiet": 5})
        proc.recv()
        initial = proc.recv()
        count, cpu, reconciles = initial["count"], 0.0, 0
        for r in range(plan.b2_updates):
            proc.send({"op": "expect", "phase": "*", "count": count + n, "timeout": 120, "quiet": 5})
            proc.recv()
            _ask(
                servers,
                {
                    "op": "modify",
                    "servers": [0],
                    "per": n,
                    "count": n,
                    "rate": 1e9,
                    "phase": f"u{r}",
                    "prefix": "b2",
                },
            )
            done = proc.recv()
            reconciles += done["count"] - count
            count = done["count"]
            cpu += done["cpu_s"]
    return {
        "engage_s": engaged["engage_s"],
        "initial_reconciles": initial["count"],
        "update_reconciles": reconciles,
        "updates": n * plan.b2_updates,
        "cpu_s": cpu,
        "per_cpu_s": n * plan.b2_updates / max(cpu, 1e-9),
    }


def run_b2(
    servers: Child, fleet: Path, subjects: list[Subject], plan: Plan, bench: str = "B2"
) -> Iterator[dict[str, Any]]:
    _ask(servers, {"op": "create", "servers": [0], "per": plan.b2_objects, "phase": "b2"})
    try:
        for r in range(plan.rounds):
            for subject in _order(subjects, r):
                point = _b2_point(servers, fleet, subject, plan)
                yield {"bench": bench, "subject": subject.name, "round": r, **point}
    finally:
        _ask(servers, {"op": "wipe"})


def run_b2_real(subjects: list[Subject], plan: Plan) -> Iterator[dict[str, Any]]:
    """B2 against one real kube-apiserver (:mod:`bench.anchors._real`), mcr on asyncio and Go only."""
    directory = Path(tempfile.mkdtemp(prefix="mcr-bench-anchors-real-"))
    real = Child("bench.anchors._real", ["--dir", str(directory)], 0)
    try:
        ready = real.recv()
        if "skipped" in ready:
            print(json.dumps({"real_server_skipped": ready["skipped"]}), flush=True)
            return
        print(
            json.dumps({"real_servers": ready["ready"], "server_start_s": round(ready["start_s"], 1)}),
            flush=True,
        )
        pair = [s for s in subjects if s.name in ("mcr", "go")]
        yield from run_b2(real, directory / "fleet.json", pair, plan, bench="B2real")
    finally:
        real.close(timeout=60)
        shutil.rmtree(directory, ignore_errors=True)


# -- per K ----------------------------------------------------------------------------------------
def _fleet_point(servers: Child, fleet: Path, subject: Subject, k: int, plan: Plan) -> dict[str, Any]:
    targets = list(range(k))
    _ask(servers, {"op": "create", "servers": targets, "per": 1, "phase": "e"})
    per = max(1, plan.total // k)
    try:
        with start(subject, fleet, k, "get", first=True) as proc:
            engaged = proc.recv()
            burst_phase = f"b{k}"
            proc.send({"op": "expect", "phase": burst_phase, "count": per * k, "timeout": 300, "quiet": 20})
            proc.recv()
            made = _ask(servers, {"op": "create", "servers": targets, "per": per, "phase": burst_phase})
            burst = proc.recv()
            count = int(plan.rate * plan.paced_s)
            paced_phase = f"p{k}"
            proc.send(
                {
                    "op": "expect",
                    "phase": paced_phase,
                    "count": count,
                    "timeout": plan.paced_s + 60,
                    "quiet": 20,
                }
            )
            proc.recv()
            _ask(
                servers,
                {
                    "op": "modify",
                    "servers": targets,
                    "per": per,
                    "count": count,
                    "rate": plan.rate,
                    "phase": paced_phase,
                    "prefix": burst_phase,
                },
            )
            paced = proc.recv()
    finally:
        _ask(servers, {"op": "wipe"})
    return {
        "clusters": k,
        "engage_s": engaged["engage_s"],
        "engage_cpu_s": engaged["engage_cpu_s"],
        "idle_kib_per_cluster": (engaged["rss1"] - engaged["rss0"]) / k / 1024,
        "rss_idle_mib": engaged["rss1"] / 2**20,
        "burst_events": burst["count"],
        "burst_complete": burst["complete"],
        "per_cpu_s": burst["count"] / max(burst["cpu_s"], 1e-9),
        "per_wall_s": burst["count"] / max((burst["last"] or made["t1"]) - made["t0"], 1e-9),
        "paced_complete": paced["complete"],
        "paced_p50_ms": paced["p50_ms"],
        "paced_p99_ms": paced["p99_ms"],
        "paced_cpu_us_per_event": paced["cpu_s"] / max(paced["count"], 1) * 1e6,
        "rss_loaded_mib": burst["rss"] / 2**20,
        "loaded_objects_per_cluster": per + 1,
    }


def run_fleet(servers: Child, fleet: Path, subjects: list[Subject], plan: Plan) -> Iterator[dict[str, Any]]:
    for k in plan.counts:
        for r in range(plan.rounds):
            for subject in _order(subjects, r):
                point = _fleet_point(servers, fleet, subject, k, plan)
                yield {"bench": "K", "subject": subject.name, "round": r, **point}


# -- summary --------------------------------------------------------------------------------------
ROWS: list[tuple[str, str, Callable[[dict[str, Any]], bool], str, bool]] = [
    # label, field, row filter, unit, higher is better
    ("B2 no-op, update events / CPU s (1 cluster)", "per_cpu_s", lambda r: r["bench"] == "B2", "/s", True),
    (
        "B2 on real kube-apiserver, events / CPU s",
        "per_cpu_s",
        lambda r: r["bench"] == "B2real",
        "/s",
        True,
    ),
]


def _fleet_rows(
    counts: tuple[int, ...],
) -> list[tuple[str, str, Callable[[dict[str, Any]], bool], str, bool]]:
    out: list[tuple[str, str, Callable[[dict[str, Any]], bool], str, bool]] = []

    def at(k: int) -> Callable[[dict[str, Any]], bool]:
        return lambda r: r["bench"] == "K" and r["clusters"] == k

    for k in counts:
        out.append((f"MEM RSS loaded, K={k}", "rss_loaded_mib", at(k), "MiB", False))
    for k in counts:
        out.append((f"B4 idle KiB / cluster, K={k}", "idle_kib_per_cluster", at(k), "KiB", False))
    for k in counts:
        out.append((f"B3 reconciles / CPU s, K={k}", "per_cpu_s", at(k), "/s", True))
        out.append((f"B3 paced p99 ms, K={k}", "paced_p99_ms", at(k), "ms", False))
    for k in counts:
        out.append((f"B6 engage to first reconcile s, K={k}", "engage_s", at(k), "s", False))
        out.append((f"B6 engage CPU s, K={k}", "engage_cpu_s", at(k), "s", False))
    return out


def summarize(
    points: list[dict[str, Any]], counts: tuple[int, ...], mcr_names: list[str]
) -> list[dict[str, Any]]:
    """Per row and mcr subject: median of each side, mcr/Go of the medians, per-round ratio range."""
    table: list[dict[str, Any]] = []
    for label, field, keep, unit, _higher in ROWS + _fleet_rows(counts):
        rows = [p for p in points if keep(p) and p.get(field) is not None]
        go = {p["round"]: float(p[field]) for p in rows if p["subject"] == "go"}
        if not go:
            continue
        for name in mcr_names:
            mine = {p["round"]: float(p[field]) for p in rows if p["subject"] == name}
            if not mine:
                continue
            ratios = [mine[r] / go[r] for r in mine if go.get(r)]
            m, g = statistics.median(mine.values()), statistics.median(go.values())
            table.append(
                {
                    "row": label,
                    "mcr": name,
                    "mcr_value": round(m, 3),
                    "go_value": round(g, 3),
                    "unit": unit,
                    "mcr_over_go": round(m / g, 3) if g else None,
                    "round_ratios": [round(x, 3) for x in ratios],
                }
            )
    return table


def _print_table(table: list[dict[str, Any]]) -> None:
    print()
    print(f"{'row':47} {'subject':10} {'mcr':>12} {'go':>12} {'mcr/go':>8}  rounds (mcr/go)")
    for t in table:
        spread = ", ".join(f"{x:.2f}" for x in t["round_ratios"])
        ratio = f"{t['mcr_over_go']:.2f}" if t["mcr_over_go"] is not None else "-"
        values = f"{t['mcr_value']:>12.4g} {t['go_value']:>12.4g}"
        print(f"{t['row']:47} {t['mcr']:10} {values} {ratio:>8}  [{spread}]")


def _print_kopf(rows: list[dict[str, Any]]) -> None:
    mcr = next(r for r in rows if r["variant"] == "mcr")
    print(
        f"\nkopf, K={mcr['clusters']}: {'variant':15} {'ΣRSS idle MiB':>14} {'loaded MiB':>11} "
        f"{'CPU ms/event':>13} {'handled':>9}  mcr/variant (idle, loaded, CPU)"
    )
    for r in rows:
        ratios = ", ".join(
            f"{mcr[f] / r[f]:.3f}" if r[f] else "-"
            for f in ("rss_idle_mib", "rss_loaded_mib", "cpu_ms_per_event")
        )
        handled = f"{r['events_handled']}/{r['events_sent']}"
        print(
            f"{'':12}{r['variant']:15} {r['rss_idle_mib']:>14.1f} {r['rss_loaded_mib']:>11.1f} "
            f"{r['cpu_ms_per_event']:>13.3f} {handled:>9}  {ratios}"
        )


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    plan = _plan(args)
    try:
        binary = _gobuild.build()
    except _gobuild.GoBuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    subjects = [Subject("mcr")]
    if not args.no_uvloop:
        subjects.append(Subject("mcr-uvloop", loop="uvloop"))
    if not args.no_go:
        subjects.append(Subject("go", go_binary=binary))
    env = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "go_binary": str(binary),
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "plan": plan.__dict__,
    }
    print(json.dumps({"env": env}), flush=True)
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {1})
    directory = Path(tempfile.mkdtemp(prefix="mcr-bench-anchors-"))
    fleet = directory / "fleet.json"
    started = time.perf_counter()
    kopf_k = args.kopf_clusters or (2 if args.quick else 100)
    kopf_per = args.kopf_events or (5 if args.quick else 20)
    kopf_python = None
    if not args.skip_kopf:
        try:
            kopf_python = _kopfenv.python()
        except _kopfenv.KopfEnvError as exc:
            print(exc, file=sys.stderr)
            return 1
    n_servers = max(*(() if args.skip_fleet else plan.counts), kopf_k if kopf_python else 2, 2)
    servers = Child("bench.multicluster._servers", ["--servers", str(n_servers), "--dir", str(directory)], 0)
    points: list[dict[str, Any]] = []
    kopf_rows: list[dict[str, Any]] = []
    try:
        ready = servers.recv()
        print(
            json.dumps({"servers": ready["ready"], "server_start_s": round(ready["start_s"], 1)}), flush=True
        )
        runs: list[Iterator[dict[str, Any]]] = []
        if not args.skip_b2:
            runs.append(run_b2(servers, fleet, subjects, plan))
        if not args.skip_fleet:
            runs.append(run_fleet(servers, fleet, subjects, plan))
        for run in runs:
            for point in run:
                print(
                    json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in point.items()}),
                    flush=True,
                )
                points.append(point)
        if kopf_python is not None:
            kopf_rows = run_kopf(kopf_python, servers, fleet, kopf_k, kopf_per)
        if not args.skip_real:
            real_plan = Plan(
                **{
                    **plan.__dict__,
                    "rounds": args.real_rounds,
                    "b2_objects": args.real_objects or (100 if args.quick else plan.b2_objects),
                }
            )
            for point in run_b2_real(subjects, real_plan):
                print(
                    json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in point.items()}),
                    flush=True,
                )
                points.append(point)
    finally:
        servers.close()
        shutil.rmtree(directory, ignore_errors=True)
    table = summarize(points, plan.counts, [s.name for s in subjects if s.go_binary is None])
    for t in table:
        print(json.dumps(t))
    _print_table(table)
    if kopf_rows:
        _print_kopf(kopf_rows)
    load = [round(x, 2) for x in os.getloadavg()]
    print(f"\nload average after: {load}; wall time {time.perf_counter() - started:.0f} s")
    return 0
