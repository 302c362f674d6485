"""What kube-apiserver sets on create and refuses on update for workloads, pods, claims and a few
other kinds, as controllers read it back (both lanes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from .conftest import Raw, workload_namespace

CONTAINERS = [{"name": "c", "image": "busybox"}]
MERGE = {"Content-Type": "application/merge-patch+json"}
SMP = {"Content-Type": "application/strategic-merge-patch+json"}


@pytest.fixture
async def ns(raw: Raw) -> AsyncIterator[str]:
    async for name in workload_namespace(raw, "wd"):
        yield name


async def create(raw: Raw, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, out = await raw.json("POST", path, json=body)
    assert status == 201, out
    return out


def invalid(status: int, body: Any) -> list[tuple[str, str]]:
    assert (status, body["reason"]) == (422, "Invalid"), body
    return [(c["reason"], c["field"]) for c in body["details"]["causes"]]


async def test_statefulset_defaults_and_status_rules(raw: Raw, ns: str) -> None:
    path = f"/apis/apps/v1/namespaces/{ns}/statefulsets"
    claim = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    claim["spec"]["resources"] = {"requests": {"storage": "1Gi"}}
    spec = {
        "serviceName": "db",
        "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": CONTAINERS}},
        "volumeClaimTemplates": [claim],
    }
    sts = await create(raw, path, {"metadata": {"name": "db", "labels": {"a": "b"}}, "spec": spec})
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    assert sts["spec"]["updateStrategy"]["rollingUpdate"] == {"partition": 0, "maxUnavailable": 1}
    template = sts["spec"]["volumeClaimTemplates"][0]
    assert (template["apiVersion"], template["kind"]) == ("v1", "PersistentVolumeClaim")
    assert template["spec"]["volumeMode"] == "Filesystem"
    assert template["status"] == {"phase": "Pending"}
    assert sts["status"] == {"replicas": 0, "availableReplicas": 0}

    status, body = await raw.json(
        "PATCH",
        f"{path}/db/status",
        json={
            "status": {
                "replicas": -1,
                "readyReplicas": 2,
                "currentReplicas": 3,
                "updatedReplicas": 3,
                "availableReplicas": 2,
            }
        },
        headers=MERGE,
    )
    assert invalid(status, body) == [
        ("FieldValueInvalid", "status.replicas"),
        ("FieldValueInvalid", "status.readyReplicas"),
        ("FieldValueInvalid", "status.currentReplicas"),
        ("FieldValueInvalid", "status.updatedReplicas"),
        ("FieldValueInvalid", "status.availableReplicas"),
    ]
    assert (
        body["details"]["causes"][1]["message"] == "Invalid value: 2: cannot be greater than status.replicas"
    )

    # a status PUT takes the labels it sends (none here)
    sent = {**sts, "metadata": {"name": "db"}, "status": {"replicas": 2, "readyReplicas": 1}}
    status, body = await raw.json("PUT", f"{path}/db/status", json=sent)
    assert status == 200, body
    assert "labels" not in body["metadata"]
    assert body["status"] == {"replicas": 2, "readyReplicas": 1, "availableReplicas": 0}


async def test_job_generated_selector_and_immutable_template(raw: Raw, ns: str) -> None:
    path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    template = {"spec": {"restartPolicy": "Never", "containers": CONTAINERS}}
    job = await create(
        raw, path, {"metadata": {"name": "once"}, "spec": {"suspend": True, "template": template}}
    )
    uid = job["metadata"]["uid"]
    labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "once",
        "controller-uid": uid,
        "job-name": "once",
    }
    assert job["metadata"]["labels"] == labels
    assert job["spec"]["template"]["metadata"]["labels"] == labels
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["manualSelector"] is False
    assert job["status"] == {}

    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "alpine"}]}}}}
    status, body = await raw.json("PATCH", f"{path}/once", json=patch, headers=SMP)
    assert invalid(status, body) == [("FieldValueInvalid", "spec.template.spec")]
    assert body["message"].endswith(": field is immutable"), body

    status, body = await raw.json("PATCH", f"{path}/once", json={"spec": {"parallelism": 3}}, headers=MERGE)
    assert status == 200, body
    assert body["metadata"]["generation"] == 2
    assert body["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"


async def test_cronjob_daemonset_rc_hpa_endpoints_defaults(raw: Raw, ns: str) -> None:
    job_template = {"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": CONTAINERS}}}}
    cron = await create(
        raw,
        f"/apis/batch/v1/namespaces/{ns}/cronjobs",
        {"metadata": {"name": "nightly"}, "spec": {"schedule": "0 3 * * *", "jobTemplate": job_template}},
    )
    assert cron["spec"]["jobTemplate"]["metadata"] == {}
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"] == {}
    assert cron["status"] == {}

    ds_path = f"/apis/apps/v1/namespaces/{ns}/daemonsets"
    pod_template = {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": CONTAINERS}}
    ds = await create(
        raw,
        ds_path,
        {
            "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": pod_template},
        },
    )
    assert ds["metadata"]["annotations"] == {"deprecated.daemonset.template.generation": "1"}
    assert {k: ds["status"][k] for k in ("currentNumberScheduled", "numberMisscheduled", "numberReady")} == {
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "numberReady": 0,
    }
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "alpine"}]}}}}
    status, body = await raw.json("PATCH", f"{ds_path}/agent", json=patch, headers=SMP)
    assert status == 200, body
    assert body["metadata"]["annotations"] == {"deprecated.daemonset.template.generation": "2"}

    rc = await create(
        raw,
        f"/api/v1/namespaces/{ns}/replicationcontrollers",
        {
            "metadata": {"name": "rc"},
            "spec": {
                "replicas": 0,
                "selector": {"app": "rc"},
                "template": {"metadata": {"labels": {"app": "rc"}}, "spec": {"containers": CONTAINERS}},
            },
        },
    )
    assert rc["metadata"]["labels"] == {"app": "rc"}
    assert rc["status"] == {"replicas": 0}

    hpa = await create(
        raw,
        f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
        {
            "metadata": {"name": "hpa"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
                "maxReplicas": 3,
            },
        },
    )
    assert hpa["status"] == {"desiredReplicas": 0, "currentMetrics": None}

    ep = await create(
        raw,
        f"/api/v1/namespaces/{ns}/endpoints",
        {
            "metadata": {"name": "ep"},
            "subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]}],
        },
    )
    assert ep["subsets"][0]["ports"] == [{"port": 80, "protocol": "TCP"}]


async def test_pod_defaults_admission_and_update_rules(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/pods"
    container = {
        "name": "c",
        "image": "nginx:1.27",
        "ports": [{"containerPort": 80}],
        "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
        "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1", "memory": "128Mi"}},
    }
    spec = {
        "automountServiceAccountToken": False,
        "containers": [container],
        "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}],
    }
    pod = await create(raw, path, {"metadata": {"name": "web"}, "spec": spec})
    got = pod["spec"]
    c = got["containers"][0]
    assert c["readinessProbe"] == {
        "httpGet": {"path": "/", "port": 80, "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    assert c["env"][0]["valueFrom"]["fieldRef"] == {"apiVersion": "v1", "fieldPath": "metadata.name"}
    assert c["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}  # from the limits
    assert got["volumes"][0]["configMap"]["defaultMode"] == 420
    assert (got["priority"], got["preemptionPolicy"], got["serviceAccount"]) == (
        0,
        "PreemptLowerPriority",
        "default",
    )
    assert {(t["key"], t["effect"], t["tolerationSeconds"]) for t in got["tolerations"]} == {
        ("node.kubernetes.io/not-ready", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "NoExecute", 300),
    }
    assert pod["status"]["qosClass"] == "Burstable"

    status, body = await raw.json(
        "POST",
        path,
        json={"metadata": {"name": "noacct"}, "spec": {**spec, "serviceAccountName": "ghost"}},
    )
    assert (status, body["reason"], body["details"]) == (403, "Forbidden", {"name": "noacct", "kind": "pods"})
    assert body["message"] == (
        f'pods "noacct" is forbidden: error looking up service account {ns}/ghost: '
        'serviceaccount "ghost" not found'
    )

    patch = {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 81}]}]}}
    status, body = await raw.json("PATCH", f"{path}/web", json=patch, headers=SMP)
    assert invalid(status, body) == [("FieldValueForbidden", "spec")]
    assert "pod updates may not change fields other than `spec.containers[*].image`" in body["message"]
    status, body = await raw.json(
        "PATCH",
        f"{path}/web",
        json={"spec": {"containers": [{"name": "c", "image": "nginx:1.28"}]}},
        headers=SMP,
    )
    assert status == 200, body
    assert body["metadata"]["generation"] == 2

    status_patch = {
        "metadata": {"labels": {"fromstatus": "yes"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    status, body = await raw.json("PATCH", f"{path}/web/status", json=status_patch, headers=MERGE)
    assert status == 200, body
    assert body["metadata"]["labels"] == {"fromstatus": "yes"}
    ready = [c for c in body["status"]["conditions"] if c["type"] == "Ready"]
    assert (ready[0]["lastProbeTime"], ready[0]["lastTransitionTime"]) == (None, None)

    status, body = await raw.json("DELETE", f"{path}/web")
    assert status == 200, body
    assert body["metadata"]["deletionGracePeriodSeconds"] == 0
    assert body["metadata"]["deletionTimestamp"]
    assert body["metadata"]["generation"] == 3


async def test_claim_spec_is_immutable_while_unbound(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    await create(raw, path, {"metadata": {"name": "claim"}, "spec": spec})
    patch = {"spec": {"resources": {"requests": {"storage": "500Mi"}}}}
    status, body = await raw.json("PATCH", f"{path}/claim", json=patch, headers=MERGE)
    assert invalid(status, body) == [("FieldValueForbidden", "spec")]
    assert body["message"].startswith(
        'PersistentVolumeClaim "claim" is invalid: spec: Forbidden: spec is immutable after creation except '
        "resources.requests and volumeAttributesClassName for bound claims"
    )


async def test_load_balancer_service_and_event_defaults(raw: Raw, ns: str) -> None:
    svc_path = f"/api/v1/namespaces/{ns}/services"
    spec = {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}
    svc = await create(raw, svc_path, {"metadata": {"name": "lb"}, "spec": spec})
    assert svc["spec"]["allocateLoadBalancerNodePorts"] is True
    assert 30000 <= svc["spec"]["healthCheckNodePort"] <= 32767
    lb_status = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}
    status, body = await raw.json("PATCH", f"{svc_path}/lb/status", json=lb_status, headers=MERGE)
    assert status == 200, body
    assert body["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.10", "ipMode": "VIP"}]

    event = await create(
        raw,
        f"/api/v1/namespaces/{ns}/events",
        {
            "metadata": {"name": "ev"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
            "reason": "Started",
            "type": "Normal",
        },
    )
    assert {k: event[k] for k in ("eventTime", "firstTimestamp", "lastTimestamp", "source")} == {
        "eventTime": None,
        "firstTimestamp": None,
        "lastTimestamp": None,
        "source": {},
    }
    assert (event["reportingComponent"], event["reportingInstance"]) == ("", "")
