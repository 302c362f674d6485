"""ClusterAPIProvider against a management server and workload servers over HTTPS."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

import mcr
import mcr.plugins
import mcr.providers
from mcr.errors import ClusterNotFoundError
from mcr.multicluster import Provider, ProviderRunnable
from mcr.testing import check_provider, eventually
from mcr_provider_capi import (
    CLUSTER,
    CLUSTER_NAME_LABEL,
    ClusterAPIProvider,
    __version__,
    control_plane_initialized,
)

from .conftest import Management


def reasons(provider: ClusterAPIProvider) -> dict[str, str]:
    return {p.cluster: str(p) for p in provider.problems()}


def test_options_readiness_and_registration() -> None:
    provider = ClusterAPIProvider()
    assert isinstance(provider, Provider)
    assert isinstance(provider, ProviderRunnable)
    assert provider.controller_name == "cluster-api-provider"
    assert ClusterAPIProvider(namespace="tenants").controller_name == "cluster-api-provider-tenants"
    assert ClusterAPIProvider(controller_name="mine").controller_name == "mine"
    assert control_plane_initialized({"status": {"initialization": {"controlPlaneInitialized": True}}})
    assert not control_plane_initialized({"status": {"initialization": {"controlPlaneInitialized": False}}})
    assert not control_plane_initialized({"status": {}})
    entry = mcr.plugins.load_registry().info("capi")
    assert (entry.distribution, entry.version) == ("mcr-provider-capi", __version__)
    assert isinstance(mcr.providers.create("capi", namespace="tenants"), ClusterAPIProvider)


async def test_ready_clusters_engage_and_a_rotated_kubeconfig_reengages(
    management: Management, run: Any
) -> None:
    m = management
    await m.cluster("alpha")
    await m.kubeconfig("alpha", m.servers[1])
    await m.cluster("beta", ready=False)
    await m.kubeconfig("beta", m.servers[2])
    provider = ClusterAPIProvider(cluster=m.admin)
    aware = run(provider)
    await eventually(lambda: "tenants/alpha" in aware.engaged, message="alpha engaged")
    alpha = aware.engaged["tenants/alpha"]
    assert alpha.config.host == m.servers[1].url
    assert await alpha.api_reader.list("v1/Namespace")
    await eventually(lambda: "tenants/beta" in reasons(provider))
    assert "control plane is not initialized" in reasons(provider)["tenants/beta"]
    assert "tenants/beta" not in aware.engaged

    # beta's control plane comes up: engaged. Status churn on alpha keeps its cluster.
    await m.cluster("alpha")
    await m.cluster("beta")
    await eventually(lambda: "tenants/beta" in aware.engaged, message="beta engaged once ready")
    assert aware.engaged["tenants/alpha"] is alpha
    assert len(aware.engagements("tenants/alpha")) == 1

    # Rotation of the kubeconfig Secret alone (the Cluster object is untouched): re-engaged.
    await m.kubeconfig("alpha", m.servers[3])
    await eventually(lambda: aware.engaged.get("tenants/alpha") not in (None, alpha), message="rotation")
    assert aware.engaged["tenants/alpha"].config.host == m.servers[3].url

    # Not ready while engaged: stays. Deleted: disengaged.
    beta = aware.engaged["tenants/beta"]
    await m.cluster("beta", ready=False)
    await m.admin.api_reader.delete(CLUSTER, "alpha", namespace="tenants")
    await eventually(lambda: "tenants/alpha" not in aware.engaged, message="deleted Cluster disengaged")
    assert aware.engaged["tenants/beta"] is beta
    with pytest.raises(ClusterNotFoundError):
        await provider.get("tenants/alpha")


async def test_a_rotation_re_engages_an_engaged_cluster_whose_control_plane_is_not_ready(
    management: Management, run: Any
) -> None:
    # An engaged Cluster whose control plane stops being ready stays engaged (as upstream); its
    # kubeconfig Secret is still followed, so new credentials take effect at once.
    m = management
    await m.cluster("alpha")
    await m.kubeconfig("alpha", m.servers[1])
    provider = ClusterAPIProvider(cluster=m.admin)
    aware = run(provider)
    await eventually(lambda: "tenants/alpha" in aware.engaged, message="alpha engaged")
    old = aware.engaged["tenants/alpha"]
    await m.cluster("alpha", ready=False)
    await m.kubeconfig("alpha", m.servers[2])
    await eventually(
        lambda: aware.engaged.get("tenants/alpha") not in (None, old), message="rotation while not ready"
    )
    assert aware.engaged["tenants/alpha"].config.host == m.servers[2].url
    assert "tenants/alpha" not in reasons(provider)
    # A Secret that breaks disengages it; a cluster that is not ready is not engaged anew.
    await m.kubeconfig("alpha", m.servers[3], raw=b"clusters: [\n  - {")
    await eventually(lambda: "tenants/alpha" not in aware.engaged, message="broken Secret disengages")
    await m.kubeconfig("alpha", m.servers[3])
    await eventually(lambda: "control plane is not initialized" in reasons(provider).get("tenants/alpha", ""))
    assert "tenants/alpha" not in aware.engaged
    await m.cluster("alpha")
    await eventually(lambda: "tenants/alpha" in aware.engaged, message="engaged once ready again")
    assert aware.engaged["tenants/alpha"].config.host == m.servers[3].url


async def test_missing_or_broken_kubeconfigs_leave_the_others_alone(management: Management) -> None:
    m = management
    await m.cluster("good")
    await m.kubeconfig("good", m.servers[1])
    await m.cluster("no-secret")
    await m.cluster("broken")
    await m.kubeconfig("broken", m.servers[2], raw=b"clusters: [\n  - {")
    await m.cluster("empty")
    await m.kubeconfig("empty", m.servers[2], raw=b"")
    provider = ClusterAPIProvider(cluster=m.admin)
    seen: set[tuple[str, str]] = set()

    async def reconcile(req: mcr.Request) -> None:
        seen.add((req.cluster_name, req.name))

    mgr = mcr.Manager(provider=provider, metrics_bind_address="0", health_probe_bind_address="0")
    mcr.controller_managed_by(mgr).named("capi-test").for_("v1/ConfigMap").complete(reconcile)
    runner = asyncio.create_task(mgr.start(handle_signals=False))
    try:
        await eventually(lambda: len(provider.problems()) == 3, message="three Clusters reported")
        found = reasons(provider)
        assert found["tenants/no-secret"].startswith("Secret tenants/no-secret-kubeconfig key 'value'")
        assert "not found" in found["tenants/no-secret"]
        assert "malformed YAML" in found["tenants/broken"]
        assert "missing or empty" in found["tenants/empty"]
        await eventually(lambda: "tenants/good" in provider.names())
        good = await provider.get("tenants/good")
        await good.client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hello", "namespace": "default"}}
        )
        await eventually(lambda: ("tenants/good", "hello") in seen)
        # The missing Secret appears: engaged, without touching the Cluster object.
        await m.kubeconfig("no-secret", m.servers[3])
        await eventually(lambda: "tenants/no-secret" in provider.names())
        assert set(reasons(provider)) == {"tenants/broken", "tenants/empty"}
        assert await provider.get("tenants/good") is good
    finally:
        mgr.stop()
        await asyncio.wait_for(runner, 30)


async def test_other_cluster_secrets_are_cached_without_their_data(management: Management, run: Any) -> None:
    # Cluster API labels a cluster's CA Secret too: the provider's cache keeps its metadata only.
    m = management
    await m.cluster("alpha")
    await m.kubeconfig("alpha", m.servers[1])
    await m.admin.api_reader.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "alpha-ca", "namespace": "tenants", "labels": {CLUSTER_NAME_LABEL: "alpha"}},
            "data": {"tls.key": "c2VjcmV0", "tls.crt": "Y2VydA=="},
        }
    )
    provider = ClusterAPIProvider(cluster=m.admin)
    aware = run(provider)
    await eventually(lambda: "tenants/alpha" in aware.engaged, message="alpha engaged")
    view = provider.view
    cached_ca = await view.client.get("v1/Secret", "alpha-ca", namespace="tenants")
    assert "data" not in cached_ca
    assert cached_ca["metadata"]["labels"] == {CLUSTER_NAME_LABEL: "alpha"}
    cached_kubeconfig = await view.client.get("v1/Secret", "alpha-kubeconfig", namespace="tenants")
    assert set(cached_kubeconfig["data"]) == {"value"}


async def test_namespace_and_custom_readiness(management: Management, run: Any) -> None:
    m = management
    await m.admin.api_reader.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    await m.cluster("here", ready=False)
    await m.kubeconfig("here", m.servers[1])
    await m.cluster("there", namespace="other")
    await m.kubeconfig("there", m.servers[2], namespace="other")
    # Provisioned infrastructure is enough for this provider; only namespace tenants.
    provider = ClusterAPIProvider(
        cluster=m.admin,
        namespace="tenants",
        is_ready=lambda obj: (
            obj.get("status", {}).get("initialization", {}).get("infrastructureProvisioned") is True
        ),
    )
    aware = run(provider)
    await eventually(lambda: "tenants/here" in aware.engaged)
    await m.cluster("later")
    await m.kubeconfig("later", m.servers[3])
    await eventually(lambda: "tenants/later" in aware.engaged)
    assert "other/there" not in aware.engaged
    assert "other/there" not in reasons(provider)


async def test_conformance(management: Management) -> None:
    m = management
    provider = ClusterAPIProvider(cluster=m.admin)
    counter = itertools.count()
    await m.cluster("existing")
    await m.kubeconfig("existing", m.servers[1])

    async def add() -> str:
        name = f"c{next(counter)}"
        await m.cluster(name)
        await m.kubeconfig(name, m.servers[2])
        return f"tenants/{name}"

    async def change(name: str) -> None:
        await m.kubeconfig(name.split("/", 1)[1], m.servers[3])

    async def remove(name: str) -> None:
        await m.admin.api_reader.delete(CLUSTER, name.split("/", 1)[1], namespace="tenants")

    await check_provider(
        provider, existing=["tenants/existing"], add_cluster=add, change_cluster=change, remove_cluster=remove
    )
