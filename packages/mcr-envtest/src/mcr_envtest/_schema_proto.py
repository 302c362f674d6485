"""Decoding of the few protobuf request bodies kubectl sends to typed endpoints.

kubectl 1.3x posts ``application/vnd.kubernetes.protobuf`` bodies for SelfSubjectAccessReview
(``auth can-i``), SelfSubjectReview (``auth whoami``) and TokenRequest (``create token``), while
accepting JSON answers. Those bodies are upstream's protobuf envelope: the magic ``k8s\\0``, then
a ``runtime.Unknown`` message (typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2) whose ``raw`` is
the object. Only the fields these reviews carry are decoded; everything else is skipped.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROTOBUF", "decode_protobuf"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"

# message name → {field number: (json name, "string"|"int"|"bool"|"strings"|<message name>)}
_Schema = dict[int, tuple[str, str]]
_MESSAGES: dict[str, _Schema] = {
    "Unknown": {1: ("typeMeta", "TypeMeta"), 2: ("raw", "bytes")},
    "TypeMeta": {1: ("apiVersion", "string"), 2: ("kind", "string")},
    "ObjectMeta": {1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string")},
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


def _message(data: bytes, name: str) -> dict[str, Any]:
    schema = _MESSAGES[name]
    out: dict[str, Any] = {}
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            raw: Any = value
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ValueError("truncated protobuf field")
            raw = data[pos : pos + length]
            pos += length
        elif wire == 1:
            pos += 8
            continue
        elif wire == 5:
            pos += 4
            continue
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if number not in schema:
            continue
        key, typ = schema[number]
        if typ == "string":
            out[key] = bytes(raw).decode() if isinstance(raw, bytes) else str(raw)
        elif typ == "strings":
            out.setdefault(key, []).append(bytes(raw).decode())
        elif typ == "int":
            out[key] = int(raw)
        elif typ == "bool":
            out[key] = bool(raw)
        elif typ == "bytes":
            out[key] = raw
        elif isinstance(raw, bytes):
            out[key] = _message(raw, typ)
    return out


def decode_protobuf(body: bytes) -> dict[str, Any]:
    """Decode a protobuf-encoded SelfSubjectAccessReview, SelfSubjectReview or TokenRequest body
    into its JSON form (with ``apiVersion`` and ``kind``).

    Raises ValueError for anything else or for malformed bytes (the server answers 415/400).
    """
    if not body.startswith(_MAGIC):
        raise ValueError("protobuf body lacks the k8s\\0 envelope prefix")
    envelope = _message(body[len(_MAGIC) :], "Unknown")
    type_meta = envelope.get("typeMeta") or {}
    kind = type_meta.get("kind", "")
    if kind not in ("SelfSubjectAccessReview", "SelfSubjectReview", "TokenRequest"):
        raise ValueError(f"protobuf bodies of kind {kind!r} are not supported; send JSON")
    obj = _message(envelope.get("raw") or b"", kind)
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
