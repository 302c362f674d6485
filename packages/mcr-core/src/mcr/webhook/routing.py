"""The paths the webhook server serves: each names the cluster the call comes from.

``/validate/<cluster>/<group>/<version>/<kind>``, ``/mutate/<cluster>/<group>/<version>/<kind>``
and ``/convert/<cluster>/<group>/<kind>``. The core group ``""`` is written ``core`` and the kind
is lowercased. A cluster name is written with unreserved URL characters only, so that no client
re-escapes it: letters, digits, ``-``, ``.`` and ``_`` stand for themselves, every other byte of its
UTF-8 form is ``~`` followed by two hex digits, and the local cluster ``""`` is the segment ``~``.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

__all__ = ["Route", "cluster_segment", "parse", "path_for"]

_PLAIN = frozenset(string.ascii_letters + string.digits + "-._")
OPERATIONS = ("validate", "mutate", "convert")


def cluster_segment(name: str) -> str:
    """The path segment naming the cluster ``name`` (``~`` for the local cluster)."""
    if name == "":
        return "~"
    out: list[str] = []
    for ch in name:
        if ch in _PLAIN:
            out.append(ch)
        else:
            out.extend(f"~{b:02x}" for b in ch.encode())
    return "".join(out)


def cluster_from_segment(segment: str) -> str:
    """The cluster name a path segment names; ``ValueError`` for a malformed segment."""
    if segment == "~":
        return ""
    raw = bytearray()
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "~":
            try:
                raw.append(int(segment[i + 1 : i + 3], 16))
            except ValueError:
                raise ValueError(
                    f"cluster segment {segment!r}: '~' must be followed by two hex digits"
                ) from None
            if len(segment[i + 1 : i + 3]) != 2:
                raise ValueError(f"cluster segment {segment!r}: '~' must be followed by two hex digits")
            i += 3
            continue
        if ch not in _PLAIN:
            raise ValueError(f"cluster segment {segment!r}: {ch!r} must be escaped")
        raw.append(ord(ch))
        i += 1
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise ValueError(f"cluster segment {segment!r} is not UTF-8") from None


@dataclass(frozen=True)
class Route:
    """What a path addresses: the operation, the cluster and the handler's key."""

    operation: str  # "validate" | "mutate" | "convert"
    cluster: str
    key: tuple[str, ...]  # (group, version, kind) for admission, (group, kind) for conversion


def _group(group: str) -> str:
    return group or "core"


def path_for(operation: str, cluster: str, group: str, version: str, kind: str) -> str:
    """The path of a handler as seen from ``cluster`` (``version`` is ignored for ``convert``)."""
    if operation == "convert":
        return f"/convert/{cluster_segment(cluster)}/{_group(group)}/{kind.lower()}"
    return f"/{operation}/{cluster_segment(cluster)}/{_group(group)}/{version}/{kind.lower()}"


def handler_key(operation: str, group: str, version: str, kind: str) -> tuple[str, ...]:
    """The key :func:`parse` returns for a handler's path."""
    if operation == "convert":
        return (_group(group), kind.lower())
    return (_group(group), version, kind.lower())


def parse(path: str) -> Route:
    """The route of ``path``; ``ValueError`` saying what is wrong with it."""
    parts = path.strip("/").split("/")
    operation = parts[0]
    if operation not in OPERATIONS:
        raise ValueError(f"path {path!r}: the first segment must be one of {', '.join(OPERATIONS)}")
    want = 4 if operation == "convert" else 5
    if len(parts) != want:
        shape = "<cluster>/<group>/<kind>" if operation == "convert" else "<cluster>/<group>/<version>/<kind>"
        raise ValueError(f"path {path!r}: expected /{operation}/{shape}")
    return Route(operation, cluster_from_segment(parts[1]), tuple(parts[2:]))
