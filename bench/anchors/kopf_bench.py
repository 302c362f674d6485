"""kopf beside mcr: K clusters as K kopf processes, as K kopf operators on threads of one
process, and as one mcr manager (asyncio, uvloop), each fed the same event burst on the same
mcr-envtest servers.

Per variant: Σ RSS of its processes once every cluster's first event was handled (idle) and after
the burst (loaded), CPU seconds per event handled during the burst (all its processes, from
``/proc``), and the events handled of those sent. kopf runs from its own venv
(:mod:`bench.anchors._kopfenv`), its operators from ``kopf_operator.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.anchors._subjects import Subject, start
from bench.multicluster._proc import Child, pinned

_TICK = os.sysconf("SC_CLK_TCK")
OPERATOR = Path(__file__).resolve().parent / "kopf_operator.py"


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _handled(outs: list[Path]) -> tuple[int, int]:
    """(events handled, clusters with at least one event) over every output file so far."""
    n = seen = 0
    for out in outs:
        try:
            state = json.loads(out.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            continue
        n += state["n"]
        seen += sum(1 for v in state["clusters"].values() if v)
    return n, seen


def _wait(outs: list[Path], procs: list[subprocess.Popen[bytes]], want: int, k: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    last, last_at = -1, time.monotonic()
    while True:
        n, seen = _handled(outs)
        if n >= want and seen >= k:
            return n
        dead = [p.args for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"kopf operator exited early: {dead[0]!r}")
        now = time.monotonic()
        if n != last:
            last, last_at = n, now
        if now > deadline or (n >= k and now - last_at > 20):
            return n
        time.sleep(0.1)


def _kopf(python: Path, servers: Child, fleet: Path, k: int, per: int, threads: bool) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="mcr-bench-kopf-"))
    groups = [list(range(k))] if threads else [[i] for i in range(k)]
    outs = [tmp / f"out-{g[0]}.json" for g in groups]
    procs: list[subprocess.Popen[bytes]] = []
    started = time.perf_counter()
    try:
        for group, out in zip(groups, outs, strict=True):
            argv = [str(python), str(OPERATOR), "--fleet", str(fleet), "--out", str(out)]
            argv += ["--clusters", ",".join(map(str, group))]
            procs.append(subprocess.Popen(pinned(argv, 1), stdout=subprocess.DEVNULL))
        _wait(outs, procs, k, k, timeout=120 + 3 * k)
        ready_s = time.perf_counter() - started
        time.sleep(2.0)
        pids = [p.pid for p in procs]
        idle = sum(_rss(p) for p in pids)
        cpu0 = sum(_cpu_s(p) for p in pids)
        before, _ = _handled(outs)
        servers.ask({"op": "create", "servers": list(range(k)), "per": per, "phase": "kb"})
        after = _wait(outs, procs, before + per * k, k, timeout=300)
        cpu = sum(_cpu_s(p) for p in pids) - cpu0
        loaded = sum(_rss(p) for p in pids)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for out in tmp.iterdir():
            out.unlink()
        tmp.rmdir()
    handled = after - before
    return {
        "ready_s": ready_s,
        "rss_idle_mib": idle / 2**20,
        "rss_loaded_mib": loaded / 2**20,
        "events_sent": per * k,
        "events_handled": handled,
        "cpu_ms_per_event": cpu / max(handled, 1) * 1e3,
    }


def _mcr(servers: Child, fleet: Path, k: int, per: int, loop: str) -> dict[str, Any]:
    with start(Subject("mcr", loop=loop), fleet, k, "get", first=True) as proc:
        engaged = proc.recv()
        proc.send({"op": "expect", "phase": "kb", "count": per * k, "timeout": 300, "quiet": 20})
        proc.recv()
        servers.ask({"op": "create", "servers": list(range(k)), "per": per, "phase": "kb"})
        burst = proc.recv()
    return {
        "ready_s": engaged["engage_s"],
        "rss_idle_mib": engaged["rss1"] / 2**20,
        "rss_loaded_mib": burst["rss"] / 2**20,
        "events_sent": per * k,
        "events_handled": burst["count"],
        "cpu_ms_per_event": burst["cpu_s"] / max(burst["count"], 1) * 1e3,
    }


def run_kopf(python: Path, servers: Child, fleet: Path, k: int, per: int) -> list[dict[str, Any]]:
    """One row per variant (mcr on asyncio and uvloop, kopf threads, kopf processes), each on
    freshly seeded servers."""
    rows = []
    for variant in ("mcr", "mcr-uvloop", "kopf-threads", "kopf-processes"):
        servers.ask({"op": "create", "servers": list(range(k)), "per": 1, "phase": "e"})
        try:
            if variant.startswith("mcr"):
                point = _mcr(servers, fleet, k, per, "uvloop" if variant == "mcr-uvloop" else "asyncio")
            else:
                point = _kopf(python, servers, fleet, k, per, threads=variant == "kopf-threads")
        finally:
            servers.ask({"op": "wipe"})
        row = {"bench": "kopf", "variant": variant, "clusters": k, **point}
        print(
            json.dumps({key: round(v, 3) if isinstance(v, float) else v for key, v in row.items()}),
            flush=True,
        )
        rows.append(row)
    return rows
