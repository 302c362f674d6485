"""Events between the core ``v1`` API and ``events.k8s.io/v1``, as kube-apiserver converts them:
both APIs serve one storage, and an Event written through either reads through the other.

``message`` is ``note``, ``involvedObject`` is ``regarding``, ``reportingComponent`` is
``reportingController``; the core fields ``source``, ``firstTimestamp``, ``lastTimestamp`` and
``count`` are events.k8s.io's ``deprecatedSource``, ``deprecatedFirstTimestamp``,
``deprecatedLastTimestamp`` and ``deprecatedCount``. ``action``, ``reason``, ``type``,
``related``, ``eventTime`` and ``series`` are the same in both. Each API's always-serialised
fields are set (null times, empty source and reporting fields in core; null deprecated times and
an empty deprecated source in events.k8s.io), empty optional ones left out as upstream leaves
them out. Objects already at the version asked for are returned as they are; others are not
changed in place.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CORE", "EVENTS", "RESOURCES", "convert"]

CORE = "v1"
EVENTS = "events.k8s.io/v1"
RESOURCES = frozenset({("", "events"), ("events.k8s.io", "events")})

Obj = dict[str, Any]
_SHARED = ("action", "reason", "type", "related", "series")


def convert(obj: Obj, api_version: str) -> Obj:
    """``obj`` (an Event of either API) at ``api_version`` (``v1`` or ``events.k8s.io/v1``)."""
    if obj.get("apiVersion") == api_version or api_version not in (CORE, EVENTS):
        return obj
    return _to_events(obj) if api_version == EVENTS else _to_core(obj)


def _head(obj: Obj, api_version: str) -> Obj:
    out: Obj = {"kind": "Event", "apiVersion": api_version}
    if "metadata" in obj:
        out["metadata"] = obj["metadata"]
    for key in _SHARED:
        if obj.get(key) is not None:
            out[key] = obj[key]
    out["eventTime"] = obj.get("eventTime")
    return out


def _to_events(obj: Obj) -> Obj:
    out = _head(obj, EVENTS)
    if isinstance(out.get("series"), dict):
        out["series"] = {k: v for k, v in out["series"].items() if k in ("count", "lastObservedTime")}
    if obj.get("involvedObject"):
        out["regarding"] = obj["involvedObject"]
    if obj.get("message"):
        out["note"] = obj["message"]
    if obj.get("reportingComponent"):
        out["reportingController"] = obj["reportingComponent"]
    if obj.get("reportingInstance"):
        out["reportingInstance"] = obj["reportingInstance"]
    out["deprecatedSource"] = obj.get("source") or {}
    out["deprecatedFirstTimestamp"] = obj.get("firstTimestamp")
    out["deprecatedLastTimestamp"] = obj.get("lastTimestamp")
    if obj.get("count"):
        out["deprecatedCount"] = obj["count"]
    return out


def _to_core(obj: Obj) -> Obj:
    out = _head(obj, CORE)
    out["involvedObject"] = obj.get("regarding") or {}
    if obj.get("note"):
        out["message"] = obj["note"]
    out["reportingComponent"] = obj.get("reportingController") or ""
    out["reportingInstance"] = obj.get("reportingInstance") or ""
    out["source"] = obj.get("deprecatedSource") or {}
    out["firstTimestamp"] = obj.get("deprecatedFirstTimestamp")
    out["lastTimestamp"] = obj.get("deprecatedLastTimestamp")
    if obj.get("deprecatedCount"):
        out["count"] = obj["deprecatedCount"]
    return out
