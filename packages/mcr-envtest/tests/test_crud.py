"""CRUD through the official sync client against a real HTTPS server."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from mcr_envtest import ServerThread

from .test_openapi import raw_request


def test_default_namespaces_and_service_accounts(core: Any) -> None:
    names = [n.metadata.name for n in core.list_namespace().items]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    core.create_namespace({"metadata": {"name": "team-a"}})
    # kube-controller-manager adds the account a moment after the namespace (mcr-envtest with it)
    deadline = time.monotonic() + 30
    while not (sas := core.list_namespaced_service_account("team-a").items) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [s.metadata.name for s in sas] == ["default"]


def test_configmap_lifecycle(core: Any) -> None:
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"x": "1"}})
    assert cm.metadata.uid
    assert cm.metadata.creation_timestamp is not None
    rv1 = int(cm.metadata.resource_version)
    cm2 = core.patch_namespaced_config_map("a", "default", {"data": {"x": "2"}})
    assert cm2.data == {"x": "2"}
    assert int(cm2.metadata.resource_version) > rv1
    cm3 = core.patch_namespaced_config_map("a", "default", {"data": {"x": "2"}})
    assert cm3.metadata.resource_version == cm2.metadata.resource_version  # no-op write
    cm2.data = {"x": "3"}
    cm4 = core.replace_namespaced_config_map("a", "default", cm2)
    assert cm4.data == {"x": "3"}
    cm2.metadata.resource_version = cm.metadata.resource_version
    with pytest.raises(client.ApiException) as exc:
        core.replace_namespaced_config_map("a", "default", cm2)
    assert exc.value.status == 409
    core.delete_namespaced_config_map("a", "default")
    with pytest.raises(client.ApiException) as exc:
        core.read_namespaced_config_map("a", "default")
    assert exc.value.status == 404


def test_create_errors(core: Any) -> None:
    core.create_namespaced_secret("default", {"metadata": {"name": "s"}, "stringData": {"a": "b"}})
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_secret("default", {"metadata": {"name": "s"}})
    assert exc.value.status == 409
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_config_map("nope", {"metadata": {"name": "x"}})
    assert exc.value.status == 404
    generated = core.create_namespaced_config_map("default", {"metadata": {"generateName": "gen-"}})
    assert generated.metadata.name.startswith("gen-")
    assert len(generated.metadata.name) == len("gen-") + 5


def test_lease_keeps_microtime(api_client: client.ApiClient) -> None:
    coord = client.CoordinationV1Api(api_client)
    lease = coord.create_namespaced_lease(
        "default",
        {
            "metadata": {"name": "leader"},
            "spec": {
                "holderIdentity": "a",
                "leaseDurationSeconds": 15,
                "renewTime": "2026-01-02T03:04:05.123456Z",
                "acquireTime": "2026-01-02T03:04:05.000001Z",
            },
        },
    )
    assert lease.spec.renew_time.microsecond == 123456
    lease.spec.holder_identity = "b"
    updated = coord.replace_namespaced_lease("leader", "default", lease)
    assert updated.spec.holder_identity == "b"
    lease.spec.holder_identity = "c"  # stale resourceVersion: the lease was lost
    with pytest.raises(client.ApiException) as exc:
        coord.replace_namespaced_lease("leader", "default", lease)
    assert exc.value.status == 409


def test_both_event_apis(apiserver: ServerThread, api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    ev = core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Started",
            "type": "Normal",
        },
    )
    assert ev.reason == "Started"
    listed = core.list_namespaced_event("default", field_selector="involvedObject.name=p")
    assert [e.metadata.name for e in listed.items] == ["e1"]
    events = client.EventsV1Api(api_client)
    # created over raw HTTP: the official client sends this eventTime as "...05+00:00", which
    # kube-apiserver refuses (a MicroTime needs its six fraction digits)
    status, _ = raw_request(
        apiserver,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        {
            "metadata": {"name": "e2"},
            "eventTime": "2026-01-02T03:04:05.000000Z",
            "reason": "Done",
            "reportingController": "mcr",
            "reportingInstance": "mcr-1",
            "action": "Reconcile",
            "type": "Normal",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        },
    )
    assert status == 201
    ev2 = events.read_namespaced_event("e2", "default")
    assert ev2.reporting_controller == "mcr"
    assert ev2.event_time.microsecond == 0


def test_builtin_defaults_and_status_split(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    svc = core.create_namespaced_service(
        "default", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}
    )
    assert svc.spec.type == "ClusterIP"
    assert svc.status is not None
    pod = core.create_namespaced_pod(
        "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    )
    assert pod.status.phase == "Pending"
    assert pod.spec.restart_policy == "Always"
    apps = client.AppsV1Api(api_client)
    dep = apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "d"},
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "template": {
                    "metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
            },
        },
    )
    assert dep.metadata.generation == 1
    assert dep.spec.replicas == 1
    dep = apps.patch_namespaced_deployment_status("d", "default", {"status": {"replicas": 3}})
    assert dep.status.replicas == 3
    assert dep.metadata.generation == 1
    scale = apps.patch_namespaced_deployment_scale("d", "default", {"spec": {"replicas": 4}})
    assert scale.spec.replicas == 4
    dep = apps.read_namespaced_deployment("d", "default")
    assert dep.spec.replicas == 4
    assert dep.metadata.generation == 2


async def test_server_side_apply_create_conflict_and_force(raw: Any) -> None:
    path = "/api/v1/namespaces/default/configmaps/ssa"

    async def apply(manager: str, value: str, force: bool = False) -> tuple[int, Any]:
        doc = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  k: {value}\n"
        query = f"?fieldManager={manager}" + ("&force=true" if force else "")
        return await raw.json(
            "PATCH", path + query, data=doc.encode(), headers={"Content-Type": "application/apply-patch+yaml"}
        )

    status, created = await apply("alpha", "one")
    assert status == 201
    assert created["data"] == {"k": "one"}
    assert [m["manager"] for m in created["metadata"]["managedFields"]] == ["alpha"]
    status, conflict = await apply("beta", "two")
    assert status == 409
    assert conflict["reason"] == "Conflict"
    assert conflict["details"]["causes"][0]["reason"] == "FieldManagerConflict"
    status, forced = await apply("beta", "two", force=True)
    assert status == 200
    assert forced["data"] == {"k": "two"}
    status, missing = await raw.json(
        "PATCH", path, data=b"{}", headers={"Content-Type": "application/apply-patch+yaml"}
    )
    assert status == 422
    assert missing["details"]["causes"][0]["field"] == "fieldManager"


async def test_partial_object_metadata_and_legacy_watch_path(raw: Any) -> None:
    await raw.json(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        json={"metadata": {"name": "m", "labels": {"a": "b"}}, "data": {"big": "x"}},
    )
    accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
    path = "/api/v1/namespaces/default/configmaps?labelSelector=a"
    status, body = await raw.json("GET", path, headers={"Accept": accept})
    assert status == 200
    assert body["kind"] == "PartialObjectMetadataList"
    assert body["items"][0]["metadata"]["labels"] == {"a": "b"}
    assert "data" not in body["items"][0]
    async with raw.request("GET", "/api/v1/watch/namespaces/default/configmaps/m?timeoutSeconds=1") as resp:
        lines = [line async for line in resp.content]
    assert len(lines) == 1
    assert b'"ADDED"' in lines[0]
