"""The resources real clusters serve beyond the basics, their defaults (on create and on every
update), the objects present at start, and ``kubectl auth can-i --list``."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client

from mcr_envtest import ServerThread

from .conftest import Raw

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

# (collection path, body, a field the server defaults, its default)
KINDS: list[tuple[str, dict[str, Any], tuple[str, ...], Any]] = [
    (
        "/apis/apiregistration.k8s.io/v1/apiservices",
        {
            "metadata": {"name": "v1.example.com"},
            "spec": {
                "group": "example.com",
                "version": "v1",
                "groupPriorityMinimum": 100,
                "versionPriority": 1,
            },
        },
        ("status", "conditions", 0, "reason"),
        "Local",
    ),
    (
        "/apis/networking.k8s.io/v1/ingressclasses",
        {"metadata": {"name": "nginx"}, "spec": {"controller": "example.com/ingress"}},
        ("spec", "controller"),
        "example.com/ingress",
    ),
    (
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": "pv1"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/d"},
            },
        },
        ("spec", "persistentVolumeReclaimPolicy"),
        "Retain",
    ),
    (
        "/api/v1/namespaces/default/resourcequotas",
        {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "10"}}},
        ("spec", "hard", "pods"),
        "10",
    ),
    (
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        {
            "metadata": {"name": "pdb"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
        ("spec", "minAvailable"),
        1,
    ),
    (
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"metadata": {"name": "high"}, "value": 1000},
        ("preemptionPolicy",),
        "PreemptLowerPriority",
    ),
    (
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
        {
            "metadata": {"name": "web"},
            "spec": {
                "maxReplicas": 5,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            },
        },
        ("spec", "minReplicas"),
        1,
    ),
    (
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        {
            "metadata": {"name": "web-abc"},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"]}],
            "ports": [{"name": "http", "port": 80}],
        },
        ("ports", 0, "protocol"),
        "TCP",
    ),
    (
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        {
            "metadata": {"name": "check"},
            "webhooks": [
                {
                    "name": "check.example.com",
                    "clientConfig": {"url": "https://hook.example.com/check"},
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        },
        ("webhooks", 0, "failurePolicy"),
        "Fail",
    ),
    (
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        {
            "metadata": {"name": "mutate"},
            "webhooks": [
                {
                    "name": "mutate.example.com",
                    "clientConfig": {"url": "https://hook.example.com/mutate"},
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        },
        ("webhooks", 0, "reinvocationPolicy"),
        "Never",
    ),
]


def dig(obj: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


@pytest.mark.parametrize(
    ("path", "body", "field", "default"), KINDS, ids=[k[0].rsplit("/", 1)[1] for k in KINDS]
)
async def test_kind_is_served_with_defaults_on_create_and_update(
    raw: Raw, path: str, body: dict[str, Any], field: tuple[str | int, ...], default: Any
) -> None:
    status, created = await raw.json("POST", path, json=body)
    assert status == 201, created
    assert dig(created, field) == default
    name = body["metadata"]["name"]
    status, listed = await raw.json("GET", path)
    assert status == 200
    assert name in [i["metadata"]["name"] for i in listed["items"]]
    # a PUT of the original body (defaults left out) gets the defaults again
    replaced = dict(
        body, metadata=dict(body["metadata"], resourceVersion=created["metadata"]["resourceVersion"])
    )
    replaced.setdefault("spec", {})
    status, updated = await raw.json("PUT", f"{path}/{name}", json=replaced)
    assert status == 200, updated
    assert dig(updated, field) == default
    # ...and so does a merge patch that removes them
    patch = {"metadata": {"labels": {"patched": "yes"}}}
    status, patched = await raw.json(
        "PATCH", f"{path}/{name}", json=patch, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert status == 200
    assert dig(patched, field) == default


async def test_defaults_come_back_after_a_patch_removes_them(raw: Raw) -> None:
    path = "/apis/apps/v1/namespaces/default/deployments"
    body = {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
            },
        },
    }
    status, created = await raw.json("POST", path, json=body)
    assert status == 201
    assert created["spec"]["strategy"]["type"] == "RollingUpdate"
    status, patched = await raw.json(
        "PATCH",
        f"{path}/web",
        json={"spec": {"strategy": None, "revisionHistoryLimit": None}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200
    assert patched["spec"]["strategy"]["type"] == "RollingUpdate"
    assert patched["spec"]["revisionHistoryLimit"] == 10
    svc = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}
    status, created_svc = await raw.json("POST", "/api/v1/namespaces/default/services", json=svc)
    assert status == 201
    ip = created_svc["spec"]["clusterIP"]
    # a PUT without the allocated cluster IP keeps it (it is not re-allocated)
    put = dict(
        svc, metadata=dict(svc["metadata"], resourceVersion=created_svc["metadata"]["resourceVersion"])
    )
    status, replaced = await raw.json("PUT", "/api/v1/namespaces/default/services/s", json=put)
    assert status == 200
    assert replaced["spec"]["clusterIP"] == ip
    assert replaced["spec"]["ports"][0]["targetPort"] == 80


async def test_ingress_paths_need_a_path_type(raw: Raw) -> None:
    path = "/apis/networking.k8s.io/v1/namespaces/default/ingresses"
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    rule = {"host": "a.example.com", "http": {"paths": [{"path": "/", "backend": backend}]}}
    status, body = await raw.json("POST", path, json={"metadata": {"name": "web"}, "spec": {"rules": [rule]}})
    assert status == 422
    assert body["message"].startswith(  # kube-apiserver adds ": pathType must be specified"
        'Ingress.networking.k8s.io "web" is invalid: spec.rules[0].http.paths[0].pathType: Required value'
    )
    rule["http"]["paths"][0]["pathType"] = "Prefix"
    status, body = await raw.json("POST", path, json={"metadata": {"name": "web"}, "spec": {"rules": [rule]}})
    assert status == 201, body
    assert body["status"] == {"loadBalancer": {}}


def test_present_at_start_and_readable_by_the_official_client(
    apiserver: ServerThread, api_client: Any
) -> None:
    core = client.CoreV1Api(api_client)
    svc = core.read_namespaced_service("kubernetes", "default")
    assert svc.spec.cluster_ip == "10.96.0.1"
    assert [(p.name, p.port) for p in svc.spec.ports] == [("https", 443)]
    services = client.ApiregistrationV1Api(api_client).list_api_service().items
    names = {s.metadata.name for s in services}
    assert {"v1.", "v1.apps", "v2.autoscaling", "v1.networking.k8s.io", "v1.policy"} <= names
    assert all(s.status.conditions[0].type == "Available" for s in services)
    # typed reads of the new kinds parse in the official models
    net = client.NetworkingV1Api(api_client)
    net.create_namespaced_ingress(
        "default",
        {
            "metadata": {"name": "i"},
            "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}},
        },
    )
    assert net.read_namespaced_ingress("i", "default").spec.default_backend.service.name == "web"
    pdb = client.PolicyV1Api(api_client).create_namespaced_pod_disruption_budget(
        "default", {"metadata": {"name": "p"}, "spec": {"maxUnavailable": "50%"}}
    )
    assert pdb.spec.max_unavailable == "50%"
    hpa = client.AutoscalingV2Api(api_client).create_namespaced_horizontal_pod_autoscaler(
        "default",
        {
            "metadata": {"name": "h"},
            "spec": {
                "maxReplicas": 3,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
            },
        },
    )
    assert hpa.spec.metrics[0].resource.target.average_utilization == 80
    pv = core.create_persistent_volume(
        {
            "metadata": {"name": "pv"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/x"},
            },
        }
    )
    assert pv.status.phase == "Pending"
    sched = client.SchedulingV1Api(api_client)
    sched.create_priority_class({"metadata": {"name": "low"}, "value": 10})
    assert sched.read_priority_class("low").preemption_policy == "PreemptLowerPriority"


@pytest.mark.kubectl
def test_kubectl_get_and_auth_can_i_list(apiserver: ServerThread, kubectl: Kubectl) -> None:
    out = kubectl("get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "10.96.0.1"
    out = kubectl("get", "apiservices", "-o", "name")
    assert out.returncode == 0, out.stderr
    assert "apiservice.apiregistration.k8s.io/v1.apps" in out.stdout.split()
    out = kubectl("auth", "can-i", "--list")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert any(line.split()[:1] == ["*.*"] and "[*]" in line for line in lines)
    alice = apiserver.add_user("alice")
    path = apiserver.work_dir / "alice.kubeconfig"
    path.write_text(yaml.safe_dump(alice))
    kubectl(
        "create",
        "rolebinding",
        "alice-view",
        "--clusterrole=view",
        "--user=alice",
        "-n",
        "default",
        check=True,
    )
    out = kubectl("auth", "can-i", "--list", "-n", "default", kubeconfig=str(path))
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines()[1:] if line.split()}
    assert "configmaps" in rows
    assert "[get list watch]" in rows["configmaps"]
    assert "secrets" not in rows
    out = kubectl("get", "ingressclass,pv,pdb,pc,hpa,endpointslices,quota", "-A")
    assert out.returncode == 0, out.stderr
