"""Cluster engagement through the manager: replay to late runnables, replacement, clean disengage,
per-cluster state, a provider started by the manager."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mcr.cluster import Cluster
from mcr.errors import ClusterNotFoundError
from mcr.log import ContextFilter, current_fields, log_context
from mcr.manager import ClusterState, Manager
from mcr.providers.clusters import ClustersProvider
from mcr.rest.config import load_config
from mcr.testing import eventually
from mcr_envtest import ServerThread


class Recorder:
    """A user-level aware runnable that records each engagement's life."""

    def __init__(self, name: str = "recorder", *, fail_for: str | None = None, leader: bool = False) -> None:
        self.name = name
        self.need_leader_election = leader
        self.fail_for = fail_for
        self.live: dict[str, Any] = {}
        self.log: list[tuple[str, str, int]] = []  # (event, cluster name, id(cluster))
        self.attempts: dict[str, int] = {}

    async def engage(self, name: str, cluster: Any) -> None:
        self.attempts[name] = self.attempts.get(name, 0) + 1
        if name == self.fail_for:
            raise RuntimeError(f"cannot engage {name}")
        self.live[name] = cluster
        self.log.append(("engaged", name, id(cluster)))
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            if self.live.get(name) is cluster:
                del self.live[name]
            self.log.append(("disengaged", name, id(cluster)))


@pytest.fixture
async def clusters(fleet: Callable[..., Any]) -> AsyncIterator[list[Cluster]]:
    servers = fleet(2).servers
    made = [Cluster(load_config(s.kubeconfig), name=f"c{i}") for i, s in enumerate(servers)]
    for c in made:
        await c.start()
    yield made
    for c in made:
        await c.stop()


@pytest.fixture
async def manager(apiserver: ServerThread) -> AsyncIterator[Manager]:
    mgr = Manager(load_config(apiserver.kubeconfig), metrics_bind_address="0")
    yield mgr
    mgr.stop()


async def _start(mgr: Manager) -> asyncio.Task[None]:
    task = asyncio.create_task(mgr.start(handle_signals=False))
    await eventually(lambda: "" in [i.name for i in mgr.clusters()], timeout=10)
    return task


async def _stop(mgr: Manager, task: asyncio.Task[None]) -> None:
    mgr.stop()
    await asyncio.wait_for(task, 20)


async def test_awares_added_late_are_engaged_with_live_clusters(
    manager: Manager, clusters: list[Cluster]
) -> None:
    early = Recorder("early")
    manager.add(early)
    task = await _start(manager)
    engagements = [asyncio.create_task(manager.engage(c.name, c)) for c in clusters]
    await eventually(lambda: set(early.live) == {"", "c0", "c1"}, timeout=5)

    late = Recorder("late")
    manager.add(late)  # after start and after every cluster was engaged: replayed
    await eventually(lambda: set(late.live) == {"", "c0", "c1"}, timeout=5)
    assert late.live["c1"] is clusters[1]
    assert [i.name for i in manager.clusters()] == ["", "c0", "c1"]

    for e in engagements:
        e.cancel()
    await asyncio.gather(*engagements, return_exceptions=True)
    assert set(late.live) == {""}
    await _stop(manager, task)
    assert late.live == {}
    assert early.live == {}


async def test_reengaging_a_name_replaces_the_old_cluster_cleanly(
    manager: Manager, clusters: list[Cluster]
) -> None:
    rec = Recorder()
    manager.add(rec)
    task = await _start(manager)
    first = asyncio.create_task(manager.engage("zoo", clusters[0]))
    await eventually(lambda: rec.live.get("zoo") is clusters[0], timeout=5)
    second = asyncio.create_task(manager.engage("zoo", clusters[1]))
    await eventually(lambda: rec.live.get("zoo") is clusters[1], timeout=5)
    # The earlier call ended normally (replaced), after the old engagement was torn down.
    await asyncio.wait_for(first, 5)
    zoo = [entry for entry in rec.log if entry[1] == "zoo"]
    assert zoo == [
        ("engaged", "zoo", id(clusters[0])),
        ("disengaged", "zoo", id(clusters[0])),
        ("engaged", "zoo", id(clusters[1])),
    ]
    assert await manager.get_cluster("zoo") is clusters[1]
    # Disengage: every per-cluster task ends before the cancelled call returns.
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    assert "zoo" not in rec.live
    assert rec.log[-1] == ("disengaged", "zoo", id(clusters[1]))
    with pytest.raises(ClusterNotFoundError, match="zoo"):
        await manager.get_cluster("zoo")
    assert [i.name for i in manager.clusters()] == [""]
    await _stop(manager, task)


async def test_failing_aware_reports_error_state_and_is_retried(
    manager: Manager, clusters: list[Cluster]
) -> None:
    rec = Recorder(fail_for="c0")
    manager.add(rec)
    task = await _start(manager)
    engagement = asyncio.create_task(manager.engage("c0", clusters[0]))
    info = await eventually(
        lambda: next(
            (i for i in manager.clusters() if i.name == "c0" and i.state == ClusterState.ERROR), None
        ),
        timeout=5,
    )
    assert info.error is not None
    assert "cannot engage c0" in info.error
    await eventually(lambda: rec.attempts.get("c0", 0) >= 2, timeout=5, message="not retried")
    engagement.cancel()
    await asyncio.gather(engagement, return_exceptions=True)
    await _stop(manager, task)


