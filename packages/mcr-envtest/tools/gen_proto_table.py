"""Regenerate ``src/mcr_envtest/data/proto_fields.json``: the protobuf field table of every
built-in Kubernetes kind, for decoding ``application/vnd.kubernetes.protobuf`` request bodies.

Usage::

    python tools/gen_proto_table.py OUT.json SRC [SRC ...]

Each SRC is a checkout of a Kubernetes API source tree (``k8s.io/api``,
``k8s.io/apimachinery``, ``k8s.io/apiextensions-apiserver``, ``k8s.io/kube-aggregator``) at
the release the table should follow. For every package holding a ``generated.proto`` it reads
the message fields (number, proto type, repeated or map) from the ``.proto`` file and, from the
Go structs of the same package, each field's JSON name, whether it is inlined
(``json:",inline"``), a pointer, and ``omitempty``. Go named slice types (``type ExtraValue
[]string``) are marked so the decoder unwraps their ``items`` wrapper message. Only stable
versions (``v1``, ``v2``, ...) are kept, plus the ``meta``/``runtime``/``resource``/``intstr``
support packages.

Table format (JSON)::

    {"groups": {"<apiVersion>": "<proto package>"},
     "messages": {"<package>.<Message>": {"f": [[number, json name, type, flags], ...], "u": 1?}}}

``type`` is a proto scalar (``string``, ``int64``, ...), a fully qualified message name, or
``map:<key type>:<value type>``; ``flags`` holds ``r`` (repeated), ``i`` (inline), ``p`` (Go
pointer) and ``o`` (``omitempty``). ``u`` marks a named slice type.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

_PACKAGE = re.compile(r"^package\s+([\w.]+);", re.M)
_MESSAGE = re.compile(r"^message\s+(\w+)\s*\{(.*?)^\}", re.M | re.S)
_FIELD = re.compile(
    r"^\s*(optional|repeated|required)?\s*([\w.]+|map<\s*[\w.]+\s*,\s*[\w.]+\s*>)\s+(\w+)\s*=\s*(\d+)", re.M
)
_STRUCT = re.compile(r"^type\s+(\w+)\s+struct\s*\{(.*?)^\}", re.M | re.S)
_NAMED_SLICE = re.compile(r"^type\s+(\w+)\s+\[\][\w.]+\s*$", re.M)
_GROUP = re.compile(r'\+groupName=([\w.]*)|\bGroupName\s*=\s*"([\w.]*)"')
_STABLE = re.compile(r"^v\d+$")
_SCALARS = {
    "string",
    "int32",
    "int64",
    "uint32",
    "uint64",
    "bool",
    "bytes",
    "double",
    "float",
    "fixed64",
    "sfixed64",
}
_SUPPORT = (
    "k8s.io.apimachinery.pkg.apis.meta.v1",
    "k8s.io.apimachinery.pkg.runtime",
    "k8s.io.apimachinery.pkg.api.resource",
    "k8s.io.apimachinery.pkg.util.intstr",
)


def _go_fields(directory: Path) -> tuple[dict[str, dict[int, tuple[str, str]]], set[str]]:
    """Go structs of a package: {struct: {proto number: (json name, flags)}}, and named slices."""
    structs: dict[str, dict[int, tuple[str, str]]] = {}
    slices: set[str] = set()
    for path in sorted(directory.glob("*.go")):
        if path.name.endswith("_test.go") or path.name.startswith(("zz_generated", "generated.pb")):
            continue
        text = path.read_text()
        slices.update(_NAMED_SLICE.findall(text))
        for name, body in _STRUCT.findall(text):
            fields: dict[int, tuple[str, str]] = {}
            for line in body.splitlines():
                line = line.strip()
                if "`" not in line or "protobuf:" not in line:
                    continue
                decl, tags = line.split("`", 1)
                proto = re.search(r'protobuf:"(\w+),(\d+),', tags)
                js = re.search(r'json:"([^"]*)"', tags)
                if proto is None or js is None:
                    continue
                parts = decl.split()
                go_type = parts[-1] if parts else ""
                json_name, _, options = js.group(1).partition(",")
                if json_name == "-":
                    continue
                flags = ""
                # an embedded struct without a JSON name has its fields promoted (inlined)
                if "inline" in options.split(",") or (not json_name and len(parts) == 1):
                    flags += "i"
                if go_type.startswith("*"):
                    flags += "p"
                if "omitempty" in options.split(","):
                    flags += "o"
                fields[int(proto.group(2))] = (json_name, flags)
            structs[name] = fields
    return structs, slices


def _qualify(typ: str, package: str, known: set[str]) -> str:
    if typ in _SCALARS:
        return typ
    typ = typ.lstrip(".")
    if "." in typ and typ in known:
        return typ
    local = f"{package}.{typ}"
    return local if local in known or "." not in typ else typ


def _api_version(directory: Path, package: str) -> str | None:
    version = package.rsplit(".", 1)[-1]
    if not _STABLE.match(version):
        return None
    for path in sorted(directory.glob("*.go")):
        m = _GROUP.search(path.read_text())
        if m is not None:
            group = m.group(1) or m.group(2) or ""
            return f"{group}/{version}" if group else version
    return None


def generate(sources: list[Path]) -> dict[str, object]:
    parsed: list[tuple[Path, str, list[tuple[str, str]]]] = []
    for root in sources:
        for proto in sorted(root.rglob("generated.proto")):
            text = proto.read_text()
            m = _PACKAGE.search(text)
            if m is None:
                continue
            parsed.append((proto.parent, m.group(1), _MESSAGE.findall(text)))
    known = {f"{pkg}.{name}" for _, pkg, msgs in parsed for name, _ in msgs}
    groups: dict[str, str] = {}
    messages: dict[str, object] = {}
    for directory, package, msgs in parsed:
        api_version = _api_version(directory, package)
        if api_version is None and package not in _SUPPORT:
            continue
        if api_version is not None and "testapigroup" not in package:
            groups[api_version] = package
        structs, slices = _go_fields(directory)
        for name, body in msgs:
            go = structs.get(name, {})
            fields = []
            for label, typ, proto_name, number in _FIELD.findall(body):
                num = int(number)
                if typ.startswith("map<"):
                    key, value = (t.strip() for t in typ[4:-1].split(","))
                    ftype = f"map:{_qualify(key, package, known)}:{_qualify(value, package, known)}"
                else:
                    ftype = _qualify(typ, package, known)
                json_name, flags = go.get(num, (proto_name, "o"))
                if label == "repeated":
                    flags = "r" + flags
                fields.append([num, json_name, ftype, flags])
            entry: dict[str, object] = {"f": fields}
            if name in slices:
                entry["u"] = 1
            messages[f"{package}.{name}"] = entry
    return {"groups": dict(sorted(groups.items())), "messages": dict(sorted(messages.items()))}


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    table = generate([Path(a) for a in argv[2:]])
    Path(argv[1]).write_text(json.dumps(table, separators=(",", ":"), sort_keys=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
