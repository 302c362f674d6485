"""HorizontalPodAutoscalers at ``autoscaling/v1`` and ``autoscaling/v2``: one object, converted
both ways as kube-apiserver converts it (both lanes)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .conftest import Raw, fresh_namespace

TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}},
}
MEMORY = {
    "type": "Resource",
    "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}},
}
PODS = {
    "type": "Pods",
    "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}},
}
# kube-apiserver's v1 annotations: v1's metric format, the behavior in its internal field names
METRICS_V1 = (
    '[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}},'
    '{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]'
)
BEHAVIOR_V1 = (
    '{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,'
    '"PeriodSeconds":15},{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null},'
    '"ScaleDown":{"StabilizationWindowSeconds":30,"SelectPolicy":"Max","Policies":[{"Type":"Percent",'
    '"Value":100,"PeriodSeconds":15}],"Tolerance":null}}'
)


@pytest.fixture
async def ns(raw: Raw) -> AsyncIterator[str]:
    async for name in fresh_namespace(raw, "hpa"):
        yield name


def paths(ns: str) -> tuple[str, str]:
    return (
        f"/apis/autoscaling/v1/namespaces/{ns}/horizontalpodautoscalers",
        f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
    )


async def test_a_v2_autoscaler_reads_at_v1_with_its_other_metrics_in_annotations(raw: Raw, ns: str) -> None:
    v1, v2 = paths(ns)
    body = {
        "metadata": {"name": "a", "annotations": {"x": "y"}},
        "spec": {
            "scaleTargetRef": TARGET,
            "minReplicas": 2,
            "maxReplicas": 5,
            "metrics": [CPU, MEMORY, PODS],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}},
        },
    }
    status, created = await raw.json("POST", v2, json=body)
    assert status == 201, created
    assert created["spec"]["behavior"]["scaleUp"]["policies"] == [
        {"periodSeconds": 15, "type": "Pods", "value": 4},
        {"periodSeconds": 15, "type": "Percent", "value": 100},
    ]
    status, old = await raw.json("GET", f"{v1}/a")
    assert status == 200, old
    assert old["apiVersion"] == "autoscaling/v1"
    assert old["spec"] == {
        "maxReplicas": 5,
        "minReplicas": 2,
        "scaleTargetRef": TARGET,
        "targetCPUUtilizationPercentage": 60,
    }
    assert old["status"] == {"currentReplicas": 0, "desiredReplicas": 0}
    assert old["metadata"]["annotations"] == {
        "autoscaling.alpha.kubernetes.io/behavior": BEHAVIOR_V1,
        "autoscaling.alpha.kubernetes.io/metrics": METRICS_V1,
        "x": "y",
    }
    status, listed = await raw.json("GET", v1)
    assert status == 200, listed
    assert listed["apiVersion"] == "autoscaling/v1"
    assert [i["spec"].get("targetCPUUtilizationPercentage") for i in listed["items"]] == [60]

    # an update at v1 keeps what rides in the annotations; the CPU target comes last at v2
    old["spec"]["targetCPUUtilizationPercentage"] = 80
    status, updated = await raw.json("PUT", f"{v1}/a", json=old)
    assert status == 200, updated
    assert updated["spec"]["targetCPUUtilizationPercentage"] == 80
    status, new = await raw.json("GET", f"{v2}/a")
    assert status == 200, new
    cpu80 = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }
    assert new["spec"]["metrics"] == [MEMORY, PODS, cpu80]
    assert new["spec"]["behavior"] == created["spec"]["behavior"]
    assert new["metadata"]["annotations"] == {"x": "y"}
    assert new["status"] == {"currentMetrics": None, "desiredReplicas": 0}


async def test_a_v1_autoscaler_reads_at_v2_with_a_cpu_metric(raw: Raw, ns: str) -> None:
    v1, v2 = paths(ns)
    for name, target in (("with", 70), ("without", None)):
        spec: dict[str, Any] = {"scaleTargetRef": TARGET, "maxReplicas": 4}
        if target is not None:
            spec["targetCPUUtilizationPercentage"] = target
        status, created = await raw.json("POST", v1, json={"metadata": {"name": name}, "spec": spec})
        assert status == 201, created
        assert created["apiVersion"] == "autoscaling/v1"
        assert created["spec"] == {
            "maxReplicas": 4,
            "minReplicas": 1,
            "scaleTargetRef": TARGET,
            "targetCPUUtilizationPercentage": target or 80,
        }
        assert "annotations" not in created["metadata"]
        status, new = await raw.json("GET", f"{v2}/{name}")
        assert status == 200, new
        assert new["spec"] == {
            "maxReplicas": 4,
            "minReplicas": 1,
            "scaleTargetRef": TARGET,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": target or 80},
                    },
                }
            ],
        }


async def test_a_v1_watch_sees_v2_writes_at_v1(raw: Raw, ns: str) -> None:
    v1, v2 = paths(ns)
    status, listed = await raw.json("GET", v1)
    assert status == 200, listed
    rv = listed["metadata"]["resourceVersion"]
    body = {
        "metadata": {"name": "w"},
        "spec": {"scaleTargetRef": TARGET, "maxReplicas": 3, "metrics": [CPU, PODS]},
    }
    status, created = await raw.json("POST", v2, json=body)
    assert status == 201, created
    async with raw.request("GET", f"{v1}?watch=1&resourceVersion={rv}&timeoutSeconds=5") as resp:
        assert resp.status == 200
        event = json.loads(await resp.content.readline())
    assert event["type"] == "ADDED"
    obj = event["object"]
    assert (obj["apiVersion"], obj["metadata"]["name"]) == ("autoscaling/v1", "w")
    assert obj["spec"]["targetCPUUtilizationPercentage"] == 60
    assert obj["metadata"]["annotations"] == {
        "autoscaling.alpha.kubernetes.io/metrics": (
            '[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]'
        )
    }


async def test_discovery_and_openapi_list_autoscaling_v1(raw: Raw) -> None:
    status, group = await raw.json("GET", "/apis/autoscaling")
    assert status == 200, group
    assert [v["groupVersion"] for v in group["versions"]] == ["autoscaling/v2", "autoscaling/v1"]
    assert group["preferredVersion"]["version"] == "v2"
    status, resources = await raw.json("GET", "/apis/autoscaling/v1")
    assert status == 200, resources
    served = {r["name"]: r for r in resources["resources"]}
    assert set(served) == {"horizontalpodautoscalers", "horizontalpodautoscalers/status"}
    status, v2resources = await raw.json("GET", "/apis/autoscaling/v2")
    assert status == 200, v2resources
    v2hpa = next(r for r in v2resources["resources"] if r["name"] == "horizontalpodautoscalers")
    hpa = served["horizontalpodautoscalers"]
    assert (hpa["kind"], hpa["shortNames"], hpa["namespaced"]) == ("HorizontalPodAutoscaler", ["hpa"], True)
    assert hpa["storageVersionHash"] == v2hpa["storageVersionHash"]
    status, index = await raw.json("GET", "/openapi/v3")
    assert status == 200
    assert "apis/autoscaling/v1" in index["paths"]
    status, doc = await raw.json("GET", "/openapi/v3/apis/autoscaling/v1")
    assert status == 200
    assert "io.k8s.api.autoscaling.v1.HorizontalPodAutoscaler" in doc["components"]["schemas"]


async def test_apply_and_patches_at_v1_reach_the_v2_object(raw: Raw, ns: str) -> None:
    v1, v2 = paths(ns)
    applied = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "p"},
        "spec": {"scaleTargetRef": TARGET, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50},
    }
    status, body = await raw.json(
        "PATCH",
        f"{v1}/p?fieldManager=me",
        data=json.dumps(applied),
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert status == 201, body
    assert body["spec"]["targetCPUUtilizationPercentage"] == 50
    for ctype, target in (
        ("application/merge-patch+json", 55),
        ("application/strategic-merge-patch+json", 56),
    ):
        patch = {"spec": {"targetCPUUtilizationPercentage": target}}
        status, body = await raw.json("PATCH", f"{v1}/p", json=patch, headers={"Content-Type": ctype})
        assert status == 200, body
        assert body["spec"]["targetCPUUtilizationPercentage"] == target, ctype
    status, new = await raw.json("GET", f"{v2}/p")
    assert status == 200, new
    assert new["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 56}},
        }
    ]
    entries = [(e["manager"], e["apiVersion"], e["operation"]) for e in new["metadata"]["managedFields"]]
    assert entries == [("me", "autoscaling/v1", "Apply"), ("Python", "autoscaling/v1", "Update")]


async def test_a_v2_status_reads_at_v1_with_its_other_current_metrics_in_annotations(
    raw: Raw, ns: str
) -> None:
    v1, v2 = paths(ns)
    body = {"metadata": {"name": "s"}, "spec": {"scaleTargetRef": TARGET, "maxReplicas": 3, "metrics": [CPU]}}
    status, created = await raw.json("POST", v2, json=body)
    assert status == 201, created
    created["status"] = {
        "currentReplicas": 2,
        "desiredReplicas": 3,
        "currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 70}}},
            {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "90Mi"}}},
            {
                "type": "External",
                "external": {"metric": {"name": "queue"}, "current": {"averageValue": "4"}},
            },
        ],
    }
    status, written = await raw.json("PUT", f"{v2}/s/status", json=created)
    assert status == 200, written
    status, old = await raw.json("GET", f"{v1}/s")
    assert status == 200, old
    assert old["status"] == {
        "currentReplicas": 2,
        "desiredReplicas": 3,
        "currentCPUUtilizationPercentage": 70,
    }
    # every current metric rides in the annotation, CPU too, and v1 always writes a status metric's
    # current value: "0" where v2 has none
    assert old["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/current-metrics"] == (
        '[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":70,"currentAverageValue":"0"}},'
        '{"type":"Resource","resource":{"name":"memory","currentAverageValue":"90Mi"}},'
        '{"type":"External","external":{"metricName":"queue","currentValue":"0","currentAverageValue":"4"}}]'
    )
    # and they come back once at v2 after a write at v1
    status, rewritten = await raw.json("PUT", f"{v1}/s/status", json=old)
    assert status == 200, rewritten
    status, new = await raw.json("GET", f"{v2}/s")
    assert status == 200, new
    assert [(m["type"], (m.get("resource") or {}).get("name")) for m in new["status"]["currentMetrics"]] == [
        ("Resource", "cpu"),
        ("Resource", "memory"),
        ("External", None),
    ]
