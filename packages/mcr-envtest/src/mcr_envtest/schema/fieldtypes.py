"""The built-in types as kube-apiserver's field manager sees them (``data/field_types.json``).

``metadata.managedFields`` depends on facts the client's models do not carry: which structs and
maps are atomic, how every list merges (its ``x-kubernetes-list-type`` and keys), and what a
Go object of each type holds before anything is set (non-pointer structs are there as ``{}``,
fields without ``omitempty`` as their zero value, and ``omitempty`` drops zero values). The table
is generated from a real kube-apiserver's OpenAPI v3 documents and Go's struct tags by
``tools/gen_field_types.py``.

:func:`kind_schema` turns it into the JSON-schema dicts :mod:`mcr_envtest._fieldpath` walks:
``properties``, ``items``, ``additionalProperties`` and upstream's ``x-kubernetes-*``
extensions, plus two of mcr-envtest's own on a property: ``x-mcr-zero`` (the value a Go zero
object holds there; absent when it holds none) and ``x-mcr-omitempty`` (a zero or empty value
is dropped). Nested types are shared dicts, so the schemas are cyclic: never copy or serialise
them. List items' missing key fields take ``x-mcr-key-defaults``.
"""

from __future__ import annotations

import functools
import importlib.resources
from typing import Any

import orjson

__all__ = ["kind_schema"]

Schema = dict[str, Any]


@functools.cache
def _table() -> tuple[dict[str, str], dict[str, Schema]]:
    raw = orjson.loads(
        importlib.resources.files("mcr_envtest").joinpath("data/field_types.json").read_bytes()
    )
    types: dict[str, Schema] = {name: {"type": "object", "properties": {}} for name in raw["types"]}
    for name, entry in raw["types"].items():
        if entry.get("a"):
            types[name]["x-kubernetes-map-type"] = "atomic"
    for name, entry in raw["types"].items():
        props = types[name]["properties"]
        for field, spec in entry["f"].items():
            props[field] = _field(spec, types)
    return raw["kinds"], types


def _field(spec: dict[str, Any], types: dict[str, Schema]) -> Schema:
    inner = types.get(spec["t"]) if "t" in spec else None
    node: Schema
    if "l" in spec:
        node = {"type": "array", "items": inner or {}, "x-kubernetes-list-type": spec["l"]}
        if "k" in spec:
            node["x-kubernetes-list-map-keys"] = spec["k"]
        if "d" in spec:
            node["x-mcr-key-defaults"] = spec["d"]
    elif "m" in spec:
        node = {"type": "object", "additionalProperties": inner or {}}
        if spec["m"] == "atomic":
            node["x-kubernetes-map-type"] = "atomic"
    elif inner is not None:
        node = dict(inner)  # the type's properties dict is shared; per-field keys stay here
    else:
        node = {}
    if "z" in spec:
        node["x-mcr-zero"] = spec["z"]
    if "o" in spec:
        node["x-mcr-omitempty"] = True
    return node


def kind_schema(api_version: str, kind: str) -> Schema | None:
    """The schema of a built-in kind served at ``api_version``, or None for one not in the table."""
    kinds, types = _table()
    name = kinds.get(f"{api_version} {kind}")
    return types.get(name) if name is not None else None
