"""HorizontalPodAutoscalers between ``autoscaling/v2`` (stored) and ``autoscaling/v1``, as
kube-apiserver converts them.

v1 has one metric, ``spec.targetCPUUtilizationPercentage``: the first ``Resource`` ``cpu``
``Utilization`` metric of v2. Every other metric, the ``behavior``, the current metrics other
than CPU utilisation and the status conditions ride in the ``autoscaling.alpha.kubernetes.io/*``
annotations of the v1 object (metrics in v1's own metric format, the behavior in upstream's
internal field names), and come back out of them when a v1 object is converted to v2. Objects
already at the version asked for are returned as they are; other objects are not changed in
place. Annotations that do not hold valid JSON are dropped.
"""

from __future__ import annotations

import copy
import json
from typing import Any

__all__ = ["RESOURCE", "V1", "V2", "convert"]

RESOURCE = ("autoscaling", "horizontalpodautoscalers")

V1 = "autoscaling/v1"
V2 = "autoscaling/v2"
PREFIX = "autoscaling.alpha.kubernetes.io/"
METRICS = PREFIX + "metrics"
BEHAVIOR = PREFIX + "behavior"
CURRENT_METRICS = PREFIX + "current-metrics"
CONDITIONS = PREFIX + "conditions"

Obj = dict[str, Any]


