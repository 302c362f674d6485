"""``metadata.managedFields`` of ``Update`` writes: which fields a manager owns, field for field
as kube-apiserver records them (both lanes)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .conftest import Raw, crd_served, workload_namespace

JSON_MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
async def ns(raw: Raw) -> AsyncIterator[str]:
    async for name in workload_namespace(raw, "mf"):
        yield name


def fields(obj: dict[str, Any], manager: str = "writer", subresource: str | None = None) -> Any:
    """The fieldsV1 of ``manager``'s Update entry, or None when it has none."""
    for entry in obj["metadata"].get("managedFields") or []:
        if (entry["manager"], entry["operation"], entry.get("subresource")) == (
            manager,
            "Update",
            subresource,
        ):
            return entry["fieldsV1"]
    return None


async def create(raw: Raw, path: str, body: dict[str, Any], manager: str = "writer") -> dict[str, Any]:
    status, out = await raw.json("POST", path, params={"fieldManager": manager}, json=body)
    assert status == 201, out
    assert isinstance(out, dict)
    return out


async def test_maps_and_items_a_write_creates_are_owned_themselves(raw: Raw, ns: str) -> None:
    cm = await create(
        raw,
        f"/api/v1/namespaces/{ns}/configmaps",
        {"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}},
    )
    assert fields(cm) == {"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:x": {}}}}

    # A Go zero Deployment already holds spec, its strategy and template (non-pointer structs):
    # they are not the writer's "." but the pointer rollingUpdate and every map and item are.
    deploy = await create(
        raw,
        f"/apis/apps/v1/namespaces/{ns}/deployments",
        {
            "metadata": {"name": "d"},
            "spec": {
                "selector": {"matchLabels": {"app": "d"}},
                "template": {
                    "metadata": {"labels": {"app": "d"}},
                    "spec": {
                        "containers": [{"name": "c", "image": "img:1", "env": [{"name": "E", "value": "1"}]}]
                    },
                },
            },
        },
    )
    container = {
        ".": {},
        "f:env": {".": {}, 'k:{"name":"E"}': {".": {}, "f:name": {}, "f:value": {}}},
        "f:image": {},
        "f:imagePullPolicy": {},
        "f:name": {},
        "f:resources": {},
        "f:terminationMessagePath": {},
        "f:terminationMessagePolicy": {},
    }
    assert fields(deploy) == {
        "f:spec": {
            "f:progressDeadlineSeconds": {},
            "f:replicas": {},
            "f:revisionHistoryLimit": {},
            "f:selector": {},  # a LabelSelector is atomic: owned whole
            "f:strategy": {
                "f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}},
                "f:type": {},
            },
            "f:template": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:containers": {'k:{"name":"c"}': container},
                    "f:dnsPolicy": {},
                    "f:restartPolicy": {},
                    "f:schedulerName": {},
                    "f:securityContext": {},
                    "f:terminationGracePeriodSeconds": {},
                },
            },
        }
    }


async def test_what_the_server_allocates_or_admits_is_owned_by_no_one(raw: Raw, ns: str) -> None:
    svc = await create(
        raw,
        f"/api/v1/namespaces/{ns}/services",
        {
            "metadata": {"name": "s"},
            "spec": {"type": "NodePort", "selector": {"app": "s"}, "ports": [{"port": 80}]},
        },
    )
    assert svc["spec"]["clusterIP"]
    assert svc["spec"]["ports"][0]["nodePort"]
    assert fields(svc) == {
        "f:spec": {
            "f:externalTrafficPolicy": {},
            "f:internalTrafficPolicy": {},
            "f:ports": {
                ".": {},
                'k:{"port":80,"protocol":"TCP"}': {
                    ".": {},
                    "f:port": {},
                    "f:protocol": {},
                    "f:targetPort": {},
                },
            },
            "f:selector": {},  # an atomic map
            "f:sessionAffinity": {},
            "f:type": {},
        }
    }
    # a value the request sets is the writer's, allocated or not
    headless = await create(
        raw,
        f"/api/v1/namespaces/{ns}/services",
        {"metadata": {"name": "h"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}},
    )
    assert "f:clusterIP" in fields(headless)["f:spec"]
    assert "f:clusterIPs" not in fields(headless)["f:spec"]

    pod = await create(
        raw,
        f"/api/v1/namespaces/{ns}/pods",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}},
    )
    assert pod["spec"]["serviceAccountName"] == "default"
    assert pod["spec"]["tolerations"]
    owned = fields(pod)["f:spec"]
    for admitted in (
        "f:serviceAccountName",
        "f:serviceAccount",
        "f:tolerations",
        "f:priority",
        "f:preemptionPolicy",
    ):
        assert admitted not in owned
    assert "f:enableServiceLinks" in owned  # a default: the writer's


