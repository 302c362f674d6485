"""Rules of Secrets, owner references, a custom resource's set and map lists, RBAC objects,
Leases, Events, PriorityClasses, EndpointSlices, HorizontalPodAutoscalers, ResourceQuotas,
Nodes, PersistentVolumeClaims and PodDisruptionBudgets that kube-apiserver's validation
enforces beyond their OpenAPI schemas, as Status causes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = [
    "RULES",
    "duplicate_items",
    "field_cause",
    "go_json",
    "go_quoted",
    "owner_reference_causes",
    "secret_type_causes",
    "value_at",
]

Obj = dict[str, Any]
Cause = dict[str, Any]
Rule = Callable[[Obj, "Obj | None"], list[Cause]]


def field_cause(kind: str, message: str, field: str) -> Cause:
    """One entry of a 422's ``details.causes``, as kube-apiserver writes a field error."""
    return {"type": kind, "reason": kind, "message": message, "field": field}


def go_json(value: Any) -> str:
    """``value`` as Go's encoding/json prints it in a field error (maps with sorted keys)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def go_quoted(value: str) -> str:
    """A string quoted as a field error quotes it."""
    return json.dumps(value, ensure_ascii=False)


def value_at(obj: Any, *keys: str) -> Any:
    """``obj[k1][k2]...``, or ``None`` where a step is missing or not a mapping."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


# Short names for the rules below.
_cause, _go_json, _quoted, _at = field_cause, go_json, go_quoted, value_at


def owner_reference_causes(refs: Any) -> list[Cause]:
    """An owner reference without a uid, or more than one reference marked controller."""
    if not isinstance(refs, list):
        return []
    out: list[Cause] = []
    controller = ""
    for i, ref in enumerate(refs):
        if not isinstance(ref, dict):
            continue
        if not ref.get("uid"):
            out.append(
                _cause(
                    "FieldValueRequired",
                    "Required value: must not be empty",
                    f"metadata.ownerReferences[{i}].uid",
                )
            )
        if ref.get("controller") is True:
            name = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if controller:
                shown = json.dumps(
                    [_owner_json(r) for r in refs if isinstance(r, dict)], separators=(",", ":")
                )
                out.append(
                    _cause(
                        "FieldValueInvalid",
                        f"Invalid value: {shown}: Only one reference can have Controller set to true. "
                        f'Found "true" in references for {controller} and {name}',
                        "metadata.ownerReferences",
                    )
                )
            else:
                controller = name
    return out


def _owner_json(ref: Obj) -> dict[str, Any]:
    """An owner reference in its Go struct's field order, empty optional fields left out."""
    out: dict[str, Any] = {k: ref.get(k, "") for k in ("apiVersion", "kind", "name", "uid")}
    for key in ("controller", "blockOwnerDeletion"):
        if ref.get(key) is not None:
            out[key] = ref[key]
    return out


_SECRET_KEYS: dict[str, tuple[str, ...]] = {
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}


def secret_type_causes(obj: Obj) -> list[Cause]:
    """The data keys a typed Secret must carry."""
    kind = obj.get("type")
    data = obj.get("data")
    data = data if isinstance(data, dict) else {}
    if kind == "kubernetes.io/basic-auth" and "username" not in data and "password" not in data:
        return [
            _cause("FieldValueRequired", "Required value", f"data[{k}]") for k in ("username", "password")
        ]
    if kind == "kubernetes.io/ssh-auth" and not data.get("ssh-privatekey"):
        return [_cause("FieldValueRequired", "Required value", "data[ssh-privatekey]")]
    if kind == "kubernetes.io/service-account-token":
        annotations = _at(obj, "metadata", "annotations")
        if not isinstance(annotations, dict) or not annotations.get("kubernetes.io/service-account.name"):
            return [
                _cause(
                    "FieldValueRequired",
                    "Required value",
                    "metadata.annotations[kubernetes.io/service-account.name]",
                )
            ]
    if not isinstance(kind, str):
        return []
    return [
        _cause("FieldValueRequired", "Required value", f"data[{k}]")
        for k in _SECRET_KEYS.get(kind, ())
        if k not in data
    ]


def _lease(obj: Obj, old: Obj | None) -> list[Cause]:
    value = _at(obj, "spec", "leaseDurationSeconds")
    if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
        return [
            _cause(
                "FieldValueInvalid",
                f"Invalid value: {value}: must be greater than 0",
                "spec.leaseDurationSeconds",
            )
        ]
    return []


