"""Decoding of the few protobuf request bodies kubectl sends to typed endpoints.

kubectl 1.3x posts ``application/vnd.kubernetes.protobuf`` bodies through its typed clients:
SelfSubjectAccessReview (``auth can-i``), SelfSubjectReview (``auth whoami``), TokenRequest
(``create token``) and the objects of ``kubectl create configmap|secret|serviceaccount|namespace|
role|rolebinding|clusterrole|clusterrolebinding``, while accepting JSON answers. Those bodies
are upstream's protobuf envelope: the magic ``k8s\\0``, then a ``runtime.Unknown`` message
(typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2) whose ``raw`` is the object. Only the fields
those kinds carry are decoded (by upstream's field numbers); everything else is skipped.
"""

from __future__ import annotations

import base64
from typing import Any

__all__ = ["PROTOBUF", "SUPPORTED_KINDS", "decode_protobuf"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"

# message name → {field number: (json name, type)}; types: string, int, bool, bytes, strings,
# time (metav1.Time), map (map<string,string>), bytesmap (map<string,bytes>), a message name, or
# "[]Message" for repeated messages.
_Schema = dict[int, tuple[str, str]]
_MESSAGES: dict[str, _Schema] = {
    "Unknown": {1: ("typeMeta", "TypeMeta"), 2: ("raw", "bytes")},
    "TypeMeta": {1: ("apiVersion", "string"), 2: ("kind", "string")},
    "ObjectMeta": {
        1: ("name", "string"),
        2: ("generateName", "string"),
        3: ("namespace", "string"),
        5: ("uid", "string"),
        6: ("resourceVersion", "string"),
        11: ("labels", "map"),
        12: ("annotations", "map"),
        13: ("ownerReferences", "[]OwnerReference"),
        14: ("finalizers", "strings"),
    },
    "OwnerReference": {
        1: ("kind", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
        5: ("apiVersion", "string"),
        6: ("controller", "bool"),
        7: ("blockOwnerDeletion", "bool"),
    },
    "SelfSubjectAccessReview": {
        1: ("metadata", "ObjectMeta"),
        2: ("spec", "SelfSubjectAccessReviewSpec"),
    },
    "SelfSubjectAccessReviewSpec": {
        1: ("resourceAttributes", "ResourceAttributes"),
        2: ("nonResourceAttributes", "NonResourceAttributes"),
    },
    "ResourceAttributes": {
        1: ("namespace", "string"),
        2: ("verb", "string"),
        3: ("group", "string"),
        4: ("version", "string"),
        5: ("resource", "string"),
        6: ("subresource", "string"),
        7: ("name", "string"),
    },
    "NonResourceAttributes": {1: ("path", "string"), 2: ("verb", "string")},
    "SelfSubjectReview": {1: ("metadata", "ObjectMeta")},
    "SelfSubjectRulesReview": {1: ("metadata", "ObjectMeta"), 2: ("spec", "SelfSubjectRulesReviewSpec")},
    "SelfSubjectRulesReviewSpec": {1: ("namespace", "string")},
    "TokenRequest": {1: ("metadata", "ObjectMeta"), 2: ("spec", "TokenRequestSpec")},
    "TokenRequestSpec": {
        1: ("audiences", "strings"),
        4: ("expirationSeconds", "int"),
        3: ("boundObjectRef", "BoundObjectReference"),
    },
    "BoundObjectReference": {
        1: ("kind", "string"),
        2: ("apiVersion", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
    },
    "ConfigMap": {
        1: ("metadata", "ObjectMeta"),
        2: ("data", "map"),
        3: ("binaryData", "bytesmap"),
        4: ("immutable", "bool"),
    },
    "Secret": {
        1: ("metadata", "ObjectMeta"),
        2: ("data", "bytesmap"),
        3: ("type", "string"),
        4: ("stringData", "map"),
        5: ("immutable", "bool"),
    },
    "ServiceAccount": {
        1: ("metadata", "ObjectMeta"),
        2: ("secrets", "[]ObjectReference"),
        3: ("imagePullSecrets", "[]LocalObjectReference"),
        4: ("automountServiceAccountToken", "bool"),
    },
    "ObjectReference": {1: ("kind", "string"), 2: ("namespace", "string"), 3: ("name", "string")},
    "LocalObjectReference": {1: ("name", "string")},
    "Namespace": {1: ("metadata", "ObjectMeta"), 2: ("spec", "NamespaceSpec")},
    "NamespaceSpec": {1: ("finalizers", "strings")},
    "Role": {1: ("metadata", "ObjectMeta"), 2: ("rules", "[]PolicyRule")},
    "ClusterRole": {1: ("metadata", "ObjectMeta"), 2: ("rules", "[]PolicyRule")},
    "PolicyRule": {
        1: ("verbs", "strings"),
        2: ("apiGroups", "strings"),
        3: ("resources", "strings"),
        4: ("resourceNames", "strings"),
        5: ("nonResourceURLs", "strings"),
    },
    "RoleBinding": {1: ("metadata", "ObjectMeta"), 2: ("subjects", "[]Subject"), 3: ("roleRef", "RoleRef")},
    "ClusterRoleBinding": {
        1: ("metadata", "ObjectMeta"),
        2: ("subjects", "[]Subject"),
        3: ("roleRef", "RoleRef"),
    },
    "Subject": {
        1: ("kind", "string"),
        2: ("apiGroup", "string"),
        3: ("name", "string"),
        4: ("namespace", "string"),
    },
    "RoleRef": {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")},
}
_MAP_ENTRY: _Schema = {1: ("key", "string"), 2: ("value", "string")}
_BYTES_ENTRY: _Schema = {1: ("key", "string"), 2: ("value", "bytes")}
# Fields whose empty value is meaningful (Go writes every non-pointer field, even when empty).
_KEEP_EMPTY = {"data", "binaryData", "stringData", "verbs", "rules", "subjects"}
SUPPORTED_KINDS = frozenset(_MESSAGES) - {
    "Unknown",
    "TypeMeta",
    "ObjectMeta",
    "OwnerReference",
    "SelfSubjectAccessReviewSpec",
    "SelfSubjectRulesReviewSpec",
    "ResourceAttributes",
    "NonResourceAttributes",
    "TokenRequestSpec",
    "BoundObjectReference",
    "ObjectReference",
    "LocalObjectReference",
    "NamespaceSpec",
    "PolicyRule",
    "Subject",
    "RoleRef",
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated protobuf varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("protobuf varint too long")


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, wire, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ValueError("truncated protobuf field")
            out.append((number, wire, bytes(data[pos : pos + length])))
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return out


def _entry(raw: bytes, schema: _Schema) -> tuple[str, Any]:
    decoded = _message_with(raw, schema, keep_empty=True)
    return str(decoded.get("key", "")), decoded.get("value", "" if schema is _MAP_ENTRY else b"")


def _message(data: bytes, name: str) -> dict[str, Any]:
    return _message_with(data, _MESSAGES[name])


def _message_with(data: bytes, schema: _Schema, *, keep_empty: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, _wire, raw in _fields(data):
        if number not in schema:
            continue
        key, typ = schema[number]
        if typ == "string":
            out[key] = raw.decode() if isinstance(raw, bytes) else str(raw)
        elif typ == "strings":
            out.setdefault(key, []).append(raw.decode() if isinstance(raw, bytes) else str(raw))
        elif typ == "int":
            out[key] = int(raw) if isinstance(raw, int) else 0
        elif typ == "bool":
            out[key] = bool(raw)
        elif typ == "bytes":
            out[key] = raw
        elif typ in ("map", "bytesmap") and isinstance(raw, bytes):
            k, v = _entry(raw, _MAP_ENTRY if typ == "map" else _BYTES_ENTRY)
            if typ == "bytesmap":
                v = base64.b64encode(v).decode()
            out.setdefault(key, {})[k] = v
        elif typ.startswith("[]") and isinstance(raw, bytes):
            out.setdefault(key, []).append(_message(raw, typ[2:]))
        elif isinstance(raw, bytes):
            out[key] = _message(raw, typ)
    if keep_empty:
        return out
    return {k: v for k, v in out.items() if k in _KEEP_EMPTY or v not in ("", 0, False, {}, [])}


def decode_protobuf(body: bytes) -> dict[str, Any]:
    """Decode a protobuf-encoded request body of one of :data:`SUPPORTED_KINDS` (the reviews,
    TokenRequest, and the kinds ``kubectl create <generator>`` posts: ConfigMap, Secret,
    ServiceAccount, Namespace, Role, ClusterRole, RoleBinding, ClusterRoleBinding) into its JSON
    form (with ``apiVersion`` and ``kind``). Empty scalars are dropped, as Go's JSON omits them.

    Raises ValueError for anything else or for malformed bytes (the server answers 415/400).
    """
    if not body.startswith(_MAGIC):
        raise ValueError("protobuf body lacks the k8s\\0 envelope prefix")
    envelope = _message(body[len(_MAGIC) :], "Unknown")
    type_meta = envelope.get("typeMeta") or {}
    kind = type_meta.get("kind", "")
    if kind not in SUPPORTED_KINDS:
        raise ValueError(f"protobuf bodies of kind {kind!r} are not supported; send JSON")
    obj = _message(envelope.get("raw") or b"", kind)
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
