"""Responses shaped as kube-apiserver's: metadata.generation per kind, discovery details, the
/version fields, Status details of routing errors, scale and access-review bodies, custom
resource lists. Every test runs unchanged against the real kube-apiserver."""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

from mcr.testing import eventually

from .conftest import Raw, crd_served

AGG = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _hash(gvk: str) -> str:
    return base64.b64encode(hashlib.sha256(gvk.encode()).digest()[:8]).decode()


async def _namespace(raw: Raw) -> str:
    ns = _name("parity")
    status, body = await raw.json("POST", "/api/v1/namespaces", json={"metadata": {"name": ns}})
    assert status == 201, body
    return ns


async def test_generation_only_on_kinds_upstream_tracks_it(raw: Raw) -> None:
    ns = await _namespace(raw)
    svc = {
        "metadata": {"name": "svc"},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}},
    }
    status, body = await raw.json("POST", f"/api/v1/namespaces/{ns}/services", json=svc)
    assert status == 201, body
    assert "generation" not in body["metadata"]
    lease = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}
    status, body = await raw.json("POST", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", json=lease)
    assert status == 201, body
    assert "generation" not in body["metadata"]
    slice_ = {
        "metadata": {"name": "es"},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"]}],
    }
    status, body = await raw.json(
        "POST", f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", json=slice_
    )
    assert status == 201, body
    assert body["metadata"]["generation"] == 1
    pc = {"metadata": {"name": _name("pc")}, "value": 10}
    status, body = await raw.json("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", json=pc)
    assert status == 201, body
    assert body["metadata"]["generation"] == 1
    await raw.json("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{pc['metadata']['name']}")


async def test_storage_version_hash_is_upstreams(raw: Raw) -> None:
    status, core = await raw.json("GET", "/api/v1")
    assert status == 200
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["configmaps"]["storageVersionHash"] == _hash("/v1/ConfigMap")
    assert by_name["configmaps"]["storageVersionHash"] == "qFsyl6wFWjQ="
    _status, apps = await raw.json("GET", "/apis/apps/v1")
    deploy = next(r for r in apps["resources"] if r["name"] == "deployments")
    assert deploy["storageVersionHash"] == _hash("apps/v1/Deployment")
    _status, ext = await raw.json("GET", "/apis/apiextensions.k8s.io/v1")
    crds = next(r for r in ext["resources"] if r["name"] == "customresourcedefinitions")
    # CRDs are stored at their legacy version
    assert crds["storageVersionHash"] == _hash("apiextensions.k8s.io/v1beta1/CustomResourceDefinition")


async def test_namespaces_have_no_deletecollection(raw: Raw) -> None:
    _status, core = await raw.json("GET", "/api/v1")
    ns = next(r for r in core["resources"] if r["name"] == "namespaces")
    assert ns["verbs"] == ["create", "delete", "get", "list", "patch", "update", "watch"]


async def test_aggregated_response_kind_leaves_own_group_version_empty(raw: Raw) -> None:
    status, body = await raw.json("GET", "/apis", headers={"Accept": AGG})
    assert status == 200
    apps = next(i for i in body["items"] if i["metadata"].get("name") == "apps")
    assert apps["metadata"] == {"name": "apps"}
    deploy = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments")
    assert deploy["responseKind"] == {"group": "", "version": "", "kind": "Deployment"}
    subs = {s["subresource"]: s["responseKind"] for s in deploy["subresources"]}
    assert subs["status"] == {"group": "", "version": "", "kind": "Deployment"}
    assert subs["scale"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}


async def test_version_has_emulation_fields(raw: Raw) -> None:
    status, body = await raw.json("GET", "/version")
    assert status == 200
    assert (body["emulationMajor"], body["emulationMinor"]) == (body["major"], body["minor"])
    assert body["minCompatibilityMajor"] == "1"
    assert int(body["minCompatibilityMinor"]) == int(body["minor"]) - 1


async def test_routing_errors_carry_empty_details(raw: Raw) -> None:
    ns = await _namespace(raw)
    cases = [
        ("GET", "/api/v2", 404),
        ("GET", "/apis/apps/v9", 404),
        ("GET", f"/api/v1/namespaces/{ns}/configmaps/x/bogus", 404),
        ("GET", f"/api/v1/namespaces/{ns}/nodes", 404),
        ("PUT", f"/api/v1/namespaces/{ns}/configmaps", 405),
    ]
    for method, path, code in cases:
        async with raw.request(method, path, json={}) as resp:
            assert resp.status == code, path
            assert resp.content_type == "application/json", path
            body = await resp.json()
        assert body["code"] == code, path
        assert body["details"] == {}, path
    status, body = await raw.json(
        "GET", f"/api/v1/namespaces/{ns}/configmaps", headers={"Accept": "application/bogus"}
    )
    assert status == 406
    assert body["details"] == {}


async def test_scale_omits_zero_replicas(raw: Raw) -> None:
    ns = await _namespace(raw)
    labels = {"app": "z"}
    deploy = {
        "metadata": {"name": "zero"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    status, body = await raw.json("POST", base, json=deploy)
    assert status == 201, body
    status, scale = await raw.json("GET", f"{base}/zero/scale")
    assert status == 200
    assert scale["spec"] == {}
    status, scale = await raw.json(
        "PATCH",
        f"{base}/zero/scale",
        data=b'{"spec":{"replicas":2}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200, scale
    assert scale["spec"] == {"replicas": 2}


async def test_access_review_has_no_creation_timestamp(raw: Raw) -> None:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "configmaps"}},
    }
    status, body = await raw.json(
        "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review
    )
    assert status == 201, body
    assert "creationTimestamp" not in body["metadata"]
    assert body["status"]["allowed"] is True


async def test_custom_resource_lists_carry_empty_continue(raw: Raw) -> None:
    group = f"{uuid.uuid4().hex[:8]}.parity.example.com"
    crd: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                        },
                    },
                }
            ],
        },
    }
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    status, body = await raw.json("POST", crd_path, json=crd)
    assert status == 201, body
    try:
        await crd_served(raw, crd)
        ns = await _namespace(raw)
        path = f"/apis/{group}/v1/namespaces/{ns}/things"
        status, body = await raw.json(
            "POST", path, json={"kind": "Thing", "apiVersion": f"{group}/v1", "metadata": {"name": "t"}}
        )
        assert status == 201, body
        status, listed = await raw.json("GET", path)
        assert status == 200
        assert listed["metadata"]["continue"] == ""
        assert [i["metadata"]["name"] for i in listed["items"]] == ["t"]
        status, deleted = await raw.json("DELETE", path)
        assert status == 200, deleted
        assert deleted["metadata"]["continue"] == ""
        _status, disc = await raw.json("GET", f"/apis/{group}/v1")
        things = disc["resources"]
        assert things[0]["verbs"] == [
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch",
        ]
        assert [r["name"] for r in things] == ["things", "things/status", "things/scale"]
    finally:
        await raw.json("DELETE", f"{crd_path}/things.{group}")


