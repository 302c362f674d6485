"""Answers kube-apiserver gives that mcr-envtest reproduces: write-only and immutable fields of
Secrets and ConfigMaps, pod template rules, ``/scale`` selectors, bootstrap objects, health
checks, OpenAPI documents, metrics and CEL validation rules of CRDs.

Every test runs unchanged against the real kube-apiserver (the real lane)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcr.testing import eventually
from mcr_envtest import ServerThread

from .conftest import Raw

NS = "/api/v1/namespaces/default"
APPS = "/apis/apps/v1/namespaces/default"
MERGE = {"Content-Type": "application/merge-patch+json"}
SMP = {"Content-Type": "application/strategic-merge-patch+json"}


@pytest.fixture
async def raw(apiserver: ServerThread) -> AsyncIterator[Raw]:
    r = Raw(apiserver)
    yield r
    await r.close()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def invalid(body: Any) -> list[tuple[str, str]]:
    """(field, message) of each cause of a 422 Status."""
    assert (body["kind"], body["reason"]) == ("Status", "Invalid"), body
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


# ---------------------------------------------------------------- Secret stringData


async def test_secret_string_data_is_merged_into_data_and_never_stored(raw: Raw) -> None:
    status, created = await raw.json(
        "POST",
        f"{NS}/secrets",
        json={
            "metadata": {"name": "s"},
            "data": {"a": b64("A"), "b": b64("B")},
            "stringData": {"b": "from-string-data", "c": "C"},
        },
    )
    assert status == 201, created
    assert created["data"] == {"a": b64("A"), "b": b64("from-string-data"), "c": b64("C")}
    assert "stringData" not in created
    status, got = await raw.json("GET", f"{NS}/secrets/s")
    assert (got["data"], "stringData" in got) == (created["data"], False)

    # PUT: stringData joins the data sent with it
    status, put = await raw.json(
        "PUT",
        f"{NS}/secrets/s",
        json={"metadata": {"name": "s"}, "data": {"a": b64("A")}, "stringData": {"d": "D"}},
    )
    assert status == 200, put
    assert put["data"] == {"a": b64("A"), "d": b64("D")}
    assert "stringData" not in put
    # merge and strategic patches: stringData overrides the stored value of the same key
    status, patched = await raw.json(
        "PATCH", f"{NS}/secrets/s", json={"stringData": {"e": "E"}}, headers=MERGE
    )
    assert patched["data"] == {"a": b64("A"), "d": b64("D"), "e": b64("E")}
    assert "stringData" not in patched
    status, patched = await raw.json(
        "PATCH", f"{NS}/secrets/s", json={"stringData": {"a": "new"}}, headers=SMP
    )
    assert patched["data"]["a"] == b64("new")
    assert "stringData" not in patched
    # a dry run answers with the merged object too
    status, dry = await raw.json(
        "POST", f"{NS}/secrets?dryRun=All", json={"metadata": {"name": "dry"}, "stringData": {"x": "y"}}
    )
    assert (status, dry["data"], "stringData" in dry) == (201, {"x": b64("y")}, False)


async def test_secret_string_data_keys_are_checked_as_data_keys(raw: Raw) -> None:
    status, body = await raw.json(
        "POST", f"{NS}/secrets", json={"metadata": {"name": "s"}, "stringData": {"bad key": "v"}}
    )
    assert status == 422
    assert invalid(body) == [
        (
            "data[bad key]",
            "Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', "
            "'_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
            "'[-._a-zA-Z0-9]+')",
        )
    ]


# ---------------------------------------------------------------- immutable ConfigMaps and Secrets

IMMUTABLE = "Forbidden: field is immutable when `immutable` is set"


async def test_immutable_config_map_refuses_data_changes(raw: Raw) -> None:
    cm = {"metadata": {"name": "c"}, "data": {"a": "1"}, "binaryData": {"b": "AA=="}, "immutable": True}
    status, _ = await raw.json("POST", f"{NS}/configmaps", json=cm)
    assert status == 201
    path = f"{NS}/configmaps/c"
    status, body = await raw.json("PUT", path, json={**cm, "data": {"a": "2"}})
    assert status == 422
    assert body["message"] == f'ConfigMap "c" is invalid: data: {IMMUTABLE}'
    status, body = await raw.json(
        "PUT", path, json={"metadata": {"name": "c"}, "data": {"a": "2"}, "immutable": False}
    )
    assert invalid(body) == [("immutable", IMMUTABLE), ("data", IMMUTABLE), ("binaryData", IMMUTABLE)]
    status, body = await raw.json("PUT", path, json={k: v for k, v in cm.items() if k != "immutable"})
    assert invalid(body) == [("immutable", IMMUTABLE)]
    status, body = await raw.json("PATCH", path, json={"data": {"a": "3"}}, headers=MERGE)
    assert (status, invalid(body)) == (422, [("data", IMMUTABLE)])
    # metadata stays writable
    status, body = await raw.json("PATCH", path, json={"metadata": {"labels": {"x": "y"}}}, headers=MERGE)
    assert (status, body["metadata"]["labels"], body["data"]) == (200, {"x": "y"}, {"a": "1"})


async def test_a_config_map_may_turn_immutable_with_a_last_change(raw: Raw) -> None:
    status, _ = await raw.json(
        "POST", f"{NS}/configmaps", json={"metadata": {"name": "c"}, "data": {"a": "1"}}
    )
    status, body = await raw.json(
        "PATCH", f"{NS}/configmaps/c", json={"immutable": True, "data": {"a": "5"}}, headers=MERGE
    )
    assert (status, body["immutable"], body["data"]) == (200, True, {"a": "5"})


async def test_immutable_secret_refuses_data_changes_and_type_never_changes(raw: Raw) -> None:
    secret = {"metadata": {"name": "s"}, "data": {"a": b64("A")}, "immutable": True}
    status, _ = await raw.json("POST", f"{NS}/secrets", json=secret)
    assert status == 201
    path = f"{NS}/secrets/s"
    status, body = await raw.json("PUT", path, json={**secret, "data": {"a": b64("B")}})
    assert (status, body["message"]) == (422, f'Secret "s" is invalid: data: {IMMUTABLE}')
    status, body = await raw.json(
        "PUT", path, json={"metadata": {"name": "s"}, "stringData": {"a": "B"}, "immutable": True}
    )
    assert invalid(body) == [("data", IMMUTABLE)]
    status, body = await raw.json("PUT", path, json={**secret, "immutable": False})
    assert invalid(body) == [("immutable", IMMUTABLE)]
    status, body = await raw.json("PUT", path, json={**secret, "type": "Other"})
    assert invalid(body) == [("type", 'Invalid value: "Other": field is immutable')]


# ---------------------------------------------------------------- containers need an image


async def test_a_container_without_image_is_invalid(raw: Raw) -> None:
    status, body = await raw.json(
        "POST",
        f"{NS}/pods",
        json={
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "c", "image": "x"}, {"name": "d", "image": ""}],
                "initContainers": [{"name": "i"}],
            },
        },
    )
    assert status == 422
    assert body["message"] == (
        'Pod "p" is invalid: [spec.containers[1].image: Required value, '
        "spec.initContainers[0].image: Required value]"
    )
    assert invalid(body) == [
        ("spec.containers[1].image", "Required value"),
        ("spec.initContainers[0].image", "Required value"),
    ]


@pytest.mark.parametrize(
    ("path", "kind", "body", "field"),
    [
        (
            f"{APPS}/deployments",
            "Deployment.apps",
            {"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": "TEMPLATE"}},
            "spec.template.spec.containers[0].image",
        ),
        (
            f"{APPS}/statefulsets",
            "StatefulSet.apps",
            {"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": "TEMPLATE"}},
            "spec.template.spec.containers[0].image",
        ),
        (
            "/apis/batch/v1/namespaces/default/cronjobs",
            "CronJob.batch",
            {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": "TEMPLATE"}}}},
            "spec.jobTemplate.spec.template.spec.containers[0].image",
        ),
    ],
)
async def test_a_pod_template_container_without_image_is_invalid(
    raw: Raw, path: str, kind: str, body: dict[str, Any], field: str
) -> None:
    template = {
        "metadata": {"labels": {"a": "b"}},
        "spec": {"restartPolicy": "OnFailure" if "cron" in path else "Always", "containers": [{"name": "c"}]},
    }
    spec = dict(body["spec"])
    if "jobTemplate" in spec:
        spec["jobTemplate"] = {"spec": {"template": template}}
    else:
        spec["template"] = template
    status, out = await raw.json("POST", path, json={"metadata": {"name": "x"}, "spec": spec})
    assert status == 422, out
    assert out["message"] == f'{kind} "x" is invalid: {field}: Required value'


# ---------------------------------------------------------------- /scale


def pod_template(labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


async def test_scale_reports_the_label_selector(raw: Raw) -> None:
    selector = {
        "matchLabels": {"a": "b"},
        "matchExpressions": [
            {"key": "k", "operator": "In", "values": ["v2", "v1"]},
            {"key": "e", "operator": "Exists"},
        ],
    }
    labels = {"a": "b", "k": "v1", "e": "z"}
    for plural in ("deployments", "replicasets", "statefulsets"):
        body = {"metadata": {"name": "w"}, "spec": {"selector": selector, "template": pod_template(labels)}}
        status, out = await raw.json("POST", f"{APPS}/{plural}", json=body)
        assert status == 201, out
        status, scale = await raw.json("GET", f"{APPS}/{plural}/w/scale")
        assert scale["status"]["selector"] == "a=b,e,k in (v1,v2)", plural
        status, scale = await raw.json(
            "PUT",
            f"{APPS}/{plural}/w/scale",
            json={
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {"name": "w"},
                "spec": {"replicas": 3},
            },
        )
        assert (status, scale["spec"]["replicas"], scale["status"]["selector"]) == (
            200,
            3,
            "a=b,e,k in (v1,v2)",
        )
    rc = {
        "metadata": {"name": "rc"},
        "spec": {"selector": {"z": "1", "a": "b"}, "template": pod_template({"a": "b", "z": "1"})},
    }
    status, out = await raw.json("POST", f"{NS}/replicationcontrollers", json=rc)
    assert status == 201, out
    status, scale = await raw.json("GET", f"{NS}/replicationcontrollers/rc/scale")
    assert scale["status"] == {"replicas": 0, "selector": "a=b,z=1"}


# ---------------------------------------------------------------- bootstrap objects

RBAC = "/apis/rbac.authorization.k8s.io/v1"
DEFAULTS = {"kubernetes.io/bootstrapping": "rbac-defaults"}


async def test_default_cluster_roles_and_bindings_are_readable(raw: Raw) -> None:
    status, admin = await raw.json("GET", f"{RBAC}/clusterroles/cluster-admin")
    assert status == 200, admin
    assert admin["metadata"]["labels"] == DEFAULTS
    assert admin["metadata"]["annotations"] == {"rbac.authorization.kubernetes.io/autoupdate": "true"}
    assert admin["rules"] == [
        {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
        {"verbs": ["*"], "nonResourceURLs": ["*"]},
    ]
    for name in ("admin", "edit", "view"):
        status, role = await raw.json("GET", f"{RBAC}/clusterroles/{name}")
        assert status == 200, role
        selector = role["aggregationRule"]["clusterRoleSelectors"][0]
        assert selector == {"matchLabels": {f"rbac.authorization.k8s.io/aggregate-to-{name}": "true"}}
        assert role["rules"], name  # filled by aggregation
    status, view = await raw.json("GET", f"{RBAC}/clusterroles/view")
    assert not any("secrets" in r.get("resources", []) for r in view["rules"])
    status, roles = await raw.json("GET", f"{RBAC}/clusterroles")
    names = {r["metadata"]["name"] for r in roles["items"]}
    assert {
        "system:aggregate-to-admin",
        "system:aggregate-to-edit",
        "system:aggregate-to-view",
        "system:basic-user",
        "system:discovery",
        "system:public-info-viewer",
        "system:monitoring",
        "system:auth-delegator",
    } <= names
    status, binding = await raw.json("GET", f"{RBAC}/clusterrolebindings/cluster-admin")
    assert binding["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:masters"}
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "cluster-admin",
    }
    for name in ("system:basic-user", "system:discovery", "system:public-info-viewer"):
        status, binding = await raw.json("GET", f"{RBAC}/clusterrolebindings/{name}")
        assert status == 200, binding
        assert binding["roleRef"]["name"] == name
    status, reader = await raw.json(
        "GET", f"{RBAC}/namespaces/kube-system/roles/extension-apiserver-authentication-reader"
    )
    assert reader["rules"][0]["resourceNames"] == ["extension-apiserver-authentication"]


async def test_the_bound_view_role_grants_reads_but_not_secrets(apiserver: ServerThread, raw: Raw) -> None:
    binding = {
        "metadata": {"name": "bob-view"},
        "subjects": [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "ClusterRole", "name": "view", "apiGroup": "rbac.authorization.k8s.io"},
    }
    status, out = await raw.json("POST", f"{RBAC}/namespaces/default/rolebindings", json=binding)
    assert status == 201, out
    kubeconfig = apiserver.add_user("bob")
    bob = Raw(apiserver, token=kubeconfig["users"][0]["user"]["token"])
    try:
        assert await bob.status("GET", f"{NS}/configmaps") == 200
        assert await bob.status("GET", f"{NS}/secrets") == 403
        assert await bob.status("POST", f"{NS}/configmaps", json={"metadata": {"name": "x"}}) == 403
    finally:
        await bob.close()


async def test_system_priority_classes_exist(raw: Raw) -> None:
    status, listed = await raw.json("GET", "/apis/scheduling.k8s.io/v1/priorityclasses")
    assert status == 200
    got = {
        pc["metadata"]["name"]: (pc["value"], pc["preemptionPolicy"], pc.get("globalDefault", False))
        for pc in listed["items"]
    }
    assert got == {
        "system-cluster-critical": (2000000000, "PreemptLowerPriority", False),
        "system-node-critical": (2000001000, "PreemptLowerPriority", False),
    }


# ---------------------------------------------------------------- health endpoints


async def text(raw: Raw, path: str) -> tuple[int, str, str]:
    async with raw.request("GET", path) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), (await resp.read()).decode()


@pytest.mark.parametrize("endpoint", ["readyz", "livez", "healthz"])
async def test_health_endpoints_list_their_checks_when_verbose(raw: Raw, endpoint: str) -> None:
    assert await text(raw, f"/{endpoint}") == (200, "text/plain; charset=utf-8", "ok")
    status, _, body = await text(raw, f"/{endpoint}?verbose")
    assert status == 200
    lines = body.splitlines()
    assert lines[:2] == ["[+]ping ok", "[+]log ok"]
    assert "[+]etcd ok" in lines
    assert "[+]poststarthook/rbac/bootstrap-roles ok" in lines
    assert lines[-1] == f"{endpoint} check passed"
    assert all(line.startswith("[+]") and line.endswith(" ok") for line in lines[:-1])
    assert ("[+]shutdown ok" in lines) == (endpoint == "readyz")
    status, _, body = await text(raw, f"/{endpoint}?verbose&exclude=etcd")
    assert "[+]etcd excluded: ok" in body.splitlines()


async def test_health_paths_need_credentials_without_anonymous_auth(apiserver: ServerThread) -> None:
    nobody = Raw(apiserver)
    nobody.session.headers.pop("Authorization")
    try:
        for path in ("/readyz", "/livez?verbose", "/healthz/ping", "/version"):
            status, body = await nobody.json("GET", path)
            assert (status, body["reason"]) == (401, "Unauthorized"), path
    finally:
        await nobody.close()


async def test_single_health_checks(raw: Raw) -> None:
    for path in (
        "/readyz/ping",
        "/readyz/etcd",
        "/livez/ping",
        "/healthz/log",
        "/readyz/poststarthook/rbac/bootstrap-roles",
    ):
        assert await text(raw, path) == (200, "text/plain; charset=utf-8", "ok"), path
    for path in ("/readyz/nope", "/livez/shutdown", "/healthz/nope"):
        status, _, body = await text(raw, path)
        assert (status, body) == (404, "404 page not found\n"), path


# ---------------------------------------------------------------- OpenAPI v3 and v2

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


def widget_crd(spec_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": spec_schema
                                or {"type": "object", "properties": {"size": {"type": "integer"}}}
                            },
                        }
                    },
                }
            ],
        },
    }


async def create_crd(raw: Raw, crd: dict[str, Any]) -> None:
    status, out = await raw.json("POST", CRDS, json=crd)
    assert status == 201, out

    async def served() -> bool:
        return await raw.status("GET", WIDGETS) == 200

    await eventually(served, message="the CRD's resource is served")


def refs(doc: Any, prefix: str) -> set[str]:
    return set(re.findall(re.escape(json.dumps(prefix)[1:-1]) + r'([^"]+)"', json.dumps(doc)))


def ref_of(prop: dict[str, Any]) -> str:
    """The schema a property refers to (directly, or through a one-element ``allOf``)."""
    return str(prop["allOf"][0]["$ref"] if "allOf" in prop else prop["$ref"])


async def test_openapi_v3_names_schemas_as_upstream(raw: Raw) -> None:
    status, doc = await raw.json("GET", "/openapi/v3/api/v1")
    assert status == 200
    assert doc["info"] == {"title": "Kubernetes", "version": "1.37"}
    schemas = doc["components"]["schemas"]
    cm = schemas["io.k8s.api.core.v1.ConfigMap"]
    assert cm["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "ConfigMap", "version": "v1"}]
    assert (
        ref_of(cm["properties"]["metadata"])
        == "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    )
    assert "io.k8s.api.core.v1.Container" in schemas
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.Status" in schemas
    assert not any(name.startswith("v1.") for name in schemas)
    assert refs(doc, "#/components/schemas/") <= set(schemas)  # no dangling reference
    get = doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["get"]
    assert get["operationId"] == "readCoreV1NamespacedConfigMap"
    status, apps = await raw.json("GET", "/openapi/v3/apis/apps/v1")
    assert "io.k8s.api.apps.v1.Deployment" in apps["components"]["schemas"]


async def test_openapi_v3_names_custom_resources_by_reversed_group(raw: Raw) -> None:
    await create_crd(raw, widget_crd())

    async def published() -> dict[str, Any]:
        status, doc = await raw.json("GET", "/openapi/v3/apis/example.com/v1")
        assert status == 200
        return dict(doc["components"]["schemas"])

    schemas = await eventually(published)
    widget = schemas["com.example.v1.Widget"]
    assert widget["x-kubernetes-group-version-kind"] == [
        {"group": "example.com", "kind": "Widget", "version": "v1"}
    ]
    assert ref_of(widget["properties"]["metadata"]) == (
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    )
    assert "com.example.v1.WidgetList" in schemas


async def test_openapi_v2_serves_the_swagger_document(raw: Raw) -> None:
    async with raw.request("GET", "/openapi/v2", headers={"Accept": "application/json"}) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "application/json"
        etag = resp.headers["ETag"]
        doc = json.loads(await resp.read())
    assert re.fullmatch(r'"[0-9A-F]{128}"', etag)
    assert doc["swagger"] == "2.0"
    assert doc["info"] == {"title": "Kubernetes", "version": "1.37"}
    definitions = doc["definitions"]
    cm = definitions["io.k8s.api.core.v1.ConfigMap"]
    assert cm["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "ConfigMap", "version": "v1"}]
    assert cm["properties"]["data"]["additionalProperties"] == {"type": "string"}
    assert "io.k8s.api.apps.v1.Deployment" in definitions
    assert refs(doc["paths"], "#/definitions/") <= set(definitions)
    get = doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["get"]
    assert get["operationId"] == "readCoreV1NamespacedConfigMap"
    assert get["responses"]["200"]["schema"] == {"$ref": "#/definitions/io.k8s.api.core.v1.ConfigMap"}
    assert get["x-kubernetes-group-version-kind"] == {"group": "", "kind": "ConfigMap", "version": "v1"}
    for accept in ("application/vnd.kubernetes.protobuf", "text/html"):
        async with raw.request("GET", "/openapi/v2", headers={"Accept": accept}) as resp:
            assert (resp.status, await resp.read()) == (406, b""), accept


async def test_openapi_v2_lists_custom_resources(raw: Raw) -> None:
    await create_crd(raw, widget_crd())

    async def published() -> dict[str, Any]:
        status, doc = await raw.json("GET", "/openapi/v2")
        assert status == 200
        assert "com.example.v1.Widget" in doc["definitions"]
        return dict(doc)

    doc = await eventually(published, timeout=30)
    widget = doc["definitions"]["com.example.v1.Widget"]
    assert widget["properties"]["spec"]["properties"]["size"]["type"] == "integer"
    assert "com.example.v1.WidgetList" in doc["definitions"]
    assert "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}" in doc["paths"]


# ---------------------------------------------------------------- /metrics


async def test_metrics_serve_request_counts_to_those_rbac_allows(apiserver: ServerThread, raw: Raw) -> None:
    status, _ = await raw.json("POST", f"{NS}/configmaps", json={"metadata": {"name": "counted"}})
    assert status == 201

    async def scrape(r: Raw) -> tuple[int, str, str]:
        async with r.request("GET", "/metrics") as resp:
            return resp.status, resp.headers.get("Content-Type", ""), (await resp.read()).decode()

    status, ctype, body = await scrape(raw)
    assert status == 200
    assert ctype.startswith("text/plain; version=0.0.4")
    lines = body.splitlines()
    assert "# TYPE apiserver_request_total counter" in lines
    assert "# TYPE apiserver_request_duration_seconds histogram" in lines
    assert "# TYPE apiserver_current_inflight_requests gauge" in lines
    created = re.compile(
        r'apiserver_request_total\{code="201",component="apiserver",dry_run="",group="",resource="configmaps",'
        r'scope="resource",subresource="",verb="POST",version="v1"\} (\d+)'
    )
    assert any(created.fullmatch(line) for line in lines), [x for x in lines if "configmaps" in x][:20]
    # RBAC: the path needs a grant (system:monitoring has one)
    denied = Raw(apiserver, token=apiserver.add_user("eve")["users"][0]["user"]["token"])
    monitor = Raw(
        apiserver, token=apiserver.add_user("mon", ["system:monitoring"])["users"][0]["user"]["token"]
    )
    try:
        status, body = await denied.json("GET", "/metrics")
        assert status == 403
        assert body["message"] == 'forbidden: User "eve" cannot get path "/metrics"'
        assert (await scrape(monitor))[0] == 200
    finally:
        await denied.close()
        await monitor.close()


# ---------------------------------------------------------------- CEL validation rules

RULES_SPEC: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.min <= self.max", "message": "min must be <= max"},
        {
            "rule": "self.name.startsWith('w-')",
            "messageExpression": "'name ' + self.name + ' must start with w-'",
        },
        {"rule": "size(self.tags) <= 2", "fieldPath": ".tags", "reason": "FieldValueForbidden"},
    ],
    "properties": {
        "min": {"type": "integer"},
        "max": {"type": "integer"},
        "name": {"type": "string"},
        "tags": {
            "type": "array",
            "items": {"type": "string"},
            "x-kubernetes-validations": [{"rule": "self.all(t, t.size() > 1)"}],
        },
        "fixed": {
            "type": "string",
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "is immutable"}],
        },
        "mode": {
            "type": "string",
            "x-kubernetes-validations": [
                {"rule": "self in ['a', 'b'] ? true : self.matches('^x-[0-9]+$')", "message": "bad mode"}
            ],
        },
        "replicas": {
            "type": "integer",
            "x-kubernetes-validations": [
                {"rule": "self % 2 == 1 && self * 2 < 100", "message": "odd, below 50"}
            ],
        },
        "labels": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(k, k.lowerAscii() == k) && !self.exists(k, self[k] == '')",
                    "message": "keys",
                }
            ],
        },
    },
}


def widget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


GOOD = {"min": 1, "max": 2, "name": "w-a", "tags": ["ab"], "fixed": "x"}


async def test_cel_rules_refuse_invalid_custom_resources_as_upstream(raw: Raw) -> None:
    await create_crd(raw, widget_crd(RULES_SPEC))
    status, body = await raw.json("POST", WIDGETS, json=widget("w1", GOOD))
    assert status == 201, body
    status, body = await raw.json(
        "POST", WIDGETS, json=widget("w2", {"min": 3, "max": 2, "name": "x", "tags": ["ab", "cd", "ef"]})
    )
    assert status == 422
    assert body["message"] == (
        'Widget.example.com "w2" is invalid: [spec: Invalid value: min must be <= max, spec: Invalid value: '
        "name x must start with w-, spec.tags: Forbidden: failed rule: size(self.tags) <= 2]"
    )
    assert [c["reason"] for c in body["details"]["causes"]] == [
        "FieldValueInvalid",
        "FieldValueInvalid",
        "FieldValueForbidden",
    ]
    status, body = await raw.json("POST", WIDGETS, json=widget("w3", {**GOOD, "tags": ["a"]}))
    assert invalid(body) == [("spec.tags", "Invalid value: failed rule: self.all(t, t.size() > 1)")]
    status, body = await raw.json("POST", WIDGETS, json=widget("w4", {"name": "w-"}))
    assert invalid(body) == [
        ("spec", 'Invalid value: "object": no such key: min evaluating rule: min must be <= max'),
        ("spec", 'Invalid value: "object": no such key: tags evaluating rule: size(self.tags) <= 2'),
    ]
    for field, good, bad, message in [
        ("mode", "b", "c", 'Invalid value: "c": bad mode'),
        ("mode", "x-12", "x-", 'Invalid value: "x-": bad mode'),
        ("replicas", 7, 8, "Invalid value: 8: odd, below 50"),
        ("replicas", 49, 51, "Invalid value: 51: odd, below 50"),
        ("labels", {"a": "1"}, {"A": "1"}, "Invalid value: keys"),
        ("labels", {"a": "1"}, {"a": ""}, "Invalid value: keys"),
    ]:
        status, body = await raw.json("POST", WIDGETS, json=widget("ok", {**GOOD, field: good}))
        assert status == 201, (field, good, body)
        await raw.json("DELETE", f"{WIDGETS}/ok")
        status, body = await raw.json("POST", WIDGETS, json=widget("bad", {**GOOD, field: bad}))
        assert (status, invalid(body)) == (422, [(f"spec.{field}", message)]), (field, bad)


NOT_CHECKED = (
    "Invalid value: null: some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)


async def test_schema_errors_that_block_rules_are_named_and_strings_fail_once(raw: Raw) -> None:
    spec = {**RULES_SPEC, "properties": {**RULES_SPEC["properties"]}}
    spec["properties"]["name"] = {"type": "string", "maxLength": 4, "pattern": "^[a-z-]+$"}
    spec["properties"]["kind"] = {"type": "string", "enum": ["a", "b"]}
    await create_crd(raw, widget_crd(spec))
    # a string too long for maxLength is not also matched against its pattern; a blocking error
    # (too long, unsupported, required, wrong type) stops the rules with one cause saying so
    for name, extra, first in [
        ("long", {"name": "w-ABCDEF"}, ("spec.name", "Too long: may not be more than 4 bytes")),
        ("enum", {"kind": "c"}, ("spec.kind", 'Unsupported value: "c": supported values: "a", "b"')),
        (
            "type",
            {"min": "one"},
            ("spec.min", 'Invalid value: "string": spec.min in body must be of type integer: "string"'),
        ),
    ]:
        status, body = await raw.json("POST", WIDGETS, json=widget(name, {**GOOD, "min": 5, **extra}))
        assert status == 422, body
        assert invalid(body) == [first, ("<nil>", NOT_CHECKED)], name
    # a pattern failure alone does not block: the rules run and report too
    status, body = await raw.json("POST", WIDGETS, json=widget("pat", {**GOOD, "min": 5, "name": "w-A"}))
    assert invalid(body) == [
        ("spec.name", "Invalid value: \"w-A\": spec.name in body should match '^[a-z-]+$'"),
        ("spec", "Invalid value: min must be <= max"),
    ]


async def test_cel_transition_rules_compare_with_the_stored_object(raw: Raw) -> None:
    await create_crd(raw, widget_crd(RULES_SPEC))
    status, current = await raw.json("POST", WIDGETS, json=widget("w", GOOD))
    assert status == 201, current
    current["spec"]["fixed"] = "y"
    status, body = await raw.json("PUT", f"{WIDGETS}/w", json=current)
    assert status == 422
    assert (
        body["message"] == 'Widget.example.com "w" is invalid: spec.fixed: Invalid value: "y": is immutable'
    )
    status, body = await raw.json("PATCH", f"{WIDGETS}/w", json={"spec": {"max": 5}}, headers=MERGE)
    assert (status, body["spec"]["max"]) == (200, 5)  # oldSelf == self for the untouched field


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        (
            "self.nope(",
            "compilation failed: ERROR: <input>:1:11: Syntax error: mismatched input '<EOF>' expecting "
            "{'[', '{', '(', ')', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, "
            "STRING, BYTES, IDENTIFIER}\n | self.nope(\n | ..........^",
        ),
        (
            "self.unknownField > 1",
            "compilation failed: ERROR: <input>:1:5: undefined field 'unknownField'\n"
            " | self.unknownField > 1\n | ....^",
        ),
        (
            "self.min + 'a'",
            "compilation failed: ERROR: <input>:1:10: found no matching overload for '_+_' applied to "
            "'(int, string)'\n | self.min + 'a'\n | .........^",
        ),
        ("1 + 1", "cel expression must evaluate to a bool"),
    ],
)
async def test_a_crd_with_an_invalid_rule_is_refused(raw: Raw, rule: str, error: str) -> None:
    spec = json.loads(json.dumps(RULES_SPEC))
    spec["x-kubernetes-validations"] = [{"rule": rule}]
    status, body = await raw.json("POST", CRDS, json=widget_crd(spec))
    assert status == 422
    field = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    rule_json = json.dumps(
        {
            "Rule": rule,
            "Message": "",
            "MessageExpression": "",
            "Reason": None,
            "FieldPath": "",
            "OptionalOldSelf": None,
        },
        separators=(",", ":"),
    ).replace(">", "\\u003e")
    assert invalid(body) == [(field, f"Invalid value: {rule_json}: {error}")]


@pytest.mark.envtest_only("the warning about rules it cannot evaluate is mcr-envtest's own")
async def test_a_rule_mcr_envtest_cannot_evaluate_is_reported_when_the_crd_is_written(raw: Raw) -> None:
    spec = json.loads(json.dumps(RULES_SPEC))
    spec["properties"]["size"] = {
        "type": "string",
        "x-kubernetes-validations": [{"rule": "quantity(self).isGreaterThan(quantity('1'))"}],
    }
    async with raw.request("POST", CRDS, json=widget_crd(spec)) as resp:
        assert resp.status == 201
        warnings = resp.headers.getall("Warning", [])
    where = "spec.validation.openAPIV3Schema.properties[spec].properties[size].x-kubernetes-validations[0]"
    assert warnings == [
        f"299 - \"{where}: function 'quantity' is not supported by mcr-envtest; the rule is not enforced\""
    ]


# ---------------------------------------------------------------- protobuf responses

PROTOBUF = "application/vnd.kubernetes.protobuf"


async def fetch(raw: Raw, path: str, accept: str) -> tuple[int, str, bytes]:
    async with raw.request("GET", path, headers={"Accept": accept}) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.read()


async def test_built_in_kinds_are_served_as_protobuf(raw: Raw) -> None:
    from mcr_envtest.schema.protobuf import decode_protobuf

    cm = {
        "metadata": {"name": "c", "labels": {"b": "2", "a": "1"}},
        "data": {"x": "y"},
        "binaryData": {"z": "AAE="},
    }
    status, _ = await raw.json("POST", f"{NS}/configmaps", json=cm)
    assert status == 201
    deployment = {
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": pod_template({"a": "b"})},
    }
    status, _ = await raw.json("POST", f"{APPS}/deployments", json=deployment)
    assert status == 201

    def without_nulls(value: Any) -> Any:  # Go writes a zero time as null in JSON, not at all in protobuf
        if isinstance(value, dict):
            return {k: without_nulls(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [without_nulls(v) for v in value]
        return value

    for path in (
        f"{NS}/configmaps/c",
        f"{NS}/configmaps",
        f"{NS}/services/kubernetes",
        f"{APPS}/deployments/d",
    ):
        status, as_json = await raw.json("GET", path)
        status, ctype, body = await fetch(raw, path, PROTOBUF)
        assert (status, ctype) == (200, PROTOBUF), path
        assert body.startswith(b"k8s\x00")
        decoded = without_nulls(decode_protobuf(body))
        if "deployments" in path:  # the deployment controller may write status in between
            assert decoded["spec"] == without_nulls(as_json["spec"])
        elif "items" in as_json:  # a list: its resourceVersion may move in between
            items = [
                {k: v for k, v in i.items() if k not in ("apiVersion", "kind")} for i in as_json["items"]
            ]
            assert decoded["items"] == without_nulls(items), path
        else:
            assert decoded == without_nulls(as_json), path
    # JSON still wins where the client prefers it
    status, ctype, _ = await fetch(raw, f"{NS}/configmaps/c", f"application/json, {PROTOBUF}")
    assert (status, ctype) == (200, "application/json")
    # errors come as protobuf Status objects
    status, ctype, body = await fetch(raw, f"{NS}/configmaps/nope", PROTOBUF)
    assert (status, ctype) == (404, PROTOBUF)
    assert body.startswith(b"k8s\x00\n\x0c\n\x02v1\x12\x06Status")
    assert b'configmaps "nope" not found' in body


async def test_custom_resources_refuse_protobuf_as_upstream(raw: Raw) -> None:
    await create_crd(raw, widget_crd())
    status, _ = await raw.json("POST", WIDGETS, json=widget("w", {"size": 1}))
    assert status == 201
    message = (
        b"only the following media types are accepted: application/json, application/yaml, "
        b"application/vnd.kubernetes.protobuf"
    )
    expected = (
        b"k8s\x00\n\x0c\n\x02v1\x12\x06Status\x12\x99\x01\n\x06\n\x00\x12\x00\x1a\x00\x12\x07Failure\x1at"
        + message
        + b'"\rNotAcceptable0\x96\x03\x1a\x00"\x00'
    )
    for path in (f"{WIDGETS}/w", WIDGETS):
        assert await fetch(raw, path, PROTOBUF) == (406, PROTOBUF, expected), path
        status, ctype, _ = await fetch(raw, path, f"{PROTOBUF}, application/json")
        assert (status, ctype) == (200, "application/json"), path


async def test_watches_of_built_in_kinds_stream_protobuf_frames(raw: Raw) -> None:
    from mcr_envtest.schema.protobuf import decode_protobuf

    status, _ = await raw.json(
        "POST", f"{NS}/configmaps", json={"metadata": {"name": "a"}, "data": {"k": "v"}}
    )
    assert status == 201
    path = f"{NS}/configmaps?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Da"
    async with raw.request("GET", path, headers={"Accept": PROTOBUF}) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == f"{PROTOBUF};stream=watch"
        data = await resp.read()
    size = int.from_bytes(data[:4], "big")
    frame = data[4 : 4 + size]
    assert frame.startswith(b"\n\x05ADDED\x12")  # WatchEvent: type, then object (RawExtension)
    envelope = frame[frame.index(b"k8s\x00") :]
    obj = decode_protobuf(envelope)
    assert (obj["kind"], obj["metadata"]["name"], obj["data"]) == ("ConfigMap", "a", {"k": "v"})


async def test_openapi_v3_caching_headers_and_negotiation(raw: Raw) -> None:
    async with raw.request("GET", "/openapi/v3") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "text/plain; charset=utf-8"  # JSON, labelled as upstream does
        index = json.loads(await resp.read())
    url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
    digest = url.split("hash=", 1)[1]
    async with raw.request("GET", url) as resp:
        assert resp.status == 200
        assert resp.headers["ETag"] == f'"{digest}"'
        assert resp.headers["Cache-Control"] == "public, immutable"
        assert resp.headers["Vary"] == "Accept"
    async with raw.request("GET", "/openapi/v3/apis/apps/v1") as resp:
        assert (resp.headers["Cache-Control"], resp.headers["ETag"]) == ("no-cache, private", f'"{digest}"')
    async with raw.request(
        "GET", "/openapi/v3/apis/apps/v1", headers={"If-None-Match": f'"{digest}"'}
    ) as resp:
        assert resp.status == 304
    async with raw.request("GET", "/openapi/v3/apis/apps/v1", headers={"Accept": "text/html"}) as resp:
        assert (resp.status, await resp.read()) == (406, b"")


async def test_fields_v1_lists_fields_in_upstream_order(raw: Raw) -> None:
    body = {"metadata": {"name": "c", "labels": {"z": "1", "a": "2"}}, "data": {"y": "1", "b": "2"}}
    status, cm = await raw.json("POST", f"{NS}/configmaps", json=body)
    assert status == 201
    fields = cm["metadata"]["managedFields"][0]["fieldsV1"]
    assert list(fields) == ["f:data", "f:metadata"]
    assert [k for k in fields["f:data"] if k != "."] == ["f:b", "f:y"]
    assert [k for k in fields["f:metadata"]["f:labels"] if k != "."] == ["f:a", "f:z"]
