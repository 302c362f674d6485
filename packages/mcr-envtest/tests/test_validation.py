"""Validation: names, required fields (F32), types, CR schemas and metadata rules (F11)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, config

from mcr_envtest import ServerThread
from mcr_envtest.resources import Registry, ResourceInfo
from mcr_envtest.validation import unknown_fields, validate_name, validate_object

REG = Registry()


def info(group: str, kind: str) -> ResourceInfo:
    found = REG.by_kind(group, "v1", kind)
    assert found is not None
    return found


def fields(causes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(c["type"], c["field"]) for c in causes]


@pytest.mark.parametrize(
    ("group", "kind", "obj", "missing"),
    [
        ("", "Pod", {"spec": {}}, "spec.containers"),
        ("apps", "Deployment", {"spec": {"template": {}}}, "spec.selector"),
        ("", "Event", {}, "involvedObject"),
        ("events.k8s.io", "Event", {}, "eventTime"),
        ("", "Pod", {"spec": {"containers": [{"image": "x"}]}}, "spec.containers[0].name"),
        ("", "Service", {"spec": {"ports": [{"name": "http"}]}}, "spec.ports[0].port"),
    ],
)
def test_required_fields_of_builtins(group: str, kind: str, obj: dict[str, Any], missing: str) -> None:
    causes = validate_object(info(group, kind), {"metadata": {"name": "x"}, **obj}, old=None, registry=REG)
    assert ("FieldValueRequired", missing) in fields(causes)
    assert all(c["reason"] == c["type"] for c in causes)


def test_valid_objects_pass() -> None:
    pod = {
        "metadata": {"name": "p", "labels": {"app.kubernetes.io/name": "web"}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "nginx",
                    "ports": [{"containerPort": 80}],
                    "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
                }
            ]
        },
    }
    assert validate_object(info("", "Pod"), pod, old=None, registry=REG) == []
    svc = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "targetPort": "http"}]}}
    assert validate_object(info("", "Service"), svc, old=None, registry=REG) == []


def test_wrong_types_are_invalid() -> None:
    causes = validate_object(
        info("apps", "Deployment"),
        {"metadata": {"name": "d"}, "spec": {"replicas": "3", "selector": {}, "template": {}}},
        old=None,
        registry=REG,
    )
    assert fields(causes) == [("FieldValueTypeInvalid", "spec.replicas")]


@pytest.mark.parametrize(
    ("group", "kind", "name", "ok"),
    [
        ("", "ConfigMap", "a.b-c", True),
        ("", "ConfigMap", "Bad", False),
        ("", "ConfigMap", "a" * 254, False),
        ("", "Namespace", "a.b", False),
        ("", "Namespace", "team-a", True),
        ("", "Service", "1abc", False),
        ("", "Service", "abc1", True),
        ("rbac.authorization.k8s.io", "ClusterRole", "system:controller:x", True),
        ("rbac.authorization.k8s.io", "Role", "a/b", False),
        ("rbac.authorization.k8s.io", "Role", "..", False),
    ],
)
def test_names(group: str, kind: str, name: str, ok: bool) -> None:
    causes = validate_name(info(group, kind), name)
    assert (causes == []) is ok
    assert all(c["field"] == "metadata.name" for c in causes)


def test_metadata_rules_on_update() -> None:
    cm = info("", "ConfigMap")
    old = {
        "metadata": {
            "name": "a",
            "namespace": "d",
            "uid": "u1",
            "finalizers": ["x"],
            "deletionTimestamp": "t",
        }
    }
    new = {"metadata": {"name": "a", "namespace": "d", "uid": "u2", "finalizers": ["x", "y"]}}
    got = fields(validate_object(cm, new, old=old, registry=REG))
    assert ("FieldValueInvalid", "metadata.uid") in got
    assert ("FieldValueForbidden", "metadata.finalizers") in got
    same = {"metadata": {"name": "a", "namespace": "d", "finalizers": []}}
    assert validate_object(cm, same, old=old, registry=REG) == []
    bad_labels = {"metadata": {"name": "a", "labels": {"-x": "ok", "y": "not ok"}}}
    assert len(validate_object(cm, bad_labels, old=None, registry=REG)) == 2


def test_custom_resources_follow_the_crd_schema() -> None:
    from .test_openapi import WIDGET_CRD

    reg = Registry()
    (widget,) = reg.add_crd(WIDGET_CRD)
    assert (
        validate_object(widget, {"metadata": {"name": "w"}, "spec": {"size": 2}}, old=None, registry=reg)
        == []
    )
    causes = validate_object(
        widget, {"metadata": {"name": "w"}, "spec": {"color": 3}}, old=None, registry=reg
    )
    assert sorted(fields(causes)) == [
        ("FieldValueRequired", "spec.size"),
        ("FieldValueTypeInvalid", "spec.color"),
    ]
    assert unknown_fields(widget, {"metadata": {"name": "w"}, "spec": {"size": 1, "shape": "round"}}) == [
        ".spec.shape"
    ]


def test_crd_name_must_match_its_names() -> None:
    from .test_openapi import WIDGET_CRD

    crd = {**WIDGET_CRD, "metadata": {"name": "wrong"}}
    causes = validate_object(
        info("apiextensions.k8s.io", "CustomResourceDefinition"), crd, old=None, registry=REG
    )
    assert ("FieldValueInvalid", "metadata.name") in fields(causes)


def test_server_rejects_objects_the_python_client_could_not_read(apiserver: ServerThread) -> None:
    from .test_openapi import raw_request

    base = "/api/v1/namespaces/default"
    status, body = raw_request(apiserver, "POST", f"{base}/pods", {"metadata": {"name": "p"}, "spec": {}})
    assert status == 422
    assert body["reason"] == "Invalid"
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.containers"]
    status, body = raw_request(
        apiserver, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", {"metadata": {"name": "e"}}
    )
    assert status == 422
    status, body = raw_request(apiserver, "POST", f"{base}/configmaps", {"metadata": {"name": "Bad_Name"}})
    assert status == 422
    # What the server stored is readable by the typed client.
    api = config.new_client_from_config_dict(apiserver.kubeconfig)
    try:
        core = client.CoreV1Api(api)
        core.create_namespaced_event(
            "default", {"metadata": {"name": "ok"}, "involvedObject": {"kind": "Pod", "name": "p"}}
        )
        assert [e.metadata.name for e in core.list_namespaced_event("default").items] == ["ok"]
    finally:
        api.close()


def test_custom_resources_are_pruned_and_defaulted() -> None:
    from mcr_envtest.validation import apply_defaults, prune_unknown

    from .test_openapi import WIDGET_CRD

    crd = json.loads(json.dumps(WIDGET_CRD))
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    props["spec"]["properties"]["color"]["default"] = "blue"
    props["spec"]["properties"]["extra"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    props["status"] = {"type": "object", "properties": {"phase": {"type": "string", "default": "New"}}}
    (widget,) = Registry().add_crd(crd)
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"a": "b"}},
        "spec": {"size": 1, "shape": "round", "extra": {"anything": [1, 2]}},
        "junk": True,
    }
    pruned = prune_unknown(widget, obj)
    assert pruned == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"a": "b"}},
        "spec": {"size": 1, "extra": {"anything": [1, 2]}},
    }
    assert "junk" in obj  # input untouched
    defaulted = apply_defaults(widget, pruned)
    assert defaulted["spec"]["color"] == "blue"
    assert "status" not in defaulted  # defaults apply only inside objects that exist
    assert apply_defaults(widget, {**pruned, "status": {}})["status"] == {"phase": "New"}
    pod = REG.by_kind("", "v1", "Pod")
    assert pod is not None
    assert prune_unknown(pod, obj) is obj
