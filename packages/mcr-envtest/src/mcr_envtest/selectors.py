"""Label and field selectors (parse once, match many).

Labels: ``=``, ``==``, ``!=``, ``in``, ``notin``, ``key``, ``!key``, ``>`` and ``<`` (integers);
``!=`` and ``notin`` also match objects without the key. Fields: ``=``, ``==``, ``!=`` on
``metadata.name``, ``metadata.namespace`` and a few per-type fields; other fields are a 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from . import errors
from .resources import ResourceInfo

__all__ = ["Selector", "parse_field_selector", "parse_label_selector"]

Matcher = Callable[[dict[str, Any]], bool]

_REQ = re.compile(
    r"""\s*(?P<not>!)?\s*(?P<key>[A-Za-z0-9_./-]+)\s*
        (?:(?P<op>==|=|!=|>|<)\s*(?P<val>[A-Za-z0-9_.-]*)
          |\s+(?P<setop>in|notin)\s*\((?P<set>[^)]*)\)
        )?\s*""",
    re.X,
)


def _split_top(s: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in (x.strip() for x in parts) if p]


def _label_req(req: str) -> Callable[[dict[str, str]], bool]:
    m = _REQ.fullmatch(req)
    if m is None:
        raise errors.bad_request(f'unable to parse requirement: invalid label selector: "{req}"')
    key, neg = m["key"], bool(m["not"])
    if neg:
        if m["op"] or m["setop"]:
            raise errors.bad_request(f'unable to parse requirement: invalid label selector: "{req}"')
        return lambda labels: key not in labels
    op = m["op"]
    if op is not None:
        val = m["val"]
        if op in ("=", "=="):
            return lambda labels: labels.get(key) == val
        if op == "!=":
            return lambda labels: labels.get(key) != val
        try:
            num = int(val)
        except ValueError:
            raise errors.bad_request(f"invalid label selector {req!r}: {val!r} is not an integer") from None

        def cmp(labels: dict[str, str]) -> bool:
            v = labels.get(key)
            if v is None:
                return False
            try:
                n = int(v)
            except ValueError:
                return False
            return n > num if op == ">" else n < num

        return cmp
    if m["setop"]:
        values = {v.strip() for v in m["set"].split(",") if v.strip()}
        if m["setop"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    return lambda labels: key in labels


def parse_label_selector(selector: str | None) -> Matcher | None:
    """A matcher on an object's ``metadata.labels`` (None for an empty selector); 400 when malformed."""
    if not selector or not selector.strip():
        return None
    reqs = [_label_req(r) for r in _split_top(selector)]

    def match(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r(labels) for r in reqs)

    return match


# Per-type selectable fields beyond metadata.name / metadata.namespace.
TYPE_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    ("", "events"): frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    ("events.k8s.io", "events"): frozenset(
        {
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "reason",
            "type",
            "reportingController",
        }
    ),
    ("", "secrets"): frozenset({"type"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "replicationcontrollers"): frozenset({"status.replicas"}),
    ("apps", "replicasets"): frozenset({"status.replicas"}),
    ("batch", "jobs"): frozenset({"status.successful"}),
    ("apiextensions.k8s.io", "customresourcedefinitions"): frozenset(),
}


def _field_value(obj: dict[str, Any], path: str) -> str:
    if path == "source" and "source" in obj and isinstance(obj["source"], dict):
        return str(obj["source"].get("component", ""))
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
        if cur is None:
            return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def _selectable(info: ResourceInfo) -> frozenset[str]:
    fields = {"metadata.name", "metadata.namespace"} | set(TYPE_FIELDS.get((info.group, info.plural), ()))
    if info.crd is not None:
        for v in (info.crd.get("spec") or {}).get("versions") or []:
            if v.get("name") == info.version:
                for sf in v.get("selectableFields") or []:
                    fields.add(str(sf.get("jsonPath", "")).lstrip("."))
    return frozenset(fields)


def parse_field_selector(selector: str | None, info: ResourceInfo) -> Matcher | None:
    """A matcher for a field selector on ``info``'s objects (None for an empty selector).

    Raises StatusError 400 for a malformed selector or a field the type does not support.
    """
    if not selector or not selector.strip():
        return None
    allowed = _selectable(info)
    reqs: list[tuple[str, bool, str]] = []
    for part in _split_top(selector):
        m = re.fullmatch(r"\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*", part)
        if m is None:
            raise errors.bad_request(f'invalid field selector: "{part}"')
        fld, op, val = m.group(1), m.group(2), m.group(3)
        if fld not in allowed:
            raise errors.bad_request(f"field label not supported: {fld}")
        reqs.append((fld, op == "!=", val))

    def match(obj: dict[str, Any]) -> bool:
        return all((_field_value(obj, fld) == val) != neg for fld, neg, val in reqs)

    return match


class Selector:
    """A namespace + label + field filter for list and watch."""

    __slots__ = ("fields", "labels", "namespace")

    def __init__(self, namespace: str | None, labels: Matcher | None, fields: Matcher | None) -> None:
        self.namespace = namespace
        self.labels = labels
        self.fields = fields

    @property
    def trivial(self) -> bool:
        """True when only the namespace filters (the fast path for watches)."""
        return self.labels is None and self.fields is None

    def matches(self, obj: dict[str, Any]) -> bool:
        if self.labels is not None and not self.labels(obj):
            return False
        return self.fields is None or self.fields(obj)