def convert(obj: Obj, api_version: str) -> Obj:
    """``obj`` (an HPA at v1 or v2) at ``api_version`` (``autoscaling/v1`` or ``autoscaling/v2``)."""
    if obj.get("apiVersion") == api_version or api_version not in (V1, V2):
        return obj
    return _to_v1(obj) if api_version == V1 else _to_v2(obj)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _set(out: Obj, key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


# ------------------------------------------------------------------ v2 -> v1
def _zero_if_unset(quantity: Any) -> Any:
    """A quantity v1 always serialises: ``"0"`` when v2 has none."""
    return "0" if quantity is None else quantity


def _is_cpu_utilization(m: Any, field: str) -> bool:
    r = m.get("resource") if isinstance(m, dict) and m.get("type") == "Resource" else None
    inner = (r or {}).get(field) or {}
    return isinstance(r, dict) and r.get("name") == "cpu" and inner.get("averageUtilization") is not None


def _metric_to_v1(m: Obj, part: str) -> Obj:
    """A v2 metric in v1's format: a spec metric (``part="target"``) or a status one (``"current"``).
    The two differ only in their field names and in which values default to ``"0"``."""
    current = part == "current"
    kind = m.get("type")
    out: Obj = {"type": kind}
    if kind == "Resource" or kind == "ContainerResource":
        key = "resource" if kind == "Resource" else "containerResource"
        src = m.get(key) or {}
        v = src.get(part) or {}
        r: Obj = {"name": src.get("name", "")}
        _set(r, f"{part}AverageUtilization", v.get("averageUtilization"))
        average = v.get("averageValue")
        _set(r, f"{part}AverageValue", _zero_if_unset(average) if current else average)
        if kind == "ContainerResource":
            r["container"] = src.get("container", "")
        out[key] = r
    elif kind == "Pods":
        src = m.get("pods") or {}
        metric, v = src.get("metric") or {}, src.get(part) or {}
        p: Obj = {"metricName": metric.get("name", ""), f"{part}AverageValue": v.get("averageValue", "0")}
        _set(p, "selector", metric.get("selector"))
        out["pods"] = p
    elif kind == "Object":
        src = m.get("object") or {}
        metric, v = src.get("metric") or {}, src.get(part) or {}
        o: Obj = {
            "target": src.get("describedObject") or {},
            "metricName": metric.get("name", ""),
            f"{part}Value": v.get("value", "0"),
        }
        _set(o, "selector", metric.get("selector"))
        _set(o, "averageValue", v.get("averageValue"))
        out["object"] = o
    elif kind == "External":
        src = m.get("external") or {}
        metric, v = src.get("metric") or {}, src.get(part) or {}
        e: Obj = {"metricName": metric.get("name", "")}
        _set(e, "metricSelector", metric.get("selector"))
        value = v.get("value")
        _set(e, f"{part}Value", _zero_if_unset(value) if current else value)
        _set(e, f"{part}AverageValue", v.get("averageValue"))
        out["external"] = e
    return out


def _rules_to_internal(rules: Any) -> Any:
    if not isinstance(rules, dict):
        return None
    policies = rules.get("policies")
    return {
        "StabilizationWindowSeconds": rules.get("stabilizationWindowSeconds"),
        "SelectPolicy": rules.get("selectPolicy"),
        "Policies": None
        if policies is None
        else [
            {
                "Type": p.get("type", ""),
                "Value": p.get("value", 0),
                "PeriodSeconds": p.get("periodSeconds", 0),
            }
            for p in policies
            if isinstance(p, dict)
        ],
        "Tolerance": rules.get("tolerance"),
    }


def _to_v1(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    out["apiVersion"] = V1
    meta = out.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    spec = out.get("spec") or {}
    v1spec: Obj = {}
    for key in ("maxReplicas", "minReplicas", "scaleTargetRef"):
        if key in spec:
            v1spec[key] = spec[key]
    others = []
    for m in spec.get("metrics") or []:
        if "targetCPUUtilizationPercentage" not in v1spec and _is_cpu_utilization(m, "target"):
            t = m["resource"]["target"]
            if t.get("type") == "Utilization":
                v1spec["targetCPUUtilizationPercentage"] = t["averageUtilization"]
                continue
        if isinstance(m, dict):
            others.append(_metric_to_v1(m, "target"))
    if others:
        annotations[METRICS] = _json(others)
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        annotations[BEHAVIOR] = _json(
            {
                "ScaleUp": _rules_to_internal(behavior.get("scaleUp")),
                "ScaleDown": _rules_to_internal(behavior.get("scaleDown")),
            }
        )
    if "spec" in out:
        out["spec"] = v1spec
    status = out.get("status")
    if isinstance(status, dict):
        v1status: Obj = {}
        for key in ("observedGeneration", "lastScaleTime"):
            _set(v1status, key, status.get(key))
        v1status["currentReplicas"] = status.get("currentReplicas", 0)
        v1status["desiredReplicas"] = status.get("desiredReplicas", 0)
        # unlike the spec's, every current metric rides in the annotation, CPU utilisation too
        current = []
        for m in status.get("currentMetrics") or []:
            if "currentCPUUtilizationPercentage" not in v1status and _is_cpu_utilization(m, "current"):
                v1status["currentCPUUtilizationPercentage"] = m["resource"]["current"]["averageUtilization"]
            if isinstance(m, dict):
                current.append(_metric_to_v1(m, "current"))
        if current:
            annotations[CURRENT_METRICS] = _json(current)
        if status.get("conditions"):
            annotations[CONDITIONS] = _json(status["conditions"])
        out["status"] = v1status
    if annotations:
        meta["annotations"] = annotations
    return out


# ------------------------------------------------------------------ v1 -> v2
def _metric_to_v2(m: Any) -> Obj | None:
    if not isinstance(m, dict):
        return None
    kind = m.get("type")
    out: Obj = {"type": kind}
    if kind == "Resource" or kind == "ContainerResource":
        key = "resource" if kind == "Resource" else "containerResource"
        src = m.get(key) or {}
        if src.get("targetAverageUtilization") is not None:
            target: Obj = {"type": "Utilization", "averageUtilization": src["targetAverageUtilization"]}
        else:
            target = {"type": "AverageValue"}
            _set(target, "averageValue", src.get("targetAverageValue"))
        r: Obj = {"name": src.get("name", ""), "target": target}
        if kind == "ContainerResource":
            r["container"] = src.get("container", "")
        out[key] = r
    elif kind == "Pods":
        src = m.get("pods") or {}
        metric: Obj = {"name": src.get("metricName", "")}
        _set(metric, "selector", src.get("selector"))
        target = {"type": "AverageValue"}
        _set(target, "averageValue", src.get("targetAverageValue"))
        out["pods"] = {"metric": metric, "target": target}
    elif kind == "Object":
        src = m.get("object") or {}
        metric = {"name": src.get("metricName", "")}
        _set(metric, "selector", src.get("selector"))
        if src.get("averageValue") is not None:
            target = {"type": "AverageValue", "averageValue": src["averageValue"]}
        else:
            target = {"type": "Value"}
            _set(target, "value", src.get("targetValue"))
        out["object"] = {"describedObject": src.get("target") or {}, "metric": metric, "target": target}
    elif kind == "External":
        src = m.get("external") or {}
        metric = {"name": src.get("metricName", "")}
        _set(metric, "selector", src.get("metricSelector"))
        if src.get("targetAverageValue") is not None:
            target = {"type": "AverageValue", "averageValue": src["targetAverageValue"]}
        else:
            target = {"type": "Value"}
            _set(target, "value", src.get("targetValue"))
        out["external"] = {"metric": metric, "target": target}
    return out


def _status_metric_to_v2(m: Any) -> Obj | None:
    if not isinstance(m, dict):
        return None
    kind = m.get("type")
    out: Obj = {"type": kind}
    if kind == "Resource" or kind == "ContainerResource":
        key = "resource" if kind == "Resource" else "containerResource"
        src = m.get(key) or {}
        current: Obj = {}
        _set(current, "averageValue", src.get("currentAverageValue"))
        _set(current, "averageUtilization", src.get("currentAverageUtilization"))
        r: Obj = {"name": src.get("name", ""), "current": current}
        if kind == "ContainerResource":
            r["container"] = src.get("container", "")
        out[key] = r
    elif kind == "Pods":
        src = m.get("pods") or {}
        metric: Obj = {"name": src.get("metricName", "")}
        _set(metric, "selector", src.get("selector"))
        current = {}
        _set(current, "averageValue", src.get("currentAverageValue"))
        out["pods"] = {"metric": metric, "current": current}
    elif kind == "Object":
        src = m.get("object") or {}
        metric = {"name": src.get("metricName", "")}
        _set(metric, "selector", src.get("selector"))
        current = {}
        _set(current, "value", src.get("currentValue"))
        _set(current, "averageValue", src.get("averageValue"))
        out["object"] = {"describedObject": src.get("target") or {}, "metric": metric, "current": current}
    elif kind == "External":
        src = m.get("external") or {}
        metric = {"name": src.get("metricName", "")}
        _set(metric, "selector", src.get("metricSelector"))
        current = {}
        _set(current, "value", src.get("currentValue"))
        _set(current, "averageValue", src.get("currentAverageValue"))
        out["external"] = {"metric": metric, "current": current}
    return out


def _rules_from_internal(rules: Any) -> Any:
    if not isinstance(rules, dict):
        return None
    out: Obj = {}
    _set(out, "stabilizationWindowSeconds", rules.get("StabilizationWindowSeconds"))
    _set(out, "selectPolicy", rules.get("SelectPolicy"))
    policies = rules.get("Policies")
    if isinstance(policies, list):
        out["policies"] = [
            {
                "type": p.get("Type", ""),
                "value": p.get("Value", 0),
                "periodSeconds": p.get("PeriodSeconds", 0),
            }
            for p in policies
            if isinstance(p, dict)
        ]
    _set(out, "tolerance", rules.get("Tolerance"))
    return out


def _load(annotations: Obj, key: str) -> Any:
    raw = annotations.pop(key, None)
    if not isinstance(raw, str):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _to_v2(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    out["apiVersion"] = V2
    meta = out.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    metrics = _load(annotations, METRICS)
    behavior = _load(annotations, BEHAVIOR)
    current = _load(annotations, CURRENT_METRICS)
    conditions = _load(annotations, CONDITIONS)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    spec = out.get("spec")
    if isinstance(spec, dict):
        v2spec: Obj = {k: spec[k] for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec}
        v2metrics = [m for m in map(_metric_to_v2, metrics if isinstance(metrics, list) else []) if m]
        cpu = spec.get("targetCPUUtilizationPercentage")
        if cpu is not None:
            v2metrics.append(
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": cpu}},
                }
            )
        if v2metrics:
            v2spec["metrics"] = v2metrics
        if isinstance(behavior, dict):
            v2behavior: Obj = {}
            _set(v2behavior, "scaleUp", _rules_from_internal(behavior.get("ScaleUp")))
            _set(v2behavior, "scaleDown", _rules_from_internal(behavior.get("ScaleDown")))
            v2spec["behavior"] = v2behavior
        out["spec"] = v2spec
    status = out.get("status")
    if isinstance(status, dict):
        v2status: Obj = {}
        for key in ("observedGeneration", "lastScaleTime"):
            _set(v2status, key, status.get(key))
        if status.get("currentReplicas"):
            v2status["currentReplicas"] = status["currentReplicas"]
        v2status["desiredReplicas"] = status.get("desiredReplicas", 0)
        # the annotation holds every current metric; without it, CPU utilisation is the only one
        if isinstance(current, list):
            v2current = [m for m in map(_status_metric_to_v2, current) if m]
        else:
            cpu_now = status.get("currentCPUUtilizationPercentage")
            v2current = (
                []
                if cpu_now is None
                else [
                    {
                        "type": "Resource",
                        "resource": {"name": "cpu", "current": {"averageUtilization": cpu_now}},
                    }
                ]
            )
        v2status["currentMetrics"] = v2current or None
        if isinstance(conditions, list):
            v2status["conditions"] = conditions
        out["status"] = v2status
    return out