async def test_cluster_states_with_a_real_controller(manager: Manager, apiserver: ServerThread) -> None:
    from mcr.builder import controller_managed_by

    async def reconcile(req: Any) -> None:
        return None

    ctrl = (
        controller_managed_by(manager)
        .named("engage-states")
        .for_("v1/ConfigMap", engage_with_local_cluster=True, engage_with_provider_clusters=True)
        .with_options(cache_sync_timeout=2.0)
        .complete(reconcile)
    )
    # A cluster whose server does not answer: its watch cannot sync.
    dead = Cluster(load_config(apiserver.kubeconfig).copy(host="https://127.0.0.1:9"), name="dead")
    await dead.start()
    task = await _start(manager)
    engagement = asyncio.create_task(manager.engage("dead", dead))
    try:
        states = await eventually(
            lambda: (
                (s := {i.name: i.state for i in manager.clusters()})
                and s.get("") == ClusterState.SYNCED
                and s.get("dead") == ClusterState.FAILED
                and s
            ),
            timeout=20,
        )
        assert states == {"": "synced", "dead": "failed"}
        # The per-cluster lookup agrees with the full report, and knows no other cluster.
        assert {name: ctrl.cluster_state(name) for name in ctrl.clusters()} == ctrl.clusters()
        assert ctrl.cluster_state("dead") == "failed"
        assert ctrl.cluster_state("never-engaged") is None
    finally:
        engagement.cancel()
        await asyncio.gather(engagement, return_exceptions=True)
        await _stop(manager, task)
        await dead.stop()


async def test_a_kind_the_cluster_does_not_serve_is_reported_with_what_it_serves(
    manager: Manager, caplog: pytest.LogCaptureFixture
) -> None:
    from mcr.builder import controller_managed_by

    async def reconcile(req: Any) -> None:
        return None

    caplog.set_level(logging.WARNING, logger="mcr.controller")
    # A wrong case and a missing version: neither is a kind the server serves.
    controller_managed_by(manager).named("lower-case-kind").for_("v1/configmap").complete(reconcile)
    controller_managed_by(manager).named("no-version").for_("apps/Deployment").complete(reconcile)
    task = await _start(manager)
    try:
        local = await eventually(
            lambda: next(
                (
                    i
                    for i in manager.clusters()
                    if i.name == "" and i.state == ClusterState.FAILED and i.error
                ),
                None,
            ),
            timeout=20,
            message="the local cluster reported failed with an error",
        )
        await eventually(lambda: "apps/Deployment" in (manager.clusters()[0].error or ""), timeout=20)
        error = manager.clusters()[0].error or ""
        assert "Controller(lower-case-kind): watch of v1/configmap: no matches for kind v1/configmap" in error
        assert "did you mean v1/ConfigMap?" in error
        served = error.split("v1 serves ", 1)[1]  # the kinds the server does serve there
        assert "ConfigMap, " in served
        assert "Secret" in served
        assert "Controller(no-version): watch of apps/Deployment" in error
        assert "'apps' is an API group, not a version" in error
        assert "did you mean apps/v1/Deployment?" in error
        assert local.running
        logged = " ".join(r.getMessage() for r in caplog.records if "v1/configmap" in r.getMessage())
        assert "did you mean v1/ConfigMap?" in logged
        assert "Secret" in logged  # the log names the kinds of that group-version too
    finally:
        await _stop(manager, task)


async def test_manager_starts_a_provider_and_resolves_its_clusters(
    apiserver: ServerThread, clusters: list[Cluster]
) -> None:
    provider = ClustersProvider(start_clusters=False)
    mgr = Manager(load_config(apiserver.kubeconfig), provider=provider, metrics_bind_address="0")
    rec = Recorder()
    mgr.add(rec)
    assert mgr.get_provider() is provider
    task = await _start(mgr)
    await provider.add("c0", clusters[0])
    await eventually(lambda: "c0" in rec.live, timeout=5)
    assert await mgr.get_cluster("c0") is clusters[0]
    view = await mgr.get_manager("c0")
    assert view.cluster is clusters[0]
    assert view.client is clusters[0].client
    assert mgr.get_local_manager().cluster is mgr.local_cluster
    with pytest.raises(ClusterNotFoundError, match="nowhere"):
        await mgr.get_cluster("nowhere")
    await provider.remove("c0")
    await eventually(lambda: "c0" not in rec.live, timeout=5)
    await _stop(mgr, task)
    assert rec.live == {}


async def test_manager_without_config_has_no_local_cluster() -> None:
    mgr = Manager(metrics_bind_address="0")
    with pytest.raises(ClusterNotFoundError):
        await mgr.get_cluster("")
    with pytest.raises(ClusterNotFoundError, match="no provider"):
        await mgr.get_cluster("x")
    with pytest.raises(ValueError, match="leader election needs a local cluster"):
        Manager(leader_election=True, leader_election_id="x", metrics_bind_address="0")
    with pytest.raises(TypeError, match="neither a runnable"):
        mgr.add(object())


