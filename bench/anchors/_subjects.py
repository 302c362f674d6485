"""The measured processes of the anchors: mcr (asyncio or uvloop) and the Go original.

Both speak the protocol of :mod:`bench.anchors._worker` and run pinned to CPU 1 (the servers'
process is pinned to CPU 0), so the Go runtime sees one CPU (``GOMAXPROCS`` 1) like Python's loop.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.multicluster._proc import Child, pinned


@dataclass(frozen=True)
class Subject:
    """One side of a comparison: ``name`` is the row label (``mcr``, ``mcr-uvloop``, ``go``)."""

    name: str
    go_binary: Path | None = None
    loop: str = "asyncio"

    def argv(self, fleet: Path, k: int, reconcile: str, first: bool) -> list[str]:
        common = ["--fleet", str(fleet), "--clusters", str(k), "--reconcile", reconcile]
        if first:
            common.append("--first")
        if self.go_binary is not None:
            return [str(self.go_binary), *common]
        return [sys.executable, "-m", "bench.anchors._worker", *common, "--loop", self.loop]


class Proc(Child):
    """A measured process (:class:`~bench.multicluster._proc.Child`'s JSON-lines protocol) running
    ``argv``, pinned to ``cpu``; its errors name the subject."""

    def __init__(self, subject: Subject, argv: list[str], cpu: int = 1) -> None:
        self.name = self.module = subject.name
        self.proc = subprocess.Popen(
            pinned(argv, cpu), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start(subject: Subject, fleet: Path, k: int, reconcile: str, first: bool = False) -> Proc:
    return Proc(subject, subject.argv(fleet, k, reconcile, first))
