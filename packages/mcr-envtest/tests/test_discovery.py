"""Discovery, /version, health and OpenAPI entry points, through the official client and raw HTTP."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from mcr.testing import eventually
from mcr_envtest import ServerThread

from .conftest import crd_served

AGG = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
                "subresources": {"status": {}},
            }
        ],
    },
}


def test_version_has_all_fields(api_client: client.ApiClient) -> None:
    info = client.VersionApi(api_client).get_code()
    assert info.major == "1"
    assert info.minor == "37"
    for field in (
        "git_version",
        "git_commit",
        "git_tree_state",
        "build_date",
        "go_version",
        "compiler",
        "platform",
    ):
        assert getattr(info, field)


def test_legacy_discovery(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client).get_api_resources()
    names = {r.name: r for r in core.resources}
    assert names["configmaps"].singular_name == "configmap"
    assert names["pods/status"].verbs == ["get", "patch", "update"]
    assert names["namespaces"].namespaced is False
    groups = client.ApisApi(api_client).get_api_versions().groups
    by_name = {g.name: g for g in groups}
    for g in (
        "apps",
        "coordination.k8s.io",
        "events.k8s.io",
        "rbac.authorization.k8s.io",
        "apiextensions.k8s.io",
    ):
        assert g in by_name
    apps = client.AppsV1Api(api_client).get_api_resources()
    assert "deployments/scale" in {r.name for r in apps.resources}


async def test_aggregated_discovery_etag(raw: Any) -> None:
    async with raw.request("GET", "/apis", headers={"Accept": AGG}) as resp:
        assert resp.status == 200
        assert "as=APIGroupDiscoveryList" in resp.headers["Content-Type"]
        body = await resp.json(content_type=None)
        etag = resp.headers["ETag"]
    assert body["kind"] == "APIGroupDiscoveryList"
    apps = next(i for i in body["items"] if i["metadata"]["name"] == "apps")
    deploy = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments")
    assert deploy["scope"] == "Namespaced"
    assert deploy["responseKind"]["kind"] == "Deployment"
    async with raw.request("GET", "/apis", headers={"Accept": AGG, "If-None-Match": etag}) as resp:
        assert resp.status == 304
    status, core = await raw.json("GET", "/api", headers={"Accept": AGG})
    assert status == 200
    assert "name" not in core["items"][0]["metadata"]  # the core group's name is empty
    status, plain = await raw.json("GET", "/api")
    assert plain["kind"] == "APIVersions"
    assert plain["versions"] == ["v1"]


async def test_health_and_openapi(raw: Any) -> None:
    for path in ("/healthz", "/livez", "/readyz"):
        async with raw.request("GET", path) as resp:
            assert resp.status == 200
            assert await resp.text() == "ok"
    status, doc = await raw.json("GET", "/openapi/v3")
    assert status == 200
    assert "api/v1" in doc["paths"]
    status, _ = await raw.json("GET", "/openapi/v3/apis/nope.example/v1")
    assert status == 404


async def test_crd_changes_discovery(apiserver: ServerThread, raw: Any) -> None:
    status, _ = await raw.json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=CRD)
    assert status == 201
    await crd_served(raw, CRD)  # at once with mcr-envtest, within moments with kube-apiserver
    status, rl = await raw.json("GET", "/apis/example.com/v1")
    assert status == 200
    assert [r["name"] for r in rl["resources"]] == ["widgets", "widgets/status"]
    status, groups = await raw.json("GET", "/apis")
    assert "example.com" in [g["name"] for g in groups["groups"]]
    status, _ = await raw.json(
        "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"
    )
    assert status == 200

    async def gone() -> bool:
        s, _ = await raw.json("GET", "/apis/example.com/v1")
        _, groups = await raw.json("GET", "/apis")
        return s == 404 and "example.com" not in [g["name"] for g in groups["groups"]]

    await eventually(gone, timeout=30)
