"""Pure rules of object writes: copies, timestamps, what counts as a change (content,
ownership), and the metadata types the writer itself relies on."""

from __future__ import annotations

import time
from typing import Any

import orjson

from .errors import StatusError

__all__ = ["content", "deep_copy", "now_rfc3339", "ownership", "strip_volatile", "type_causes"]


def now_rfc3339() -> str:
    """The current time as upstream's RFC 3339 seconds timestamp."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def deep_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON object (orjson round trip: fast and exact for JSON data)."""
    out: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    return out


def strip_volatile(obj: dict[str, Any]) -> dict[str, Any]:
    meta = dict(obj.get("metadata") or {})
    meta.pop("resourceVersion", None)
    meta.pop("managedFields", None)
    out = dict(obj)
    out["metadata"] = meta
    return out


def ownership(obj: dict[str, Any]) -> list[Any]:
    """The managedFields of ``obj`` without their timestamps: who owns what.

    A write that changes only this (an apply taking or sharing ownership of fields whose values
    stay the same) is a real write; a write that changes nothing but timestamps is not."""
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    return [{k: v for k, v in e.items() if k != "time"} for e in entries if isinstance(e, dict) and e]


def content(obj: dict[str, Any], *, with_status: bool) -> dict[str, Any]:
    drop = {"metadata", "kind", "apiVersion"} if with_status else {"metadata", "status", "kind", "apiVersion"}
    return {k: v for k, v in obj.items() if k not in drop}


_JSON_TYPES: dict[type, str] = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "bool",
    int: "number",
    float: "number",
}
# string maps of built-in kinds: (group, kind) -> ((field, Go type of the values), ...)
_STRING_MAPS: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    ("", "ConfigMap"): (("data", "string"), ("binaryData", "[]uint8")),
    ("", "Secret"): (("data", "[]uint8"), ("stringData", "string")),
}


def decode_error(group: str, kind: str, obj: dict[str, Any]) -> str | None:
    """The message kube-apiserver's JSON decoding gives a built-in object whose string maps
    (labels, annotations, a ConfigMap's or Secret's data) hold values of another JSON type, or
    None when they are well typed."""

    def check(value: Any, struct: str, field: str, go_type: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            found = _JSON_TYPES.get(type(value), "value")
            return (
                f"cannot unmarshal {found} into Go struct field {struct}.{field} of type map[string]{go_type}"
            )
        for v in value.values():
            if v is not None and not isinstance(v, str):
                found = _JSON_TYPES.get(type(v), "value")
                return f"cannot unmarshal {found} into Go struct field {struct}.{field} of type {go_type}"
        return None

    meta = obj.get("metadata")
    found: str | None = None
    if isinstance(meta, dict):
        found = check(meta.get("labels"), "ObjectMeta", "metadata.labels", "string") or check(
            meta.get("annotations"), "ObjectMeta", "metadata.annotations", "string"
        )
    for field, go_type in _STRING_MAPS.get((group, kind), ()):
        found = found or check(obj.get(field), kind, field, go_type)
    return f"json: {found}" if found else None


def type_causes(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Causes for metadata fields whose JSON type the server's own logic relies on."""
    meta = obj.get("metadata") or {}
    causes: list[dict[str, Any]] = []

    def bad(field: str, want: str) -> None:
        causes.append(
            {
                "type": "FieldValueInvalid",
                "field": field,
                "message": f"Invalid value: {meta.get(field.split('.', 1)[1])!r}: must be {want}",
            }
        )

    for key in ("name", "generateName", "namespace", "resourceVersion", "uid"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            bad(f"metadata.{key}", "a string")
    fins = meta.get("finalizers")
    if fins is not None and not (isinstance(fins, list) and all(isinstance(f, str) for f in fins)):
        bad("metadata.finalizers", "a list of strings")
    refs = meta.get("ownerReferences")
    if refs is not None and not (
        isinstance(refs, list)
        and all(isinstance(r, dict) and isinstance(r.get("uid", ""), str) for r in refs)
    ):
        bad("metadata.ownerReferences", "a list of owner references")
    for key in ("labels", "annotations"):
        v = meta.get(key)
        if v is not None and not (isinstance(v, dict) and all(isinstance(x, str) for x in v.values())):
            bad(f"metadata.{key}", "a map of strings")
    if obj.get("spec") is not None and not isinstance(obj["spec"], dict):
        causes.append(
            {"type": "FieldValueInvalid", "field": "spec", "message": "Invalid value: must be an object"}
        )
    return causes


# kinds whose /status writes also take the labels and annotations sent, as kube-apiserver's
# status strategies for them do
_STATUS_TAKES_METADATA = (("", "pods"), ("apps", "statefulsets"))


def status_metadata(group_resource: tuple[str, str], meta: dict[str, Any], sent: dict[str, Any]) -> None:
    """Give ``meta`` (of an object written through ``/status``) the labels and annotations of
    the ``sent`` metadata, for the kinds whose status writes take them; others keep theirs."""
    if group_resource not in _STATUS_TAKES_METADATA:
        return
    for key in ("labels", "annotations"):
        if sent.get(key):
            meta[key] = sent[key]
        else:
            meta.pop(key, None)


def deleted_pod(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of a pod removed at once, as kube-apiserver answers its deletion (an unscheduled
    pod is deleted gracefully with a zero grace period): deletion time set, generation bumped."""
    out = deep_copy(obj)
    meta = out["metadata"]
    meta.update(deletionTimestamp=now_rfc3339(), deletionGracePeriodSeconds=0)
    if "generation" in meta:
        meta["generation"] = int(meta["generation"]) + 1
    return out


def missing_service_account(namespace: str, name: str, account: str) -> StatusError:
    """The 403 of the ServiceAccount admission plugin for a pod whose account does not exist."""
    return StatusError(
        403,
        "Forbidden",
        f'pods "{name}" is forbidden: error looking up service account {namespace}/{account}: '
        f'serviceaccount "{account}" not found',
        details={"name": name, "kind": "pods"},
    )
