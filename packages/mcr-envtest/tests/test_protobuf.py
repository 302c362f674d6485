"""Protobuf request bodies for every served built-in kind, and every ``kubectl create`` form."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from mcr_envtest.resources import BUILTINS
from mcr_envtest.schema.protobuf import PROTOBUF, decode_protobuf

from .conftest import Raw
from .protoenc import encode

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

POD_SPEC = {
    "containers": [
        {
            "name": "app",
            "image": "nginx:1.27",
            "ports": [{"containerPort": 80, "name": "http"}],
            "env": [{"name": "A", "value": "1"}],
            "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}},
            "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5},
        }
    ],
    "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}],
    "terminationGracePeriodSeconds": 0,
}
TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": POD_SPEC}
SELECTOR = {"matchLabels": {"app": "web"}}
WEBHOOK = {
    "name": "hook.example.com",
    "clientConfig": {"url": "https://hook.example.com/", "caBundle": "Y2E="},
    "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
    "sideEffects": "None",
    "admissionReviewVersions": ["v1"],
    "timeoutSeconds": 3,
}
CRD_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1.5, "default": 2},
                "tags": {"type": "array", "items": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        }
    },
}

# (group, plural) → a body (without metadata.name) exercising the kind's fields
SAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("", "namespaces"): {"metadata": {"labels": {"team": "a"}}},
    ("", "configmaps"): {"data": {"a": "1", "empty": ""}, "binaryData": {"b": "AAEC"}, "immutable": False},
    ("", "secrets"): {"type": "Opaque", "data": {"k": "c2VjcmV0"}, "stringData": {"s": "plain"}},
    ("", "serviceaccounts"): {"automountServiceAccountToken": False, "imagePullSecrets": [{"name": "reg"}]},
    ("", "events"): {
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
        "reason": "Started",
        "message": "started",
        "type": "Normal",
        "count": 3,
        "firstTimestamp": "2025-01-02T03:04:05Z",
        "source": {"component": "test"},
    },
    ("", "services"): {
        "spec": {
            "selector": {"app": "web"},
            "ports": [
                {"name": "http", "port": 80, "targetPort": "http"},
                {"name": "alt", "port": 81, "targetPort": 8081},
            ],
        }
    },
    ("", "pods"): {"spec": POD_SPEC},
    ("", "nodes"): {
        "spec": {
            "podCIDR": "10.0.0.0/24",
            "unschedulable": True,
            # with the taint admission adds to a new Node, so what is read back is what was sent
            "taints": [
                {"key": "k", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
            ],
        }
    },
    ("", "endpoints"): {
        "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80, "name": "http"}]}]
    },
    ("", "persistentvolumeclaims"): {
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    },
    ("", "persistentvolumes"): {
        "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/d"}}
    },
    ("", "resourcequotas"): {"spec": {"hard": {"pods": "10", "requests.cpu": "2"}}},
    # Bounds only claims (which request storage anyway): the namespace's pods stay as they are.
    ("", "limitranges"): {"spec": {"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "1Ti"}}]}},
    ("", "replicationcontrollers"): {
        "spec": {"replicas": 0, "selector": {"app": "web"}, "template": TEMPLATE}
    },
    ("apiregistration.k8s.io", "apiservices"): {
        "spec": {"group": "example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10}
    },
    ("apps", "deployments"): {
        "spec": {
            "replicas": 0,
            "selector": SELECTOR,
            "template": TEMPLATE,
            "minReadySeconds": 3,
            "paused": True,
        }
    },
    ("apps", "replicasets"): {"spec": {"replicas": 2, "selector": SELECTOR, "template": TEMPLATE}},
    ("apps", "statefulsets"): {
        "spec": {"replicas": 1, "serviceName": "web", "selector": SELECTOR, "template": TEMPLATE}
    },
    ("apps", "daemonsets"): {"spec": {"selector": SELECTOR, "template": TEMPLATE}},
    ("events.k8s.io", "events"): {
        "eventTime": "2025-01-02T03:04:05.123456Z",
        "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-1",
        "action": "Reconcile",
        "reason": "Done",
        "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "p"},
    },
    ("authentication.k8s.io", "selfsubjectreviews"): {},
    ("authentication.k8s.io", "tokenreviews"): {"spec": {"token": "not-a-token"}},
    ("authorization.k8s.io", "subjectaccessreviews"): {
        "spec": {
            "user": "alice",
            "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"},
        }
    },
    ("authorization.k8s.io", "selfsubjectaccessreviews"): {
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}}
    },
    ("authorization.k8s.io", "selfsubjectrulesreviews"): {"spec": {"namespace": "default"}},
    ("autoscaling", "horizontalpodautoscalers"): {
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 5,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "memory",
                        "target": {"type": "AverageValue", "averageValue": "100Mi"},
                    },
                }
            ],
        }
    },
    ("batch", "jobs"): {
        "spec": {
            "backoffLimit": 2,
            "template": {"spec": {**POD_SPEC, "restartPolicy": "Never"}},
        }
    },
    ("batch", "cronjobs"): {
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {**POD_SPEC, "restartPolicy": "OnFailure"}}}},
        }
    },
    ("networking.k8s.io", "ingresses"): {
        "spec": {
            "ingressClassName": "nginx",
            "rules": [
                {
                    "host": "a.example.com",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "web", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ],
        }
    },
    ("networking.k8s.io", "ingressclasses"): {"spec": {"controller": "example.com/ingress"}},
    ("networking.k8s.io", "networkpolicies"): {
        "spec": {
            "podSelector": SELECTOR,
            "ingress": [{"ports": [{"protocol": "TCP", "port": 80}]}],
            "policyTypes": ["Ingress"],
        }
    },
    ("policy", "poddisruptionbudgets"): {"spec": {"maxUnavailable": "25%", "selector": SELECTOR}},
    ("rbac.authorization.k8s.io", "clusterrolebindings"): {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}],
    },
    ("rbac.authorization.k8s.io", "clusterroles"): {
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {"nonResourceURLs": ["/x"], "verbs": ["get"]},
        ]
    },
    ("rbac.authorization.k8s.io", "rolebindings"): {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
    },
    ("rbac.authorization.k8s.io", "roles"): {
        "rules": [
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"], "resourceNames": ["web"]}
        ]
    },
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): {"webhooks": [WEBHOOK]},
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): {"webhooks": [WEBHOOK]},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {
        "spec": {
            "group": "proto.example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing", "shortNames": ["th"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": CRD_SCHEMA},
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
                    ],
                    "subresources": {"status": {}},
                }
            ],
        }
    },
    ("scheduling.k8s.io", "priorityclasses"): {"value": -5, "description": "low"},
    ("coordination.k8s.io", "leases"): {
        "spec": {
            "holderIdentity": "me",
            "leaseDurationSeconds": 15,
            "acquireTime": "2025-01-02T03:04:05.000001Z",
            "renewTime": "2025-01-02T03:04:06.250000Z",
            "leaseTransitions": 2,
        }
    },
    ("discovery.k8s.io", "endpointslices"): {
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
    },
}
# kinds whose objects kube-apiserver refuses with any metadata ("metadata: must be empty")
NAMELESS = {
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
}
# names the server constrains: one fixed name per kind (created via protobuf, then via JSON)
FIXED_NAMES = {
    ("apiregistration.k8s.io", "apiservices"): "v1.example.com",
    ("apiextensions.k8s.io", "customresourcedefinitions"): "things.proto.example.com",
}
CREATABLE = [i for i in BUILTINS if "create" in i.verbs]


def path_of(group: str, version: str, plural: str, namespaced: bool) -> str:
    base = f"/apis/{group}/{version}" if group else "/api/v1"
    return f"{base}/namespaces/default/{plural}" if namespaced else f"{base}/{plural}"


def normalized(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without what differs between two creations of the same body (a Job's generated
    selector and labels name its uid and name)."""
    md = obj.get("metadata") or {}
    text = json.dumps(obj)
    for key in ("uid", "name"):
        if isinstance(md.get(key), str) and md[key]:
            text = text.replace(json.dumps(md[key]), json.dumps(f"<{key}>"))
    out = json.loads(text)
    md = out.get("metadata") or {}
    for key in ("name", "uid", "resourceVersion", "creationTimestamp", "managedFields"):
        md.pop(key, None)
    (md.get("labels") or {}).pop("kubernetes.io/metadata.name", None)  # a namespace's name
    spec = out.get("spec") or {}
    for key in ("clusterIP", "clusterIPs"):
        spec.pop(key, None)
    status = out.get("status") or {}
    for c in status.get("conditions") or []:
        c.pop("lastTransitionTime", None)
    return out


