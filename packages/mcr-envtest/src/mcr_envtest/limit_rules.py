"""LimitRanges as kube-apiserver enforces them: the validation of a LimitRange itself
(:data:`RULES`, Status causes in kube-apiserver's words) and the LimitRanger admission plugin,
which gives a new Pod's containers the default requests and limits of its namespace's
LimitRanges (:func:`default_pod`, recording what it set in the ``kubernetes.io/limit-ranger``
annotation) and refuses a Pod or PersistentVolumeClaim outside their bounds
(:func:`violation`, the message of the 403). Quantities compare by value, as upstream's do;
the iteration over resource names, random in Go, is sorted here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from .label_selector import key_problems
from .object_rules import field_cause, go_quoted
from .quantity import Quantity

__all__ = ["ANNOTATION", "KIND", "RULES", "default_pod", "replaces", "violation"]

Obj = dict[str, Any]
Cause = dict[str, Any]
Rule = Callable[[Obj, "Obj | None"], list[Cause]]

ANNOTATION = "kubernetes.io/limit-ranger"
_TYPES = ("Pod", "Container", "PersistentVolumeClaim")
_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_STANDARD_RESOURCES = frozenset(
    {
        *_CONTAINER_RESOURCES,
        "storage",
        *(f"{scope}.{name}" for scope in ("requests", "limits") for name in _CONTAINER_RESOURCES),
        "requests.storage",
        *("pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps"),
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_MAX_MILLI = (1 << 63) // 1000  # upstream's MaxMilliValue: larger values compare whole


def _invalid(value: str, message: str, field: str) -> Cause:
    return field_cause("FieldValueInvalid", f"Invalid value: {go_quoted(value)}: {message}", field)


def _quantities(values: Any) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for key, text in (values if isinstance(values, dict) else {}).items():
        try:
            out[str(key)] = Quantity.parse(text)
        except (TypeError, ValueError):
            continue  # not a quantity: the request's decoding refuses it
    return out


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _resource_name_problems(name: str, container: bool) -> list[str]:
    bad = key_problems(name)
    if bad:
        return bad
    if "/" not in name:
        if name not in _STANDARD_RESOURCES and not name.startswith("hugepages-"):
            bad.append("must be a standard resource type or fully qualified")
        if container and name not in _CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            bad.append("must be a standard resource for containers")
    elif container and not _native(name) and name.startswith("requests."):
        bad.append("doesn't follow extended resource name standard")
    return bad


def _type_problems(kind: str) -> list[str]:
    bad = key_problems(kind)
    if not bad and "/" not in kind and kind not in _TYPES:
        bad.append("must be a standard limit type or fully qualified")
    return bad


def _item_causes(item: Obj, at: str, seen: set[str]) -> list[Cause]:
    kind = str(item.get("type") or "")
    out = [_invalid(kind, m, f"{at}.type") for m in _type_problems(kind)]
    if kind in seen:
        out.append(field_cause("FieldValueDuplicate", f"Duplicate value: {go_quoted(kind)}", f"{at}.type"))
    seen.add(kind)
    container = kind in ("Pod", "Container")
    fields = ["max", "min"] if kind == "Pod" else ["max", "min", "default", "defaultRequest"]
    for name in fields:
        for key in sorted(item.get(name) or {}):
            out += [_invalid(key, m, f"{at}.{name}[{key}]") for m in _resource_name_problems(key, container)]
    if kind == "Pod":
        for name in ("default", "defaultRequest"):
            if item.get(name):
                message = "Forbidden: may not be specified when `type` is 'Pod'"
                out.append(field_cause("FieldValueForbidden", message, f"{at}.{name}"))
    if kind == "PersistentVolumeClaim" and "storage" not in (item.get("min") or {}) | (item.get("max") or {}):
        message = (
            "Required value: either minimum or maximum storage value is required, but neither was provided"
        )
        out.append(field_cause("FieldValueRequired", message, f"{at}.limits"))
    for key in sorted(item.get("maxLimitRequestRatio") or {}):
        path = f"{at}.maxLimitRequestRatio[{key}]"
        out += [_invalid(key, m, path) for m in _resource_name_problems(key, container)]
    return out + _bounds_causes(item, at, kind)


# (smaller, larger, field at fault, value shown, words): a cause when smaller > larger, in
# upstream's order (the value shown is upstream's choice, not always the field's own).
_ORDER = (
    ("min", "max", "min", "min", "min value {min} is greater than max value {max}"),
    (
        "min",
        "defaultRequest",
        "defaultRequest",
        "defaultRequest",
        "min value {min} is greater than default request value {defaultRequest}",
    ),
    (
        "defaultRequest",
        "max",
        "defaultRequest",
        "defaultRequest",
        "default request value {defaultRequest} is greater than max value {max}",
    ),
    (
        "defaultRequest",
        "default",
        "defaultRequest",
        "defaultRequest",
        "default request value {defaultRequest} is greater than default limit value {default}",
    ),
    ("min", "default", "default", "min", "min value {min} is greater than default value {default}"),
    ("default", "max", "default", "max", "default value {default} is greater than max value {max}"),
)


def _bounds_causes(item: Obj, at: str, kind: str) -> list[Cause]:
    fields = ("min", "max") if kind == "Pod" else ("min", "max", "default", "defaultRequest")
    bounds = {name: _quantities(item.get(name)) for name in fields}
    ratios = _quantities(item.get("maxLimitRequestRatio"))
    out: list[Cause] = []
    for key in sorted({k for values in bounds.values() for k in values} | set(ratios)):
        q = {name: values[key] for name, values in bounds.items() if key in values}
        for smaller, larger, name, shown, words in _ORDER:
            if smaller in q and larger in q and q[smaller] > q[larger]:
                out.append(_invalid(str(q[shown]), words.format(**q), f"{at}.{name}[{key}]"))
        rt, mn, mx = ratios.get(key), q.get("min"), q.get("max")
        path = f"{at}.maxLimitRequestRatio[{key}]"
        if rt is not None and rt < Quantity.parse("1"):
            out.append(_invalid(str(rt), f"ratio {rt} is less than 1", path))
        if rt is not None and mn is not None and mx is not None:
            whole = max(rt.value(), mn.value(), mx.value()) >= _MAX_MILLI
            low, high = (mn.value(), mx.value()) if whole else (mn.milli_value(), mx.milli_value())
            limit = high / low if low else math.inf  # Go's float division by zero
            if (rt.value() if whole else rt.milli_value() / 1000) > limit:
                out.append(_invalid(str(rt), f"ratio {rt} is greater than max/min = {limit:f}", path))
        df, dr = q.get("default"), q.get("defaultRequest")
        overcommit = _native(key) and not key.startswith("hugepages-")
        if not overcommit and df is not None and dr is not None and df != dr:
            words = f"default value {df} must equal to defaultRequest value {dr} in {key}"
            out.append(_invalid(str(dr), words, f"{at}.defaultRequest[{key}]"))
    return out


def _limit_range(obj: Obj, old: Obj | None) -> list[Cause]:
    items = (obj.get("spec") or {}).get("limits") if isinstance(obj.get("spec"), dict) else None
    seen: set[str] = set()
    out: list[Cause] = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        if isinstance(item, dict):
            out += _item_causes(item, f"spec.limits[{i}]", seen)
    return out


KIND = ("", "limitranges")
RULES: dict[tuple[str, str], Rule] = {KIND: _limit_range}


def replaces(cause: Cause) -> bool:
    """Whether ``cause``, found in a LimitRange by its schema, is one this module words
    differently (an item's missing type, which upstream reports as an invalid name)."""
    field = str(cause.get("field", ""))
    return (
        cause.get("reason") == "FieldValueRequired"
        and field.startswith("spec.limits[")
        and field.endswith("].type")
    )


def _containers(pod: Obj) -> Iterable[tuple[str, Obj]]:
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    for key, prefix in (("containers", "container"), ("initContainers", "init container")):
        for c in (spec or {}).get(key) or []:
            if isinstance(c, dict):
                yield prefix, c


def default_pod(pod: Obj, ranges: list[Obj]) -> None:
    """Give ``pod``'s containers the default limits and requests of each LimitRange's Container
    items where they have none, each LimitRange in turn; in place."""
    for limit_range in ranges:
        limits: dict[str, Any] = {}
        requests: dict[str, Any] = {}
        for item in (limit_range.get("spec") or {}).get("limits") or []:
            if isinstance(item, dict) and item.get("type") == "Container":
                requests.update(item.get("defaultRequest") or {})
                limits.update(item.get("default") or {})
        notes: list[str] = []
        for prefix, container in _containers(pod):
            resources = container.setdefault("resources", {})
            set_requests = _fill(resources, "requests", requests)
            set_limits = _fill(resources, "limits", limits)
            if set_requests:
                notes.append(f"{', '.join(set_requests)} request for {prefix} {container.get('name', '')}")
            if set_limits:
                notes.append(f"{', '.join(set_limits)} limit for {prefix} {container.get('name', '')}")
        if notes:
            meta = pod.setdefault("metadata", {})
            meta.setdefault("annotations", {})[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def _fill(resources: Obj, key: str, defaults: dict[str, Any]) -> list[str]:
    sent = resources.get(key)
    present: dict[str, Any] = sent if isinstance(sent, dict) else {}
    added = sorted(k for k in defaults if k not in present)
    if added:
        resources[key] = {**present, **{k: defaults[k] for k in added}}
    return added


def _compared(*quantities: Quantity) -> list[int]:
    if all(q.value() <= _MAX_MILLI for q in quantities):
        return [q.milli_value() for q in quantities]
    return [q.value() for q in quantities]


def _min(
    kind: str, name: str, bound: Quantity, requests: dict[str, Quantity], limits: dict[str, Quantity]
) -> str | None:
    req, lim = requests.get(name), limits.get(name)
    if req is None:
        return f"minimum {name} usage per {kind} is {bound}.  No request is specified"
    seen_req, seen_lim, enforced = _compared(req, lim or Quantity.parse("0"), bound)
    if seen_req < enforced:
        return f"minimum {name} usage per {kind} is {bound}, but request is {req}"
    if lim is not None and seen_lim < enforced:
        return f"minimum {name} usage per {kind} is {bound}, but limit is {lim}"
    return None


def _max(
    kind: str, name: str, bound: Quantity, requests: dict[str, Quantity], limits: dict[str, Quantity] | None
) -> str | None:
    req = requests.get(name)
    if limits is None:  # a claim: only its request counts
        if req is None:
            return f"maximum {name} usage per {kind} is {bound}.  No request is specified"
        seen_req, _, enforced = _compared(req, Quantity.parse("0"), bound)
        return (
            f"maximum {name} usage per {kind} is {bound}, but request is {req}"
            if seen_req > enforced
            else None
        )
    lim = limits.get(name)
    if lim is None:
        return f"maximum {name} usage per {kind} is {bound}.  No limit is specified"
    seen_req, seen_lim, enforced = _compared(req or Quantity.parse("0"), lim, bound)
    if seen_lim > enforced:
        return f"maximum {name} usage per {kind} is {bound}, but limit is {lim}"
    if req is not None and seen_req > enforced:
        return f"maximum {name} usage per {kind} is {bound}, but request is {req}"
    return None


def _ratio(
    kind: str, name: str, bound: Quantity, requests: dict[str, Quantity], limits: dict[str, Quantity]
) -> str | None:
    req, lim = requests.get(name), limits.get(name)
    seen_req, seen_lim, _ = _compared(req or Quantity.parse("0"), lim or Quantity.parse("0"), bound)
    lead = f"{name} max limit to request ratio per {kind} is {bound}"
    if req is None or seen_req == 0:
        return f"{lead}, but no request is specified or request is 0"
    if lim is None or seen_lim == 0:
        return f"{lead}, but no limit is specified or limit is 0"
    ratio = seen_lim / seen_req
    whole = bound.value() > _MAX_MILLI
    if (ratio if whole else ratio * 1000) > (bound.value() if whole else bound.milli_value()):
        return f"{lead}, but provided ratio is {ratio:f}"
    return None


def _pod_totals(pod: Obj, key: str) -> dict[str, Quantity]:
    """A pod's requests or limits: its containers' (and sidecars') sums, or an init container's
    larger need."""
    total: dict[str, Quantity] = {}
    sidecars: dict[str, Quantity] = {}
    init: dict[str, Quantity] = {}
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    for c in (spec or {}).get("containers") or []:
        _add(total, _quantities((c.get("resources") or {}).get(key)))
    for c in (spec or {}).get("initContainers") or []:
        own = _quantities((c.get("resources") or {}).get(key))
        if c.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            own = dict(sidecars)
        else:
            own = _add(dict(own), sidecars)
        for name, q in own.items():
            if name not in init or q > init[name]:
                init[name] = q
    for name, q in init.items():
        if name not in total or q > total[name]:
            total[name] = q
    return total


def _add(into: dict[str, Quantity], more: dict[str, Quantity]) -> dict[str, Quantity]:
    for name, q in more.items():
        into[name] = into[name] + q if name in into else q
    return into


def _checks(
    kind: str, item: Obj, requests: dict[str, Quantity], limits: dict[str, Quantity]
) -> list[str | None]:
    out: list[str | None] = []
    out += [_min(kind, k, v, requests, limits) for k, v in sorted(_quantities(item.get("min")).items())]
    out += [_max(kind, k, v, requests, limits) for k, v in sorted(_quantities(item.get("max")).items())]
    ratios = sorted(_quantities(item.get("maxLimitRequestRatio")).items())
    return out + [_ratio(kind, k, v, requests, limits) for k, v in ratios]


def _range_errors(resource: str, obj: Obj, limit_range: Obj) -> list[str]:
    found: list[str | None] = []
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        kind = item.get("type") if isinstance(item, dict) else None
        if resource == "pods" and kind == "Container":
            for _, c in _containers(obj):
                res = c.get("resources") or {}
                found += _checks(kind, item, _quantities(res.get("requests")), _quantities(res.get("limits")))
        elif resource == "pods" and kind == "Pod":
            found += _checks(kind, item, _pod_totals(obj, "requests"), _pod_totals(obj, "limits"))
        elif resource == "persistentvolumeclaims" and kind == "PersistentVolumeClaim":
            requests = _quantities(((obj.get("spec") or {}).get("resources") or {}).get("requests"))
            found += [_min(kind, k, v, requests, {}) for k, v in sorted(_quantities(item.get("min")).items())]
            found += [
                _max(kind, k, v, requests, None) for k, v in sorted(_quantities(item.get("max")).items())
            ]
    return list(dict.fromkeys(e for e in found if e is not None))


def violation(resource: str, obj: Obj, ranges: list[Obj]) -> str | None:
    """Why LimitRanger refuses ``obj`` (a Pod or PersistentVolumeClaim, by ``resource``) under
    its namespace's ``ranges``: the first LimitRange it violates, all of that one's errors
    (``[a, b]`` for more than one); None when it is within them all."""
    for limit_range in ranges:
        errs = _range_errors(resource, obj, limit_range)
        if errs:
            return errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
    return None
