"""OpenAPI schemas of the built-in kinds, derived from the ``kubernetes`` client's models.

The official client's generated (pydantic v2) models carry each field's JSON name, type and
whether it is required; that is exactly the part of upstream's OpenAPI documents that clients
depend on (F32). Patch metadata (merge keys and strategies) is not in the models, so it comes from
a table of upstream's ``patchStrategy``/``patchMergeKey`` struct tags.

Schemas are JSON-schema dicts using ``{"$ref": "#/components/schemas/<name>"}`` for nested
models. Everything is built lazily on first use and cached for the life of the process.
"""

from __future__ import annotations

import functools
import importlib
import importlib.resources
import re
import types
import typing
from typing import Any

import orjson

REF_PREFIX = "#/components/schemas/"

_CLASS_RE = re.compile(r"^([A-Z][a-z]+)?(V\d+(?:(?:alpha|beta)\d+)?)([A-Z]\w*)$")
_LIST_RE = re.compile(r"^List\[(.+)\]$")
_DICT_RE = re.compile(r"^Dict\[str, (.+)\]$")

_PRIMITIVES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer", "format": "int64"},
    "float": {"type": "number", "format": "double"},
    "bool": {"type": "boolean"},
    "bytes": {"type": "string", "format": "byte"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
}

# Upstream struct tags `patchStrategy`/`patchMergeKey` (plus list types) for the built-ins served
# here, keyed by (model class, JSON field). A strategy "merge" without a key is a merged set.
PATCH_META: dict[tuple[str, str], dict[str, Any]] = {
    ("V1ObjectMeta", "finalizers"): {"x-kubernetes-patch-strategy": "merge", "x-kubernetes-list-type": "set"},
    ("V1ObjectMeta", "ownerReferences"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "uid",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["uid"],
    },
    ("V1PodSpec", "containers"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "name",
    },
    ("V1PodSpec", "initContainers"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "name",
    },
    ("V1PodSpec", "ephemeralContainers"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "name",
    },
    ("V1PodSpec", "volumes"): {
        "x-kubernetes-patch-strategy": "merge,retainKeys",
        "x-kubernetes-patch-merge-key": "name",
    },
    ("V1PodSpec", "imagePullSecrets"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "name",
    },
    ("V1PodSpec", "hostAliases"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "ip",
    },
    ("V1PodSpec", "topologySpreadConstraints"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "topologyKey",
    },
    ("V1PodSpec", "schedulingGates"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "name",
    },
    ("V1PodSpec", "resourceClaims"): {
        "x-kubernetes-patch-strategy": "merge,retainKeys",
        "x-kubernetes-patch-merge-key": "name",
    },
    ("V1Container", "ports"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "containerPort",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
    },
    ("V1Container", "env"): {"x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"},
    ("V1Container", "volumeMounts"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "mountPath",
    },
    ("V1Container", "volumeDevices"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "devicePath",
    },
    ("V1PodStatus", "conditions"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "type",
    },
    ("V1PodStatus", "podIPs"): {"x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "ip"},
    ("V1PodStatus", "hostIPs"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "ip",
    },
    ("V1ServiceSpec", "ports"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "port",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["port", "protocol"],
    },
    ("V1ServiceAccount", "secrets"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "name",
    },
    ("V1DeploymentSpec", "strategy"): {"x-kubernetes-patch-strategy": "retainKeys"},
    ("V1NodeStatus", "addresses"): {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "type",
    },
    ("V1NodeSpec", "podCIDRs"): {"x-kubernetes-patch-strategy": "merge"},
}
for _cls in (
    "V1DeploymentStatus",
    "V1ReplicaSetStatus",
    "V1StatefulSetStatus",
    "V1DaemonSetStatus",
    "V1JobStatus",
    "V1NamespaceStatus",
    "V1NodeStatus",
    "V1PersistentVolumeClaimStatus",
    "V1ServiceStatus",
    "V1ReplicationControllerStatus",
):
    PATCH_META[(_cls, "conditions")] = {
        "x-kubernetes-patch-strategy": "merge",
        "x-kubernetes-patch-merge-key": "type",
    }
for _cls in ("V1EphemeralContainer",):
    for (_c, _f), _meta in list(PATCH_META.items()):
        if _c == "V1Container":
            PATCH_META[(_cls, _f)] = _meta


def _short_name(class_name: str) -> str:
    m = _CLASS_RE.match(class_name)
    if m is None:
        return f"io.k8s.{class_name}"
    prefix, version, name = m.groups()
    return f"{prefix.lower()}.{version.lower()}.{name}" if prefix else f"{version.lower()}.{name}"


@functools.cache
def _upstream_names() -> dict[str, str]:
    """Upstream's definition names (``io.k8s.api.core.v1.ConfigMap``, from
    ``data/openapi_names.json``) by each of their suffixes of two or more segments that names
    one definition only (``v1.ConfigMap``, ``core.v1.Event``)."""
    names = orjson.loads(
        importlib.resources.files("mcr_envtest").joinpath("data/openapi_names.json").read_bytes()
    )
    by_suffix: dict[str, str | None] = {}
    for full in names:
        parts = full.split(".")
        for i in range(len(parts) - 2, -1, -1):
            suffix = ".".join(parts[i:])
            by_suffix[suffix] = full if suffix not in by_suffix else None
    return {k: v for k, v in by_suffix.items() if v is not None}


def definition_name(class_name: str) -> str:
    """Return the OpenAPI definition name of a model class as kube-apiserver names it
    (``V1Container`` → ``io.k8s.api.core.v1.Container``, ``CoreV1Event`` →
    ``io.k8s.api.core.v1.Event``); a model kube-apiserver 1.37 does not serve keeps the client's
    short name (``v1alpha1.Mutation``).

    The last dot-separated segment is the bare type name, which is what ``kubectl explain`` shows.
    """
    short = _short_name(class_name)
    return _upstream_names().get(short, short)


@functools.cache
def _definition_index() -> dict[str, str]:
    return {definition_name(n): n for n in dir(_models()) if _CLASS_RE.match(n)}


def class_for_definition(name: str) -> str | None:
    """Return the model class name whose definition name is ``name`` (None when unknown)."""
    return _definition_index().get(name)


@functools.cache
def _models() -> types.ModuleType:
    return importlib.import_module("kubernetes.client.models")


@functools.cache
def model_class(class_name: str) -> Any | None:
    """Return the ``kubernetes.client.models`` class called ``class_name``, or None."""
    cls = getattr(_models(), class_name, None)
    return cls if isinstance(cls, type) and hasattr(cls, "openapi_types") else None


def class_for_kind(group: str, version: str, kind: str) -> str | None:
    """Return the model class name for a built-in kind (``("apps", "v1", "Deployment")`` → ``V1Deployment``).

    Kinds whose bare name is ambiguous across groups carry a group prefix in the client
    (``CoreV1Event``, ``EventsV1Event``); both spellings are tried.
    """
    ver = version[:1].upper() + version[1:]
    first = (group.split(".")[0] if group else "core").capitalize()
    for candidate in (f"{first}{ver}{kind}", f"{ver}{kind}"):
        if model_class(candidate) is not None:
            return candidate
    return None


def _type_schema(type_str: str, annotation: Any) -> dict[str, Any]:
    if type_str in _PRIMITIVES:
        return dict(_PRIMITIVES[type_str])
    if m := _LIST_RE.match(type_str):
        return {"type": "array", "items": _type_schema(m.group(1), None)}
    if m := _DICT_RE.match(type_str):
        return {"type": "object", "additionalProperties": _type_schema(m.group(1), None)}
    if type_str == "object":
        if annotation is not None and _is_int_or_string(annotation):
            return {"x-kubernetes-int-or-string": True, "format": "int-or-string"}
        return {"x-kubernetes-preserve-unknown-fields": True}
    if model_class(type_str) is not None:
        return {"$ref": REF_PREFIX + definition_name(type_str)}
    return {"x-kubernetes-preserve-unknown-fields": True}


def _is_int_or_string(annotation: Any) -> bool:
    names: set[str] = set()

    def visit(a: Any) -> None:
        args = typing.get_args(a)
        if typing.get_origin(a) is typing.Annotated:
            visit(args[0])
        elif args:
            for x in args:
                visit(x)
        elif isinstance(a, type):
            names.add(a.__name__)

    visit(annotation)
    return {"int", "str"} <= names


@functools.cache
def model_schema(class_name: str) -> dict[str, Any]:
    """Return the OpenAPI v3 schema of one model class (nested models as ``$ref``).

    Raises KeyError when ``class_name`` is not a model of the ``kubernetes`` client.
    """
    cls = model_class(class_name)
    if cls is None:
        raise KeyError(f"no model {class_name!r} in kubernetes.client.models")
    props: dict[str, Any] = {}
    required: list[str] = []
    for attr, type_str in cls.openapi_types.items():
        json_name = cls.attribute_map.get(attr, attr)
        field = cls.model_fields.get(attr)
        schema = _type_schema(type_str, field.annotation if field is not None else None)
        if field is not None and field.description:
            schema["description"] = field.description
        schema.update(PATCH_META.get((class_name, json_name), {}))
        props[json_name] = schema
        if field is not None and field.is_required():
            required.append(json_name)
    out: dict[str, Any] = {"type": "object", "properties": props}
    if cls.__doc__:
        doc = cls.__doc__.strip().split("\n\n")[0].strip()
        if doc:
            out["description"] = doc
    if required:
        out["required"] = required
    return out


def model_closure(class_name: str) -> dict[str, dict[str, Any]]:
    """Return every definition reachable from ``class_name``, keyed by definition name."""
    out: dict[str, dict[str, Any]] = {}
    pending = [class_name]
    while pending:
        cls = pending.pop()
        name = definition_name(cls)
        if name in out:
            continue
        schema = model_schema(cls)
        out[name] = schema
        for ref in _refs(schema):
            target = class_for_definition(ref)
            if target is not None and definition_name(target) not in out:
                pending.append(target)
    return out


def _refs(schema: Any) -> list[str]:
    found: list[str] = []
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX):
            found.append(ref[len(REF_PREFIX) :])
        for v in schema.values():
            found.extend(_refs(v))
    elif isinstance(schema, list):
        for v in schema:
            found.extend(_refs(v))
    return found


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    """Follow a built-in ``$ref`` (and single-``allOf`` wrappers) to the schema it names."""
    for _ in range(8):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX):
            cls = class_for_definition(ref[len(REF_PREFIX) :])
            if cls is None:
                return {"x-kubernetes-preserve-unknown-fields": True}
            # Keep the extensions a property adds to its type (patch strategy, list type); drop
            # descriptions, so the common case returns the cached schema without copying it.
            extra = {k: v for k, v in schema.items() if k.startswith("x-kubernetes")}
            schema = {**model_schema(cls), **extra} if extra else model_schema(cls)
            continue
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
            schema = {**{k: v for k, v in schema.items() if k != "allOf"}, **all_of[0]}
            continue
        return schema
    return schema


def kind_schema(group: str, version: str, kind: str) -> dict[str, Any] | None:
    """Return the (resolved) top-level schema of a built-in kind, or None when it has no model."""
    cls = class_for_kind(group, version, kind)
    return model_schema(cls) if cls is not None else None
