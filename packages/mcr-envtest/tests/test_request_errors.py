"""Refusals of malformed requests worded and shaped as kube-apiserver's: request options,
bodies kube-apiserver cannot decode into its Go types, patches, impersonation and access
reviews; unknown fields of built-in objects dropped with a warning (both lanes)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .conftest import Raw, crd_served, fresh_namespace


@pytest.fixture
async def ns(raw: Raw) -> AsyncIterator[str]:
    async for name in fresh_namespace(raw, "re"):
        yield name


def options_invalid(kind: str, field: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{kind}.meta.k8s.io "" is invalid: {field}: {message}',
        "reason": "Invalid",
        "details": {
            "group": "meta.k8s.io",
            "kind": kind,
            "causes": [{"reason": reason, "message": message, "field": field}],
        },
        "code": 422,
    }


async def test_invalid_options_name_their_options_kind(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    status, body = await raw.json("GET", path, params={"resourceVersionMatch": "NotOlderThan"})
    assert status == 422
    message = "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
    assert body == options_invalid("ListOptions", "resourceVersionMatch", "FieldValueForbidden", message)

    query = {"watch": "1", "sendInitialEvents": "true", "allowWatchBookmarks": "true"}
    status, body = await raw.json("GET", path, params=query)
    assert status == 422
    message = "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    assert body == options_invalid("ListOptions", "resourceVersionMatch", "FieldValueForbidden", message)

    status, body = await raw.json(
        "POST", path, params={"fieldValidation": "Maybe"}, json={"metadata": {"name": "m"}}
    )
    assert status == 422
    message = 'Unsupported value: "Maybe": supported values: "", "Ignore", "Strict", "Warn"'
    assert body == options_invalid("CreateOptions", "fieldValidation", "FieldValueNotSupported", message)

    assert await raw.status("POST", path, json={"metadata": {"name": "victim"}}) == 201
    status, body = await raw.json("DELETE", f"{path}/victim", params={"propagationPolicy": "Sideways"})
    assert status == 422
    message = 'Unsupported value: "Sideways": supported values: "Foreground", "Background", "Orphan", "nil"'
    assert body == options_invalid("DeleteOptions", "propagationPolicy", "FieldValueNotSupported", message)

    status, body = await raw.json("DELETE", f"{path}/victim", json={"kind": "Pod", "apiVersion": "v1"})
    assert (status, body["message"]) == (
        400,
        'no kind "Pod" is registered for version "v1" in scheme "pkg/runtime/scheme.go:111"',
    )


async def test_initial_events_without_bookmarks_end_without_one(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    assert await raw.status("POST", path, json={"metadata": {"name": "w", "labels": {"w": "1"}}}) == 201
    query = {
        "watch": "1",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "labelSelector": "w",
        "timeoutSeconds": "1",
    }
    async with raw.request("GET", path, params=query) as resp:
        assert resp.status == 200
        events = [json.loads(line) for line in (await resp.read()).splitlines() if line.strip()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "w")]


async def test_bodies_that_do_not_decode_into_go_types(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    prefix = 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
    status, body = await raw.json("POST", path, json={"metadata": {"name": "t"}, "data": {"a": 1}})
    assert (status, body["reason"]) == (400, "BadRequest"), body
    assert (
        body["message"]
        == prefix + "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
    )
    status, body = await raw.json("POST", path, json={"metadata": {"name": "t", "labels": ["a"]}})
    assert (status, body["message"]) == (
        400,
        prefix + "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type "
        "map[string]string",
    )
    status, body = await raw.json(
        "POST",
        path,
        params={"fieldValidation": "Strict", "dryRun": "All"},
        data=b'{"metadata": {"name": "d"}, "data": {"a": "1"}, "data": {"b": "2"}}',
        headers={"Content-Type": "application/json"},
    )
    assert (status, body["message"]) == (400, prefix + 'strict decoding error: duplicate field "data"')

    status, body = await raw.json(
        "POST", path, json={"metadata": {"name": "ia", "annotations": {"/bad": "x"}}}
    )
    assert status == 422
    assert body["details"]["causes"][0]["message"] == 'Invalid value: "/bad": prefix part must be non-empty'


async def test_unknown_fields_are_dropped_with_a_warning(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    sent = {"metadata": {"name": "u"}, "bogus": True, "data": {"a": "1"}, "spec": {"x": 1}}
    async with raw.request("POST", path, json=sent) as resp:
        assert resp.status == 201
        warnings = resp.headers.getall("Warning", [])
        body = await resp.json()
    assert warnings == ['299 - "unknown field \\"bogus\\""', '299 - "unknown field \\"spec\\""']
    assert "bogus" not in body
    assert "spec" not in body
    assert body["data"] == {"a": "1"}
    async with raw.request(
        "POST", path, params={"fieldValidation": "Ignore"}, json={**sent, "metadata": {"name": "i"}}
    ) as resp:
        assert resp.status == 201
        assert resp.headers.getall("Warning", []) == []
        assert "bogus" not in await resp.json()


async def test_patch_impersonation_and_review_refusals(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    assert await raw.status("POST", path, json={"metadata": {"name": "p"}}) == 201
    status, body = await raw.json(
        "PATCH", f"{path}/p", data=b"{not json", headers={"Content-Type": "application/merge-patch+json"}
    )
    assert (status, body["message"]) == (400, "invalid JSON patch")
    status, body = await raw.json(
        "PATCH", f"{path}/p", json={"op": "add"}, headers={"Content-Type": "application/json-patch+json"}
    )
    assert (status, body["message"]) == (
        400,
        "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
    )

    status, body = await raw.json("GET", path, headers={"Impersonate-Group": "devs"})
    assert (status, body["message"]) == (
        400,
        'requested &user.DefaultInfo{Name:"", UID:"", Groups:[]string{"devs"}, '
        "Extra:map[string][]string(nil)} without impersonating a user name",
    )

    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}}
    status, body = await raw.json(
        "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review
    )
    message = (
        "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
    )
    assert status == 422
    assert body["message"] == f'.authorization.k8s.io "" is invalid: spec: {message}'
    assert body["details"] == {
        "group": "authorization.k8s.io",
        "causes": [{"reason": "FieldValueInvalid", "message": message, "field": "spec"}],
    }


async def test_deprecated_custom_resource_version_warns(raw: Raw) -> None:
    group = f"dep{uuid.uuid4().hex[:6]}.example.com"
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gizmos.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [
                {"name": "v1alpha1", "served": True, "storage": False, "deprecated": True, "schema": schema},
                {"name": "v1beta1", "served": True, "storage": False, "deprecated": True, "schema": schema},
                {"name": "v1", "served": True, "storage": True, "schema": schema},
            ],
        },
    }
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert await raw.status("POST", crds, json=crd) == 201
    try:
        await crd_served(raw, crd)
        async with raw.request("GET", f"/apis/{group}/v1alpha1/gizmos") as resp:
            assert resp.status == 200
            assert resp.headers.getall("Warning", []) == [
                f'299 - "{group}/v1alpha1 Gizmo is deprecated; use {group}/v1 Gizmo"'
            ]
        async with raw.request("GET", f"/apis/{group}/v1/gizmos") as resp:
            assert resp.status == 200
            assert resp.headers.getall("Warning", []) == []
    finally:
        await raw.status("DELETE", f"{crds}/gizmos.{group}")


async def test_refusals_worded_as_upstream(raw: Raw, ns: str) -> None:
    deployments = f"/apis/apps/v1/namespaces/{ns}/deployments"
    template = {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    deployment = {
        "metadata": {"name": "w"},
        "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": template},
    }
    assert await raw.status("POST", deployments, json=deployment) == 201
    status, body = await raw.json(
        "PATCH",
        f"{deployments}/w/scale",
        json={"spec": {"replicas": -3}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 422
    message = "Invalid value: -3: must be greater than or equal to 0"
    assert body["message"] == f'Scale.autoscaling "w" is invalid: spec.replicas: {message}'
    assert (body["details"]["group"], body["details"]["kind"]) == ("autoscaling", "Scale")

    accounts = f"/api/v1/namespaces/{ns}/serviceaccounts"
    status, body = await raw.json("POST", accounts, json={"metadata": {"name": "robot"}})
    assert status == 201, body
    status, body = await raw.json("POST", f"{accounts}/robot/token", json={"spec": {"expirationSeconds": 60}})
    assert status == 422
    assert body["message"].startswith(
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds'
    )
    assert "name" not in body["details"]

    event = {
        "metadata": {"name": "ev"},
        "reason": "R",
        "action": "A",
        "type": "Normal",
        "reportingController": "c",
        "reportingInstance": "i",
        "regarding": {"kind": "Pod", "name": "web", "namespace": ns},
    }
    status, body = await raw.json("POST", f"/apis/events.k8s.io/v1/namespaces/{ns}/events", json=event)
    assert (status, body["message"]) == (422, 'Event "ev" is invalid: eventTime: Required value')
    assert "group" not in body["details"]

    configmaps = f"/api/v1/namespaces/{ns}/configmaps"
    held = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    assert await raw.status("POST", configmaps, json=held) == 201
    assert await raw.status("DELETE", f"{configmaps}/held") == 200
    more = {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}
    status, body = await raw.json(
        "PATCH", f"{configmaps}/held", json=more, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert status == 422
    assert body["details"]["causes"][0]["message"].endswith(
        'found new finalizers []string{"example.com/more"}'
    )
    await raw.json(
        "PATCH",
        f"{configmaps}/held",
        json={"metadata": {"finalizers": None}},
        headers={"Content-Type": "application/merge-patch+json"},
    )

    long_name = "n" + "1" * 63
    status, body = await raw.json("POST", "/api/v1/namespaces", json={"metadata": {"name": long_name}})
    assert status == 422
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        ("metadata.name", f'Invalid value: "{long_name}": must be no more than 63 characters'),
        ("metadata.labels", f'Invalid value: "{long_name}": must be no more than 63 bytes'),
    ]

    backend = {"service": {"name": "web", "port": {"number": 80}}}
    ingress = {
        "metadata": {"name": "nopt"},
        "spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": backend}]}}]},
    }
    status, body = await raw.json(
        "POST", f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses", json=ingress
    )
    assert status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: pathType must be specified",
            "field": "spec.rules[0].http.paths[0].pathType",
        }
    ]

    status, body = await raw.json("GET", "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps")
    assert status == 200, body
    assert (body["spec"]["groupPriorityMinimum"], body["spec"]["versionPriority"]) == (17800, 15)


async def test_access_review_answer_records_its_writer(raw: Raw) -> None:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "*", "group": "*", "resource": "*"}},
    }
    status, body = await raw.json(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        params={"fieldManager": "probe"},
        json=review,
    )
    assert status == 201, body
    assert body["status"] == {"allowed": True}  # an admin in system:masters: no reason given
    assert "creationTimestamp" not in body["metadata"]
    (entry,) = body["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == (
        "probe",
        "Update",
        "authorization.k8s.io/v1",
    )
    assert "f:resourceAttributes" in entry["fieldsV1"]["f:spec"]


@pytest.mark.parametrize("kind", ["SubjectAccessReview", "SelfSubjectAccessReview"])
async def test_access_review_with_metadata_is_refused(raw: Raw, kind: str) -> None:
    spec: dict[str, Any] = {"resourceAttributes": {"verb": "get", "resource": "pods"}}
    if kind == "SubjectAccessReview":
        spec["user"] = "someone"
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": kind, "metadata": {"name": "x"}, "spec": spec}
    status, body = await raw.json("POST", f"/apis/authorization.k8s.io/v1/{kind.lower()}s", json=review)
    assert (status, body["reason"]) == (422, "Invalid"), body
    assert body["message"].startswith(
        '.authorization.k8s.io "" is invalid: metadata: Invalid value: {"name":"x"'
    )
    assert body["message"].endswith(": must be empty")
    assert [(c["reason"], c["field"]) for c in body["details"]["causes"]] == [
        ("FieldValueInvalid", "metadata")
    ]


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("ab=c", "illegal base64 data at input byte 2"),
        ("abcde", "illegal base64 data at input byte 4"),
        ("abc", "invalid character 'i' looking for beginning of value"),
        ("not-a-token", "invalid character '\\u009e' looking for beginning of value"),
        ("eyJ2IjoieCJ9", "server does not recognize this encoded version x"),
        ("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NX0", "encoded start key empty (version meta.k8s.io/v1)"),
    ],
)
async def test_malformed_continue_tokens(raw: Raw, ns: str, token: str, why: str) -> None:
    status, body = await raw.json("GET", f"/api/v1/namespaces/{ns}/configmaps?limit=1&continue={token}")
    assert (status, body["reason"]) == (400, "BadRequest"), body
    assert body["message"] == f"invalid continue token: continue key is not valid: {why}"


_KEY_RULE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
    "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("tier in front", "unable to parse requirement: found 'front' expected: '('"),
        ("tier=a b", "found 'b', expected: ',' or 'end of string'"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a!!b", "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt"),
        ("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'"),
        ("a===b", "unable to parse requirement: found '=', expected: identifier"),
        ("a,", "found '', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("-bad=x", f'unable to parse requirement: <nil>: Invalid value: "-bad": {_KEY_RULE}'),
        (
            "x/=b",
            'unable to parse requirement: <nil>: Invalid value: "x/": name part must be non-empty; '
            f"{_KEY_RULE}",
        ),
        ("a=-x-", f'unable to parse requirement: values[0][a]: Invalid value: "-x-": {_VALUE_RULE}'),
        (
            "a>-x",
            "unable to parse requirement: [values[0]: Invalid value: \"-x\": for 'Gt', 'Lt' operators, "
            f'the value must be an integer, values[0][a]: Invalid value: "-x": {_VALUE_RULE}]',
        ),
    ],
)
async def test_malformed_label_selectors(raw: Raw, ns: str, selector: str, message: str) -> None:
    status, body = await raw.json(
        "GET", f"/api/v1/namespaces/{ns}/configmaps", params={"labelSelector": selector}
    )
    assert (status, body["reason"], body["message"]) == (400, "BadRequest", message)


async def test_label_selectors_upstream_accepts_select_as_upstream(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for name, labels in (("l1", {"a": "x", "n": "5"}), ("l2", {"a": "", "n": "x"}), ("l3", {})):
        status, body = await raw.json(
            "POST", path, json={"metadata": {"name": name, "labels": {"t": "y", **labels}}}
        )
        assert status == 201, body
    for selector, names in (
        ("t,a in ()", ["l2"]),
        ("t,a notin (x,,)", ["l3"]),
        ("t,a in (x,)", ["l1", "l2"]),
        ("t,n>4", ["l1"]),
        ("t,n<6,a", ["l1"]),
        ("t,!a", ["l3"]),
        ("t,a!=x", ["l2", "l3"]),
    ):
        status, body = await raw.json("GET", path, params={"labelSelector": selector})
        assert status == 200, (selector, body)
        assert [i["metadata"]["name"] for i in body["items"]] == names, selector


@pytest.mark.parametrize(
    ("resource", "selector", "message"),
    [
        (
            "api/v1/namespaces/{ns}/configmaps",
            "data.x=1",
            '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        (
            "api/v1/namespaces/{ns}/configmaps",
            "metadata.name = x",
            '"metadata.name " is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        (
            "api/v1/namespaces/{ns}/configmaps",
            "metadata.name",
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
        ),
        (
            "apis/apps/v1/namespaces/{ns}/replicasets",
            "status.replicas=1",
            '"status.replicas" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        ("apis/batch/v1/namespaces/{ns}/jobs", "spec.x=1", 'field label "spec.x" not supported for Job'),
        ("api/v1/namespaces/{ns}/services", "spec.x=1", "field label not supported: spec.x"),
        ("api/v1/namespaces/{ns}/secrets", "data.x=1", "field label not supported: data.x"),
        (
            "apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "spec.x=1",
            '"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
    ],
)
async def test_unsupported_field_selectors(
    raw: Raw, ns: str, resource: str, selector: str, message: str
) -> None:
    path = "/" + resource.format(ns=ns)
    status, body = await raw.json("GET", path, params={"fieldSelector": selector})
    assert (status, body["reason"], body["message"]) == (400, "BadRequest", message)


@pytest.mark.parametrize(
    ("body", "fault", "quoted"),
    [
        (b"{not json", "invalid character 'n' looking for beginning of object key string", "{not json"),
        (b'{"metadata": ', "unexpected end of JSON input", '{"metadata": '),
        (b'{"a" 1}', "invalid character '1' after object key", '{"a" 1}'),
        (
            b'{"data": {"a": tru}}',
            "invalid character '}' in literal true (expecting 'e')",
            '{"data": {"a": tru}}',
        ),
        (b"{} x", "invalid character 'x' after top-level value", "{} x"),
    ],
)
async def test_malformed_json_bodies(raw: Raw, ns: str, body: bytes, fault: str, quoted: str) -> None:
    status, out = await raw.json(
        "POST", f"/api/v1/namespaces/{ns}/configmaps", data=body, headers={"Content-Type": "application/json"}
    )
    assert (status, out["reason"]) == (400, "BadRequest"), out
    assert out["message"] == (
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; "
        f"json parse error: {fault} ({quoted})"
    )


@pytest.mark.parametrize(
    ("api_version", "kind", "message"),
    [
        ("v1", "Secret", "invalid object type: /v1, Kind=Secret"),
        ("apps/v1", "Deployment", "invalid object type: apps/v1, Kind=Deployment"),
    ],
)
async def test_apply_of_another_kind_is_refused(
    raw: Raw, ns: str, api_version: str, kind: str, message: str
) -> None:
    body = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}
    status, out = await raw.json(
        "PATCH",
        f"/api/v1/namespaces/{ns}/configmaps/x",
        data=json.dumps(body),
        params={"fieldManager": "m"},
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert (status, out["reason"], out["message"]) == (400, "BadRequest", message)


async def test_access_review_names_the_default_binding_that_grants(raw: Raw) -> None:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}},
    }
    headers = {"Impersonate-User": "alice", "Impersonate-Group": "system:authenticated"}
    status, out = await raw.json(
        "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review, headers=headers
    )
    assert status == 201, out
    assert out["status"]["allowed"] is True
    # both default bindings grant /healthz; kube-apiserver names whichever its cache yields first
    to = 'to Group "system:authenticated"'
    assert out["status"]["reason"] in {
        f'RBAC: allowed by ClusterRoleBinding "{name}" of ClusterRole "{name}" {to}'
        for name in ("system:discovery", "system:public-info-viewer")
    }
