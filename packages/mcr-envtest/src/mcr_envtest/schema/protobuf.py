"""Decoding of protobuf request bodies (``application/vnd.kubernetes.protobuf``) for every
built-in kind.

kubectl's typed clients post protobuf: ``kubectl create deployment|job|cronjob|service|
configmap|secret|...``, ``auth can-i``, ``create token``. A body is upstream's envelope: the magic
``k8s\\0``, then a ``runtime.Unknown`` message (typeMeta = 1 {apiVersion = 1, kind = 2},
raw = 2) whose ``raw`` is the object. The field numbers, JSON names and Go field traits
(pointer, ``omitempty``, inlined embedded structs) of every message come from
``data/proto_fields.json``, generated from upstream's API definitions by
``tools/gen_proto_table.py``; nothing here is specific to one kind.

The result is the JSON the client would have sent: zero scalars of non-pointer ``omitempty``
fields are omitted (Go writes them to protobuf but not to JSON), embedded structs are inlined,
and upstream's special types get their JSON forms (Time and MicroTime as RFC 3339 or null,
Quantity as a string, IntOrString as a number or a string, Duration as a Go duration, raw JSON
values parsed, bytes base64-encoded).
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import importlib.resources
import json
import struct
from typing import Any

__all__ = ["PROTOBUF", "decode_protobuf", "message_fields", "message_of", "supported"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_EXT = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1."
_RAW_JSON = {"k8s.io.apimachinery.pkg.runtime.RawExtension", _META + "FieldsV1", _EXT + "JSON"}
_SIGNED = {"int32", "int64", "sint32", "sint64"}
_ZERO: tuple[Any, ...] = ("", 0, False, 0.0)

Field = tuple[int, int, Any]  # (number, wire type, value: int for varints, bytes otherwise)


@functools.cache
def _table() -> dict[str, Any]:
    data = importlib.resources.files("mcr_envtest").joinpath("data/proto_fields.json").read_bytes()
    table: dict[str, Any] = json.loads(data)
    # index each message's fields by number once
    table["index"] = {name: {f[0]: f for f in msg["f"]} for name, msg in table["messages"].items()}
    return table


def message_of(api_version: str, kind: str) -> str | None:
    """The name of the message of ``api_version``/``kind`` in the table, or None."""
    package = _table()["groups"].get(api_version)
    return f"{package}.{kind}" if package is not None else None


def message_fields(name: str) -> list[list[Any]] | None:
    """A message's fields as the table holds them: ``[number, JSON name, type, traits]`` (type
    ``map:K:V`` for maps; traits ``r`` repeated, ``i`` inlined, ``o`` omitempty, ``p`` pointer);
    None for a message the table does not hold."""
    msg = _table()["messages"].get(name)
    return None if msg is None else list(msg["f"])


def supported(api_version: str, kind: str) -> bool:
    """True when protobuf bodies of ``api_version``/``kind`` can be decoded."""
    package = _table()["groups"].get(api_version)
    return package is not None and f"{package}.{kind}" in _table()["messages"]


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


def _fields(data: bytes) -> list[Field]:
    out: list[Field] = []
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
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > len(data):
                raise ValueError("truncated protobuf field")
            out.append((number, wire, bytes(data[pos : pos + size])))
            pos += size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return out


def _scalar(typ: str, wire: int, raw: Any) -> Any:
    if typ == "string":
        return raw.decode() if isinstance(raw, bytes) else str(raw)
    if typ == "bytes":
        return base64.b64encode(raw if isinstance(raw, bytes) else b"").decode()
    if typ == "bool":
        return bool(raw)
    if typ in ("double", "float"):
        if not isinstance(raw, bytes):
            return float(raw)
        return struct.unpack("<d" if len(raw) == 8 else "<f", raw)[0]
    if not isinstance(raw, int):
        raise ValueError(f"protobuf {typ} field has wire type {wire}")
    if typ in _SIGNED and raw >= 1 << 63:
        return raw - (1 << 64)
    return raw


def _packed(typ: str, raw: bytes) -> list[Any]:
    if typ in ("double", "float", "fixed64", "sfixed64"):
        size = 4 if typ == "float" else 8
        return [_scalar(typ, 1, raw[i : i + size]) for i in range(0, len(raw), size)]
    out: list[Any] = []
    pos = 0
    while pos < len(raw):
        v, pos = _varint(raw, pos)
        out.append(_scalar(typ, 0, v))
    return out


def _value(typ: str, wire: int, raw: Any) -> Any:
    if typ.startswith("k8s.io."):
        if not isinstance(raw, bytes):
            raise ValueError(f"protobuf message field {typ} has wire type {wire}")
        return _message(raw, typ)
    return _scalar(typ, wire, raw)


def _go_duration(ns: int) -> str:
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + f"{ns / size:.9f}".rstrip("0").rstrip(".") + unit
    h, rest = divmod(ns, 3_600_000_000_000)
    m, rest = divmod(rest, 60_000_000_000)
    secs = f"{rest / 1e9:.9f}".rstrip("0").rstrip(".") + "s"
    if h:
        return f"{sign}{h}h{m}m{secs}"
    return f"{sign}{m}m{secs}" if m else sign + secs


def _special(name: str, data: bytes) -> tuple[bool, Any]:
    """(handled, JSON value) for upstream's types with a custom JSON form."""
    if name in (_META + "Time", _META + "MicroTime"):
        f = {n: v for n, _, v in _fields(data)}
        seconds, nanos = f.get(1, 0), f.get(2, 0)
        if not seconds and not nanos:
            return True, None
        seconds = seconds - (1 << 64) if seconds >= 1 << 63 else seconds
        t = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds, microseconds=nanos // 1000)
        fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if name.endswith("MicroTime") else "%Y-%m-%dT%H:%M:%SZ"
        return True, t.strftime(fmt)
    if name == _META + "Duration":
        ns = next((v for n, _, v in _fields(data) if n == 1), 0)
        return True, _go_duration(ns - (1 << 64) if ns >= 1 << 63 else ns)
    if name == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        return True, next((v.decode() for n, _, v in _fields(data) if n == 1), "0")
    if name == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        f = {n: v for n, _, v in _fields(data)}
        if f.get(1, 0) == 1:
            return True, f.get(3, b"").decode()
        v = f.get(2, 0)
        return True, v - (1 << 64) if v >= 1 << 63 else v
    if name in _RAW_JSON:
        raw = next((v for n, _, v in _fields(data) if n == 1), b"")
        return True, json.loads(raw) if raw else None
    if name.startswith(_EXT + "JSONSchemaPropsOr"):
        props = _EXT + "JSONSchemaProps"
        parts = _fields(data)
        if name.endswith("OrBool"):
            schema = next((_message(v, props) for n, _, v in parts if n == 2), None)
            return True, schema if schema is not None else bool(next((v for n, _, v in parts if n == 1), 0))
        many = [v for n, _, v in parts if n == 2]
        if many:
            return True, [_message(v, props) if name.endswith("OrArray") else v.decode() for v in many]
        return True, next((_message(v, props) for n, _, v in parts if n == 1), {})
    return False, None


