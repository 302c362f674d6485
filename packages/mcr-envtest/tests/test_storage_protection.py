"""PersistentVolume and claim protection: the finalizers kube-apiserver adds on create and when
kube-controller-manager drops them again (both lanes)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from mcr.testing import eventually

from .conftest import Raw, workload_namespace

PV_FIN = "kubernetes.io/pv-protection"
PVC_FIN = "kubernetes.io/pvc-protection"
CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


@pytest.fixture
async def ns(raw: Raw) -> AsyncIterator[str]:
    async for name in workload_namespace(raw, "sp"):
        yield name


async def gone(raw: Raw, path: str) -> bool:
    return await raw.status("GET", path) == 404


async def test_volume_gets_its_finalizer_unowned_and_goes_once_deleted(raw: Raw) -> None:
    name = f"pv-{uuid.uuid4().hex[:8]}"
    spec = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/d"}}
    body = {"metadata": {"name": name, "finalizers": ["example.com/keep"]}, "spec": spec}
    status, pv = await raw.json("POST", "/api/v1/persistentvolumes", json=body)
    assert status == 201, pv
    assert pv["metadata"]["finalizers"] == ["example.com/keep", PV_FIN]
    # added by admission after field management: the writer owns only the finalizer it sent
    (entry,) = pv["metadata"]["managedFields"]
    owned = set(entry["fieldsV1"]["f:metadata"]["f:finalizers"]) - {"."}
    assert owned == {'v:"example.com/keep"'}
    path = f"/api/v1/persistentvolumes/{name}"
    status, out = await raw.json("DELETE", path)
    assert status == 200, out
    assert out["metadata"]["deletionTimestamp"]
    # an unbound volume loses its protection; the foreign finalizer still holds it
    await eventually(
        lambda: _finalizers(raw, path, ["example.com/keep"]), message="pv-protection finalizer stays"
    )
    patch = [{"op": "remove", "path": "/metadata/finalizers"}]
    headers = {"Content-Type": "application/json-patch+json"}
    assert await raw.status("PATCH", path, json=patch, headers=headers) == 200
    await eventually(lambda: gone(raw, path), message="volume stays")


async def _finalizers(raw: Raw, path: str, want: list[str]) -> bool:
    status, obj = await raw.json("GET", path)
    assert status == 200, obj
    return bool(obj["metadata"].get("finalizers") == want)


async def test_claim_stays_while_a_scheduled_pod_mounts_it(raw: Raw, ns: str) -> None:
    claims = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    for name in ("used", "unused"):
        status, claim = await raw.json("POST", claims, json={"metadata": {"name": name}, "spec": CLAIM_SPEC})
        assert status == 201, claim
        assert claim["metadata"]["finalizers"] == [PVC_FIN]
        assert "f:metadata" not in claim["metadata"]["managedFields"][0]["fieldsV1"]
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "c", "image": "busybox"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "used"}}],
        },
    }
    status, out = await raw.json("POST", f"/api/v1/namespaces/{ns}/pods", json=pod)
    assert status == 201, out
    for name in ("used", "unused"):
        status, out = await raw.json("DELETE", f"{claims}/{name}")
        assert status == 200, out
        assert out["metadata"]["finalizers"] == [PVC_FIN]
        assert out["metadata"]["deletionTimestamp"]
    await eventually(lambda: gone(raw, f"{claims}/unused"), message="unused claim stays")
    status, used = await raw.json("GET", f"{claims}/used")
    assert status == 200, used
    assert used["metadata"]["finalizers"] == [PVC_FIN]
    # the pod going releases the claim
    status, out = await raw.json("DELETE", f"/api/v1/namespaces/{ns}/pods/p", json={"gracePeriodSeconds": 0})
    assert status == 200, out
    await eventually(lambda: gone(raw, f"{claims}/used"), message="claim stays after its pod went")
