"""The public API: Server in the test's loop, ServerThread, Fleet/FleetThread, users and
credentials, kubeconfig files and state directories (real mode: test_real.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from kubernetes import client, config
from kubernetes.aio import client as aclient
from kubernetes.aio import config as aconfig

import mcr_envtest
from mcr_envtest import Fleet, Server, ServerThread

from .conftest import Raw, close_client, sync_client
from .test_watch import ROOT_CA


def test_public_names() -> None:
    assert set(mcr_envtest.__all__) == {
        "Faults",
        "Fleet",
        "FleetThread",
        "LoggedRequest",
        "Server",
        "ServerThread",
        "__version__",
    }
    assert Server.__module__ == "mcr_envtest"


async def test_server_in_the_running_loop_with_aio_client() -> None:
    async with Server() as srv:
        assert srv.url.startswith("https://127.0.0.1:")
        api = await aconfig.new_client_from_config_dict(srv.kubeconfig)
        async with api:
            core = aclient.CoreV1Api(api)
            await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
            names = [c.metadata.name for c in (await core.list_namespaced_config_map("default")).items]
            assert [n for n in names if n != ROOT_CA] == ["a"]


def test_kubeconfig_file_works_with_official_loader(apiserver: ServerThread) -> None:
    data = yaml.safe_load(Path(apiserver.kubeconfig_path).read_text())
    assert data["clusters"][0]["cluster"]["server"] == apiserver.url
    assert Path(apiserver.kubeconfig_path).stat().st_mode & 0o077 == 0
    api = config.new_client_from_config(config_file=apiserver.kubeconfig_path)
    try:
        assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
    finally:
        close_client(api)


def test_add_user_is_subject_to_rbac(apiserver: ServerThread) -> None:
    cfg = apiserver.add_user("alice", groups=("devs",))
    api = sync_client(cfg)
    admin = sync_client(apiserver.kubeconfig)
    try:
        core = client.CoreV1Api(api)
        with pytest.raises(client.ApiException) as exc:
            core.list_namespaced_config_map("default")
        assert exc.value.status == 403
        assert 'User "alice" cannot list resource "configmaps"' in orjson.loads(exc.value.body)["message"]
        rbac = client.RbacAuthorizationV1Api(admin)
        rbac.create_namespaced_role(
            "default",
            {
                "metadata": {"name": "r"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
            },
        )
        rbac.create_namespaced_role_binding(
            "default",
            {
                "metadata": {"name": "rb"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                "subjects": [{"kind": "Group", "name": "devs"}],
            },
        )
        # kube-apiserver's RBAC follows new bindings within moments, not at once
        deadline = time.monotonic() + 10
        while True:
            try:
                items = core.list_namespaced_config_map("default").items
                break
            except client.ApiException as err:
                if err.status != 403 or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert [c.metadata.name for c in items if c.metadata.name != ROOT_CA] == []
        with pytest.raises(client.ApiException) as exc:
            core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})
        assert exc.value.status == 403
    finally:
        close_client(api)
        close_client(admin)


def test_client_certificate_user(apiserver: ServerThread) -> None:
    cfg = apiserver.add_user("bob", groups=("system:masters",), client_cert=True)
    assert "token" not in cfg["users"][0]["user"]
    api = sync_client(cfg)
    try:
        assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
    finally:
        close_client(api)


async def test_fleet_async(tmp_path: Path) -> None:
    async with Fleet(2, kubeconfig_dir=tmp_path) as fleet:
        assert len(fleet) == 2
        assert fleet[0].url != fleet[1].url
        assert [p.name for p in fleet.kubeconfig_paths] == ["cluster-0.kubeconfig", "cluster-1.kubeconfig"]
        assert all(p.parent == tmp_path for p in fleet.kubeconfig_paths)
        r0, r1 = Raw(fleet[0]), Raw(fleet[1])
        try:
            await r0.json(
                "POST", "/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "only0"}}
            )
            s0, _ = await r0.json("GET", "/api/v1/namespaces/default/configmaps/only0")
            s1, _ = await r1.json("GET", "/api/v1/namespaces/default/configmaps/only0")
            assert (s0, s1) == (200, 404)
        finally:
            await r0.close()
            await r1.close()


def test_fleet_fixture(fleet: Any) -> None:
    servers = fleet(3)
    assert len({s.port for s in servers.servers}) == 3
    for path in servers.kubeconfig_paths:
        cfg = yaml.safe_load(path.read_text())
        api = sync_client(cfg)
        try:
            assert client.VersionApi(api).get_code().major == "1"
        finally:
            close_client(api)


@pytest.mark.envtest_only("state_dir persistence is mcr-envtest's")
def test_state_dir_persists_objects_and_rv(tmp_path: Path) -> None:
    with ServerThread(state_dir=tmp_path) as srv:
        api = sync_client(srv.kubeconfig)
        try:
            cm = client.CoreV1Api(api).create_namespaced_config_map("default", {"metadata": {"name": "kept"}})
        finally:
            close_client(api)
    assert (tmp_path / "state.json").exists()
    with ServerThread(state_dir=tmp_path) as srv2:
        api = sync_client(srv2.kubeconfig)
        try:
            core = client.CoreV1Api(api)
            again = core.read_namespaced_config_map("kept", "default")
            assert again.metadata.uid == cm.metadata.uid
            newer = core.create_namespaced_config_map("default", {"metadata": {"name": "n"}})
            assert int(newer.metadata.resource_version) > int(cm.metadata.resource_version)
        finally:
            close_client(api)