def _event(obj: Obj, old: Obj | None, involved_key: str = "involvedObject") -> list[Cause]:
    """The object an Event is about is in the Event's namespace (an empty one only in ``default``)."""
    involved = _at(obj, involved_key, "namespace") or ""
    namespace = _at(obj, "metadata", "namespace") or ""
    if not isinstance(involved, str) or not isinstance(namespace, str):
        return []
    mismatch = namespace not in ("", "default") if not involved else bool(namespace) and involved != namespace
    if mismatch:
        return [
            _cause(
                "FieldValueInvalid",
                f"Invalid value: {_quoted(involved)}: does not match event.namespace",
                "involvedObject.namespace",
            )
        ]
    return []


# events.k8s.io/v1's deprecated fields and the core names upstream's causes give them
_DEPRECATED_EVENT_FIELDS = (
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("deprecatedSource", "source"),
)


def _events_v1(obj: Obj, old: Obj | None) -> list[Cause]:
    """An events.k8s.io/v1 Event is about an object of its namespace, and may not be created
    with the deprecated core fields."""
    causes = _event(obj, old, "regarding")
    if old is None:
        causes += [
            _cause("FieldValueInvalid", 'Invalid value: "": needs to be unset', name)
            for key, name in _DEPRECATED_EVENT_FIELDS
            if obj.get(key)
        ]
    return causes


_SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def _binding(obj: Obj, old: Obj | None) -> list[Cause]:
    out: list[Cause] = []
    subjects = obj.get("subjects")
    for i, subject in enumerate(subjects if isinstance(subjects, list) else []):
        kind = subject.get("kind") if isinstance(subject, dict) else None
        if isinstance(kind, str) and kind not in _SUBJECT_KINDS:
            supported = ", ".join(_quoted(k) for k in _SUBJECT_KINDS)
            out.append(
                _cause(
                    "FieldValueNotSupported",
                    f"Unsupported value: {_quoted(kind)}: supported values: {supported}",
                    f"subjects[{i}].kind",
                )
            )
    ref, old_ref = obj.get("roleRef"), (old or {}).get("roleRef")
    if old is not None and isinstance(ref, dict) and isinstance(old_ref, dict) and ref != old_ref:
        shown = _go_json(
            {"APIGroup": ref.get("apiGroup", ""), "Kind": ref.get("kind", ""), "Name": ref.get("name", "")}
        )
        out.append(_cause("FieldValueInvalid", f"Invalid value: {shown}: field is immutable", "roleRef"))
    return out


def _role(obj: Obj, old: Obj | None) -> list[Cause]:
    out: list[Cause] = []
    rules = obj.get("rules")
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        urls = rule.get("nonResourceURLs") if isinstance(rule, dict) else None
        if urls:
            out.append(
                _cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_go_json(urls)}: namespaced rules cannot apply to non-resource URLs",
                    f"rules[{i}].nonResourceURLs",
                )
            )
    return out


def _priority_class(obj: Obj, old: Obj | None) -> list[Cause]:
    if old is not None and obj.get("value") != old.get("value"):
        return [_cause("FieldValueForbidden", "Forbidden: may not be changed in an update.", "value")]
    return []


def _endpoint_slice(obj: Obj, old: Obj | None) -> list[Cause]:
    kind = obj.get("addressType")
    if isinstance(kind, str) and kind not in ("FQDN", "IPv4", "IPv6"):
        return [
            _cause(
                "FieldValueNotSupported",
                f'Unsupported value: {_quoted(kind)}: supported values: "FQDN", "IPv4", "IPv6"',
                "addressType",
            )
        ]
    return []


def _autoscaler(obj: Obj, old: Obj | None) -> list[Cause]:
    low, high = _at(obj, "spec", "minReplicas"), _at(obj, "spec", "maxReplicas")
    if isinstance(low, int) and isinstance(high, int) and high < low:
        return [
            _cause(
                "FieldValueInvalid",
                f"Invalid value: {high}: must be greater than or equal to `minReplicas`",
                "spec.maxReplicas",
            )
        ]
    return []


def _quota(obj: Obj, old: Obj | None) -> list[Cause]:
    hard = _at(obj, "spec", "hard")
    out: list[Cause] = []
    for key, value in (hard if isinstance(hard, dict) else {}).items():
        if (isinstance(value, str) and value.strip().startswith("-")) or (
            isinstance(value, int | float) and not isinstance(value, bool) and value < 0
        ):
            out.append(
                _cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_quoted(str(value))}: must be greater than or equal to 0",
                    f"spec.hard[{key}]",
                )
            )
    return out


