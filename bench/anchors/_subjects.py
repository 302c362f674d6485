"""The measured processes of the anchors: mcr (asyncio or uvloop) and the Go original.

Both speak the protocol of :mod:`bench.anchors._worker` and run pinned to CPU 1 (the servers'
process is pinned to CPU 0), so the Go runtime sees one CPU (``GOMAXPROCS`` 1) like Python's loop.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.multicluster._proc import pinned


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


class Proc:
    """A measured process: :meth:`send` one JSON command, :meth:`recv` one JSON answer."""

    def __init__(self, subject: Subject, argv: list[str], cpu: int = 1) -> None:
        self.name = subject.name
        self.proc = subprocess.Popen(
            pinned(argv, cpu), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def recv(self) -> dict[str, Any]:
        """The next JSON line; ``RuntimeError`` naming the subject if the process exited."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} exited (code {self.proc.wait()}) before answering")
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self, timeout: float = 20.0) -> None:
        """Close stdin (the signal to stop), wait up to ``timeout`` s, then kill."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start(subject: Subject, fleet: Path, k: int, reconcile: str, first: bool = False) -> Proc:
    return Proc(subject, subject.argv(fleet, k, reconcile, first))