async def test_a_jobs_generated_selector_and_labels_are_owned_by_no_one(raw: Raw, ns: str) -> None:
    job = await create(
        raw,
        f"/apis/batch/v1/namespaces/{ns}/jobs",
        {
            "metadata": {"name": "j"},
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i:1"}]}
                },
            },
        },
    )
    assert job["spec"]["selector"]["matchLabels"]
    assert job["metadata"]["labels"]["job-name"] == "j"
    assert job["spec"]["template"]["metadata"]["labels"]["job-name"] == "j"
    owned = fields(job)
    assert "f:metadata" not in owned
    assert "f:selector" not in owned["f:spec"]
    assert "f:metadata" not in owned["f:spec"]["f:template"]


async def test_removed_fields_leave_every_manager(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    await create(
        raw, path, {"metadata": {"name": "r", "labels": {"keep": "1", "drop": "1"}}, "data": {"a": "1"}}
    )
    status, out = await raw.json(
        "PATCH", f"{path}/r", params={"fieldManager": "other"}, json={"data": {"b": "2"}}, headers=JSON_MERGE
    )
    assert status == 200, out
    assert fields(out, "other") == {"f:data": {"f:b": {}}}
    # the first manager removes a label and the other manager's key: both leave every set
    status, out = await raw.json(
        "PATCH",
        f"{path}/r",
        params={"fieldManager": "writer"},
        json={"metadata": {"labels": {"drop": None}}, "data": {"b": None}},
        headers=JSON_MERGE,
    )
    assert status == 200, out
    assert fields(out) == {
        "f:data": {".": {}, "f:a": {}},
        "f:metadata": {"f:labels": {".": {}, "f:keep": {}}},
    }
    assert fields(out, "other") is None


async def test_a_status_write_owns_the_labels_it_changes(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/pods"
    await create(
        raw, path, {"metadata": {"name": "s"}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}
    )
    status, out = await raw.json(
        "PATCH",
        f"{path}/s/status",
        params={"fieldManager": "kubelet"},
        json={
            "metadata": {"labels": {"seen": "yes"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
        headers=JSON_MERGE,
    )
    assert status == 200, out
    assert fields(out, "kubelet", "status") == {
        "f:metadata": {"f:labels": {".": {}, "f:seen": {}}},
        "f:status": {
            "f:conditions": {
                ".": {},
                'k:{"type":"Ready"}': {
                    ".": {},
                    "f:lastProbeTime": {},
                    "f:lastTransitionTime": {},
                    "f:status": {},
                    "f:type": {},
                },
            }
        },
    }


async def test_a_custom_resource_records_what_its_request_version_kept(raw: Raw) -> None:
    group = f"mf{uuid.uuid4().hex[:8]}.example.com"
    spec_schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"size": {"type": "integer"}, "color": {"type": "string", "default": "red"}},
            }
        },
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": spec_schema}},
                {
                    "name": "v1beta1",
                    "served": True,
                    "storage": False,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                },
            ],
        },
    }
    await create(raw, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    try:
        await crd_served(raw, crd)
        body = {"metadata": {"name": "one"}, "spec": {"size": 1, "extra": "x"}}
        # through the storage version: pruned before recording, defaults recorded
        one = await create(
            raw, f"/apis/{group}/v1/gadgets", {"apiVersion": f"{group}/v1", "kind": "Gadget", **body}
        )
        assert one["spec"] == {"size": 1, "color": "red"}
        assert fields(one) == {"f:spec": {".": {}, "f:color": {}, "f:size": {}}}
        # through v1beta1, which keeps everything and defaults nothing: v1 prunes and defaults after
        body["metadata"]["name"] = "two"
        two = await create(
            raw,
            f"/apis/{group}/v1beta1/gadgets",
            {"apiVersion": f"{group}/v1beta1", "kind": "Gadget", **body},
        )
        assert two["spec"] == {"size": 1, "color": "red"}
        assert fields(two) == {"f:spec": {".": {}, "f:extra": {}, "f:size": {}}}
    finally:
        await raw.status("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{group}")


async def test_an_entry_gets_a_new_time_when_its_manager_changes_something(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    created = await create(raw, path, {"metadata": {"name": "t"}, "data": {"a": "1"}})
    time0 = created["metadata"]["managedFields"][0]["time"]
    await asyncio.sleep(1.1)  # entry times have a resolution of one second
    status, out = await raw.json(
        "PATCH", f"{path}/t", params={"fieldManager": "other"}, json={"data": {"b": "1"}}, headers=JSON_MERGE
    )
    assert status == 200, out
    times = {e["manager"]: e["time"] for e in out["metadata"]["managedFields"]}
    assert times["writer"] == time0  # another manager's write leaves the entry as it was
    assert times["other"] > time0
    status, out = await raw.json(
        "PATCH", f"{path}/t", params={"fieldManager": "writer"}, json={"data": {"a": "2"}}, headers=JSON_MERGE
    )
    assert status == 200, out
    assert fields(out) == {"f:data": {".": {}, "f:a": {}}}
    times = {e["manager"]: e["time"] for e in out["metadata"]["managedFields"]}
    assert times["writer"] > time0  # a value it owns changed: its set did not, its time did
