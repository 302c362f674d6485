"""Servers and fleets remove the files they created themselves, and keep the user's."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from kubernetes import client

from mcr_envtest import Fleet, FleetThread, ServerThread

from .conftest import Raw, close_client, sync_client


@pytest.mark.envtest_only("state_dir persistence is mcr-envtest's")
def test_stop_removes_the_servers_own_files_and_keeps_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with ServerThread(state_dir=state) as srv:
        work = srv.work_dir
        assert Path(srv.ca_file).parent == work
        assert Path(srv.kubeconfig_path).exists()
        # the serving key is never left on disk, not even while running
        assert not list(work.glob("*.key"))
        assert not work.stat().st_mode & 0o077
        api = sync_client(srv.kubeconfig)
        try:
            client.CoreV1Api(api).create_namespaced_config_map("default", {"metadata": {"name": "kept"}})
        finally:
            close_client(api)
        srv.stop()
        assert not work.exists()
        assert (state / "state.json").exists()
        # a restart writes them again at the same paths and serves the kept state
        srv.start()
        assert Path(srv.kubeconfig_path).exists()
        assert srv.work_dir == work
        api = sync_client(srv.kubeconfig)
        try:
            assert client.CoreV1Api(api).read_namespaced_config_map("kept", "default").metadata.name == "kept"
        finally:
            close_client(api)
    assert not work.exists()
    assert (state / "state.json").exists()


def test_many_servers_leave_no_directories() -> None:
    dirs = []
    for _ in range(3):
        with ServerThread() as srv:
            dirs.append(srv.work_dir)
            assert srv.work_dir.exists()
            assert srv.work_dir.parent == Path(tempfile.gettempdir())
    assert not [d for d in dirs if d.exists()]


def test_fleet_removes_its_kubeconfigs_and_its_own_directory(tmp_path: Path) -> None:
    given = tmp_path / "fleet"
    given.mkdir()
    (given / "notes.txt").write_text("the user's file")
    with FleetThread(2, kubeconfig_dir=given) as fleet:
        assert sorted(p.name for p in given.glob("*.kubeconfig")) == [
            "cluster-0.kubeconfig",
            "cluster-1.kubeconfig",
        ]
    assert not list(given.glob("*.kubeconfig"))
    assert (given / "notes.txt").read_text() == "the user's file"
    fleet = FleetThread(1).start()
    own = fleet.kubeconfig_dir
    assert (own / "cluster-0.kubeconfig").exists()
    fleet.close()
    assert not own.exists()


async def test_fleet_add_and_remove_members(tmp_path: Path) -> None:
    async with Fleet(1, kubeconfig_dir=tmp_path) as fleet:
        added = await fleet.add()
        assert added.name == "cluster-1"
        assert await asyncio.to_thread((tmp_path / "cluster-1.kubeconfig").exists)
        r = Raw(added)
        try:
            status, _ = await r.json("GET", "/api/v1/namespaces/default")
        finally:
            await r.close()
        assert status == 200
        await fleet.remove("cluster-0")
        assert not await asyncio.to_thread((tmp_path / "cluster-0.kubeconfig").exists)
        assert [s.name for s in fleet.servers] == ["cluster-1"]
        assert (await fleet.add()).name == "cluster-2"
    assert not await asyncio.to_thread(lambda: list(tmp_path.glob("*.kubeconfig")))
