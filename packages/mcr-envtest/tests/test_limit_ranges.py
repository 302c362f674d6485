"""LimitRanges as kube-apiserver serves and enforces them: their defaults and validation, and
the LimitRanger admission of Pods and PersistentVolumeClaims in their namespace (both lanes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from .conftest import Raw, workload_namespace

ANNOTATION = "kubernetes.io/limit-ranger"


@pytest.fixture
async def ns(raw: Raw) -> AsyncIterator[str]:
    async for name in workload_namespace(raw, "limits"):
        yield name


async def limit_range(raw: Raw, ns: str, name: str, *items: dict[str, Any]) -> tuple[int, Any]:
    body = {"metadata": {"name": name}, "spec": {"limits": list(items)}}
    return await raw.json("POST", f"/api/v1/namespaces/{ns}/limitranges", json=body)


async def pod(raw: Raw, ns: str, name: str, *resources: dict[str, Any]) -> tuple[int, Any]:
    containers = [{"name": f"c{i}", "image": "x", "resources": r} for i, r in enumerate(resources)]
    body = {"metadata": {"name": name}, "spec": {"containers": containers}}
    return await raw.json("POST", f"/api/v1/namespaces/{ns}/pods", json=body)


async def test_a_container_items_defaults_come_from_its_max_default_and_min(raw: Raw, ns: str) -> None:
    item = {"type": "Container", "max": {"memory": "1Gi"}, "min": {"cpu": "10m"}, "default": {"cpu": "500m"}}
    status, body = await limit_range(raw, ns, "limits", item, {"type": "Pod", "max": {"cpu": "4"}})
    assert status == 201, body
    container, whole_pod = body["spec"]["limits"]
    assert container["default"] == {"cpu": "500m", "memory": "1Gi"}
    assert container["defaultRequest"] == {"cpu": "500m", "memory": "1Gi"}
    assert whole_pod == {"type": "Pod", "max": {"cpu": "4"}}


async def test_bounds_that_contradict_each_other_are_refused(raw: Raw, ns: str) -> None:
    # The defaults (from max) are in place before validation, as upstream orders it.
    status, body = await limit_range(
        raw, ns, "bad", {"type": "Container", "max": {"cpu": "100m"}, "min": {"cpu": "200m"}}
    )
    assert status == 422, body
    assert [(c["message"], c["field"]) for c in body["details"]["causes"]] == [
        ('Invalid value: "200m": min value 200m is greater than max value 100m', "spec.limits[0].min[cpu]"),
        (
            'Invalid value: "100m": min value 200m is greater than default request value 100m',
            "spec.limits[0].defaultRequest[cpu]",
        ),
        (
            'Invalid value: "200m": min value 200m is greater than default value 100m',
            "spec.limits[0].default[cpu]",
        ),
    ]
    status, body = await limit_range(
        raw, ns, "bad", {"type": "Pod", "default": {"cpu": "1"}}, {"type": "Pod"}
    )
    assert status == 422, body
    assert [(c["reason"], c["field"]) for c in body["details"]["causes"]] == [
        ("FieldValueForbidden", "spec.limits[0].default"),
        ("FieldValueDuplicate", "spec.limits[1].type"),
    ]
    status, body = await limit_range(raw, ns, "bad", {"max": {"cpu": "1"}})
    assert status == 422, body
    assert [c["message"] for c in body["details"]["causes"]] == [
        'Invalid value: "": name part must be non-empty',
        "Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
        "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ]


async def test_a_new_pods_containers_get_the_defaults_they_lack(raw: Raw, ns: str) -> None:
    item = {
        "type": "Container",
        "default": {"cpu": "500m", "memory": "256Mi"},
        "defaultRequest": {"cpu": "100m"},
    }
    status, body = await limit_range(raw, ns, "limits", item)
    assert status == 201, body
    status, out = await pod(raw, ns, "p", {}, {"limits": {"memory": "128Mi"}})
    assert status == 201, out
    first, second = (c["resources"] for c in out["spec"]["containers"])
    assert first == {
        "limits": {"cpu": "500m", "memory": "256Mi"},
        "requests": {"cpu": "100m", "memory": "256Mi"},
    }
    # A limit sent is kept, and (pod defaulting) is the request where none was sent.
    assert second == {
        "limits": {"cpu": "500m", "memory": "128Mi"},
        "requests": {"cpu": "100m", "memory": "128Mi"},
    }
    assert out["metadata"]["annotations"][ANNOTATION] == (
        "LimitRanger plugin set: cpu, memory request for container c0; cpu, memory limit for container c0; "
        "cpu request for container c1; cpu limit for container c1"
    )
    # What admission set belongs to no field manager.
    owned = out["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:containers"]
    assert owned['k:{"name":"c0"}']["f:resources"] == {}


async def test_pods_and_claims_outside_the_bounds_are_forbidden(raw: Raw, ns: str) -> None:
    items = (
        {"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "10m"}},
        {"type": "Pod", "max": {"memory": "1Gi"}},
        {"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}},
    )
    status, body = await limit_range(raw, ns, "limits", *items)
    assert status == 201, body

    status, out = await pod(raw, ns, "over", {"limits": {"cpu": "3", "memory": "512Mi"}})
    assert status == 403, out
    assert out["message"] == 'pods "over" is forbidden: maximum cpu usage per Container is 2, but limit is 3'
    assert (out["reason"], out["details"]) == ("Forbidden", {"name": "over", "kind": "pods"})

    status, out = await pod(raw, ns, "pair", *[{"limits": {"cpu": "1", "memory": "768Mi"}}] * 2)
    assert status == 403, out
    assert (
        out["message"] == 'pods "pair" is forbidden: maximum memory usage per Pod is 1Gi, but limit is 1536Mi'
    )

    # The container gets cpu from the Container item's defaults (its max); nothing gives memory.
    status, out = await pod(raw, ns, "none", {})
    assert status == 403, out
    assert (
        out["message"]
        == 'pods "none" is forbidden: maximum memory usage per Pod is 1Gi.  No limit is specified'
    )

    status, out = await pod(raw, ns, "both", {"limits": {"cpu": "3", "memory": "2Gi"}})
    assert status == 403, out
    assert out["message"] == (
        'pods "both" is forbidden: [maximum cpu usage per Container is 2, but limit is 3, '
        "maximum memory usage per Pod is 1Gi, but limit is 2Gi]"
    )

    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}
    status, out = await raw.json(
        "POST",
        f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
        json={"metadata": {"name": "big"}, "spec": claim},
    )
    assert status == 403, out
    assert out["message"] == (
        'persistentvolumeclaims "big" is forbidden: maximum storage usage per PersistentVolumeClaim is 10Gi, '
        "but request is 20Gi"
    )

    status, out = await pod(raw, ns, "fits", {"limits": {"cpu": "1", "memory": "512Mi"}})
    assert status == 201, out