async def test_unsupported_body_media_type_is_upstreams_415(raw: Raw) -> None:
    ns = await _namespace(raw)
    status, body = await raw.json(
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        data=b"name: x",
        headers={"Content-Type": "text/plain"},
    )
    assert status == 415
    assert body["reason"] == "UnsupportedMediaType"
    assert body["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )
    assert "details" not in body


async def test_body_of_another_kind_is_worded_as_upstream(raw: Raw) -> None:
    ns = await _namespace(raw)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    cases = [
        (
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}},
            'Secret in version "v1" cannot be handled as a ConfigMap: '
            "converting (v1.Secret) to (core.ConfigMap): unknown conversion",
        ),
        (
            {"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "b"}},
            'ConfigMap in version "v1" cannot be handled as a ConfigMap: no kind "ConfigMap" is '
            'registered for version "apps/v1" in scheme "pkg/runtime/scheme.go:111"',
        ),
    ]
    for obj, message in cases:
        status, body = await raw.json("POST", path, json=obj)
        assert status == 400, body
        assert body["message"] == message
    status, body = await raw.json("POST", path, data=b"", headers={"Content-Type": "application/json"})
    assert status == 400
    assert body["message"] == (
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get "
        "version/kind; json parse error: unexpected end of JSON input (<empty>)"
    )


async def test_openapi_v3_index_lists_version_and_api(raw: Raw) -> None:
    status, index = await raw.json("GET", "/openapi/v3")
    assert status == 200
    for key, operation in (("version", "getCodeVersion"), ("api", "getCoreAPIVersions")):
        url = index["paths"][key]["serverRelativeURL"]
        assert url.startswith(f"/openapi/v3/{key}?hash=")
        status, doc = await raw.json("GET", url)
        assert status == 200, url
        (path_item,) = doc["paths"].values()
        assert path_item["get"]["operationId"] == operation


