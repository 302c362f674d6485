"""CRD conversion webhooks: custom resources read and written at a version other than the storage
version are converted through the CRD's webhook (ConversionReview v1), checked against a webhook
server of the test's own over HTTPS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from .conftest import Raw, crd_served
from .webhook_server import Hooks

GROUP = "convert.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _schema(field: str) -> dict[str, Any]:
    return {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {field: {"type": "integer"}}}},
        }
    }


def crd(hooks: Hooks) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"dials.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "dials", "singular": "dial", "kind": "Dial", "listKind": "DialList"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": _schema("size")},
                {"name": "v2", "served": True, "storage": False, "schema": _schema("count")},
            ],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": hooks.url + "/convert", "caBundle": hooks.ca_bundle},
                },
            },
        },
    }


def convert(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    """size (v1) <-> count (v2); a label records which way the object went."""
    out = dict(obj)
    spec = dict(obj.get("spec") or {})
    if desired.endswith("/v2") and "size" in spec:
        spec["count"] = spec.pop("size")
    if desired.endswith("/v1") and "count" in spec:
        spec["size"] = spec.pop("count")
    out["spec"] = spec
    out["apiVersion"] = desired
    meta = dict(obj["metadata"])
    meta["labels"] = {**(meta.get("labels") or {}), "converted-to": desired.rpartition("/")[2]}
    meta["generation"] = 99  # not the webhook's to change: the server keeps its own
    out["metadata"] = meta
    return out


@pytest.fixture
async def hooks(tmp_path: Path) -> AsyncIterator[Hooks]:
    h = Hooks()
    h.convert = convert
    await h.start(tmp_path)
    try:
        yield h
    finally:
        await h.close()


def path(version: str, name: str = "") -> str:
    base = f"/apis/{GROUP}/{version}/namespaces/default/dials"
    return f"{base}/{name}" if name else base


async def test_reads_and_writes_convert_through_the_webhook(raw: Raw, hooks: Hooks) -> None:
    status, body = await raw.json("POST", CRDS, json=crd(hooks))
    assert status == 201, body
    await crd_served(raw, crd(hooks))
    dial = {"apiVersion": f"{GROUP}/v2", "kind": "Dial", "metadata": {"name": "d"}, "spec": {"count": 3}}
    status, created = await raw.json("POST", path("v2"), json=dial)
    assert status == 201, created
    assert created["apiVersion"] == f"{GROUP}/v2"
    assert created["spec"] == {"count": 3}
    assert any(r["desiredAPIVersion"] == f"{GROUP}/v1" for r in hooks.conversions)

    status, v1 = await raw.json("GET", path("v1", "d"))
    assert status == 200
    assert v1["spec"] == {"size": 3}
    assert v1["metadata"]["labels"] == {"converted-to": "v1"}
    assert v1["metadata"]["generation"] == 1

    status, v2 = await raw.json("GET", path("v2", "d"))
    assert status == 200
    assert v2["apiVersion"] == f"{GROUP}/v2"
    assert v2["spec"] == {"count": 3}
    assert v2["metadata"]["labels"] == {"converted-to": "v2"}
    assert v2["metadata"]["generation"] == 1

    status, listed = await raw.json("GET", path("v2"))
    assert status == 200
    assert [i["spec"] for i in listed["items"]] == [{"count": 3}]

    async with raw.request("GET", path("v2") + "?watch=1&timeoutSeconds=1") as resp:
        assert resp.status == 200
        events = [orjson.loads(line) for line in (await resp.read()).splitlines() if line.strip()]
    assert [(e["type"], e["object"]["apiVersion"], e["object"]["spec"]) for e in events] == [
        ("ADDED", f"{GROUP}/v2", {"count": 3})
    ]

    status, patched = await raw.json(
        "PATCH",
        path("v2", "d"),
        json={"spec": {"count": 5}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200, patched
    assert patched["spec"] == {"count": 5}
    status, v1 = await raw.json("GET", path("v1", "d"))
    assert v1["spec"] == {"size": 5}
    since = listed["metadata"]["resourceVersion"]
    async with raw.request("GET", path("v2") + f"?watch=1&resourceVersion={since}&timeoutSeconds=1") as resp:
        events = [orjson.loads(line) for line in (await resp.read()).splitlines() if line.strip()]
    assert [(e["type"], e["object"]["apiVersion"], e["object"]["spec"]) for e in events] == [
        ("MODIFIED", f"{GROUP}/v2", {"count": 5})
    ]


async def test_failed_conversion_is_an_internal_error(raw: Raw, hooks: Hooks) -> None:
    status, body = await raw.json("POST", CRDS, json=crd(hooks))
    assert status == 201, body
    await crd_served(raw, crd(hooks))
    dial = {"apiVersion": f"{GROUP}/v1", "kind": "Dial", "metadata": {"name": "d"}, "spec": {"size": 1}}
    assert (await raw.json("POST", path("v1"), json=dial))[0] == 201

    hooks.convert = None  # the server answers a Failure result
    status, body = await raw.json("GET", path("v2", "d"))
    assert status == 500
    assert body["reason"] == "InternalError"
    # kube-apiserver words the failure of converting a stored object as a storage error naming
    # its etcd key; mcr-envtest names the conversion only
    assert body["message"].startswith("Internal error occurred: "), body
    assert f"conversion webhook for {GROUP}/" in body["message"]
    assert body["message"].endswith("Kind=Dial failed: conversions are switched off")
    status, v1 = await raw.json("GET", path("v1", "d"))
    assert status == 200
    assert v1["spec"] == {"size": 1}
