"""The building blocks of providers that read their fleet from a host cluster: host_cluster,
run_controller, SourcedClusters, and kubeconfig text as RestConfig."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

import mcr
from mcr.cluster import Cluster
from mcr.controller import Controller
from mcr.errors import ClusterNotFoundError, ConfigError
from mcr.providers import (
    ClustersProvider,
    MultiProvider,
    Problem,
    SourcedClusters,
    fingerprint,
    host_cluster,
    run_controller,
)
from mcr.rest.config import RestConfig
from mcr.source import Kind
from mcr.testing import RecordingAware, eventually

log = logging.getLogger("test.sourced")


def configmap(name: str, data: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data or {},
    }


# --- host_cluster -------------------------------------------------------------------------------


async def test_host_cluster_comes_from_the_argument_the_manager_or_a_multi_member(apiserver: Any) -> None:
    explicit = Cluster.from_kubeconfig(apiserver.kubeconfig, name="explicit")
    mgr = mcr.Manager(RestConfig.from_kubeconfig(apiserver.kubeconfig), metrics_bind_address="0")
    try:
        assert host_cluster(mgr, explicit, provider="test") is explicit
        assert host_cluster(mgr, None, provider="test") is mgr.local_cluster

        # A member of a multi provider sees the manager's local cluster through the multi's aware.
        seen: list[Cluster] = []

        class Member(ClustersProvider):
            async def start(self, aware: mcr.Aware) -> None:
                seen.append(host_cluster(aware, None, provider="member"))
                await super().start(aware)

        multi = MultiProvider()
        await multi.add_provider("m", Member())
        runner = asyncio.create_task(multi.start(mgr))
        await eventually(lambda: seen, message="member started")
        assert seen == [mgr.local_cluster]
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)

        with pytest.raises(ValueError, match="the secrets provider needs a host cluster"):
            host_cluster(RecordingAware(), None, provider="secrets")
        without_config = mcr.Manager(metrics_bind_address="0")
        with pytest.raises(ValueError, match="pass cluster="):
            host_cluster(without_config, None, provider="secrets")
    finally:
        await explicit.stop()
        if mgr.local_cluster is not None:
            await mgr.local_cluster.stop()


# --- run_controller -----------------------------------------------------------------------------


async def test_run_controller_reconciles_the_host_and_cleans_up_on_cancel(apiserver: Any) -> None:
    host = Cluster.from_kubeconfig(apiserver.kubeconfig, name="host")
    seen: list[mcr.Request] = []

    async def reconcile(req: mcr.Request) -> None:
        seen.append(req)

    controller = Controller("test-host-controller", reconcile, need_leader_election=False)
    controller.watch(Kind("v1/ConfigMap", engage_provider=False))
    before = set(asyncio.all_tasks())
    runner = asyncio.create_task(run_controller(controller, host))
    try:
        await host.client.create(configmap("one"))
        await eventually(
            lambda: mcr.Request("default", "one", "") in seen, message="host ConfigMap reconciled"
        )
        assert controller.clusters() == {"": "synced"}
    finally:
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner
    # The workers and the engagement are gone; only the host's own informers remain until it stops.
    assert controller.clusters() == {}
    await host.stop()
    assert {t for t in asyncio.all_tasks() if not t.done()} - before <= {asyncio.current_task()}


async def test_run_controller_raises_when_its_workers_fail(apiserver: Any) -> None:
    host = Cluster.from_kubeconfig(apiserver.kubeconfig, name="host")
    controller = Controller("test-twice-started", lambda req: None, need_leader_election=False)
    controller.watch(Kind("v1/ConfigMap", engage_provider=False))
    first = asyncio.create_task(controller.start())
    await asyncio.sleep(0)
    try:
        with pytest.raises(RuntimeError, match="already started"):
            await run_controller(controller, host)
    finally:
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        await host.stop()


# --- fingerprint --------------------------------------------------------------------------------


def test_fingerprint_ignores_dict_order_and_sees_every_byte() -> None:
    a = fingerprint({"server": "https://x", "ca": b"\x00\x01"}, "ctx")
    assert a == fingerprint({"ca": b"\x00\x01", "server": "https://x"}, "ctx")
    assert a != fingerprint({"ca": b"\x00\x02", "server": "https://x"}, "ctx")
    assert a != fingerprint({"server": "https://x", "ca": b"\x00\x01"}, "other")
    with pytest.raises(TypeError, match="object"):
        fingerprint(object())


# --- SourcedClusters ----------------------------------------------------------------------------


async def test_sourced_clusters_rebuild_only_on_change_and_isolate_bad_sources(
    fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
    servers = fleet(2).servers
    sourced = SourcedClusters(provider="test", logger=log)
    aware = RecordingAware()
    runner = asyncio.create_task(sourced.run(aware))
    builds: list[str] = []

    def builder(name: str, server: Any) -> Any:
        async def build() -> Cluster:
            builds.append(name)
            return Cluster.from_kubeconfig(server.kubeconfig, name=name)

        return build

    async def broken() -> Cluster:
        raise ConfigError("malformed YAML at line 3, column 1", source="Secret fleet/b key 'kubeconfig'")

    try:
        assert await sourced.apply(
            "a", source="Secret fleet/a", fingerprint="f1", build=builder("a", servers[0])
        )
        assert await sourced.apply(
            "b", source="Secret fleet/b", fingerprint="g1", build=builder("b", servers[1])
        )
        await eventually(lambda: set(aware.engaged) == {"a", "b"})
        first_a = aware.engaged["a"]

        # Same fingerprint (a resync, an annotation edit): nothing is built, the engagement stays.
        assert not await sourced.apply(
            "a", source="Secret fleet/a", fingerprint="f1", build=builder("a", servers[1])
        )
        assert builds == ["a", "b"]
        assert aware.engaged["a"] is first_a
        assert len(aware.engagements("a")) == 1
        assert sourced.fingerprint_of("a") == "f1"
        assert sourced.source_of("a") == "Secret fleet/a"

        # New settings: rebuilt and re-engaged, the old engagement cancelled.
        assert await sourced.apply(
            "a", source="Secret fleet/a", fingerprint="f2", build=builder("a", servers[1])
        )
        await eventually(lambda: aware.engaged.get("a") not in (None, first_a))
        assert all(e.ended for e in aware.engagements("a") if e.cluster is first_a)
        assert (await sourced.get("a")).config.host == servers[1].url

        # A broken source disengages only its own cluster, is reported once, and not rebuilt.
        caplog.set_level(logging.WARNING, logger="test.sourced")
        assert not await sourced.apply("b", source="Secret fleet/b", fingerprint="g2", build=broken)
        assert not await sourced.apply("b", source="Secret fleet/b", fingerprint="g2", build=broken)
        await eventually(lambda: "b" not in aware.engaged)
        assert "a" in aware.engaged
        problems = sourced.problems()
        assert problems == [
            Problem(
                "b",
                "Secret fleet/b",
                "kubeconfig Secret fleet/b key 'kubeconfig': malformed YAML at line 3, column 1",
            )
        ]
        reports = [r for r in caplog.records if "malformed YAML" in r.getMessage()]
        assert len(reports) == 1, [r.getMessage() for r in reports]
        with pytest.raises(ClusterNotFoundError):
            await sourced.get("b")

        # Fixed: engaged again, problem cleared.
        assert await sourced.apply(
            "b", source="Secret fleet/b", fingerprint="g3", build=builder("b", servers[1])
        )
        await eventually(lambda: "b" in aware.engaged)
        assert sourced.problems() == []

        # A source that yields nothing (key missing) and one that is gone.
        assert await sourced.reject("b", source="Secret fleet/b", reason="has no key 'kubeconfig'")
        assert [str(p) for p in sourced.problems()] == [
            "Secret fleet/b (cluster 'b'): has no key 'kubeconfig'"
        ]
        assert not await sourced.discard("b")
        assert sourced.problems() == []
        assert await sourced.discard("a")
        assert not await sourced.discard("a")
        await eventually(lambda: aware.engaged == {})
        assert sourced.names() == []
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    assert all(e.ended for e in aware.history)


# --- kubeconfig text ----------------------------------------------------------------------------


def test_kubeconfig_data_errors_name_the_source(apiserver: Any) -> None:
    source = "Secret fleet/prod key 'kubeconfig'"
    config = RestConfig.from_kubeconfig_data(yaml.safe_dump(apiserver.kubeconfig).encode(), source=source)
    assert config.host == apiserver.url
    assert config.source == source
    with pytest.raises(
        ConfigError, match=r"kubeconfig Secret fleet/prod key 'kubeconfig': malformed YAML at line"
    ):
        RestConfig.from_kubeconfig_data(b"clusters: [\n  - {", source=source)
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        RestConfig.from_kubeconfig_data("- a list", source=source)
    with pytest.raises(ConfigError, match="current-context is not set") as err:
        RestConfig.from_kubeconfig_data("{}", source=source)
    assert err.value.source == source
    assert (
        RestConfig.from_kubeconfig(apiserver.kubeconfig, source="ClusterProfile x/y").source
        == "ClusterProfile x/y"
    )


_PLUGIN = """
import json, os, sys
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
with open(sys.argv[1], "w") as f:
    json.dump(info, f)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": "exec-cluster-info-token"}}))
