"""RESTMapper against a real mcr-envtest server: aggregated and legacy discovery, CRDs at runtime."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1Deployment

from mcr.client import Client
from mcr.cluster import Cluster
from mcr.errors import NoKindMatchError
from mcr.rest.kinds import GVK, GVR
from mcr.rest.mapper import RESTMapper
from mcr.rest.transport import Transport
from mcr.testing import eventually

GADGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.org"},
    "spec": {
        "group": "example.org",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
        "scope": "Cluster",
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


@pytest.mark.envtest_only("counts the discovery requests in mcr-envtest's request log")
async def test_builtins_from_aggregated_discovery(apiserver: Any, transport: Transport) -> None:
    mapper = RESTMapper(transport)
    apiserver.faults.request_log.clear()
    cm = await mapper.mapping(GVK("", "v1", "ConfigMap"))
    assert cm.gvr == GVR("", "v1", "configmaps")
    assert cm.namespaced
    assert cm.path("ns1", "x") == "/api/v1/namespaces/ns1/configmaps/x"
    dep = await mapper.resolve(V1Deployment)
    assert dep.path("ns1", "d", "status") == "/apis/apps/v1/namespaces/ns1/deployments/d/status"
    assert "status" in dep.subresources
    assert "scale" in dep.subresources
    ns = await mapper.resolve("Namespace")
    assert not ns.namespaced
    assert ns.path(None, "kube-system") == "/api/v1/namespaces/kube-system"
    assert await mapper.kind_for(GVR("rbac.authorization.k8s.io", "v1", "clusterroles")) == GVK(
        "rbac.authorization.k8s.io", "v1", "ClusterRole"
    )
    for gvk in [
        GVK("", "v1", "Secret"),
        GVK("", "v1", "ServiceAccount"),
        GVK("", "v1", "Pod"),
        GVK("", "v1", "Service"),
        GVK("", "v1", "Event"),
        GVK("events.k8s.io", "v1", "Event"),
        GVK("coordination.k8s.io", "v1", "Lease"),
        GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
    ]:
        assert (await mapper.mapping(gvk)).gvk == gvk
    assert [r.path for r in apiserver.faults.request_log] == ["/api", "/apis"]  # two requests in all


@pytest.mark.envtest_only("refuses aggregated discovery with an injected 406 and reads the request log")
async def test_legacy_discovery(apiserver: Any, transport: Transport) -> None:
    mapper = RESTMapper(transport)
    apiserver.faults.fail_next(1, status=406)  # no aggregated discovery
    lease = await mapper.mapping(GVK("coordination.k8s.io", "v1", "Lease"))
    assert lease.gvr.resource == "leases"
    assert (await mapper.mapping(GVK("apps", "v1", "Deployment"))).subresources >= {"status", "scale"}
    paths = {r.path for r in apiserver.faults.request_log}
    assert {"/api/v1", "/apis/apps/v1"} <= paths


async def test_crd_after_start_and_unknown_kinds(apiserver: Any, client: Client) -> None:
    mapper = client.rest_mapper
    await mapper.refresh()
    with pytest.raises(NoKindMatchError) as err:
        await mapper.mapping(GVK("example.org", "v1", "Gadget"))
    assert "example.org/v1/Gadget" in str(err.value)
    assert "test" in str(err.value)  # the cluster
    await client.create(GADGET_CRD)
    refreshes = mapper.refreshes
    m = await mapper.mapping(GVK("example.org", "v1", "Gadget"))
    assert mapper.refreshes == refreshes + 1
    assert not m.namespaced
    assert m.short_names == ("gd",)
    assert (await mapper.resolve("Gadget")).gvk == GVK("example.org", "v1", "Gadget")
    assert (await mapper.resolve(GVK("example.org", "", "Gadget"))).gvk.version == "v1"
    await client.create({"apiVersion": "example.org/v1", "kind": "Gadget", "metadata": {"name": "g"}})
    assert (await client.get("example.org/v1/Gadget", "g"))["metadata"]["name"] == "g"


@pytest.mark.parametrize(
    "legacy",
    [
        pytest.param(False, id="aggregated"),
        pytest.param(
            True,
            id="legacy",
            marks=pytest.mark.envtest_only("refuses aggregated discovery with an injected 406"),
        ),
    ],
)
async def test_identical_discovery_is_shared_between_clusters(fleet: Any, legacy: bool) -> None:
    # Two servers of one version answer discovery alike: their mappers share one parsed snapshot
    # (the same Mapping objects); a CRD on one of them gives that one its own again.
    servers = fleet(2).servers
    configs = [Cluster.from_kubeconfig(s.kubeconfig, name=f"disc-{i}") for i, s in enumerate(servers)]
    try:
        mappers = [c.rest_mapper for c in configs]
        if legacy:
            for s in servers:
                s.faults.fail_next(1, status=406)  # no aggregated discovery
        cm = [await m.mapping(GVK("", "v1", "ConfigMap")) for m in mappers]
        assert cm[0] is cm[1]
        assert (await mappers[0].mappings()) == (await mappers[1].mappings())
        await configs[0].api_reader.create(GADGET_CRD)
        gadget = GVK("example.org", "v1", "Gadget")
        assert (await mappers[0].mapping(gadget)).gvr.resource == "gadgets"
        with pytest.raises(NoKindMatchError):
            await mappers[1].mapping(gadget)
        assert await mappers[0].mapping(GVK("", "v1", "ConfigMap")) is not cm[1]
        assert await mappers[1].mapping(GVK("", "v1", "ConfigMap")) == cm[1]
    finally:
        for c in configs:
            await c.stop()


async def test_a_kind_not_served_is_reported_with_what_is_served_nearby(client: Client) -> None:
    await client.create(GADGET_CRD)
    mapper = RESTMapper(client.transport, min_refresh_interval=0.0)

    async def crd_served() -> bool:
        try:
            await mapper.mapping(GVK("example.org", "v1", "Gadget"))
        except NoKindMatchError:
            return False
        return True

    await eventually(crd_served, message="the Gadget CRD served")  # a real server takes a moment

    async def why(kind: object) -> str:
        with pytest.raises(NoKindMatchError) as err:
            await mapper.resolve(kind)
        assert err.value.hint in str(err.value)
        return str(err.value)

    wrong_case = await why("example.org/v1/gadget")
    assert (
        "no matches for kind example.org/v1/gadget in cluster 'test': did you mean example.org/v1/Gadget?"
        in (wrong_case)
    )
    assert "example.org/v1 serves Gadget" in wrong_case
    assert "did you mean v1/ConfigMap?" in await why("v1/configmap")
    assert "Secret" in await why("v1/configmap")
    no_version = await why("example.org/Gadget")
    assert "'example.org' is an API group, not a version" in no_version
    assert "did you mean example.org/v1/Gadget?" in no_version
    assert "did you mean apps/v1/Deployment?" in await why("apps/Deployment")
    assert "the 'example.org' group is served at v1" in await why("example.org/v2/Gadget")
    assert "did you mean apps/v1/Deployment?" in await why("v1/Deployment")
    assert "the group 'nowhere.example' is not served" in await why("nowhere.example/v1/Thing")
    assert "did you mean apps/v1/Deployment?" in await why("deployment")