def _message(data: bytes, name: str) -> Any:
    handled, value = _special(name, data)
    if handled:
        return value
    table = _table()
    fields = table["index"].get(name)
    if fields is None:
        raise ValueError(f"no protobuf schema for {name}")
    out: dict[str, Any] = {}
    for number, wire, raw in _fields(data):
        spec = fields.get(number)
        if spec is None:
            continue  # a field newer than the table: skipped, as an old server would
        _, key, typ, flags = spec
        if typ.startswith("map:"):
            _, ktyp, vtyp = typ.split(":", 2)
            entry = {n: (w, v) for n, w, v in _fields(raw)}
            k = _value(ktyp, *entry[1]) if 1 in entry else ""
            v = _value(vtyp, *entry[2]) if 2 in entry else _zero_of(vtyp)
            out.setdefault(key, {})[k] = v
        elif "r" in flags:
            items = out.setdefault(key, [])
            if wire == 2 and not typ.startswith("k8s.io.") and typ not in ("string", "bytes"):
                items.extend(_packed(typ, raw))
            else:
                items.append(_value(typ, wire, raw))
        else:
            value = _value(typ, wire, raw)
            if "i" in flags and isinstance(value, dict):
                out.update(value)
            elif not isinstance(value, dict | list) and value in _ZERO and "o" in flags and "p" not in flags:
                out.pop(key, None)
            else:
                out[key] = value
    if table["messages"][name].get("u"):
        return out.get("items", [])
    return out


def _zero_of(typ: str) -> Any:
    if typ.startswith("k8s.io."):
        return _message(b"", typ)
    return {"string": "", "bytes": "", "bool": False}.get(typ, 0)


def decode_protobuf(body: bytes) -> dict[str, Any]:
    """Decode a protobuf request body of any built-in kind into its JSON form (with
    ``apiVersion`` and ``kind``).

    Raises ValueError for bytes without the envelope, for a group-version or kind the table does
    not know, and for malformed messages (the server answers 415)."""
    if not body.startswith(_MAGIC):
        raise ValueError("protobuf body lacks the k8s\\0 envelope prefix")
    envelope = {n: v for n, _, v in _fields(body[len(_MAGIC) :])}
    meta_bytes = envelope.get(1, b"")
    type_meta = {n: v for n, _, v in _fields(meta_bytes)} if isinstance(meta_bytes, bytes) else {}
    api_version, kind = (
        v.decode() if isinstance(v, bytes) else "" for v in (type_meta.get(1), type_meta.get(2))
    )
    if not supported(api_version, kind):
        raise ValueError(
            f"protobuf bodies of {api_version or '?'}/{kind or '?'} are not supported; send JSON"
        )
    package = _table()["groups"][api_version]
    try:
        obj = _message(envelope.get(2, b""), f"{package}.{kind}")
    except ValueError:
        raise
    except (KeyError, TypeError, AttributeError, IndexError, struct.error, RecursionError) as exc:
        # a field whose wire type or content contradicts the schema
        raise ValueError(f"malformed protobuf {kind}: {type(exc).__name__}: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"malformed protobuf {kind}: not an object")
    return {"apiVersion": api_version, "kind": kind, **obj}
