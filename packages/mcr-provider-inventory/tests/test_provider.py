"""ClusterProfileProvider against a hub and member mcr-envtest servers over HTTPS."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest

import mcr.plugins
import mcr.providers
from mcr.cluster import Cluster
from mcr.errors import ClusterNotFoundError
from mcr.multicluster import Provider, ProviderRunnable
from mcr.testing import RecordingAware, check_provider, eventually
from mcr_provider_inventory import (
    CLUSTER_PROFILE,
    AccessConfigError,
    ClusterProfileProvider,
    __version__,
)

from .conftest import Hub, status


async def namespaces_of(cluster: Cluster) -> list[str]:
    return [ns["metadata"]["name"] for ns in await cluster.api_reader.list("v1/Namespace")]


def problem_reasons(provider: ClusterProfileProvider) -> dict[str, str]:
    return {p.cluster: f"{p.source}: {p.reason}" for p in provider.problems()}


def test_needs_exactly_one_strategy() -> None:
    with pytest.raises(ValueError, match="exactly one credential strategy"):
        ClusterProfileProvider()
    with pytest.raises(ValueError, match="exactly one credential strategy"):
        ClusterProfileProvider(consumer_name="c", access_providers={"providers": []})
    with pytest.raises(ValueError, match=r"consumer_name '' cannot be .*: it is empty"):
        ClusterProfileProvider(consumer_name="")
    with pytest.raises(ValueError, match="consumer_name 'a b' cannot be the value of the label"):
        ClusterProfileProvider(consumer_name="a b")
    assert ClusterProfileProvider(consumer_name="c", namespace="fleet").controller_name == (
        "cluster-inventory-api-provider-fleet"
    )
    provider = ClusterProfileProvider(consumer_name="c")
    assert isinstance(provider, Provider)
    assert isinstance(provider, ProviderRunnable)


def test_registered_as_the_inventory_plugin() -> None:
    registry = mcr.plugins.load_registry()
    entry = registry.info("inventory")
    assert entry.distribution == "mcr-provider-inventory"
    assert entry.version == __version__ == "0.1.0"
    provider = mcr.providers.create("inventory", consumer_name="me", namespace="fleet")
    assert isinstance(provider, ClusterProfileProvider)
    assert (provider.consumer_name, provider.namespace) == ("me", "fleet")


async def test_access_providers_engage_ready_profiles_and_reengage_only_on_real_changes(
    hub: Hub, run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcr.providers.inventory")
    provider = ClusterProfileProvider(access_providers=hub.access_config(), cluster=hub.admin)
    await hub.profile("a", 1)
    await hub.profile("b", 2)
    aware = run(provider)
    await eventually(lambda: set(aware.engaged) == {"fleet/a", "fleet/b"}, message="ready profiles engaged")
    a = aware.engaged["fleet/a"]
    # The exec plugin's token, chosen by the profile's exec extension, reaches each member.
    assert a.config.host == hub.members[1].url
    assert "kube-system" in await namespaces_of(a)
    assert "kube-system" in await namespaces_of(aware.engaged["fleet/b"])
    assert await provider.get("fleet/a") is a

    # Status heartbeats, new conditions and properties: the engaged cluster stays.
    await hub.patch_status(
        "a", status(hub.members[1], cluster_name="member-1", heartbeat="2026-01-01T00:05:00Z")
    )
    await hub.patch_status(
        "a", {"properties": [{"name": "region", "value": "eu"}], "version": {"kubernetes": "1.32"}}
    )
    await hub.profile("c", 3)  # a later event, to know the provider has processed the earlier ones
    await eventually(lambda: "fleet/c" in aware.engaged)
    assert aware.engaged["fleet/a"] is a
    assert len(aware.engagements("fleet/a")) == 1

    # New connection settings (another server): re-engaged with a new cluster object.
    await hub.profile("a", 3)
    await eventually(lambda: aware.engaged.get("fleet/a") not in (None, a), message="re-engaged")
    assert aware.engaged["fleet/a"].config.host == hub.members[3].url
    assert all(e.ended for e in aware.engagements("fleet/a") if e.cluster is a)

    # Unhealthy while engaged: stays engaged. Deleted: disengaged.
    b = aware.engaged["fleet/b"]
    await hub.profile("b", 2, healthy=False)
    await hub.admin.api_reader.delete(CLUSTER_PROFILE, "c", namespace="fleet")
    await eventually(lambda: "fleet/c" not in aware.engaged, message="deleted profile disengaged")
    assert aware.engaged["fleet/b"] is b
    with pytest.raises(ClusterNotFoundError):
        await provider.get("fleet/c")
    assert any(
        "disengaging cluster 'fleet/c': ClusterProfile fleet/c was deleted" in r.getMessage()
        for r in caplog.records
    )


async def test_profiles_that_yield_no_cluster_are_reported_and_leave_the_others_alone(
    hub: Hub, run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    provider = ClusterProfileProvider(
        access_providers=hub.access_config(), cluster=hub.admin, namespace="fleet"
    )
    await hub.profile("good", 1)
    await hub.profile("sick", 2, healthy=False)
    await hub.profile("foreign", 2, provider="someone-else")
    aware = run(provider)
    await eventually(lambda: set(aware.engaged) == {"fleet/good"})
    await eventually(lambda: set(problem_reasons(provider)) == {"fleet/sick", "fleet/foreign"})
    reasons = problem_reasons(provider)
    assert reasons["fleet/sick"] == "ClusterProfile fleet/sick: not ready (ControlPlaneHealthy is not True)"
    assert "profile offers 'someone-else'" in reasons["fleet/foreign"]
    # Healthy now: engaged, problem gone.
    await hub.profile("sick", 2)
    await eventually(lambda: "fleet/sick" in aware.engaged)
    assert set(problem_reasons(provider)) == {"fleet/foreign"}
    # Profiles of other namespaces are not even cached.
    await hub.admin.api_reader.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}}
    )
    await hub.profile("other", 3, namespace="elsewhere")
    await hub.profile("later", 3)
    await eventually(lambda: "fleet/later" in aware.engaged)
    assert "elsewhere/other" not in aware.engaged
    assert "elsewhere/other" not in problem_reasons(provider)
    assert len(aware.engagements("fleet/good")) == 1


async def test_a_broken_exec_credential_does_not_stop_the_other_clusters(hub: Hub, tmp_path: Path) -> None:
    """Under a manager: the profile whose plugin fails is reported by its controller; others reconcile."""
    config = hub.access_config(profileSourcedEnvVarsPolicy="Replace")
    provider = ClusterProfileProvider(access_providers=config, cluster=hub.admin)
    await hub.profile("good", 1)
    # The profile sends its own TOKENS_FILE, which does not exist: the plugin exits 1.
    await hub.profile(
        "broken",
        2,
        extensions=[
            {
                "name": "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs",
                "extension": {"TOKENS_FILE": str(tmp_path / "missing.json")},
            }
        ],
    )
    seen: set[tuple[str, str]] = set()

    async def reconcile(req: mcr.Request) -> None:
        seen.add((req.cluster_name, req.name))

    mgr = mcr.Manager(provider=provider, metrics_bind_address="0", health_probe_bind_address="0")
    mcr.controller_managed_by(mgr).named("inventory-test").for_("v1/ConfigMap").complete(reconcile)
    runner = asyncio.create_task(mgr.start())
    try:
        await eventually(lambda: "fleet/good" in provider.names(), message="the good cluster engaged")
        good = await provider.get("fleet/good")
        await good.client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hello", "namespace": "default"}}
        )
        await eventually(lambda: ("fleet/good", "hello") in seen)
        assert not any(c == "fleet/broken" for c, _ in seen)
        broken = await provider.get("fleet/broken")
        with pytest.raises(mcr.ConfigError, match=r"exec plugin .* exited with 1"):
            await broken.api_reader.list("v1/Namespace")
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_secret_strategy_follows_the_consumers_secrets(hub: Hub, run: Any) -> None:
    provider = ClusterProfileProvider(consumer_name="my-controller", cluster=hub.admin)
    await hub.profile("a", None)
    await hub.profile("b", None)
    await hub.secret("a", hub.members[1].kubeconfig)
    await hub.secret("b", b"clusters: [\n  - {")
    # Another consumer's Secret for the same profile is not ours.
    await hub.secret("a", hub.members[3].kubeconfig, consumer="someone-else")
    aware = run(provider)
    await eventually(lambda: "fleet/a" in aware.engaged)
    a = aware.engaged["fleet/a"]
    assert a.config.host == hub.members[1].url
    await eventually(lambda: "fleet/b" in problem_reasons(provider))
    assert problem_reasons(provider)["fleet/b"].startswith(
        "Secret fleet/b-my-controller key 'Config': "
        "kubeconfig Secret fleet/b-my-controller key 'Config': malformed YAML"
    )
    assert "fleet/b" not in aware.engaged

    # Annotation-only edit: same cluster. Rotation to another server: re-engaged.
    await hub.secret("a", hub.members[1].kubeconfig, annotations={"rotated-by": "nobody"})
    await hub.secret("b", hub.members[2].kubeconfig)  # fixes b; also a marker that events went through
    await eventually(lambda: "fleet/b" in aware.engaged)
    assert aware.engaged["fleet/a"] is a
    await hub.secret("a", hub.members[3].kubeconfig)
    await eventually(lambda: aware.engaged.get("fleet/a") not in (None, a), message="rotation re-engaged")
    assert aware.engaged["fleet/a"].config.host == hub.members[3].url
    assert provider.problems() == []

    # A second Secret for b is ambiguous; an empty key is reported; a deleted Secret disengages.
    await hub.secret("b", hub.members[2].kubeconfig, name="b-duplicate")
    await eventually(
        lambda: "found 2: b-duplicate, b-my-controller" in problem_reasons(provider).get("fleet/b", "")
    )
    assert "fleet/b" not in aware.engaged
    await hub.admin.api_reader.delete("v1/Secret", "b-duplicate", namespace="fleet")
    await eventually(lambda: "fleet/b" in aware.engaged)
    await hub.secret("b", None)
    await eventually(
        lambda: "has no kubeconfig under key 'Config'" in problem_reasons(provider).get("fleet/b", "")
    )
    await hub.admin.api_reader.delete("v1/Secret", "b-my-controller", namespace="fleet")
    no_secret = (
        "no Secret labelled x-k8s.io/cluster-inventory-consumer=my-controller, "
        "x-k8s.io/cluster-profile=b in fleet"
    )
    await eventually(lambda: problem_reasons(provider).get("fleet/b", "").endswith(no_secret))
    assert set(aware.engaged) == {"fleet/a"}


async def test_a_deleting_profile_is_disengaged(hub: Hub, run: Any) -> None:
    provider = ClusterProfileProvider(consumer_name="my-controller", cluster=hub.admin)
    await hub.profile("held", None)
    await hub.secret("held", hub.members[1].kubeconfig)
    aware = run(provider)
    await eventually(lambda: "fleet/held" in aware.engaged)
    await hub.admin.api_reader.patch(
        CLUSTER_PROFILE, "held", {"metadata": {"finalizers": ["example.com/hold"]}}, namespace="fleet"
    )
    await hub.admin.api_reader.delete(CLUSTER_PROFILE, "held", namespace="fleet")
    await eventually(lambda: "fleet/held" not in aware.engaged, message="deleting profile disengaged")
    assert (await hub.admin.api_reader.get(CLUSTER_PROFILE, "held", namespace="fleet"))["metadata"][
        "deletionTimestamp"
    ]
    await hub.admin.api_reader.patch(
        CLUSTER_PROFILE, "held", {"metadata": {"finalizers": None}}, namespace="fleet"
    )


async def test_an_unreadable_access_provider_file_fails_start(hub: Hub, tmp_path: Path) -> None:
    path = tmp_path / "providers.json"
    path.write_text(json.dumps({"providers": [{"name": "x"}]}))
    provider = ClusterProfileProvider(access_providers=path, cluster=hub.admin)
    with pytest.raises(
        AccessConfigError, match=rf"access providers {path}: provider 'x': 'execConfig' must be an object"
    ):
        await provider.start(RecordingAware())
    path.write_text(json.dumps(hub.access_config()))
    aware = RecordingAware()
    await hub.profile("a", 1)
    runner = asyncio.create_task(provider.start(aware))
    try:
        await eventually(lambda: "fleet/a" in aware.engaged)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_conformance(hub: Hub) -> None:
    provider = ClusterProfileProvider(consumer_name="my-controller", cluster=hub.admin)
    counter = itertools.count()
    await hub.profile("existing", None)
    await hub.secret("existing", hub.members[1].kubeconfig)

    async def add() -> str:
        name = f"p{next(counter)}"
        await hub.profile(name, None)
        await hub.secret(name, hub.members[2].kubeconfig)
        return f"fleet/{name}"

    async def change(name: str) -> None:
        await hub.secret(name.split("/", 1)[1], hub.members[3].kubeconfig)

    async def remove(name: str) -> None:
        await hub.admin.api_reader.delete(CLUSTER_PROFILE, name.split("/", 1)[1], namespace="fleet")

    await check_provider(
        provider, existing=["fleet/existing"], add_cluster=add, change_cluster=change, remove_cluster=remove
    )
