"""Writes kube-apiserver refuses as invalid are refused the same way: status, message and causes
of Services, Pods and workload controllers (both lanes)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .conftest import Raw, crd_served

POD_SPEC = {"containers": [{"name": "c", "image": "nginx"}]}


@pytest.fixture
async def ns(raw: Raw) -> AsyncIterator[str]:
    name = f"valid-{uuid.uuid4().hex[:8]}"
    status, body = await raw.json(
        "POST",
        "/api/v1/namespaces",
        json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    assert status == 201, body
    yield name
    await raw.status("DELETE", f"/api/v1/namespaces/{name}")


def causes(body: Any) -> list[tuple[str, str, str]]:
    assert body["kind"] == "Status", body
    assert (body["code"], body["reason"]) == (422, "Invalid"), body
    return [(c["reason"], c["field"], c["message"]) for c in body["details"]["causes"]]


def service(name: str, ports: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": {"ports": ports}}


def deployment(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": POD_SPEC},
    }
    body.update(spec)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": body}


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        ([], [("FieldValueRequired", "spec.ports", "Required value")]),
        (
            [{"port": 70000}],
            [
                (
                    "FieldValueInvalid",
                    "spec.ports[0].port",
                    "Invalid value: 70000: must be between 1 and 65535, inclusive",
                ),
                (
                    "FieldValueInvalid",
                    "spec.ports[0].targetPort",
                    "Invalid value: 70000: must be between 1 and 65535, inclusive",
                ),
            ],
        ),
        (
            [{"name": "a", "port": 80}, {"name": "a", "port": 81}],
            [("FieldValueDuplicate", "spec.ports[1].name", 'Duplicate value: "a"')],
        ),
        (
            [{"port": 80}, {"port": 81}],
            [
                ("FieldValueRequired", "spec.ports[0].name", "Required value"),
                ("FieldValueRequired", "spec.ports[1].name", "Required value"),
            ],
        ),
    ],
)
async def test_invalid_service_ports(
    raw: Raw, ns: str, ports: list[dict[str, Any]], expected: list[tuple[str, str, str]]
) -> None:
    status, body = await raw.json("POST", f"/api/v1/namespaces/{ns}/services", json=service("svc", ports))
    assert status == 422
    assert causes(body) == expected
    assert body["message"].startswith('Service "svc" is invalid: ')


async def test_service_cluster_ip_may_not_change(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/services"
    status, body = await raw.json("POST", path, json=service("web", [{"port": 80}]))
    assert status == 201, body
    patch = {"spec": {"clusterIP": "10.0.0.200", "clusterIPs": ["10.0.0.200"]}}
    if body["spec"]["clusterIP"] == "10.0.0.200":
        patch = {"spec": {"clusterIP": "10.0.0.201", "clusterIPs": ["10.0.0.201"]}}
    status, body = await raw.json(
        "PATCH", f"{path}/web", json=patch, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert status == 422
    ip = patch["spec"]["clusterIP"]
    assert causes(body) == [
        ("FieldValueInvalid", "spec.clusterIPs[0]", f'Invalid value: ["{ip}"]: may not change once set')
    ]
    status, body = await raw.json(
        "PATCH",
        f"{path}/web",
        json={"metadata": {"labels": {"a": "b"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200, body


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": []}, [("FieldValueRequired", "spec.containers", "Required value")]),
        (
            {"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]},
            [("FieldValueDuplicate", "spec.containers[1].name", 'Duplicate value: "a"')],
        ),
        (
            {**POD_SPEC, "restartPolicy": "Sometimes"},
            [
                (
                    "FieldValueNotSupported",
                    "spec.restartPolicy",
                    'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
                )
            ],
        ),
    ],
)
async def test_invalid_pod_specs(
    raw: Raw, ns: str, spec: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    status, body = await raw.json("POST", f"/api/v1/namespaces/{ns}/pods", json=pod)
    assert status == 422
    assert causes(body) == expected


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            deployment("mism", template={"metadata": {"labels": {"app": "b"}}, "spec": POD_SPEC}),
            [
                (
                    "FieldValueInvalid",
                    "spec.template.metadata.labels",
                    'Invalid value: {"app":"b"}: `selector` does not match template `labels`',
                )
            ],
        ),
        (
            deployment("neg", replicas=-1),
            [("FieldValueInvalid", "spec.replicas", "Invalid value: -1: must be greater than or equal to 0")],
        ),
        (
            deployment("rec", strategy={"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}),
            [
                (
                    "FieldValueForbidden",
                    "spec.strategy.rollingUpdate",
                    "Forbidden: may not be specified when strategy `type` is 'Recreate'",
                )
            ],
        ),
    ],
)
async def test_invalid_deployments(
    raw: Raw, ns: str, obj: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    status, body = await raw.json("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", json=obj)
    assert status == 422
    assert causes(body) == expected
    assert body["details"]["group"] == "apps"


async def test_workload_selectors_and_service_name_are_immutable(raw: Raw, ns: str) -> None:
    merge = {"Content-Type": "application/merge-patch+json"}
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    status, body = await raw.json("POST", path, json=deployment("web"))
    assert status == 201, body
    labels = {"app": "other"}
    change = {"spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}}}}
    status, body = await raw.json("PATCH", f"{path}/web", json=change, headers=merge)
    assert status == 422
    assert causes(body) == [
        (
            "FieldValueInvalid",
            "spec.selector",
            'Invalid value: {"matchLabels":{"app":"other"}}: field is immutable',
        )
    ]
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": POD_SPEC},
        },
    }
    path = f"/apis/apps/v1/namespaces/{ns}/statefulsets"
    status, body = await raw.json("POST", path, json=sts)
    assert status == 201, body
    status, body = await raw.json(
        "PATCH", f"{path}/db", json={"spec": {"serviceName": "other"}}, headers=merge
    )
    assert status == 422
    assert causes(body) == [
        ("FieldValueInvalid", "spec.serviceName", 'Invalid value: "other": field is immutable')
    ]
    status, body = await raw.json("PATCH", f"{path}/db", json={"spec": {"replicas": 2}}, headers=merge)
    assert status == 200, body


def secret(name: str, kind: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": kind, "data": data}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            secret("tls", "kubernetes.io/tls", {"tls.crt": "YQ=="}),
            [("FieldValueRequired", "data[tls.key]", "Required value")],
        ),
        (
            secret("docker", "kubernetes.io/dockerconfigjson", {}),
            [("FieldValueRequired", "data[.dockerconfigjson]", "Required value")],
        ),
        (
            secret("basic", "kubernetes.io/basic-auth", {}),
            [
                ("FieldValueRequired", "data[username]", "Required value"),
                ("FieldValueRequired", "data[password]", "Required value"),
            ],
        ),
    ],
)
async def test_typed_secrets_need_their_keys(
    raw: Raw, ns: str, obj: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    status, body = await raw.json("POST", f"/api/v1/namespaces/{ns}/secrets", json=obj)
    assert status == 422
    assert causes(body) == expected


async def test_owner_references_need_a_uid_and_one_controller(raw: Raw, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}]
    status, body = await raw.json("POST", path, json={"metadata": {"name": "a", "ownerReferences": refs}})
    assert status == 422
    assert causes(body) == [
        ("FieldValueRequired", "metadata.ownerReferences[0].uid", "Required value: must not be empty")
    ]
    refs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": str(uuid.uuid4()), "controller": True}
        for n in ("a", "b")
    ]
    status, body = await raw.json("POST", path, json={"metadata": {"name": "b", "ownerReferences": refs}})
    assert status == 422
    shown = ",".join(
        f'{{"apiVersion":"v1","kind":"ConfigMap","name":"{r["name"]}","uid":"{r["uid"]}","controller":true}}'
        for r in refs
    )
    assert causes(body) == [
        (
            "FieldValueInvalid",
            "metadata.ownerReferences",
            f"Invalid value: [{shown}]: Only one reference can have Controller set to true. "
            'Found "true" in references for ConfigMap/a and ConfigMap/b',
        )
    ]


async def test_jobs_and_cronjobs(raw: Raw, ns: str) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {**POD_SPEC, "restartPolicy": "Always"}}},
    }
    status, body = await raw.json("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", json=job)
    assert status == 422
    assert causes(body) == [
        (
            "FieldValueRequired",
            "spec.template.spec.restartPolicy",
            'Required value: valid values: "OnFailure", "Never"',
        )
    ]
    template = {"spec": {**POD_SPEC, "restartPolicy": "Never"}}
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "c"},
        "spec": {"schedule": "every day", "jobTemplate": {"spec": {"template": template}}},
    }
    status, body = await raw.json("POST", f"/apis/batch/v1/namespaces/{ns}/cronjobs", json=cron)
    assert status == 422
    assert causes(body) == [
        (
            "FieldValueInvalid",
            "spec.schedule",
            'Invalid value: "every day": expected exactly 5 fields, found 2: [every day]',
        )
    ]
    cron["spec"]["schedule"] = "*/5 * * * *"
    status, body = await raw.json("POST", f"/apis/batch/v1/namespaces/{ns}/cronjobs", json=cron)
    assert status == 201, body


async def test_rbac_rules(raw: Raw, ns: str) -> None:
    base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"
    role = {"metadata": {"name": "r"}, "rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}
    status, body = await raw.json("POST", f"{base}/roles", json=role)
    assert status == 422
    assert causes(body) == [
        (
            "FieldValueInvalid",
            "rules[0].nonResourceURLs",
            'Invalid value: ["/healthz"]: namespaced rules cannot apply to non-resource URLs',
        )
    ]
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}
    binding = {"metadata": {"name": "b"}, "roleRef": ref, "subjects": [{"kind": "Robot", "name": "x"}]}
    status, body = await raw.json("POST", f"{base}/rolebindings", json=binding)
    assert status == 422
    assert causes(body) == [
        (
            "FieldValueNotSupported",
            "subjects[0].kind",
            'Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"',
        )
    ]
    binding["subjects"] = [{"kind": "User", "name": "x", "apiGroup": "rbac.authorization.k8s.io"}]
    status, body = await raw.json("POST", f"{base}/rolebindings", json=binding)
    assert status == 201, body
    status, body = await raw.json(
        "PATCH",
        f"{base}/rolebindings/b",
        json={"roleRef": {"name": "other"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 422
    assert causes(body) == [
        (
            "FieldValueInvalid",
            "roleRef",
            'Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":"other"}: '
            "field is immutable",
        )
    ]


async def test_lease_duration_must_be_positive(raw: Raw, ns: str) -> None:
    lease = {"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}}
    status, body = await raw.json("POST", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", json=lease)
    assert status == 422
    assert causes(body) == [
        ("FieldValueInvalid", "spec.leaseDurationSeconds", "Invalid value: 0: must be greater than 0")
    ]


async def test_disruption_budgets_and_claims(raw: Raw, ns: str) -> None:
    pdb = {
        "metadata": {"name": "both"},
        "spec": {"minAvailable": 1, "maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }
    status, body = await raw.json("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", json=pdb)
    assert status == 422
    shown = (
        '{"MinAvailable":1,"Selector":{"matchLabels":{"app":"web"}},"MaxUnavailable":1,'
        '"UnhealthyPodEvictionPolicy":null}'
    )
    assert causes(body) == [
        (
            "FieldValueInvalid",
            "spec",
            f"Invalid value: {shown}: minAvailable and maxUnavailable cannot be both set",
        )
    ]
    claim = {"metadata": {"name": "noreq"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    status, body = await raw.json("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", json=claim)
    assert status == 422
    assert causes(body) == [("FieldValueRequired", "spec.resources[storage]", "Required value")]


async def test_custom_resource_set_and_map_lists_refuse_duplicates(raw: Raw, ns: str) -> None:
    group = f"v{uuid.uuid4().hex[:8]}.example.com"
    spec_schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "items": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
                },
            },
        },
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}},
                }
            ],
        },
    }
    status, body = await raw.json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
    assert status == 201, body
    try:
        await crd_served(raw, crd)
        path = f"/apis/{group}/v1/namespaces/{ns}/widgets"
        obj = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"tags": ["a", "a"]},
        }
        status, body = await raw.json("POST", path, json=obj)
        assert status == 422
        assert causes(body) == [("FieldValueDuplicate", "spec.tags[1]", 'Duplicate value: "a"')]
        obj["spec"] = {"items": [{"name": "y", "value": "1"}, {"name": "y", "value": "2"}]}
        status, body = await raw.json("POST", path, json=obj)
        assert status == 422
        assert causes(body) == [("FieldValueDuplicate", "spec.items[1]", 'Duplicate value: {"name":"y"}')]
    finally:
        await raw.status("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}")


_VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


@pytest.mark.parametrize(
    ("hook", "causes"),
    [
        (
            {"name": "nodots", "clientConfig": {"url": "http://x"}},
            [
                (
                    "webhooks[0].name",
                    'Invalid value: "nodots": should be a domain with at least three segments separated by '
                    "dots",
                ),
                ("webhooks[0].sideEffects", "Required value: must specify one of None, NoneOnDryRun"),
                (
                    "webhooks[0].clientConfig.url",
                    "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                ),
                ("webhooks[0].admissionReviewVersions", "Required value: must specify one of v1, v1beta1"),
            ],
        ),
        (
            {
                "name": "a.b.c",
                "sideEffects": "Some",
                "clientConfig": {},
                "admissionReviewVersions": ["v9", "v9"],
            },
            [
                (
                    "webhooks[0].sideEffects",
                    'Unsupported value: "Some": supported values: "None", "NoneOnDryRun"',
                ),
                ("webhooks[0].clientConfig", "Required value: exactly one of url or service is required"),
                ("webhooks[0].admissionReviewVersions[1]", 'Invalid value: "v9": duplicate version'),
                (
                    "webhooks[0].admissionReviewVersions",
                    'Invalid value: ["v9","v9"]: must include at least one of v1, v1beta1',
                ),
            ],
        ),
    ],
)
async def test_webhook_configuration_validation_order_and_words(
    raw: Raw, hook: dict[str, Any], causes: list[tuple[str, str]]
) -> None:
    body = {"metadata": {"name": f"bad-{uuid.uuid4().hex[:8]}"}, "webhooks": [hook]}
    status, out = await raw.json("POST", _VWC, json=body)
    assert (status, out["reason"]) == (422, "Invalid"), out
    assert [(c["field"], c["message"]) for c in out["details"]["causes"]] == causes