async def test_builtin_list_items_carry_no_kind_or_api_version(raw: Raw) -> None:
    ns = await _namespace(raw)
    for name in ("a", "b"):
        status, body = await raw.json(
            "POST",
            f"/api/v1/namespaces/{ns}/configmaps",
            json={"metadata": {"name": name, "labels": {"listed": "yes"}}},
        )
        assert status == 201, body
        assert body["kind"] == "ConfigMap"
    status, body = await raw.json("GET", f"/api/v1/namespaces/{ns}/configmaps?labelSelector=listed")
    assert status == 200, body
    assert [i["metadata"]["name"] for i in body["items"]] == ["a", "b"]
    assert all("kind" not in i and "apiVersion" not in i for i in body["items"]), body["items"]
    status, body = await raw.json("DELETE", f"/api/v1/namespaces/{ns}/configmaps?labelSelector=listed")
    assert status == 200, body
    assert body["kind"] == "ConfigMapList"
    assert all("kind" not in i and "apiVersion" not in i for i in body["items"]), body["items"]


async def test_namespace_name_label_terminating_phase_and_empty_metadata(raw: Raw) -> None:
    ns = await _namespace(raw)
    path = f"/api/v1/namespaces/{ns}"
    status, body = await raw.json("GET", path)
    assert body["metadata"]["labels"] == {"kubernetes.io/metadata.name": ns}, body
    merge = {"Content-Type": "application/merge-patch+json"}
    status, body = await raw.json(
        "PATCH", path, headers=merge, json={"metadata": {"labels": {"kubernetes.io/metadata.name": "x"}}}
    )
    assert status == 200, body
    assert body["metadata"]["labels"]["kubernetes.io/metadata.name"] == ns
    status, body = await raw.json(
        "PATCH", f"{path}/status", headers=merge, json={"status": {"phase": "Terminating"}}
    )
    assert status == 422, body
    assert body["details"]["causes"][0]["field"] == "status.Phase", body
    cm = {"metadata": {"name": "fin", "finalizers": ["example.com/hold"], "labels": {"a": "b"}}}
    status, body = await raw.json("POST", f"{path}/configmaps", json=cm)
    assert status == 201, body
    status, body = await raw.json(
        "PATCH",
        f"{path}/configmaps/fin",
        headers=merge,
        json={"metadata": {"finalizers": [], "labels": {"a": None}}},
    )
    assert status == 200, body
    assert "finalizers" not in body["metadata"], body
    assert "labels" not in body["metadata"], body


async def test_secret_with_bad_base64_and_selector_pages_without_count(raw: Raw) -> None:
    ns = await _namespace(raw)
    bad = {"metadata": {"name": "bad"}, "data": {"user": "not base64!"}}
    status, body = await raw.json("POST", f"/api/v1/namespaces/{ns}/secrets", json=bad)
    assert status == 400, body
    assert body["message"].endswith("illegal base64 data at input byte 3"), body
    for name in ("a", "b", "c"):
        cm = {"metadata": {"name": name, "labels": {"paged": "yes"}}}
        status, body = await raw.json("POST", f"/api/v1/namespaces/{ns}/configmaps", json=cm)
        assert status == 201, body
    status, body = await raw.json("GET", f"/api/v1/namespaces/{ns}/configmaps?labelSelector=paged&limit=2")
    assert status == 200, body
    assert body["metadata"]["continue"], body
    assert "remainingItemCount" not in body["metadata"], body


async def test_cluster_role_aggregation_fills_and_refills_rules(raw: Raw) -> None:
    run = uuid.uuid4().hex[:8]
    roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    agg = {
        "metadata": {"name": f"agg-{run}"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg-test": run}}]},
    }
    status, body = await raw.json("POST", roles, json=agg)
    assert status == 201, body
    assert body["rules"] is None, body
    rule = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}
    part = {"metadata": {"name": f"agg-part-{run}", "labels": {"agg-test": run}}, "rules": [rule]}
    status, body = await raw.json("POST", roles, json=part)
    assert status == 201, body

    async def rules() -> Any:
        status, body = await raw.json("GET", f"{roles}/agg-{run}")
        assert status == 200, body
        return body["rules"]

    async def filled() -> bool:
        return await rules() == [rule]

    await eventually(filled, timeout=20, interval=0.05, message="the aggregated rules")
    status, body = await raw.json("DELETE", f"{roles}/agg-part-{run}")
    assert status == 200, body

    async def emptied() -> bool:
        return not await rules()

    await eventually(emptied, timeout=20, interval=0.05, message="the aggregated rules emptied")
    await raw.json("DELETE", f"{roles}/agg-{run}")