async def test_field_indexer_reaches_the_local_cluster_and_provider_clusters(
    apiserver: ServerThread, fleet: Callable[..., Any]
) -> None:
    remote_server = fleet(1).servers[0]
    provider = ClustersProvider()  # starts and stops the clusters it is given
    mgr = Manager(load_config(apiserver.kubeconfig), provider=provider, metrics_bind_address="0")

    def owner(obj: Any) -> list[str]:
        return [(obj.get("data") or {}).get("owner", "")]

    await mgr.get_field_indexer().index_field("v1/ConfigMap", "data.owner", owner)
    for srv in (apiserver, remote_server):
        async with load_config(srv.kubeconfig).transport() as t:
            for name, who in (("a", "alice"), ("b", "bob")):
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name},
                    "data": {"owner": who},
                }
                await t.request(
                    "POST",
                    "/api/v1/namespaces/default/configmaps",
                    body=json.dumps(body).encode(),
                    content_type="application/json",
                )
    task = await _start(mgr)
    try:
        # A cluster the provider adds after the index was registered gets it too.
        await provider.add("remote", Cluster(load_config(remote_server.kubeconfig), name="remote"))
        await eventually(lambda: "remote" in [i.name for i in mgr.clusters()], timeout=10)
        for name in ("", "remote"):
            cluster = await mgr.get_cluster(name)
            found = await eventually(
                lambda c=cluster: c.cache.list(
                    "v1/ConfigMap", namespace="default", field_selector="data.owner=bob"
                ),
                timeout=10,
            )
            assert [o["metadata"]["name"] for o in found] == ["b"], name
    finally:
        await _stop(mgr, task)


class CountingAware(Recorder):
    """An aware that reports its clusters as synced and counts how often it is asked."""

    def __init__(self) -> None:
        super().__init__("counting")
        self.reports = 0

    def clusters(self) -> dict[str, str]:
        self.reports += 1
        return dict.fromkeys(self.live, "synced")


async def test_manager_clusters_asks_each_aware_once_per_snapshot(
    manager: Manager, apiserver: ServerThread
) -> None:
    """A snapshot of K clusters costs one ``clusters()`` per aware, not one per cluster (O(K), not O(K^2))."""
    aware = CountingAware()
    manager.add(aware)
    task = await _start(manager)
    config = load_config(apiserver.kubeconfig)
    fake = [Cluster(config, name=f"k{i}") for i in range(20)]  # never started: the aware only records them
    engagements = [asyncio.create_task(manager.engage(f"k{i}", c)) for i, c in enumerate(fake)]
    try:
        await eventually(lambda: len(aware.live) == 21, timeout=10)  # 20 + the local cluster
        before = aware.reports
        infos = manager.clusters()
        assert aware.reports - before == 1
        assert len(infos) == 21
        assert {i.state for i in infos} == {ClusterState.SYNCED}
    finally:
        for e in engagements:
            e.cancel()
        await asyncio.gather(*engagements, return_exceptions=True)
        await _stop(manager, task)


class FieldsRecorder(Recorder):
    """A Recorder that also keeps the log fields its engagement runs with."""

    def __init__(self) -> None:
        super().__init__("fields")
        self.fields: dict[str, dict[str, object]] = {}

    async def engage(self, name: str, cluster: Any) -> None:
        self.fields[name] = dict(current_fields())
        await super().engage(name, cluster)


async def test_an_engagement_carries_none_of_the_log_fields_of_the_provider_task(
    apiserver: ServerThread, clusters: list[Cluster], caplog: pytest.LogCaptureFixture
) -> None:
    """A provider engages from its own reconcile; the engagement's lines and tasks are not its."""
    provider = ClustersProvider()
    mgr = Manager(load_config(apiserver.kubeconfig), provider=provider, metrics_bind_address="0")
    recorder = FieldsRecorder()
    mgr.add(recorder)
    caplog.handler.addFilter(ContextFilter())
    caplog.set_level(logging.INFO, logger="mcr.manager")
    task = await _start(mgr)
    try:
        with log_context(controller="some-provider", namespace="fleet", name="secret-1"):
            await provider.add("c0", clusters[0])
        await eventually(lambda: "c0" in recorder.live, timeout=10)
        assert recorder.fields["c0"] == {"cluster": "c0"}
        await provider.remove("c0")
        await eventually(lambda: "c0" not in recorder.live, timeout=10)
    finally:
        await _stop(mgr, task)
    lines = [
        r
        for r in caplog.records
        if r.getMessage() in ("engaged cluster", "disengaged cluster") and r.__dict__.get("cluster") == "c0"
    ]
    assert {r.getMessage() for r in lines} == {"engaged cluster", "disengaged cluster"}, caplog.text
    for record in lines:
        fields = {k: v for k, v in record.mcr.items() if v}  # type: ignore[attr-defined]  # set by ContextFilter
        assert fields == {"cluster": "c0"}, (record.getMessage(), fields)
