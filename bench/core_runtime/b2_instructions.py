"""B2's watch workload in instructions: ``python -m bench.core_runtime.b2_instructions``.

CPU seconds on a shared virtual machine move by ±20% from one window to the next; instruction
counts do not (though they leave out what cache misses cost). This runs each reader of B2's
``watch`` workload (see :mod:`bench.core_runtime.b2`: the raw reader, PERFORMANCE.md's floor;
mcr's informer; the subject; the minimal controller on the raw reader) in child processes under
``valgrind --tool=callgrind``, once with one update cycle and once with three; the difference
between the two counts, divided by the 2N events it adds, is the instructions per event with
every fixed cost (imports, start-up, initial sync) taken out. Ratios are the raw reader's count
over each other's (B2 in instructions), all under mcr's GC policy (B2's default row). The
worker's runs are not limited by time here (see ``_child``): valgrind's slowdown would otherwise
shrink them to one request each. Needs ``valgrind``; takes several minutes (N = 5000 by
default).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.core_runtime.b2 import ROOT, _floor, _minimal, _raw, _Server, _server, _subject

MODES = ("raw", "floor", "subject", "minimal")


def _child(mode: str, cycles: int, n: int, kubeconfig: str, control: int) -> None:
    measure = {"raw": _raw, "floor": _floor, "subject": _subject, "minimal": _minimal}[mode]
    # A single worker sizes its runs of requests by how long the last run took (doubled up to
    # RUN_LIMIT after a run shorter than RUN_SECONDS). At native speed a run of no-op reconciles
    # stays far below that; under valgrind everything takes 20-100 times longer and every run
    # would start over at one request. Without the time limit, runs grow as they do natively.
    import mcr.controller.controller

    mcr.controller.controller.RUN_SECONDS = math.inf
    asyncio.run(measure(_Server(kubeconfig, control), n, watch=True, cycles=cycles))


def _instructions(out: Path) -> int:
    """The total instruction count callgrind wrote to ``out``."""
    match = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no instruction total in {out}")
    return int(match.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.core_runtime.b2_instructions", description=__doc__)
    parser.add_argument("--objects", type=int, default=5000, help="ConfigMaps (events per cycle)")
    parser.add_argument(
        "--child", nargs=4, metavar=("MODE", "CYCLES", "KUBECONFIG", "FD"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    n = args.objects
    if args.child:
        mode, cycles, kubeconfig, fd = args.child
        _child(mode, int(cycles), n, kubeconfig, int(fd))
        return 0
    if shutil.which("valgrind") is None:
        print("b2_instructions needs valgrind on PATH", file=sys.stderr)
        return 2
    totals: dict[tuple[str, int], int] = {}
    with _server(n) as server, tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            for cycles in (1, 3):
                out = Path(tmp) / f"{mode}.{cycles}.out"
                cmd = [
                    "valgrind",
                    "--tool=callgrind",
                    f"--callgrind-out-file={out}",
                    sys.executable,
                    "-m",
                    "bench.core_runtime.b2_instructions",
                    f"--objects={n}",
                    "--child",
                    mode,
                    str(cycles),
                    server.kubeconfig,
                    str(server.control),
                ]
                done = subprocess.run(
                    cmd, cwd=ROOT, pass_fds=(server.control,), capture_output=True, text=True, check=False
                )
                if done.returncode:
                    print(done.stderr[-4000:], file=sys.stderr)
                    return 1
                totals[mode, cycles] = _instructions(out)
    per_event = {mode: (totals[mode, 3] - totals[mode, 1]) / (2 * n) for mode in MODES}
    row: dict[str, object] = {"bench": "b2_watch_instructions", "n": n}
    for mode in MODES:
        row[f"{mode}_instructions_per_event"] = round(per_event[mode])
    for mode in ("floor", "subject", "minimal"):
        row[f"{mode}_ratio"] = round(per_event["raw"] / per_event[mode], 3)
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