async def test_array_body_is_an_unrecognized_object(raw: Raw) -> None:
    ns = await _namespace(raw)
    status, body = await raw.json(
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        data=b"[1,2]",
        headers={"Content-Type": "application/json"},
    )
    assert status == 400, body
    assert body["message"].startswith(
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; "
        "json parse error: json: cannot unmarshal array into Go value of type struct"
    ), body
    assert body["message"].endswith(" (5b312c325d)"), body


async def test_failing_json_patch_is_a_bare_422(raw: Raw) -> None:
    ns = await _namespace(raw)
    cm = {"metadata": {"name": "jp"}, "data": {"k": "v"}}
    status, body = await raw.json("POST", f"/api/v1/namespaces/{ns}/configmaps", json=cm)
    assert status == 201, body
    status, body = await raw.json(
        "PATCH",
        f"/api/v1/namespaces/{ns}/configmaps/jp",
        json=[{"op": "test", "path": "/data/k", "value": "other"}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert status == 422, body
    assert body["message"] == "the server rejected our request due to an error in our request", body
    assert body["details"] == {}, body


async def test_apply_refusals_name_the_options_and_conflicts_no_object(raw: Raw) -> None:
    ns = await _namespace(raw)
    path = f"/api/v1/namespaces/{ns}/configmaps/ap"
    apply = {"Content-Type": "application/apply-patch+yaml"}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ap"}, "data": {"k": "a"}}
    status, body = await raw.json("PATCH", path, json=cm, headers=apply)
    assert status == 422, body
    assert body["details"]["kind"] == "PatchOptions", body
    assert body["message"].startswith('PatchOptions.meta.k8s.io "" is invalid: fieldManager'), body
    status, body = await raw.json("PATCH", f"{path}?fieldManager=one", json=cm, headers=apply)
    assert status == 201, body
    cm["data"] = {"k": "b"}
    status, body = await raw.json("PATCH", f"{path}?fieldManager=two", json=cm, headers=apply)
    assert status == 409, body
    assert body["details"] == {
        "causes": [{"reason": "FieldManagerConflict", "message": 'conflict with "one"', "field": ".data.k"}]
    }, body


async def test_token_request_answer_carries_the_account_uid_and_its_writer(raw: Raw) -> None:
    ns = f"tr-{uuid.uuid4().hex[:8]}"
    status, body = await raw.json("POST", "/api/v1/namespaces", json={"metadata": {"name": ns}})
    assert status == 201, body
    status, sa = await raw.json(
        "POST", f"/api/v1/namespaces/{ns}/serviceaccounts", json={"metadata": {"name": "robot"}}
    )
    assert status == 201, sa
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    status, out = await raw.json(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts/robot/token",
        json=request,
        params={"fieldManager": "issuer"},
    )
    assert status == 201, out
    assert out["metadata"]["uid"] == sa["metadata"]["uid"]
    assert out["spec"]["boundObjectRef"] is None
    ((entry),) = out["metadata"]["managedFields"]
    assert {k: entry[k] for k in ("manager", "operation", "apiVersion", "fieldsV1", "subresource")} == {
        "manager": "issuer",
        "operation": "Update",
        "apiVersion": "authentication.k8s.io/v1",
        "fieldsV1": {"f:spec": {"f:expirationSeconds": {}}},
        "subresource": "token",
    }
    await raw.status("DELETE", f"/api/v1/namespaces/{ns}")


async def test_node_defaults_and_the_not_ready_taint(raw: Raw) -> None:
    name = f"node-{uuid.uuid4().hex[:8]}"
    spec = {"podCIDR": "10.1.0.0/24", "taints": [{"key": "x", "effect": "NoExecute"}]}
    status, node = await raw.json("POST", "/api/v1/nodes", json={"metadata": {"name": name}, "spec": spec})
    assert status == 201, node
    assert node["spec"]["podCIDRs"] == ["10.1.0.0/24"]
    assert node["spec"]["taints"] == [
        {"key": "x", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    ]
    # the taint comes from admission: the writer owns only the taint it sent
    owned = node["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
    assert set(owned) == {"f:podCIDR", "f:podCIDRs", "f:taints"}
    assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
    assert set(node["status"]["nodeInfo"].values()) == {""}
    merge = {"Content-Type": "application/merge-patch+json"}
    for cpu, allocatable in (("2", "2"), ("3", "2")):  # allocatable defaults only when unset
        status, node = await raw.json(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            json={"status": {"capacity": {"cpu": cpu}}},
            headers=merge,
        )
        assert status == 200, node
        assert (node["status"]["capacity"], node["status"]["allocatable"]) == (
            {"cpu": cpu},
            {"cpu": allocatable},
        )
    await raw.status("DELETE", f"/api/v1/nodes/{name}")
