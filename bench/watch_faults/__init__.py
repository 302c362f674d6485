"""B7: a steady stream of updates to one cluster while its watch is closed, expired or its server
restarts; events lost (must be 0) and seconds to resume, for mcr and the raw-reader floor.

``python -m bench watch_faults [--rounds N] [--rate R] [--quick]``. One mcr-envtest HTTPS server
(:mod:`bench.multicluster._servers`, pinned to CPU 0) holds ``per`` ConfigMaps; for each fault and
round, a fresh measured process (:mod:`bench.watch_faults._subject`, pinned to CPU 1; mcr and the
floor alternate which goes first) syncs, then the server modifies the objects at ``rate`` per
second for ``seconds``, and ``fault_at`` seconds in:

- ``closed``: every watch stream ends (a server's watch timeout, a proxy closing idle streams);
- ``expired``: the watch history is dropped, then the streams end: resuming from the last
  resourceVersion gets 410 Expired and the client must list again;
- ``restart``: the server stops and starts again on its port with its objects (a rolling
  kube-apiserver update): connections are refused for a moment, then accepted again.

Per run: ``lost`` (objects whose final write the subject never saw within 30 s of the stream's
end: level-triggered clients may skip intermediate writes, never the last), ``resume_s`` (from
the fault to the first write committed after it being seen) and ``settle_s`` (from the stream's
last write to the subject having seen every object's final write).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.multicluster._proc import Child

FAULTS = ("closed", "expired", "restart")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench watch_faults")
    parser.add_argument("--quick", action="store_true", help="one round, 3 s streams")
    parser.add_argument("--rounds", type=int, default=None, help="runs per fault and subject (3; quick 1)")
    parser.add_argument("--rate", type=int, default=500, help="writes per second during the stream (500)")
    parser.add_argument("--objects", type=int, default=100, help="ConfigMaps written in turn (100)")
    args, _ = parser.parse_known_args(argv)  # options meant for other benchmarks are ignored
    return args


def _run_one(
    servers: Child, entry: dict[str, Any], mode: str, fault: str, phase: str, args: argparse.Namespace
) -> dict[str, Any]:
    seconds = 3.0 if args.quick else 6.0
    argv = ["--mode", mode, "--kubeconfig", entry["kubeconfig"], "--url", entry["url"]]
    argv += ["--token", entry["token"], "--ca", entry["ca_file"], "--per", str(args.objects)]
    subject = Child("bench.watch_faults._subject", argv, 1)
    try:
        subject.recv()  # synced
        stream = servers.ask(
            {
                "op": "scenario",
                "server": 0,
                "per": args.objects,
                "count": int(args.rate * seconds),
                "rate": args.rate,
                "phase": phase,
                "prefix": "b7",
                "fault": fault,
                "fault_at": seconds / 3,
            }
        )
        settle = {"op": "settle", "phase": phase, "last": stream["last"], "t_fault": stream["t_fault"]}
        settled = subject.ask({**settle, "timeout": 30})
    finally:
        subject.close()
    return {"bench": "B7", "fault": fault, "subject": mode, "writes": stream["n"], **settled}


def _summary(rows: list[dict[str, Any]]) -> None:
    head = ("fault", "subject", "lost (per run)", "resume s (median, max)", "settle s (median)")
    print(f"\n{head[0]:9} {head[1]:8} {head[2]:>16} {head[3]:>24} {head[4]:>18}")
    for fault in FAULTS:
        for mode in ("mcr", "floor"):
            mine = [r for r in rows if r["fault"] == fault and r["subject"] == mode]
            if not mine:
                continue
            resumes = [r["resume_s"] for r in mine if r["resume_s"] is not None]
            resume = f"{statistics.median(resumes):.3f}, {max(resumes):.3f}" if resumes else "never"
            lost = ", ".join(str(r["lost"]) for r in mine)
            settle = statistics.median(r["settle_s"] for r in mine)
            print(f"{fault:9} {mode:8} {lost:>16} {resume:>24} {settle:>18.3f}")


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    env = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "rate": args.rate,
        "objects": args.objects,
        "rounds": rounds,
    }
    print(json.dumps({"env": env}), flush=True)
    if (os.cpu_count() or 1) >= 2:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {1})
    directory = Path(tempfile.mkdtemp(prefix="mcr-bench-b7-"))
    servers = Child("bench.multicluster._servers", ["--servers", "1", "--dir", str(directory)], 0)
    rows: list[dict[str, Any]] = []
    lost = 0
    try:
        servers.recv()
        (entry,) = json.loads((directory / "fleet.json").read_text())
        servers.ask({"op": "create", "servers": [0], "per": args.objects, "phase": "b7"})
        for fault in FAULTS:
            for r in range(rounds):
                order = ("mcr", "floor") if r % 2 == 0 else ("floor", "mcr")
                for mode in order:
                    row = _run_one(servers, entry, mode, fault, f"{fault}{r}{mode}", args)
                    print(json.dumps(row), flush=True)
                    rows.append(row)
                    lost += row["lost"]
    finally:
        servers.close()
        shutil.rmtree(directory, ignore_errors=True)
    _summary(rows)
    return 1 if lost else 0