def duplicate_items(schema: Any, value: Any, path: str) -> list[Cause]:
    """Items repeated in an ``x-kubernetes-list-type: set`` list, or repeating the keys of an
    earlier item of a ``map`` list."""
    if not isinstance(schema, dict) or not isinstance(value, list):
        return []
    kind = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys") or []
    out: list[Cause] = []
    seen: list[Any] = []
    for i, item in enumerate(value):
        if kind == "set":
            ident: Any = item
        elif kind == "map" and isinstance(item, dict) and keys:
            ident = {k: item[k] for k in keys if k in item}
        else:
            continue
        if ident in seen:
            shown = _quoted(ident) if isinstance(ident, str) else _go_json(ident)
            out.append(_cause("FieldValueDuplicate", f"Duplicate value: {shown}", f"{path}[{i}]"))
        else:
            seen.append(ident)
    return out


_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _node(obj: Obj, old: Obj | None) -> list[Cause]:
    taints = _at(obj, "spec", "taints")
    out: list[Cause] = []
    for i, taint in enumerate(taints if isinstance(taints, list) else []):
        effect = taint.get("effect") if isinstance(taint, dict) else None
        if isinstance(effect, str) and effect not in _TAINT_EFFECTS:
            supported = ", ".join(_quoted(e) for e in _TAINT_EFFECTS)
            # kube-apiserver names the field metadata.taints, not spec.taints
            out.append(
                _cause(
                    "FieldValueNotSupported",
                    f"Unsupported value: {_quoted(effect)}: supported values: {supported}",
                    f"metadata.taints[{i}].effect",
                )
            )
    return out


_CLAIM_IMMUTABLE = (
    "Forbidden: spec is immutable after creation except resources.requests and "
    "volumeAttributesClassName for bound claims"
)


def _claim_frozen(spec: Any) -> Any:
    """A bound claim's spec without what an update may change (its requests, its class)."""
    if not isinstance(spec, dict):
        return spec
    out = {k: v for k, v in spec.items() if k != "volumeAttributesClassName"}
    if isinstance(out.get("resources"), dict):
        out["resources"] = {k: v for k, v in out["resources"].items() if k != "requests"}
    return out


def _claim(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec")
    if old is None:
        if isinstance(spec, dict) and _at(spec, "resources", "requests", "storage") is None:
            return [_cause("FieldValueRequired", "Required value", "spec.resources[storage]")]
        return []
    old_spec = old.get("spec")
    if isinstance(spec, dict) and isinstance(old_spec, dict) and not old_spec.get("volumeName"):
        old_spec = {**old_spec, "volumeName": spec.get("volumeName")}  # set once, by binding
        if old_spec["volumeName"] is None:
            del old_spec["volumeName"]
    if _at(old, "status", "phase") == "Bound":
        spec, old_spec = _claim_frozen(spec), _claim_frozen(old_spec)
    if spec != old_spec:
        return [_cause("FieldValueForbidden", _CLAIM_IMMUTABLE, "spec")]
    return []


def _disruption_budget(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("minAvailable") is None or spec.get("maxUnavailable") is None:
        return []
    shown = json.dumps(
        {
            "MinAvailable": spec.get("minAvailable"),
            "Selector": spec.get("selector"),
            "MaxUnavailable": spec.get("maxUnavailable"),
            "UnhealthyPodEvictionPolicy": spec.get("unhealthyPodEvictionPolicy"),
        },
        separators=(",", ":"),
    )
    return [
        _cause(
            "FieldValueInvalid",
            f"Invalid value: {shown}: minAvailable and maxUnavailable cannot be both set",
            "spec",
        )
    ]


RULES: dict[tuple[str, str], Rule] = {
    ("coordination.k8s.io", "leases"): _lease,
    ("", "events"): _event,
    ("events.k8s.io", "events"): _events_v1,
    ("rbac.authorization.k8s.io", "rolebindings"): _binding,
    ("rbac.authorization.k8s.io", "clusterrolebindings"): _binding,
    ("rbac.authorization.k8s.io", "roles"): _role,
    ("scheduling.k8s.io", "priorityclasses"): _priority_class,
    ("discovery.k8s.io", "endpointslices"): _endpoint_slice,
    ("autoscaling", "horizontalpodautoscalers"): _autoscaler,
    ("", "resourcequotas"): _quota,
    ("", "nodes"): _node,
    ("", "persistentvolumeclaims"): _claim,
    ("policy", "poddisruptionbudgets"): _disruption_budget,
}
