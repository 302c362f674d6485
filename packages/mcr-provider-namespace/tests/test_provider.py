"""NamespaceProvider: namespaces of an mcr-envtest host engage and disengage as clusters."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

import mcr
import mcr.plugins
import mcr.providers
from mcr.cluster import Cluster
from mcr.errors import ClusterNotFoundError
from mcr.multicluster import Provider, ProviderRunnable
from mcr.testing import check_provider, eventually
from mcr_provider_namespace import NamespaceCluster, NamespaceProvider, __version__

from .conftest import configmap, delete_namespace, make_namespace


def test_options_and_registration() -> None:
    provider = NamespaceProvider(label_selector="tenant", exclude=["kube-system"])
    assert isinstance(provider, Provider)
    assert isinstance(provider, ProviderRunnable)
    assert provider.wanted({"metadata": {"name": "a", "labels": {"tenant": "x"}}})
    assert not provider.wanted({"metadata": {"name": "a"}})
    assert not provider.wanted({"metadata": {"name": "kube-system", "labels": {"tenant": "x"}}})
    patterns = NamespaceProvider(exclude=["kube-*", "sandbox-?", "default"])
    assert [
        n
        for n in ("kube-public", "kube", "sandbox-1", "sandbox-12", "default", "team-a")
        if patterns.wanted({"metadata": {"name": n}})
    ] == ["kube", "sandbox-12", "team-a"]
    assert not provider.wanted(
        {"metadata": {"name": "a", "labels": {"tenant": "x"}}, "status": {"phase": "Terminating"}}
    )
    entry = mcr.plugins.load_registry().info("namespace")
    assert (entry.distribution, entry.version) == ("mcr-provider-namespace", __version__)
    assert isinstance(mcr.providers.create("namespace", exclude=["kube-system"]), NamespaceProvider)


async def test_namespaces_engage_and_disengage_at_runtime(host: Cluster, admin: Cluster, run: Any) -> None:
    await make_namespace(admin, "team-a", {"tenant": "yes"})
    await make_namespace(admin, "ignored")
    provider = NamespaceProvider(host, label_selector={"tenant": "yes"})
    aware = run(provider)
    await eventually(lambda: "team-a" in aware.engaged, message="existing namespace engaged")
    a = aware.engaged["team-a"]
    assert isinstance(a, NamespaceCluster)
    assert await provider.get("team-a") is a
    assert "ignored" not in aware.engaged

    # Created at runtime: engaged. Labelled later: engaged. Deleted: disengaged.
    await make_namespace(admin, "team-b", {"tenant": "yes"})
    await admin.api_reader.patch("v1/Namespace", "ignored", {"metadata": {"labels": {"tenant": "yes"}}})
    await eventually(lambda: {"team-a", "team-b", "ignored"} <= set(aware.engaged))
    await delete_namespace(admin, "team-b")
    await eventually(lambda: "team-b" not in aware.engaged, message="deleted namespace disengaged")
    with pytest.raises(ClusterNotFoundError):
        await provider.get("team-b")

    # Terminating (held by a finalizer on an object inside): disengaged at once.
    held = configmap("held", namespace="team-a")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await admin.api_reader.create(held)
    await admin.api_reader.delete("v1/Namespace", "team-a")
    await eventually(lambda: "team-a" not in aware.engaged, message="terminating namespace disengaged")
    assert aware.engaged["ignored"] is not None
    await admin.api_reader.patch(
        "v1/ConfigMap", "held", {"metadata": {"finalizers": None}}, namespace="team-a"
    )
    # The host keeps running: the provider never stops a host it was given.
    assert host.started


@pytest.mark.envtest_only("fails the GETs, cuts the watch and compacts history with faults")
async def test_a_deletion_seen_only_by_a_relist_disengages_without_crashing(
    apiserver: Any, host: Cluster, admin: Cluster, run: Any
) -> None:
    await make_namespace(admin, "short-lived")
    await make_namespace(admin, "stays")
    provider = NamespaceProvider(host)
    aware = run(provider)
    await eventually(lambda: {"short-lived", "stays"} <= set(aware.engaged))
    informer = await host.cache.get_informer("v1/Namespace")
    lists = informer.reflectors[0].lists
    # The informer cannot watch while the namespace goes, and its resourceVersion expires: it
    # learns of the deletion only by relisting, and hands over a tombstone.
    faults = apiserver.faults
    faults.fail_next(10_000, 503, methods=("GET",), path_contains="/namespaces")
    await asyncio.to_thread(faults.close_watches)
    await admin.api_reader.delete("v1/Namespace", "short-lived")
    # The server finishes the deletion (read from its store: GETs fail on purpose meanwhile).
    await eventually(lambda: apiserver.store.get("", "namespaces", "", "short-lived") is None)
    await asyncio.to_thread(faults.compact)
    faults.clear()
    await eventually(lambda: "short-lived" not in aware.engaged, timeout=30, message="tombstone handled")
    assert informer.reflectors[0].lists > lists, "the deletion was not learned by a relist"
    await make_namespace(admin, "after")
    await eventually(lambda: "after" in aware.engaged, message="the provider still works")
    assert "stays" in aware.engaged


async def test_conformance(host: Cluster, admin: Cluster) -> None:
    counter = itertools.count()
    await make_namespace(admin, "existing", {"conformance": "yes"})

    async def add() -> str:
        name = f"ns-{next(counter)}"
        await make_namespace(admin, name, {"conformance": "yes"})
        return name

    async def remove(name: str) -> None:
        await admin.api_reader.delete("v1/Namespace", name)

    # A namespace cannot change into another one: the change check does not apply.
    await check_provider(
        NamespaceProvider(host, label_selector="conformance=yes"),
        existing=["existing"],
        add_cluster=add,
        change_cluster=None,
        remove_cluster=remove,
    )


async def test_two_namespace_providers_compose_without_naming_their_controllers(fleet: Any) -> None:
    # Two hosts, a namespace provider on each, composed: their default controller names (unique
    # per process) must not clash, and both members' namespaces engage.
    hosts = [Cluster.from_kubeconfig(s.kubeconfig, name=f"host-{i}") for i, s in enumerate(fleet(2).servers)]
    try:
        for host, namespace in zip(hosts, ("team-a", "team-b"), strict=True):
            await make_namespace(host, namespace)
        first, second = (NamespaceProvider(host) for host in hosts)
        multi = mcr.providers.MultiProvider()
        await multi.add_provider("a", first)
        await multi.add_provider("b", second)
        mgr = mcr.Manager(provider=multi, metrics_bind_address="0")
        runner = asyncio.create_task(mgr.start(handle_signals=False))
        try:
            await eventually(
                lambda: {"a#team-a", "b#team-b"} <= {i.name for i in mgr.clusters()} or runner.done(),
                timeout=60,
                message="both members' namespaces engaged",
            )
            assert not runner.done(), runner.exception()
            names = (first.controller_name, second.controller_name)
            assert names == ("a#namespace-provider", "b#namespace-provider")
            assert multi.failures() == {}
        finally:
            mgr.stop()
            await asyncio.wait_for(runner, 30)
    finally:
        for host in hosts:
            await host.stop()
