"""Encoding of built-in objects, lists and Status objects as kube-apiserver's protobuf responses
(``application/vnd.kubernetes.protobuf``): the ``k8s\\0`` magic, then a ``runtime.Unknown``
envelope (typeMeta {apiVersion, kind}, raw = the object's message, empty contentEncoding and
contentType), with the message laid out from ``data/proto_fields.json`` as Go's generated
marshallers lay it out: fields by number, non-pointer fields always written (zero values
included), map entries by key. The inverse of :mod:`.protobuf`.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import struct
from typing import Any

from .protobuf import _table, supported

__all__ = ["encode_object", "encode_watch_event", "supported"]

_MAGIC = b"k8s\x00"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_EXT = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1."
_RAW_JSON = {"k8s.io.apimachinery.pkg.runtime.RawExtension", _META + "FieldsV1", _EXT + "JSON"}
_DURATION = re.compile(r"(\d+(?:\.\d*)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _len_field(number: int, data: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(data)) + data


def _time(value: Any) -> bytes:
    if not isinstance(value, str) or not value:
        return b""
    t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    seconds = int(t.timestamp())
    nanos = t.microsecond * 1000
    return _tag(1, 0) + _varint(seconds) + _tag(2, 0) + _varint(nanos)


def _duration(value: Any) -> int:
    if isinstance(value, int | float):
        return int(value)
    text = str(value)
    sign = -1 if text.startswith("-") else 1
    total = sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(text.lstrip("+-")))
    return sign * int(total)


def _is_special(name: str) -> bool:
    return (
        name in (_META + "Time", _META + "MicroTime", _META + "Duration")
        or name in _RAW_JSON
        or name.startswith(_EXT + "JSONSchemaPropsOr")
        or name
        in (
            "k8s.io.apimachinery.pkg.api.resource.Quantity",
            "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
        )
    )


def _special(name: str, value: Any) -> bytes | None:
    """The message bytes of upstream's types with a custom JSON form (None for other types)."""
    if name in (_META + "Time", _META + "MicroTime"):
        return _time(value)
    if name == _META + "Duration":
        return _tag(1, 0) + _varint(_duration(value))
    if name == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        return _len_field(1, str(value).encode())
    if name == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        if isinstance(value, str):
            return _tag(1, 0) + _varint(1) + _tag(2, 0) + _varint(0) + _len_field(3, value.encode())
        return _tag(1, 0) + _varint(0) + _tag(2, 0) + _varint(int(value)) + _len_field(3, b"")
    if name in _RAW_JSON:
        return _len_field(1, json.dumps(value, separators=(",", ":")).encode()) if value is not None else b""
    if name.startswith(_EXT + "JSONSchemaPropsOr"):
        props = _EXT + "JSONSchemaProps"
        if name.endswith("OrBool"):
            if isinstance(value, dict):
                return _tag(1, 0) + _varint(1) + _len_field(2, _message(value, props))
            return _tag(1, 0) + _varint(1 if value else 0)
        if isinstance(value, list):
            if name.endswith("OrArray"):
                return b"".join(_len_field(2, _message(v, props)) for v in value)
            return b"".join(_len_field(2, str(v).encode()) for v in value)
        return _len_field(1, _message(value if isinstance(value, dict) else {}, props))
    return None


def _scalar(number: int, typ: str, value: Any) -> bytes:
    if typ == "string":
        return _len_field(number, str(value if value is not None else "").encode())
    if typ == "bytes":
        raw = base64.b64decode(value) if isinstance(value, str) else b""
        return _len_field(number, raw)
    if typ == "bool":
        return _tag(number, 0) + _varint(1 if value else 0)
    if typ == "double":
        return _tag(number, 1) + struct.pack("<d", float(value or 0))
    if typ == "float":
        return _tag(number, 5) + struct.pack("<f", float(value or 0))
    return _tag(number, 0) + _varint(int(value or 0))


def _value(number: int, typ: str, value: Any) -> bytes:
    if typ.startswith("k8s.io."):
        return _len_field(number, _message(value, typ))
    return _scalar(number, typ, value)


def _zero(typ: str) -> Any:
    return {"string": "", "bytes": "", "bool": False, "double": 0.0, "float": 0.0}.get(typ, 0)


def _message(value: Any, name: str) -> bytes:
    special = _special(name, value)
    if special is not None:
        return special
    table = _table()
    msg = table["messages"].get(name)
    if msg is None:
        raise ValueError(f"no protobuf schema for {name}")
    if msg.get("u"):  # a named list type: its JSON is the list itself
        value = {"items": value}
    obj = value if isinstance(value, dict) else {}
    out = bytearray()
    for number, key, typ, flags in sorted(msg["f"], key=lambda f: f[0]):
        if "i" in flags:
            out += _len_field(number, _message(obj, typ))
            continue
        present = obj.get(key)
        if typ.startswith("map:"):
            _, ktyp, vtyp = typ.split(":", 2)
            entries: dict[str, Any] = present or {}
            for k in sorted(entries):
                out += _len_field(number, _value(1, ktyp, k) + _value(2, vtyp, entries[k]))
        elif "r" in flags:
            for item in present or []:
                out += _value(number, typ, item)
        elif "p" in flags:
            if present is not None:
                out += _value(number, typ, present)
        elif typ.startswith("k8s.io."):
            # a non-pointer message is always written; an absent special value as empty bytes
            empty = present is None and _is_special(typ)
            out += _len_field(number, b"" if empty else _message(present if present is not None else {}, typ))
        else:
            out += _scalar(number, typ, present if present is not None else _zero(typ))
    return bytes(out)


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _len_field(1, api_version.encode()) + _len_field(2, kind.encode())
    return _MAGIC + _len_field(1, type_meta) + _len_field(2, raw) + _len_field(3, b"") + _len_field(4, b"")


def encode_object(obj: dict[str, Any], api_version: str | None = None, kind: str | None = None) -> bytes:
    """A built-in object (or list, or Status) as a protobuf response body; ``api_version`` and
    ``kind`` default to the object's own. Raises ValueError for a kind the table lacks."""
    api_version = api_version or str(obj.get("apiVersion", ""))
    kind = kind or str(obj.get("kind", ""))
    package = (
        "k8s.io.apimachinery.pkg.apis.meta.v1" if kind == "Status" else _table()["groups"].get(api_version)
    )
    name = f"{package}.{kind}"
    if package is None or name not in _table()["messages"]:
        raise ValueError(f"protobuf encoding of {api_version}/{kind} is not supported")
    return _envelope(api_version, kind, _message(obj, name))


def encode_watch_event(event_type: str, obj: dict[str, Any]) -> bytes:
    """One frame of a protobuf watch stream (``;stream=watch``): a 4-byte big-endian length, then
    a ``WatchEvent`` message whose object is ``obj`` encoded as :func:`encode_object` encodes it."""
    message = _len_field(1, event_type.encode()) + _len_field(2, _len_field(1, encode_object(obj)))
    return struct.pack(">I", len(message)) + message
