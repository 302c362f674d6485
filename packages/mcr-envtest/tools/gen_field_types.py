"""Regenerate ``src/mcr_envtest/data/field_types.json``: how kube-apiserver's field manager sees
each built-in type, for ``metadata.managedFields``.

Usage::

    python tools/gen_field_types.py OUT.json              # a fresh kube-apiserver (KUBEBUILDER_ASSETS)
    python tools/gen_field_types.py OUT.json DOCS.json    # OpenAPI v3 documents saved before

``DOCS.json`` maps each ``/openapi/v3`` path to its document. Two sources are joined:

* the OpenAPI v3 documents of a real kube-apiserver: which structs and maps are atomic
  (``x-kubernetes-map-type``), how lists merge (``x-kubernetes-list-type`` and its keys, else
  the strategic-merge key, else atomic: ``mcr_envtest._fieldpath.list_kind``);
* ``src/mcr_envtest/data/proto_fields.json`` (Go struct tags): which fields a Go zero object
  carries (everything not ``omitempty``, and every non-pointer struct) and which zero values
  ``omitempty`` drops.

Table format (JSON)::

    {"kinds": {"<apiVersion> <Kind>": "<type>"},
     "types": {"<type>": {"a": 1?, "f": {"<json name>": FIELD}}}}

FIELD holds ``t`` (the struct type of the field, of a list's items or of a map's values),
``l`` (``atomic``, ``set`` or ``map``, for lists) with ``k`` (the map keys) and ``d`` (the
defaults of key fields, which stand in for a key an item omits), ``m`` (``atomic``
or ``granular``, for maps), ``z`` (the value a Go zero object carries; absent when it carries
none) and ``o`` (1 when the Go type drops a zero or empty value). ``a`` marks atomic structs.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mcr_envtest._fieldpath import list_kind

HERE = Path(__file__).resolve().parent.parent
PROTO = HERE / "src" / "mcr_envtest" / "data" / "proto_fields.json"
REF = "#/components/schemas/"

# Go types the field manager treats as scalars, with the value of their zero.
SCALAR_MESSAGES = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": None,
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": None,
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": "0s",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "0",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": 0,
    "k8s.io.apimachinery.pkg.runtime.RawExtension": None,
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": None,
}
# Fields tagged ``omitzero``, which drops a zero struct (the proto table records ``omitempty``
# only); in 1.37 the one such field of the built-in API types.
OMITZERO = {("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta", "creationTimestamp")}
SCALAR_ZERO = {"string": "", "bytes": None, "bool": False, "double": 0, "float": 0}


def _proto_name(openapi_name: str) -> str:
    return "k8s.io." + openapi_name.removeprefix("io.k8s.").replace("-", "_")


def _ref(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.removeprefix(REF)
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        return _ref(all_of[0])
    return None


def _zero(message: str, proto_field: list[Any] | None, messages: dict[str, Any]) -> tuple[bool, Any, bool]:
    """(present in a Go zero object, its value there, omitempty drops zero values)."""
    if proto_field is None:
        return False, None, False
    if (message, proto_field[1]) in OMITZERO:
        return False, None, True
    _, _, ptype, flags = proto_field
    pointer, omit, repeated = "p" in flags, "o" in flags, "r" in flags
    if repeated or ptype.startswith("map:") or pointer:
        return not omit, None, omit and not pointer
    if ptype in SCALAR_MESSAGES:
        return True, SCALAR_MESSAGES[ptype], False  # a struct: omitempty keeps it
    if ptype in messages:
        return True, {}, False
    zero = SCALAR_ZERO.get(ptype, 0)
    return not omit, zero, omit


def build(docs: dict[str, Any], proto: dict[str, Any]) -> dict[str, Any]:
    """The table from OpenAPI v3 documents and the proto field table."""
    schemas: dict[str, Any] = {}
    for doc in docs.values():
        schemas.update((doc.get("components") or {}).get("schemas") or {})
    messages = proto["messages"]
    kinds: dict[str, str] = {}
    types: dict[str, Any] = {}
    for name, schema in sorted(schemas.items()):
        props = schema.get("properties")
        if schema.get("type") != "object" or not isinstance(props, dict):
            continue
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            api_version = f"{gvk['group']}/{gvk['version']}" if gvk.get("group") else gvk["version"]
            kinds.setdefault(f"{api_version} {gvk['kind']}", name)
        message = messages.get(_proto_name(name))
        by_json = {f[1]: f for f in (message or {}).get("f", [])}
        fields: dict[str, Any] = {}
        for json_name, prop in sorted(props.items()):
            out: dict[str, Any] = {}
            target = prop
            if prop.get("type") == "array":
                kind, keys = list_kind(prop)  # the rule the field manager applies
                out["l"] = kind
                target = prop.get("items") or {}
                if keys:
                    out["k"] = keys
                    item = schemas.get(_ref(target) or "", {}).get("properties") or {}
                    defaults = {k: item[k]["default"] for k in keys if "default" in item.get(k, {})}
                    if defaults:
                        out["d"] = defaults
            elif prop.get("type") == "object" and isinstance(prop.get("additionalProperties"), dict):
                out["m"] = prop.get("x-kubernetes-map-type", "granular")
                target = prop["additionalProperties"]
            ref = _ref(target)
            if (
                ref is not None
                and schemas.get(ref, {}).get("type") == "object"
                and schemas[ref].get("properties")
            ):
                out["t"] = ref
            present, zero, omit = _zero(_proto_name(name), by_json.get(json_name), messages)
            if present:
                out["z"] = zero
            if omit:
                out["o"] = 1
            if out:
                fields[json_name] = out
        entry: dict[str, Any] = {"f": fields}
        if schema.get("x-kubernetes-map-type") == "atomic":
            entry["a"] = 1
        types[name] = entry
    return {"kinds": dict(sorted(kinds.items())), "types": types}


async def _fetch() -> dict[str, Any]:
    from mcr_envtest import Server
    from mcr_envtest.corpus.client import Target

    docs: dict[str, Any] = {}
    async with Server(real=True) as srv, Target("real", srv.kubeconfig) as target:
        index = await target.request("GET", "/openapi/v3")
        for path, entry in index.body["paths"].items():
            docs[path] = (await target.request("GET", entry["serverRelativeURL"].split("?")[0])).body
    return docs


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    if len(argv) == 3:
        try:
            docs = json.loads(Path(argv[2]).read_text())
        except (OSError, ValueError) as exc:
            print(f"{argv[2]}: cannot read OpenAPI v3 documents: {exc}", file=sys.stderr)
            return 2
    else:
        docs = asyncio.run(_fetch())
    table = build(docs, json.loads(PROTO.read_text()))
    Path(argv[1]).write_text(json.dumps(table, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{argv[1]}: {len(table['types'])} types, {len(table['kinds'])} kinds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
