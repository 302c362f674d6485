"""Custom resources: serving, scope, /status split, generation, CR-only rules, CRD delete cleanup,
driven through the official async client (kubernetes.aio) and raw HTTP."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from kubernetes.aio import client as aclient
from kubernetes.aio import config as aconfig

from mcr.testing import eventually
from mcr_envtest import ServerThread

from .conftest import Raw, crd_served
from .test_discovery import CRD

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
W = "/apis/example.com/v1/namespaces/default/widgets"


def cluster_crd() -> dict[str, Any]:
    crd = copy.deepcopy(CRD)
    crd["metadata"]["name"] = "gadgets.example.com"
    crd["spec"]["names"] = {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"}
    crd["spec"]["scope"] = "Cluster"
    crd["spec"]["versions"][0]["subresources"] = {}
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
    ]
    return crd


@pytest.fixture
async def custom(apiserver: ServerThread) -> Any:
    api = await aconfig.new_client_from_config_dict(apiserver.kubeconfig)
    async with api:
        yield aclient.CustomObjectsApi(api), aclient.ApiextensionsV1Api(api)


async def test_crd_conditions_and_namespaced_crud(custom: Any, raw: Raw) -> None:
    objs, ext = custom
    await ext.create_custom_resource_definition(CRD)
    await crd_served(raw, CRD)
    crd = await ext.read_custom_resource_definition(CRD["metadata"]["name"])
    conds = {c.type: (c.status, c.reason) for c in crd.status.conditions}
    assert conds == {
        "NamesAccepted": ("True", "NoConflicts"),
        "Established": ("True", "InitialNamesAccepted"),
    }
    w = await objs.create_namespaced_custom_object(
        "example.com",
        "v1",
        "default",
        "widgets",
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w1"},
            "spec": {"size": 1},
            "status": {"ready": True},
        },
    )
    assert "status" not in w  # status is dropped on create with a status subresource
    assert w["metadata"]["generation"] == 1
    w = await objs.patch_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", "w1", {"spec": {"size": 2}, "status": {"ready": True}}
    )
    assert w["metadata"]["generation"] == 2
    assert "status" not in w
    w = await objs.patch_namespaced_custom_object_status(
        "example.com", "v1", "default", "widgets", "w1", {"status": {"ready": True}, "spec": {"size": 9}}
    )
    assert w["status"] == {"ready": True}
    assert w["spec"] == {"size": 2}
    assert w["metadata"]["generation"] == 2
    w = await objs.patch_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", "w1", {"metadata": {"labels": {"a": "b"}}}
    )
    assert w["metadata"]["generation"] == 2
    listed = await objs.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w1"]
    assert listed["items"][0]["kind"] == "Widget"


async def test_cr_rules(apiserver: ServerThread, raw: Raw) -> None:
    status, _ = await raw.json("POST", CRDS, json=CRD)
    assert status == 201
    await crd_served(raw, CRD)
    status, w = await raw.json(
        "POST",
        W,
        json={"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}},
    )
    assert status == 201
    # strategic merge patch is for built-ins only
    status, body = await raw.json(
        "PATCH",
        f"{W}/w",
        data=b'{"spec":{"a":1}}',
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert status == 415
    assert body["reason"] == "UnsupportedMediaType"
    # a CR update needs a resourceVersion
    del w["metadata"]["resourceVersion"]
    status, body = await raw.json("PUT", f"{W}/w", json=w)
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "metadata.resourceVersion"


async def test_cluster_scoped_cr_and_printer_columns(apiserver: ServerThread, raw: Raw) -> None:
    status, _ = await raw.json("POST", CRDS, json=cluster_crd())
    assert status == 201
    await crd_served(raw, cluster_crd())
    status, g = await raw.json(
        "POST",
        "/apis/example.com/v1/gadgets",
        json={
            "apiVersion": "example.com/v1",
            "kind": "Gadget",
            "metadata": {"name": "g"},
            "spec": {"size": 3},
        },
    )
    assert status == 201
    assert "namespace" not in g["metadata"]
    assert await raw.status("GET", "/apis/example.com/v1/namespaces/default/gadgets") == 404
    table_of = "application/json;as=Table;v=v1;g=meta.k8s.io"
    status, table = await raw.json("GET", "/apis/example.com/v1/gadgets", headers={"Accept": table_of})
    assert status == 200
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "Size"]
    assert table["rows"][0]["cells"][:2] == ["g", 3]


async def test_crd_delete_removes_crs_with_deleted_events(apiserver: ServerThread, raw: Raw) -> None:
    await raw.json("POST", CRDS, json=CRD)
    await crd_served(raw, CRD)
    for i in range(3):
        await raw.json(
            "POST", W, json={"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": f"w{i}"}}
        )
    status, lst = await raw.json("GET", W)
    rv = lst["metadata"]["resourceVersion"]
    types: list[str] = []
    async with raw.request("GET", f"{W}?watch=1&resourceVersion={rv}") as resp:
        status, _ = await raw.json("DELETE", f"{CRDS}/widgets.example.com")
        assert status == 200
        async for line in resp.content:
            types.append(orjson.loads(line)["type"])
    assert types == ["DELETED", "DELETED", "DELETED"]

    async def crd_gone() -> bool:
        s, _ = await raw.json("GET", f"{CRDS}/widgets.example.com")
        return s == 404

    await eventually(crd_gone, timeout=30)
    status, _ = await raw.json("GET", W)
    assert status == 404


async def test_multiple_versions_share_storage(raw: Raw) -> None:
    crd = copy.deepcopy(CRD)
    schema = crd["spec"]["versions"][0]["schema"]
    crd["spec"]["versions"] = [
        {"name": "v1", "served": True, "storage": True, "schema": schema},
        {"name": "v1beta1", "served": True, "storage": False, "schema": schema},
    ]
    status, created = await raw.json("POST", CRDS, json=crd)
    assert status == 201
    assert created["status"]["storedVersions"] == ["v1"]
    await crd_served(raw, crd)
    beta = "/apis/example.com/v1beta1/namespaces/default/widgets"
    status, w = await raw.json(
        "POST", beta, json={"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "b"}}
    )
    assert status == 201
    assert w["apiVersion"] == "example.com/v1beta1"
    status, v1 = await raw.json("GET", f"{W}/b")
    assert v1["apiVersion"] == "example.com/v1"
    status, lst = await raw.json("GET", beta)
    assert [i["apiVersion"] for i in lst["items"]] == ["example.com/v1beta1"]
    status, groups = await raw.json("GET", "/apis/example.com")
    assert groups["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in groups["versions"]] == ["v1", "v1beta1"]


async def test_managed_fields_name_the_request_version_and_the_scale_subresource(raw: Raw) -> None:
    crd = copy.deepcopy(CRD)
    schema = {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {"replicas": {"type": "integer"}, "size": {"type": "integer"}},
                },
                "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
            },
        }
    }
    subresources = {
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
    }
    crd["spec"]["versions"] = [
        {"name": "v1", "served": True, "storage": True, "schema": schema, "subresources": subresources},
        {"name": "v1beta1", "served": True, "storage": False, "schema": schema, "subresources": subresources},
    ]
    status, created = await raw.json("POST", CRDS, json=crd)
    assert status == 201, created
    await crd_served(raw, crd)
    beta = "/apis/example.com/v1beta1/namespaces/default/widgets"
    body = {
        "apiVersion": "example.com/v1beta1",
        "kind": "Widget",
        "metadata": {"name": "m"},
        "spec": {"replicas": 1, "size": 2},
    }
    status, w = await raw.json("POST", beta, json=body, params={"fieldManager": "writer"})
    assert status == 201, w
    assert [e["apiVersion"] for e in w["metadata"]["managedFields"]] == ["example.com/v1beta1"]
    status, scaled = await raw.json(
        "PATCH",
        f"{W}/m/scale",
        json={"spec": {"replicas": 3}},
        headers={"Content-Type": "application/merge-patch+json"},
        params={"fieldManager": "scaler"},
    )
    assert status == 200, scaled
    status, w = await raw.json("GET", f"{W}/m")
    assert status == 200, w
    entries = {e["manager"]: e for e in w["metadata"]["managedFields"]}
    # the writer still names the version it wrote through; /scale's entry carries no time
    assert entries["writer"]["apiVersion"] == "example.com/v1beta1"
    assert entries["scaler"] == {
        "manager": "scaler",
        "operation": "Update",
        "apiVersion": "example.com/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:replicas": {}}},
        "subresource": "scale",
    }


async def test_a_body_of_another_kind_of_the_group_is_invalid(raw: Raw) -> None:
    crd = copy.deepcopy(CRD)
    crd["spec"]["versions"][0]["schema"] = {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {
                "spec": {"type": "object", "required": ["size"], "properties": {"size": {"type": "integer"}}}
            },
        }
    }
    status, created = await raw.json("POST", CRDS, json=crd)
    assert status == 201, created
    await crd_served(raw, crd)
    body = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {}}
    status, out = await raw.json("POST", W, json=body)
    assert (status, out["reason"]) == (422, "Invalid"), out
    # the schema is not checked (spec.size is missing), only the rules, which this CRD has none of
    assert (
        out["message"] == 'Gadget.example.com "g" is invalid: kind: Invalid value: "Gadget": must be Widget'
    )
    assert (out["details"]["kind"], out["details"]["group"]) == ("Gadget", "example.com")
    status, out = await raw.json("POST", W, json={**body, "spec": {"size": 1}})
    assert [(c["field"], c["message"]) for c in out["details"]["causes"]] == [
        ("kind", 'Invalid value: "Gadget": must be Widget')
    ]
    status, _ = await raw.json("GET", f"{W}/g")
    assert status == 404
