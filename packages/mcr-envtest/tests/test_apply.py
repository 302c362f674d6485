"""Server-side apply and managedFields (F14)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client, config

from mcr_envtest import ServerThread
from mcr_envtest.apply import ApplyConflict, apply_patch, managed_sets, record_update
from mcr_envtest.resources import Registry

REG = Registry()
CM = REG.by_kind("", "v1", "ConfigMap")
DEPLOY = REG.by_kind("apps", "v1", "Deployment")
assert CM is not None
assert DEPLOY is not None


def cm(data: dict[str, str], **labels: str) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "a", "namespace": "default"}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data}


def owners(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"] + "/" + e["operation"]: e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def test_apply_creates_and_records_ownership() -> None:
    out = apply_patch(
        CM, None, cm({"a": "1"}, app="x"), manager="m1", force=False, now="2025-01-01T00:00:00Z"
    )
    assert out["data"] == {"a": "1"}
    (entry,) = out["metadata"]["managedFields"]
    assert entry["manager"] == "m1"
    assert entry["operation"] == "Apply"
    assert entry["apiVersion"] == "v1"
    assert entry["fieldsType"] == "FieldsV1"
    assert entry["time"] == "2025-01-01T00:00:00Z"
    assert entry["fieldsV1"] == {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}


def test_conflicts_force_and_shared_ownership() -> None:
    live = apply_patch(CM, None, cm({"a": "1", "b": "1"}), manager="m1", force=False, now="t1")
    live = record_update(
        CM, live, cm({"a": "2", "b": "1"}), manager="editor", operation="Update", subresource=None, now="t2"
    )
    assert owners(live)["editor/Update"] == {"f:data": {"f:a": {}}}
    assert owners(live)["m1/Apply"] == {"f:data": {"f:b": {}}}
    with pytest.raises(ApplyConflict) as exc:
        apply_patch(CM, live, cm({"a": "1", "b": "1"}), manager="m1", force=False, now="t3")
    assert exc.value.message == 'Apply failed with 1 conflict: conflict with "editor" using v1: .data.a'
    assert exc.value.causes == [
        {
            "type": "FieldManagerConflict",
            "reason": "FieldManagerConflict",
            "message": 'conflict with "editor" using v1',
            "field": ".data.a",
        }
    ]
    # Applying the live value is no conflict: ownership is shared.
    shared = apply_patch(CM, live, cm({"a": "2", "b": "1"}), manager="m1", force=False, now="t3")
    assert owners(shared)["editor/Update"] == {"f:data": {"f:a": {}}}
    assert owners(shared)["m1/Apply"] == {"f:data": {"f:a": {}, "f:b": {}}}
    forced = apply_patch(CM, live, cm({"a": "1", "b": "1"}), manager="m1", force=True, now="t3")
    assert forced["data"] == {"a": "1", "b": "1"}
    assert set(owners(forced)) == {"m1/Apply"}


def test_several_conflicts_are_listed() -> None:
    live = apply_patch(CM, None, cm({"a": "1", "b": "1"}), manager="m1", force=False, now="t1")
    with pytest.raises(ApplyConflict) as exc:
        apply_patch(CM, live, cm({"a": "2", "b": "2"}), manager="m2", force=False, now="t2")
    assert exc.value.message.startswith('Apply failed with 2 conflicts: conflicts with "m1":\n- .data.')
    assert len(exc.value.causes) == 2


def test_fields_dropped_from_the_configuration_are_removed_unless_owned_elsewhere() -> None:
    live = apply_patch(CM, None, cm({"a": "1", "b": "1", "c": "1"}), manager="m1", force=False, now="t1")
    live = apply_patch(CM, live, cm({"c": "1"}), manager="m2", force=False, now="t2")
    out = apply_patch(CM, live, cm({"a": "1"}), manager="m1", force=False, now="t3")
    assert out["data"] == {"a": "1", "c": "1"}


def test_keyed_lists_merge_by_item() -> None:
    def deploy(*containers: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": list(containers)}}},
        }

    live = apply_patch(DEPLOY, None, deploy({"name": "a", "image": "1"}), manager="m1", force=False, now="t")
    live = apply_patch(DEPLOY, live, deploy({"name": "b", "image": "2"}), manager="m2", force=False, now="t")
    assert [c["name"] for c in live["spec"]["template"]["spec"]["containers"]] == ["a", "b"]
    fields = owners(live)["m2/Apply"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert fields == {'k:{"name":"b"}': {".": {}, "f:name": {}, "f:image": {}}}
    with pytest.raises(ApplyConflict) as exc:
        apply_patch(DEPLOY, live, deploy({"name": "a", "image": "9"}), manager="m2", force=False, now="t")
    assert exc.value.causes[0]["field"] == '.spec.template.spec.containers[name="a"].image'


def test_record_update_tracks_changes_and_can_be_reset() -> None:
    created = record_update(
        CM, None, cm({"a": "1"}), manager="kubectl-create", operation="Update", subresource=None, now="t"
    )
    assert owners(created) == {"kubectl-create/Update": {"f:data": {".": {}, "f:a": {}}}}
    changed = record_update(
        CM, created, cm({"a": "1", "b": "2"}), manager="ctl", operation="Update", subresource=None, now="t"
    )
    assert owners(changed)["ctl/Update"] == {"f:data": {"f:b": {}}}
    assert set(managed_sets(changed)) == {("kubectl-create", "Update", ""), ("ctl", "Update", "")}
    reset = cm({"a": "1"})
    reset["metadata"]["managedFields"] = [{}]
    cleared = record_update(CM, changed, reset, manager="ctl", operation="Update", subresource=None, now="t")
    assert "managedFields" not in cleared["metadata"]


def test_apply_through_the_official_client(apiserver: ServerThread) -> None:
    api = config.new_client_from_config_dict(apiserver.kubeconfig)
    try:
        core = client.CoreV1Api(api)
        body = cm({"a": "1"})
        out = core.patch_namespaced_config_map(
            "a", "default", body, field_manager="mgr", _content_type="application/apply-patch+yaml"
        )
        assert out.data == {"a": "1"}
        assert [(m.manager, m.operation) for m in out.metadata.managed_fields] == [("mgr", "Apply")]
        core.patch_namespaced_config_map("a", "default", {"data": {"a": "2"}}, field_manager="other")
        with pytest.raises(client.ApiException) as exc:
            core.patch_namespaced_config_map(
                "a", "default", body, field_manager="mgr", _content_type="application/apply-patch+yaml"
            )
        assert exc.value.status == 409
        assert "conflict with" in exc.value.body
        out = core.patch_namespaced_config_map(
            "a",
            "default",
            body,
            field_manager="mgr",
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        assert out.data == {"a": "1"}
    finally:
        api.close()


def test_status_applies_are_tracked_apart_from_the_main_resource() -> None:
    from .test_openapi import WIDGET_CRD

    crd = {
        **WIDGET_CRD,
        "spec": {
            **WIDGET_CRD["spec"],
            "versions": [{**WIDGET_CRD["spec"]["versions"][0], "subresources": {"status": {}}}],
        },
    }
    (widget,) = Registry().add_crd(crd)
    base = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    live = apply_patch(widget, None, {**base, "spec": {"size": 1}}, manager="ctl", force=False, now="t")
    live = apply_patch(
        widget,
        live,
        {**base, "status": {"phase": "Ready"}},
        manager="ctl",
        force=False,
        now="t",
        subresource="status",
    )
    assert live["spec"] == {"size": 1}  # the status apply did not drop the spec the same manager applied
    assert live["status"] == {"phase": "Ready"}
    entries = {
        (e["manager"], e.get("subresource", "")): e["fieldsV1"] for e in live["metadata"]["managedFields"]
    }
    assert entries == {
        ("ctl", ""): {"f:spec": {"f:size": {}}},
        ("ctl", "status"): {"f:status": {"f:phase": {}}},
    }


def test_status_apply_through_the_server_keeps_spec_ownership(apiserver: ServerThread) -> None:
    from .conftest import crd_served_sync
    from .test_openapi import WIDGET_CRD, raw_request

    crd = {**WIDGET_CRD, "metadata": {"name": "widgets.example.com"}}
    version = crd["spec"]["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    status_schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema = {**schema, "properties": {**schema["properties"], "status": status_schema}}
    crd["spec"] = {
        **crd["spec"],
        "versions": [{**version, "schema": {"openAPIV3Schema": schema}, "subresources": {"status": {}}}],
    }
    assert (
        raw_request(apiserver, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0]
        == 201
    )
    path = "/apis/example.com/v1/namespaces/default/widgets/w"
    base = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    apply = "application/apply-patch+yaml"
    crd_served_sync(apiserver, crd)  # kube-apiserver establishes CRDs asynchronously
    status, _ = raw_request(
        apiserver,
        "PATCH",
        f"{path}?fieldManager=ctl",
        {**base, "spec": {"size": 1, "color": "red"}},
        content_type=apply,
    )
    assert status == 201
    status, obj = raw_request(
        apiserver,
        "PATCH",
        f"{path}/status?fieldManager=ctl",
        {**base, "status": {"phase": "Ready"}},
        content_type=apply,
    )
    assert status == 200
    entries = {(e["manager"], e.get("subresource", "")) for e in obj["metadata"].get("managedFields") or []}
    assert entries == {("ctl", ""), ("ctl", "status")}
    # Dropping color from the main apply removes it: ctl still owns it.
    status, obj = raw_request(
        apiserver, "PATCH", f"{path}?fieldManager=ctl", {**base, "spec": {"size": 1}}, content_type=apply
    )
    assert status == 200
    assert obj["spec"] == {"size": 1}
    assert obj["status"] == {"phase": "Ready"}
