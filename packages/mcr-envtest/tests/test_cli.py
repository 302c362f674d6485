"""The ``mcr-envtest`` console script: serve and fleet up, stopped by SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from mcr.testing import eventually
from mcr_envtest.real import assets_dir

from .conftest import close_client, sync_client

# A real control plane (KUBEBUILDER_ASSETS) starts and stops in seconds on an idle machine, but
# ``fleet up`` starts unpooled ones, which take far longer while the rest of the suite runs.
WAIT = 180 if assets_dir() is not None else 20
CLI = [sys.executable, "-c", "import sys; from mcr_envtest.cli import main; sys.exit(main())"]


async def _start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *CLI, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )


async def _stop(proc: asyncio.subprocess.Process, sig: int = signal.SIGTERM) -> int:
    if proc.returncode is None:
        proc.send_signal(sig)
    await asyncio.wait_for(proc.communicate(), WAIT)
    assert proc.returncode is not None
    return proc.returncode


def _version(kubeconfig: Path) -> str:
    api = sync_client(yaml.safe_load(kubeconfig.read_text()))
    try:
        return str(client.VersionApi(api).get_code().minor)
    finally:
        close_client(api)


@pytest.mark.envtest_only("serve --state-dir/--history-size are mcr-envtest options")
async def test_serve_writes_kubeconfig_and_stops_on_sigterm(tmp_path: Path) -> None:
    out = tmp_path / "kc.yaml"
    state = tmp_path / "state"
    proc = await _start("serve", "--kubeconfig", str(out), "--state-dir", str(state), "--history-size", "50")
    try:
        await eventually(out.exists, timeout=20, message="kubeconfig written")
        assert await asyncio.to_thread(_version, out) == "37"
    finally:
        code = await _stop(proc)
    assert code == 0
    assert (state / "state.json").exists()


async def test_fleet_up_writes_one_kubeconfig_per_cluster(tmp_path: Path) -> None:
    proc = await _start("fleet", "up", "--clusters", "2", "--dir", str(tmp_path))
    try:
        paths = [tmp_path / f"cluster-{i}.kubeconfig" for i in range(2)]
        await eventually(lambda: all(p.exists() for p in paths), timeout=WAIT, message="kubeconfigs written")
        servers = {yaml.safe_load(p.read_text())["clusters"][0]["cluster"]["server"] for p in paths}
        assert len(servers) == 2
        for p in paths:
            assert await asyncio.to_thread(_version, p) == "37"
    finally:
        code = await _stop(proc, signal.SIGINT)
    assert code == 0


async def test_bad_arguments_exit_nonzero(tmp_path: Path) -> None:
    proc = await _start("fleet", "up", "--clusters", "0", "--dir", str(tmp_path))
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 2
    assert b"--clusters must be at least 1" in err
