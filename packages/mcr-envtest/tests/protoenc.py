"""A test-side protobuf encoder for Kubernetes objects (the inverse of the server's decoder),
driven by the same field table, so a test can post any built-in kind as kubectl would."""

from __future__ import annotations

import base64
import datetime as dt
import json
import struct
from typing import Any

from mcr_envtest.schema.protobuf import _table

MAGIC = b"k8s\x00"
META = "k8s.io.apimachinery.pkg.apis.meta.v1."
EXT = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1."
RAW = {"k8s.io.apimachinery.pkg.runtime.RawExtension", META + "FieldsV1", EXT + "JSON"}


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _ld(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def _scalar(number: int, typ: str, value: Any) -> bytes:
    if typ == "string":
        return _ld(number, str(value).encode())
    if typ == "bytes":
        return _ld(number, base64.b64decode(value))
    if typ == "double":
        return _tag(number, 1) + struct.pack("<d", float(value))
    if typ == "float":
        return _tag(number, 5) + struct.pack("<f", float(value))
    return _tag(number, 0) + _varint(int(value))


def _time(value: str) -> bytes:
    t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    seconds = int((t - epoch).total_seconds() // 1)
    return _scalar(1, "int64", seconds) + _scalar(2, "int32", t.microsecond * 1000)


def message(value: Any, name: str) -> bytes:
    """The protobuf bytes of ``value`` (its JSON form) as message ``name``."""
    if name in (META + "Time", META + "MicroTime"):
        return _time(value) if value else b""
    if name == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        return _scalar(1, "string", value)
    if name == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        if isinstance(value, str):
            return _scalar(1, "int64", 1) + _scalar(3, "string", value)
        return _scalar(1, "int64", 0) + _scalar(2, "int32", value)
    if name in RAW:
        return _ld(1, json.dumps(value).encode())
    if name == EXT + "JSONSchemaPropsOrArray":
        if isinstance(value, list):
            return b"".join(_ld(2, message(v, EXT + "JSONSchemaProps")) for v in value)
        return _ld(1, message(value, EXT + "JSONSchemaProps"))
    if name == EXT + "JSONSchemaPropsOrBool":
        if isinstance(value, bool):
            return _scalar(1, "bool", value)
        return _scalar(1, "bool", True) + _ld(2, message(value, EXT + "JSONSchemaProps"))
    table = _table()["messages"][name]
    if table.get("u"):
        value = {"items": value}
    out = b""
    for number, key, typ, flags in table["f"]:
        if "i" in flags:
            out += _ld(number, message(value, typ))
            continue
        if not isinstance(value, dict) or value.get(key) is None:
            continue
        v = value[key]
        if typ.startswith("map:"):
            _, ktyp, vtyp = typ.split(":", 2)
            for k, item in v.items():
                out += _ld(number, _field(1, ktyp, k) + _field(2, vtyp, item))
        elif "r" in flags:
            for item in v:
                out += _field(number, typ, item)
        else:
            out += _field(number, typ, v)
    return out


def _field(number: int, typ: str, value: Any) -> bytes:
    if typ.startswith("k8s.io."):
        return _ld(number, message(value, typ))
    return _scalar(number, typ, value)


def encode(obj: dict[str, Any]) -> bytes:
    """A request body in upstream's protobuf envelope for ``obj`` (with apiVersion and kind)."""
    package = _table()["groups"][obj["apiVersion"]]
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    type_meta = _ld(1, obj["apiVersion"].encode()) + _ld(2, obj["kind"].encode())
    return MAGIC + _ld(1, type_meta) + _ld(2, message(body, f"{package}.{obj['kind']}"))
