"""Child processes that talk one JSON line per message over stdin/stdout, pinned to a CPU: the
parent's side (:class:`Child`) and the child's (:func:`serve_commands`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any


def pinned(cmd: list[str], cpu: int) -> list[str]:
    """``cmd`` run under ``taskset -c cpu`` when the machine has two CPUs and taskset exists."""
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(cpu), *cmd]
    return cmd


class Child:
    """A ``python -m module args`` child: :meth:`send` a JSON command, :meth:`recv` a JSON answer."""

    def __init__(self, module: str, args: list[str], cpu: int) -> None:
        self.module = module
        cmd = pinned([sys.executable, "-m", module, *args], cpu)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def recv(self) -> dict[str, Any]:
        """The next JSON line; raises ``RuntimeError`` naming the module if the child exited."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.module} exited (code {self.proc.wait()}) before answering")
        result: dict[str, Any] = json.loads(line)
        return result

    def ask(self, msg: dict[str, Any]) -> dict[str, Any]:
        """:meth:`send` then :meth:`recv` (blocking; from a loop use ``asyncio.to_thread``)."""
        self.send(msg)
        return self.recv()

    def close(self, timeout: float = 20.0) -> None:
        """Close stdin (the child's signal to stop), wait up to ``timeout`` s, then kill it."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):  # the child is gone already: nothing to tell it
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def serve_commands(handle: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]) -> None:
    """The child's side: answer each JSON command read from stdin with ``handle``'s reply, one JSON
    line on stdout, until stdin closes (the parent's signal to stop); blank lines are skipped."""
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        if line.strip():
            print(json.dumps(await handle(json.loads(line))), flush=True)


def command_of(cmd: dict[str, Any], op: str) -> dict[str, Any]:
    """``cmd`` itself when its ``op`` is ``op``; ``ValueError`` naming it otherwise."""
    if cmd.get("op") != op:
        raise ValueError(f"unknown command {cmd!r}")
    return cmd
