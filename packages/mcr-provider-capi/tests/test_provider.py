"""ClusterAPIProvider against a management server and workload servers over HTTPS."""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

import mcr
import mcr.plugins
import mcr.providers
from mcr.errors import ClusterNotFoundError
from mcr.multicluster import Provider, ProviderRunnable
from mcr.predicate import LabelSelectorPredicate
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


WORKLOAD = "provisioning.example.com/v1/Workload"
WORKLOAD_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "workloads.provisioning.example.com"},
    "spec": {
        "group": "provisioning.example.com",
        "scope": "Namespaced",
        "names": {
            "plural": "workloads",
            "singular": "workload",
            "kind": "Workload",
            "listKind": "WorkloadList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


def test_invalid_options_are_refused_when_given() -> None:
    with pytest.raises(ValueError, match="object_to_watch 'a/b/c/d'"):
        ClusterAPIProvider(object_to_watch="a/b/c/d")
    with pytest.raises(TypeError, match="predicates: 'fleet=yes' is not a predicate"):
        ClusterAPIProvider(predicates=["fleet=yes"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="get_kubeconfig 'x' is not callable"):
        ClusterAPIProvider(get_kubeconfig="x")  # type: ignore[arg-type]


async def test_another_kind_with_its_own_kubeconfig_lookup(management: Management, run: Any) -> None:
    # A provisioner's own kind names the Secret (of its own layout) holding each cluster's
    # kubeconfig: object_to_watch, is_ready and get_kubeconfig say so.
    m = management
    await m.admin.api_reader.create(copy.deepcopy(WORKLOAD_CRD))

    async def served() -> bool:
        try:
            await m.admin.api_reader.list(WORKLOAD, namespace="tenants")
        except Exception:  # noqa: BLE001 -- not served yet
            return False
        return True

    await eventually(served, message="Workload CRD served")

    async def secret(name: str, server: Any) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": "tenants"},
            "data": {"config": base64.b64encode(yaml.safe_dump(server.kubeconfig).encode()).decode()},
        }
        await m.admin.api_reader.apply(body, field_manager="capi-test", force=True)

    async def workload(name: str, secret_name: str, *, ready: bool = True) -> None:
        body = {
            "apiVersion": "provisioning.example.com/v1",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": "tenants"},
            "spec": {"secretName": secret_name},
            "status": {"phase": "Running" if ready else "Provisioning"},
        }
        await m.admin.api_reader.apply(body, field_manager="capi-test", force=True)

    lookups: list[str] = []

    async def get_kubeconfig(management_cluster: mcr.Cluster, obj: Mapping[str, Any]) -> str:
        meta = obj["metadata"]
        lookups.append(meta["name"])
        found = await management_cluster.api_reader.get(
            "v1/Secret", obj["spec"]["secretName"], namespace=meta["namespace"]
        )
        return base64.b64decode(found["data"]["config"]).decode()

    await secret("w1-access", m.servers[1])
    await workload("w1", "w1-access")
    await workload("w2", "w2-access")  # its Secret does not exist yet
    await workload("w3", "w1-access", ready=False)
    provider = ClusterAPIProvider(
        cluster=m.admin,
        namespace="tenants",
        object_to_watch=WORKLOAD,
        is_ready=lambda obj: obj.get("status", {}).get("phase") == "Running",
        get_kubeconfig=get_kubeconfig,
    )
    assert "Workload" in repr(provider)
    aware = run(provider)
    await eventually(lambda: "tenants/w1" in aware.engaged, message="w1 engaged")
    assert aware.engaged["tenants/w1"].config.host == m.servers[1].url
    await eventually(lambda: "tenants/w2" in reasons(provider), message="w2's failing lookup reported")
    assert reasons(provider)["tenants/w2"].startswith("Workload tenants/w2 (get_kubeconfig)")
    assert "failed, retried with backoff" in reasons(provider)["tenants/w2"]
    assert "not ready" in reasons(provider)["tenants/w3"]
    assert "tenants/w3" not in aware.engaged
    # The lookup is retried with backoff: once the Secret exists, w2 is engaged.
    await secret("w2-access", m.servers[2])
    await eventually(lambda: "tenants/w2" in aware.engaged, message="w2 engaged once its lookup succeeds")
    assert aware.engaged["tenants/w2"].config.host == m.servers[2].url
    # Pointing w1 at other credentials re-engages it; a status update alone keeps it.
    w1 = aware.engaged["tenants/w1"]
    await workload("w1", "w2-access")
    await eventually(lambda: aware.engaged.get("tenants/w1") not in (None, w1), message="w1 re-engaged")
    assert aware.engaged["tenants/w1"].config.host == m.servers[2].url
    # The objects of the kind are the clusters: deleting one disengages it.
    await m.admin.api_reader.delete(WORKLOAD, "w2", namespace="tenants")
    await eventually(lambda: "tenants/w2" not in aware.engaged, message="deleted Workload disengaged")
    assert "w3" not in lookups  # a Workload that is not ready is not looked up


async def test_predicates_choose_which_clusters_are_engaged(management: Management, run: Any) -> None:
    m = management

    async def label(name: str, value: str | None) -> None:
        patch = {"metadata": {"labels": {"fleet": value}}}
        await m.admin.api_reader.patch(CLUSTER, name, patch, namespace="tenants")

    for name, server in (("alpha", m.servers[1]), ("beta", m.servers[2])):
        await m.cluster(name)
        await m.kubeconfig(name, server)
    await label("alpha", "yes")
    provider = ClusterAPIProvider(cluster=m.admin, predicates=[LabelSelectorPredicate("fleet=yes")])
    aware = run(provider)
    await eventually(lambda: "tenants/alpha" in aware.engaged, message="alpha engaged")
    # beta is filtered out: not engaged, not a problem, not even when its Secret changes.
    await m.kubeconfig("beta", m.servers[3])
    await m.cluster("alpha")  # a status write reconciles alpha: it stays as it is
    alpha = aware.engaged["tenants/alpha"]
    await m.kubeconfig("alpha", m.servers[3])
    await eventually(lambda: aware.engaged.get("tenants/alpha") not in (None, alpha), message="alpha rotated")
    assert "tenants/beta" not in aware.engaged
    assert "tenants/beta" not in reasons(provider)
    # Selected later: engaged. Deselected: disengaged.
    await label("beta", "yes")
    await eventually(lambda: "tenants/beta" in aware.engaged, message="beta engaged once selected")
    assert aware.engaged["tenants/beta"].config.host == m.servers[3].url
    await label("alpha", None)
    await eventually(lambda: "tenants/alpha" not in aware.engaged, message="alpha disengaged once deselected")
    assert "tenants/beta" in aware.engaged
