"""``mcr-envtest fleet down|add|remove`` against a ``fleet up`` in another process, port errors
of ``serve``, and ``--version``; every command runs as a subprocess."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from mcr.testing import eventually

from .conftest import close_client, sync_client
from .test_cli import _start

CLI = [sys.executable, "-c", "import sys; from mcr_envtest.cli import main; sys.exit(main())"]
ENVTEST = Path(sys.executable).with_name("mcr-envtest")


async def run(*args: str, timeout: float = 60) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *CLI, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def reachable(kubeconfig: Path) -> bool:
    api = sync_client(yaml.safe_load(kubeconfig.read_text()))
    try:
        return client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
    finally:
        close_client(api)


def state(directory: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((directory / "fleet.json").read_text())
    return loaded


async def test_fleet_down_add_remove_from_another_process(tmp_path: Path) -> None:
    d = tmp_path / "fleet"
    proc = await _start("fleet", "up", "--clusters", "2", "--dir", str(d))
    try:
        await eventually(lambda: (d / "fleet.json").exists(), timeout=30, message="fleet state written")
        assert [c["name"] for c in state(d)["clusters"]] == ["cluster-0", "cluster-1"]  # type: ignore[index]
        code, out, err = await run("fleet", "add", "--dir", str(d))
        assert code == 0, err
        assert out.startswith("cluster-2: https://127.0.0.1:")
        assert await asyncio.to_thread(reachable, d / "cluster-2.kubeconfig")
        code, out, err = await run("fleet", "add", "--dir", str(d), "--name", "edge")
        assert code == 0, err
        code, out, err = await run("fleet", "remove", "--dir", str(d), "cluster-0")
        assert (code, out) == (0, "cluster-0 removed\n"), err
        assert not (d / "cluster-0.kubeconfig").exists()
        names = [c["name"] for c in state(d)["clusters"]]  # type: ignore[index]
        assert names == ["cluster-1", "cluster-2", "edge"]
        code, _, err = await run("fleet", "remove", "--dir", str(d), "cluster-9")
        assert code == 1
        assert err == "mcr-envtest: fleet has no cluster named 'cluster-9'\n"
        code, _, err = await run("fleet", "add", "--dir", str(d), "--name", "edge")
        assert code == 1
        assert "already has a cluster named 'edge'" in err
        # a second 'fleet up' on the same directory is refused
        code, _, err = await run("fleet", "up", "--clusters", "1", "--dir", str(d))
        assert (code, err) == (1, f"mcr-envtest: a fleet is already running in {d}\n")
        code, out, err = await run("fleet", "down", "--dir", str(d))
        assert (code, out) == (0, f"fleet in {d} stopped\n"), err
        await asyncio.wait_for(proc.wait(), 20)
        assert proc.returncode == 0
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
    # everything the fleet wrote is gone
    assert sorted(p.name for p in d.iterdir()) == []
    code, _, err = await run("fleet", "down", "--dir", str(d))
    assert code == 1
    assert err == f"mcr-envtest: no running fleet in {d} (no fleet.json)\n"


async def test_fleet_down_cleans_up_after_a_killed_fleet(tmp_path: Path) -> None:
    d = tmp_path / "fleet"
    proc = await _start("fleet", "up", "--clusters", "1", "--dir", str(d))
    await eventually(lambda: (d / "fleet.json").exists(), timeout=30)
    proc.kill()
    await proc.wait()
    code, _, err = await run("fleet", "down", "--dir", str(d))
    assert code == 1
    assert "is gone" in err
    assert not (d / "fleet.json").exists()


async def test_serve_port_errors_are_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out, err = await run("serve", "--port", str(port))
    assert code == 2
    assert err == f"mcr-envtest: cannot listen on 127.0.0.1:{port}: the address is already in use\n"
    assert "Traceback" not in out + err


@pytest.mark.envtest_only("serve --host: a real control plane serves on 127.0.0.1 only")
async def test_serve_host_errors_are_one_line() -> None:
    code, _, err = await run("serve", "--host", "192.0.2.1", "--port", "6443")
    assert code == 2
    assert err.startswith("mcr-envtest: cannot listen on 192.0.2.1:6443: ")
    assert err.count("\n") == 1


async def test_version(tmp_path: Path) -> None:
    for argv in ([str(ENVTEST), "--version"], [*CLI, "--version"]):
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        assert proc.returncode == 0
        assert out.decode().split()[-1] == version("mcr-envtest")
