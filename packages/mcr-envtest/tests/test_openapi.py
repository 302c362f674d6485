"""OpenAPI v3 documents: built-ins from the kubernetes models, CRs from CRD schemas."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from mcr_envtest import ServerThread
from mcr_envtest.openapi import group_version_document, root_document
from mcr_envtest.resources import Registry

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com", "uid": "u1", "resourceVersion": "5"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {"size": {"type": "integer"}, "color": {"type": "string"}},
                            }
                        },
                    }
                },
            }
        ],
    },
}


def raw_request(
    srv: ServerThread,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    token: str | None = None,
) -> tuple[int, Any]:
    """One HTTPS request as ``token`` (default admin) with a JSON body; returns (status, JSON)."""
    ctx = ssl.create_default_context(cafile=srv.ca_file)
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(
        srv.url + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token or srv.admin_token}", "Content-Type": content_type},
    )
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        with err:
            text = err.read()
        try:
            return err.code, json.loads(text or b"null")
        except ValueError:  # kube-apiserver's "404 page not found"
            return err.code, text.decode(errors="replace")


def _patch_op(doc: dict[str, Any], path: str) -> dict[str, Any]:
    op: dict[str, Any] = doc["paths"][path]["patch"]
    return op


def test_root_lists_every_group_version_with_a_hash() -> None:
    reg = Registry()
    paths = root_document(reg)["paths"]
    assert "api/v1" in paths
    assert "apis/apps/v1" in paths
    url = paths["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/apps/v1?hash=")
    assert len(url.split("hash=")[1]) > 16


def test_patch_operations_carry_gvk_and_field_validation() -> None:
    doc = group_version_document(Registry(), "apps", "v1")
    assert doc is not None
    op = _patch_op(doc, "/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
    assert op["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert "fieldValidation" in [p["name"] for p in op["parameters"]]
    assert "application/strategic-merge-patch+json" in op["requestBody"]["content"]
    core = group_version_document(Registry(), "", "v1")
    assert core is not None
    assert "/api/v1/namespaces/{name}" in core["paths"]  # cluster-scoped item path


def test_schemas_have_required_fields_and_patch_metadata() -> None:
    doc = group_version_document(Registry(), "", "v1")
    assert doc is not None
    schemas = doc["components"]["schemas"]
    pod = next(
        s
        for s in schemas.values()
        if {"group": "", "version": "v1", "kind": "Pod"} in s.get("x-kubernetes-group-version-kind", [])
    )
    spec_ref = pod["properties"]["spec"]["$ref"].rsplit("/", 1)[1]
    pod_spec = schemas[spec_ref]
    assert "containers" in pod_spec["required"]
    containers = pod_spec["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    event = next(
        s
        for s in schemas.values()
        if {"group": "", "version": "v1", "kind": "Event"} in s.get("x-kubernetes-group-version-kind", [])
    )
    assert "involvedObject" in event["required"]


def test_crd_documents_follow_the_crd() -> None:
    reg = Registry()
    reg.add_crd(WIDGET_CRD)
    root = root_document(reg)["paths"]
    first_hash = root["apis/example.com/v1"]["serverRelativeURL"]
    doc = group_version_document(reg, "example.com", "v1")
    assert doc is not None
    widget = doc["components"]["schemas"]["com.example.v1.Widget"]
    assert widget["x-kubernetes-group-version-kind"] == [
        {"group": "example.com", "version": "v1", "kind": "Widget"}
    ]
    assert widget["properties"]["spec"]["required"] == ["size"]
    op = _patch_op(doc, "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}")
    assert "application/strategic-merge-patch+json" not in op["requestBody"]["content"]
    changed = json.loads(json.dumps(WIDGET_CRD))
    changed["metadata"]["resourceVersion"] = "6"
    reg.add_crd(changed)
    assert root_document(reg)["paths"]["apis/example.com/v1"]["serverRelativeURL"] != first_hash
    reg.remove_crd(changed)
    assert group_version_document(reg, "example.com", "v1") is None


def test_served_over_https(apiserver: ServerThread) -> None:
    status, root = raw_request(apiserver, "GET", "/openapi/v3")
    assert status == 200
    status, doc = raw_request(apiserver, "GET", root["paths"]["apis/apps/v1"]["serverRelativeURL"])
    assert status == 200
    assert "/apis/apps/v1/namespaces/{namespace}/deployments/{name}" in doc["paths"]


def test_scale_and_status_subresources_have_their_operations(apiserver: ServerThread) -> None:
    _, root = raw_request(apiserver, "GET", "/openapi/v3")
    _, doc = raw_request(apiserver, "GET", root["paths"]["apis/apps/v1"]["serverRelativeURL"])
    item = "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
    scale, status = doc["paths"][item + "/scale"], doc["paths"][item + "/status"]
    ops = {verb: scale[verb]["operationId"] for verb in ("get", "put", "patch")}
    assert ops == {
        "get": "readAppsV1NamespacedDeploymentScale",
        "put": "replaceAppsV1NamespacedDeploymentScale",
        "patch": "patchAppsV1NamespacedDeploymentScale",
    }
    assert scale["get"]["x-kubernetes-group-version-kind"] == {
        "group": "autoscaling",
        "version": "v1",
        "kind": "Scale",
    }
    ref = scale["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ref == "#/components/schemas/io.k8s.api.autoscaling.v1.Scale"
    assert "io.k8s.api.autoscaling.v1.Scale" in doc["components"]["schemas"]
    assert status["put"]["operationId"] == "replaceAppsV1NamespacedDeploymentStatus"
    assert status["get"]["x-kubernetes-group-version-kind"]["kind"] == "Deployment"


async def test_schemas_can_be_warmed_in_a_thread() -> None:
    import asyncio

    from mcr_envtest.openapi import warm_schemas
    from mcr_envtest.schema import builtin

    reg = Registry()
    await asyncio.to_thread(warm_schemas, reg)
    deployment = builtin.definition_name("V1Deployment")
    assert deployment in builtin.model_closure("V1Deployment")
    doc = group_version_document(reg, "apps", "v1")
    assert doc is not None
    assert deployment in doc["components"]["schemas"]
