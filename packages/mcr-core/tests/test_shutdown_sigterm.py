"""SIGTERM to a real manager process: no new work, in-flight work finishes, exit code by grace period."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mcr.rest.config import load_config
from mcr.testing import eventually
from mcr_envtest import ServerThread

SCRIPT = r"""
import asyncio, json, sys, time

from mcr.builder import controller_managed_by
from mcr.rest.config import load_config
from mcr.manager import Manager

kubeconfig, grace, duration, events = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]


def emit(event, **fields):
    with open(events, "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": event, "t": time.time(), **fields}) + "\n")


async def reconcile(req):
    emit("start", name=req.name)
    await asyncio.sleep(duration)  # the long piece of work under test
    emit("end", name=req.name)


async def main():
    mgr = Manager(load_config(kubeconfig), metrics_bind_address="0", graceful_shutdown_timeout=grace)
    controller_managed_by(mgr).named("slow").for_("v1/ConfigMap").complete(reconcile)
    emit("ready")
    await mgr.start()  # in the main thread: SIGTERM/SIGINT handlers are installed
    emit("exit")


asyncio.run(main())
"""


def _events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


async def _run_until_sigterm(
    apiserver: ServerThread, tmp_path: Path, *, grace: float, duration: float, signals: int = 1
) -> tuple[int, str, list[dict[str, Any]], float]:
    script = tmp_path / "manager_main.py"
    script.write_text(SCRIPT)
    events = tmp_path / "events.jsonl"
    config = load_config(apiserver.kubeconfig)
    async with config.transport() as t:

        async def create(name: str) -> None:
            body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).encode()
            await t.request(
                "POST", "/api/v1/namespaces/default/configmaps", body=body, content_type="application/json"
            )

        await create("first")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            str(apiserver.kubeconfig_path),
            str(grace),
            str(duration),
            str(events),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            await eventually(
                lambda: any(e["event"] == "start" for e in _events(events)),
                timeout=30,
                message="the reconcile of 'first' never started",
            )
            await create("second")  # queued behind the in-flight reconcile (one worker)
            await asyncio.sleep(0.2)  # let the watch deliver it into the queue
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            if signals > 1:
                await asyncio.sleep(0.5)  # the first signal started the graceful drain
                proc.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(proc.communicate(), timeout=60)
            took = time.monotonic() - sent
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, stderr.decode(), _events(events), took


@pytest.mark.slow
async def test_sigterm_lets_in_flight_reconcile_finish_and_exits_zero(
    apiserver: ServerThread, tmp_path: Path
) -> None:
    code, stderr, events, took = await _run_until_sigterm(apiserver, tmp_path, grace=20, duration=2)
    names = [(e["event"], e.get("name")) for e in events]
    assert code == 0, stderr
    assert ("start", "first") in names
    assert ("end", "first") in names, names  # in-flight work finished
    assert names[-1] == ("exit", None)
    assert took < 20


@pytest.mark.slow
async def test_sigterm_starts_no_new_work(apiserver: ServerThread, tmp_path: Path) -> None:
    code, stderr, events, _ = await _run_until_sigterm(apiserver, tmp_path, grace=20, duration=2)
    names = [(e["event"], e.get("name")) for e in events]
    assert code == 0, stderr
    assert ("end", "first") in names, names
    assert ("start", "second") not in names, names  # queued before the signal: must not start after it


@pytest.mark.slow
async def test_sigterm_past_grace_period_fails_with_an_error(apiserver: ServerThread, tmp_path: Path) -> None:
    code, stderr, events, took = await _run_until_sigterm(apiserver, tmp_path, grace=1, duration=60)
    names = [(e["event"], e.get("name")) for e in events]
    assert code != 0
    assert "grace period of 1.0s" in stderr, stderr[-2000:]
    assert ("end", "first") not in names  # cut short after the grace period
    assert ("exit", None) not in names
    assert took < 15  # 1 s grace + abort, not the 60 s reconcile


@pytest.mark.slow
async def test_second_sigterm_aborts_the_drain_and_exits_non_zero(
    apiserver: ServerThread, tmp_path: Path
) -> None:
    code, stderr, events, took = await _run_until_sigterm(
        apiserver, tmp_path, grace=60, duration=60, signals=2
    )
    names = [(e["event"], e.get("name")) for e in events]
    assert code != 0
    assert "aborted by a second signal" in stderr, stderr[-2000:]
    assert ("end", "first") not in names  # the in-flight reconcile was cancelled
    assert took < 15  # neither the 60 s reconcile nor the 60 s grace period
