"""Label and field selectors (parse once, match many).

Labels: ``=``, ``==``, ``!=``, ``in``, ``notin``, ``key``, ``!key``, ``>`` and ``<`` (integers);
``!=`` and ``notin`` also match objects without the key. Fields: ``=``, ``==``, ``!=`` on
``metadata.name``, ``metadata.namespace`` and a few per-type fields; other fields are a 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from . import errors, event_conversion, label_selector
from .resources import ResourceInfo

__all__ = ["Selector", "parse_field_selector", "parse_label_selector"]

Matcher = Callable[[dict[str, Any]], bool]


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


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _label_req(req: label_selector.Requirement) -> Callable[[dict[str, str]], bool]:
    key, op, values = req.key, req.op, req.values
    if op == "exists":
        return lambda labels: key in labels
    if op == "!":
        return lambda labels: key not in labels
    if op in ("=", "in"):
        return lambda labels: key in labels and labels[key] in values
    if op in ("!=", "notin"):
        return lambda labels: key not in labels or labels[key] not in values
    (bound,) = (int(v) for v in values)

    def cmp(labels: dict[str, str]) -> bool:
        have = _int(labels.get(key))
        return have is not None and (have > bound if op == "gt" else have < bound)

    return cmp


def parse_label_selector(selector: str | None) -> Matcher | None:
    """A matcher on an object's ``metadata.labels`` (None for an empty selector); 400 with
    kube-apiserver's message when malformed."""
    if not selector or not selector.strip():
        return None
    try:
        reqs = [_label_req(r) for r in label_selector.parse(selector)]
    except label_selector.SelectorError as exc:
        raise errors.bad_request(str(exc)) from None
    if not reqs:
        return None

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
    ("batch", "jobs"): frozenset({"status.successful"}),
    ("", "services"): frozenset(),
}


# Event fields of one API only: an Event stored through the other API is read converted
_CORE_EVENT_FIELDS = ("involvedObject.", "reportingComponent", "source")
_EVENTS_V1_FIELDS = ("regarding.", "reportingController")


def _field_value(obj: dict[str, Any], path: str) -> str:
    if obj.get("kind") == "Event":
        if path.startswith(_CORE_EVENT_FIELDS):
            obj = event_conversion.convert(obj, event_conversion.CORE)
        elif path.startswith(_EVENTS_V1_FIELDS):
            obj = event_conversion.convert(obj, event_conversion.EVENTS)
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


def _unsupported(info: ResourceInfo, fld: str) -> str:
    """kube-apiserver's words for a field a kind cannot select on: kinds without field label
    conversions of their own answer in the generic words."""
    if info.group_resource == ("batch", "jobs"):
        return f'field label "{fld}" not supported for Job'
    if info.crd is None and info.group_resource not in TYPE_FIELDS:
        return f'"{fld}" is not a known field selector: only "metadata.name", "metadata.namespace"'
    return f"field label not supported: {fld}"


def parse_field_selector(selector: str | None, info: ResourceInfo) -> Matcher | None:
    """A matcher for a field selector on ``info``'s objects (None for an empty selector).

    Raises StatusError 400 for a malformed selector or a field the type does not support.
    """
    if not selector or not selector.strip():
        return None
    allowed = _selectable(info)
    reqs: list[tuple[str, bool, str]] = []
    for part in _split_top(selector):
        m = re.search("!=|==|=", part)  # the first operator splits the term, spaces and all
        if m is None:
            raise errors.bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        fld, op, val = part[: m.start()], m.group(), part[m.end() :]
        if fld not in allowed:
            raise errors.bad_request(_unsupported(info, fld))
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