"""


async def test_exec_plugins_receive_the_cluster_extension_config(apiserver: Any, tmp_path: Path) -> None:
    apiserver.add_user("robot", groups=["system:masters"], token="exec-cluster-info-token")
    plugin = tmp_path / "plugin.py"
    plugin.write_text(_PLUGIN)
    seen = tmp_path / "exec-info.json"
    cluster = dict(apiserver.kubeconfig["clusters"][0]["cluster"])
    cluster["tls-server-name"] = "127.0.0.1"
    cluster["extensions"] = [
        {
            "name": "client.authentication.k8s.io/exec",
            "extension": {"clusterName": "spoke-1", "audience": "a"},
        },
        {"name": "something-else", "extension": {"ignored": True}},
    ]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": sys.executable,
                        "args": [str(plugin), str(seen)],
                        "provideClusterInfo": True,
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    async with Cluster(RestConfig.from_kubeconfig(doc), name="exec") as c:
        await c.api_reader.list("v1/Namespace")
    info = orjson.loads(seen.read_bytes())
    spec_cluster = info["spec"]["cluster"]
    assert spec_cluster["server"] == apiserver.url
    assert spec_cluster["tls-server-name"] == "127.0.0.1"
    assert spec_cluster["config"] == {"clusterName": "spoke-1", "audience": "a"}
    assert spec_cluster["certificate-authority-data"] == cluster["certificate-authority-data"]


def test_a_sourced_provider_has_no_view_until_it_watches() -> None:
    from mcr.providers import SourcedProvider

    provider = SourcedProvider(provider="test", logger=log)
    with pytest.raises(RuntimeError, match="is not started"):
        _ = provider.view
    assert provider.names() == []
    assert provider.problems() == []
