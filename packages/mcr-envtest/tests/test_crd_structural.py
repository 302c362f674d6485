"""CRD structural schemas on every write: unknown fields pruned (unless
``x-kubernetes-preserve-unknown-fields``), ``default`` values filled in."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Raw, crd_served

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GADGETS = "/apis/example.com/v1/namespaces/default/gadgets"

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "default": 3},
                "mode": {"type": "string", "default": "fast"},
                "limits": {
                    "type": "object",
                    "default": {},
                    "properties": {"cpu": {"type": "string", "default": "100m"}},
                },
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "weight": {"type": "integer", "default": 1},
                        },
                    },
                },
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


@pytest.fixture
async def gadgets(raw: Raw) -> Raw:
    crd = {
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": SCHEMA},
                    "subresources": {"status": {}},
                }
            ],
        },
    }
    status, body = await raw.json("POST", CRDS, json=crd)
    assert status == 201, body
    await crd_served(raw, crd)
    return raw


def gadget(spec: dict[str, Any], name: str = "g") -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}


async def test_create_prunes_and_defaults(gadgets: Raw) -> None:
    status, obj = await gadgets.json(
        "POST",
        GADGETS,
        json={
            **gadget(
                {"size": 5, "bogus": 1, "extra": {"any": {"thing": [1]}}, "items": [{"name": "a", "x": 1}]}
            ),
            "topLevelJunk": True,
        },
    )
    assert status == 201, obj
    assert obj["spec"] == {
        "size": 5,
        "mode": "fast",
        "limits": {"cpu": "100m"},
        "extra": {"any": {"thing": [1]}},
        "items": [{"name": "a", "weight": 1}],
    }
    assert "topLevelJunk" not in obj
    status, stored = await gadgets.json("GET", f"{GADGETS}/g")
    assert stored["spec"] == obj["spec"]


async def test_update_patch_and_apply_prune_and_default(gadgets: Raw) -> None:
    status, obj = await gadgets.json("POST", GADGETS, json=gadget({"size": 1}))
    assert status == 201
    put = gadget({"mode": "slow", "junk": "x"})
    put["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
    status, obj = await gadgets.json("PUT", f"{GADGETS}/g", json=put)
    assert status == 200, obj
    assert obj["spec"] == {"size": 3, "mode": "slow", "limits": {"cpu": "100m"}}
    status, obj = await gadgets.json(
        "PATCH",
        f"{GADGETS}/g",
        json={"spec": {"size": None, "limits": {"cpu": None}, "junk": 2}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200, obj
    assert obj["spec"] == {"size": 3, "mode": "slow", "limits": {"cpu": "100m"}}
    status, obj = await gadgets.json(
        "PATCH",
        f"{GADGETS}/g",
        json=[{"op": "add", "path": "/spec/junk", "value": 1}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert status == 200
    assert "junk" not in obj["spec"]
    doc = "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: h\nspec:\n  mode: m\n"
    apply = {"Content-Type": "application/apply-patch+yaml"}
    status, obj = await gadgets.json(
        "PATCH", f"{GADGETS}/h?fieldManager=me", data=doc.encode(), headers=apply
    )
    assert status == 201, obj
    assert obj["spec"] == {"size": 3, "mode": "m", "limits": {"cpu": "100m"}}
    # an applied configuration with an undeclared field is refused (kube-apiserver: 500), not pruned
    junk = doc + "  junk: 1\n"
    status, obj = await gadgets.json(
        "PATCH", f"{GADGETS}/h?fieldManager=me", data=junk.encode(), headers=apply
    )
    assert status == 500
    assert obj["message"] == (
        "failed to create typed patch object (/h; example.com/v1, Kind=Gadget): .spec.junk:"
        " field not declared in schema"
    )
    assert "reason" not in obj


async def test_status_writes_are_pruned_and_identical_rewrites_are_noops(gadgets: Raw) -> None:
    status, obj = await gadgets.json("POST", GADGETS, json=gadget({}))
    assert status == 201
    rv = obj["metadata"]["resourceVersion"]
    status, obj = await gadgets.json(
        "PATCH",
        f"{GADGETS}/g/status",
        json={"status": {"ready": True, "junk": 1}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200
    assert obj["status"] == {"ready": True}
    # a write whose only difference is pruned away changes nothing
    rv = obj["metadata"]["resourceVersion"]
    status, again = await gadgets.json(
        "PATCH",
        f"{GADGETS}/g",
        json={"spec": {"junk": 5}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200
    assert again["metadata"]["resourceVersion"] == rv


def _crd(name: str, schemas: list[dict[str, Any]]) -> dict[str, Any]:
    versions = [
        {"name": f"v{i + 1}", "served": True, "storage": i == 0, "schema": {"openAPIV3Schema": s}}
        for i, s in enumerate(schemas)
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{name}s.structural.example.com"},
        "spec": {
            "group": "structural.example.com",
            "scope": "Namespaced",
            "names": {"plural": f"{name}s", "kind": name.title()},
            "versions": versions,
        },
    }


_OBJ = "Required value: must not be empty for specified object fields"
_ROOT = "spec.validation.openAPIV3Schema"


@pytest.mark.parametrize(
    ("schemas", "causes"),
    [
        (
            [{"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}],
            [("FieldValueRequired", _OBJ, f"{_ROOT}.properties[spec].type")],
        ),
        (
            [{"properties": {"spec": {"type": "object"}}}],
            [("FieldValueRequired", "Required value: must not be empty at the root", f"{_ROOT}.type")],
        ),
        (
            [{"type": "string"}],
            [("FieldValueInvalid", 'Invalid value: "string": must be object at the root', f"{_ROOT}.type")],
        ),
        (
            [{"type": "object", "properties": {"spec": {"type": "array", "items": {"properties": {}}}}}],
            [
                (
                    "FieldValueRequired",
                    "Required value: must not be empty for specified array items",
                    f"{_ROOT}.properties[spec].items.type",
                )
            ],
        ),
        (
            [
                {
                    "type": "object",
                    "properties": {
                        "spec": {"x-kubernetes-preserve-unknown-fields": True},
                        "port": {"x-kubernetes-int-or-string": True},
                        "m": {"type": "object", "additionalProperties": {}},
                        "r": {"type": "object", "properties": {"s": {}}},
                    },
                }
            ],
            [
                ("FieldValueRequired", _OBJ, f"{_ROOT}.properties[m].additionalProperties.type"),
                ("FieldValueRequired", _OBJ, f"{_ROOT}.properties[r].properties[s].type"),
            ],
        ),
        (
            [{"type": "object", "properties": {"spec": {}}}, {"type": "object", "properties": {"x": {}}}],
            [
                ("FieldValueRequired", _OBJ, "spec.versions[0].schema.openAPIV3Schema.properties[spec].type"),
                ("FieldValueRequired", _OBJ, "spec.versions[1].schema.openAPIV3Schema.properties[x].type"),
            ],
        ),
    ],
)
async def test_non_structural_schemas_are_refused(
    raw: Raw, schemas: list[dict[str, Any]], causes: list[tuple[str, str, str]]
) -> None:
    status, body = await raw.json("POST", CRDS, json=_crd("thing", schemas))
    assert (status, body["reason"]) == (422, "Invalid"), body
    assert [(c["reason"], c["message"], c["field"]) for c in body["details"]["causes"]] == causes
