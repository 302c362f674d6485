"""Runs examples/single_cluster/greeter.py as a process against mcr-envtest, then stops it with SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import Awaitable
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcr.errors import NotFoundError
from mcr.rest.config import load_config
from mcr.testing import eventually
from mcr_envtest import ServerThread

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "single_cluster" / "greeter.py"
CM = "/api/v1/namespaces/default/configmaps"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.slow
async def test_greeter_example_reconciles_and_stops_cleanly(apiserver: ServerThread) -> None:
    metrics_port, probe_port = _free_port(), _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "--kubeconfig",
        str(apiserver.kubeconfig_path),
        "--metrics-bind-address",
        f"127.0.0.1:{metrics_port}",
        "--health-probe-bind-address",
        f"127.0.0.1:{probe_port}",
        "--log-format",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        async with load_config(apiserver.kubeconfig).transport() as t, aiohttp.ClientSession() as http:

            async def ready() -> bool:
                try:
                    async with http.get(f"http://127.0.0.1:{probe_port}/readyz") as resp:
                        return resp.status == 200
                except aiohttp.ClientConnectionError:
                    return False

            await eventually(ready, timeout=30, interval=0.1, message="the example never became ready")

            for name, greet in (("hello-me", "true"), ("leave-me", "false")):
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "labels": {"example.io/greet": greet}},
                    "data": {"other": "kept"},
                }
                await t.request("POST", CM, body=json.dumps(body).encode(), content_type="application/json")

            async def greeting(name: str) -> str | None:
                try:
                    data = (await t.request("GET", f"{CM}/{name}")).json().get("data") or {}
                except NotFoundError:
                    return None
                return data.get("greeting")

            async def greeted() -> bool:
                return await greeting("hello-me") == "hello, hello-me"

            await eventually(greeted, timeout=15)
            # Drift is reverted: remove the greeting and it comes back.
            patch = json.dumps({"data": {"greeting": None}}).encode()
            await t.request(
                "PATCH", f"{CM}/hello-me", body=patch, content_type="application/merge-patch+json"
            )
            await eventually(greeted, timeout=15)
            assert await greeting("leave-me") is None
            cm = (await t.request("GET", f"{CM}/hello-me")).json()
            assert cm["data"]["other"] == "kept"

            async def successes() -> float:
                async with http.get(f"http://127.0.0.1:{metrics_port}/metrics") as resp:
                    text = await resp.text()
                return sum(
                    s.value
                    for f in text_string_to_metric_families(text)
                    if f.name == "controller_runtime_reconcile"
                    for s in f.samples
                    if s.name == "controller_runtime_reconcile_total"
                    and s.labels["controller"] == "greeter"
                    and s.labels["result"] == "success"
                )

            # Metrics are batched for at most a second: poll until the successes show.
            await eventually(lambda: _at_least(successes(), 3), timeout=10)

        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout=40)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()[-3000:]
    records = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    greeted = [r for r in records if r["msg"] == "greeted"]
    assert greeted, "no 'greeted' log record"
    assert greeted[0]["controller"] == "greeter"
    assert greeted[0]["namespace"] == "default"
    assert greeted[0]["name"] == "hello-me"
    assert greeted[0]["cluster"] == ""


async def _at_least(value: Awaitable[float], minimum: float) -> bool:
    return await value >= minimum