def test_every_creatable_builtin_has_a_sample() -> None:
    assert {(i.group, i.plural) for i in CREATABLE} == set(SAMPLES)


# kinds whose two creates differ on kube-apiserver for reasons other than the body's encoding:
# admission and controllers add fields (namespace labels, pod service-account volumes, node
# taints, job selectors, CRD conditions) or the review answers vary between the two requests
_ADMITTED = {
    ("", "namespaces"),
    ("", "pods"),
    ("", "nodes"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("batch", "jobs"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
}
# Kinds served at more than one version whose other versions need a body of their own.
VERSION_SAMPLES: dict[tuple[str, str, str], dict[str, Any]] = {
    ("autoscaling", "v1", "horizontalpodautoscalers"): {
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 5,
            "targetCPUUtilizationPercentage": 70,
        }
    },
}
_ENVTEST_ONLY = pytest.mark.envtest_only(
    "kube-apiserver's admission and controllers change this kind between two creates"
)
CREATABLE_PARAMS = [
    pytest.param(
        i,
        id=f"{i.group or 'core'}/{i.plural}",
        marks=[_ENVTEST_ONLY] if (i.group, i.plural) in _ADMITTED else [],
    )
    for i in CREATABLE
]


@pytest.mark.parametrize("info", CREATABLE_PARAMS)
async def test_protobuf_body_of_every_builtin_kind(raw: Raw, info: Any) -> None:
    path = path_of(info.group, info.version, info.plural, info.namespaced)
    key = (info.group, info.plural)
    reviews = "create" in info.verbs and "get" not in info.verbs

    def body(name: str) -> dict[str, Any]:
        b = copy.deepcopy(VERSION_SAMPLES.get((info.group, info.version, info.plural), SAMPLES[key]))
        if key not in NAMELESS:
            b["metadata"] = {**b.get("metadata", {}), "name": name}
        return {"apiVersion": info.api_version, "kind": info.kind, **b}

    name = FIXED_NAMES.get(key, "from-proto")
    sent = body(name)
    data = encode(sent)
    assert decode_protobuf(data)["kind"] == info.kind
    async with raw.request("POST", path, data=data, headers={"Content-Type": PROTOBUF}) as resp:
        via_proto = await resp.json()
        assert resp.status == 201, via_proto.get("message", via_proto)
    if key in FIXED_NAMES:
        status, _ = await raw.json("DELETE", f"{path}/{name}")
        assert status == 200
        if key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            from mcr.testing import eventually

            async def gone() -> bool:
                return (await raw.json("GET", f"{path}/{name}"))[0] == 404

            await eventually(gone, timeout=10)
    status, via_json = await raw.json("POST", path, json=body(name if key in FIXED_NAMES else "from-json"))
    assert status == 201, via_json
    if reviews:
        for r in (via_proto, via_json):
            r["metadata"].pop("creationTimestamp", None)
            r["metadata"].pop("name", None)
            # The two answers came a moment apart: their managedFields times may differ by a second.
            for entry in r["metadata"].get("managedFields", []):
                entry.pop("time", None)
        assert via_proto == via_json
        return
    assert normalized(via_proto) == normalized(via_json)
    # everything the sample set came back (defaults may add more)
    sample = {k: v for k, v in sent.items() if not (key == ("", "secrets") and k == "stringData")}
    assert contains(via_proto, sample), (via_proto, sample)


def contains(actual: Any, expected: Any) -> bool:
    """``expected`` is part of ``actual``: maps by key (extra keys allowed), lists item by item."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and contains(actual[k], v) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list) and len(actual) == len(expected) and all(map(contains, actual, expected))
        )
    return bool(actual == expected)


async def test_malformed_protobuf_bodies_are_client_errors(raw: Raw) -> None:
    import random

    rng = random.Random(7)
    good = encode(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            **SAMPLES[("apps", "deployments")],
            "metadata": {"name": "fuzz"},
        }
    )
    path = "/apis/apps/v1/namespaces/default/deployments"
    statuses = set()
    for i in range(150):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(4, len(data))
            data[pos] = rng.randrange(256)
        if i % 5 == 0:
            data = data[: rng.randrange(4, len(data))]
        async with raw.request("POST", path, data=bytes(data), headers={"Content-Type": PROTOBUF}) as resp:
            statuses.add(resp.status)
            body = await resp.json()
        assert resp.status < 500, body
        if resp.status == 400:  # kube-apiserver words it after what its decoder tripped on
            assert body["reason"] == "BadRequest", body
        await raw.json("DELETE", f"{path}/fuzz")
    assert 400 in statuses  # undecodable bodies are refused as unrecognized objects


KUBECTL_CREATE: list[tuple[list[str], str, str, str]] = [
    # (kubectl create arguments, resource, name, jsonpath → expected)
    (
        ["deployment", "web", "--image=nginx:1.27", "--replicas=0", "--port=80"],
        "deployment",
        "web",
        "{.spec.replicas}/{.spec.template.spec.containers[0].ports[0].containerPort}=0/80",
    ),
    (
        ["job", "once", "--image=busybox", "--", "echo", "hi"],
        "job",
        "once",
        "{.spec.template.spec.containers[0].command[1]}/{.spec.template.spec.restartPolicy}=hi/Never",
    ),
    (
        ["cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *", "--", "date"],
        "cronjob",
        "tick",
        "{.spec.schedule}=*/5 * * * *",
    ),
    (["service", "clusterip", "cip", "--tcp=80:8080"], "service", "cip", "{.spec.ports[0].targetPort}=8080"),
    (
        ["service", "nodeport", "np", "--tcp=80:8080", "--node-port=30080"],
        "service",
        "np",
        "{.spec.type}/{.spec.ports[0].nodePort}=NodePort/30080",
    ),
    (["service", "loadbalancer", "lb", "--tcp=443:8443"], "service", "lb", "{.spec.type}=LoadBalancer"),
    (
        ["service", "externalname", "ext", "--external-name=db.example.com"],
        "service",
        "ext",
        "{.spec.externalName}=db.example.com",
    ),
    (
        ["ingress", "ing", "--class=nginx", "--rule=a.example.com/api*=api:8080"],
        "ingress",
        "ing",
        "{.spec.rules[0].http.paths[0].pathType}/{.spec.rules[0].http.paths[0].backend.service.port.number}=Prefix/8080",
    ),
    (
        ["poddisruptionbudget", "pdb", "--selector=app=web", "--min-available=50%"],
        "pdb",
        "pdb",
        "{.spec.minAvailable}=50%",
    ),
    (
        ["priorityclass", "high", "--value=1000", "--description=important"],
        "priorityclass",
        "high",
        "{.value}/{.preemptionPolicy}=1000/PreemptLowerPriority",
    ),
    (["quota", "q", "--hard=pods=10,requests.cpu=2"], "quota", "q", "{.spec.hard.pods}=10"),
    (["secret", "generic", "gen", "--from-literal=user=admin"], "secret", "gen", "{.data.user}=YWRtaW4="),
    (
        [
            "secret",
            "docker-registry",
            "reg",
            "--docker-server=r.example.com",
            "--docker-username=u",
            "--docker-password=p",
        ],
        "secret",
        "reg",
        "{.type}=kubernetes.io/dockerconfigjson",
    ),
    (["configmap", "cfg", "--from-literal=a=b"], "configmap", "cfg", "{.data.a}=b"),
    (["role", "reader", "--verb=get,list", "--resource=pods"], "role", "reader", "{.rules[0].verbs[1]}=list"),
    (
        ["clusterrole", "creader", "--verb=get", "--resource=nodes"],
        "clusterrole",
        "creader",
        "{.rules[0].resources[0]}=nodes",
    ),
    (
        ["rolebinding", "rb", "--role=reader", "--user=alice"],
        "rolebinding",
        "rb",
        "{.subjects[0].name}=alice",
    ),
    (
        ["clusterrolebinding", "crb", "--clusterrole=creader", "--group=devs"],
        "clusterrolebinding",
        "crb",
        "{.subjects[0].kind}=Group",
    ),
    (["serviceaccount", "bot"], "serviceaccount", "bot", "{.metadata.name}=bot"),
    (["namespace", "team-a"], "namespace", "team-a", "{.status.phase}=Active"),
]


@pytest.mark.kubectl
def test_kubectl_create_forms(kubectl: Kubectl) -> None:
    for args, resource, name, check in KUBECTL_CREATE:
        out = kubectl("create", *args)
        assert out.returncode == 0, (args, out.stderr)
        expr, _, want = check.partition("=")
        got = kubectl("get", resource, name, "-o", f"jsonpath={expr}")
        assert got.returncode == 0, got.stderr
        assert got.stdout == want, args
    token = kubectl("create", "token", "bot", "--duration=15m")
    assert token.returncode == 0, token.stderr
    assert token.stdout.count(".") == 2
