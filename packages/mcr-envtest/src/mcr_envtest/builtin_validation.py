"""Spec rules of Services, Pods, workload controllers, Jobs and CronJobs that kube-apiserver's
validation enforces beyond their OpenAPI schemas (ports, container names, restart policies,
selectors that must match their template, immutable selectors, schedules), as Status causes
in kube-apiserver's order."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcr_envtest.object_rules import field_cause as _cause
from mcr_envtest.object_rules import go_json as _go_json
from mcr_envtest.object_rules import go_quoted as _quoted
from mcr_envtest.object_rules import value_at as _at

__all__ = ["RULES", "pod_spec_causes"]

Obj = dict[str, Any]
Cause = dict[str, Any]
Rule = Callable[[Obj, "Obj | None"], list[Cause]]

_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_MSG_PORT = "must be between 1 and 65535, inclusive"


def pod_spec_causes(spec: Any, path: str) -> list[Cause]:
    """A pod spec without containers, with duplicate container names, a container without an
    image, or an unknown restart policy."""
    if not isinstance(spec, dict):
        return []
    out: list[Cause] = []
    containers = spec.get("containers")
    if containers == []:  # a missing list is the schema's Required value
        out.append(_cause("FieldValueRequired", "Required value", f"{path}.containers"))
    names: set[str] = set()
    for key in ("containers", "initContainers"):
        items = spec.get(key)
        if not isinstance(items, list):
            continue
        for i, c in enumerate(items):
            if not isinstance(c, dict):
                continue
            name = c.get("name")
            if isinstance(name, str) and name:
                if name in names:
                    out.append(
                        _cause(
                            "FieldValueDuplicate",
                            f"Duplicate value: {_quoted(name)}",
                            f"{path}.{key}[{i}].name",
                        )
                    )
                names.add(name)
            if not c.get("image"):
                out.append(_cause("FieldValueRequired", "Required value", f"{path}.{key}[{i}].image"))
    policy = spec.get("restartPolicy")
    if isinstance(policy, str) and policy and policy not in _RESTART_POLICIES:
        supported = ", ".join(_quoted(p) for p in _RESTART_POLICIES)
        out.append(
            _cause(
                "FieldValueNotSupported",
                f"Unsupported value: {_quoted(policy)}: supported values: {supported}",
                f"{path}.restartPolicy",
            )
        )
    return out


def _valid_port(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _service(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    out: list[Cause] = []
    ports = spec.get("ports")
    if spec.get("type") != "ExternalName" and not ports:
        out.append(_cause("FieldValueRequired", "Required value", "spec.ports"))
    if isinstance(ports, list):
        names: set[str] = set()
        for i, p in enumerate(ports):
            if not isinstance(p, dict):
                continue
            at = f"spec.ports[{i}]"
            name = p.get("name") or ""
            if len(ports) > 1 and not name:
                out.append(_cause("FieldValueRequired", "Required value", f"{at}.name"))
            elif name:
                if name in names:
                    out.append(
                        _cause("FieldValueDuplicate", f"Duplicate value: {_quoted(str(name))}", f"{at}.name")
                    )
                names.add(str(name))
            port = p.get("port")
            if isinstance(port, int) and not _valid_port(port):
                out.append(_cause("FieldValueInvalid", f"Invalid value: {port}: {_MSG_PORT}", f"{at}.port"))
            target = p.get("targetPort", port)
            if (
                isinstance(target, int)
                and not isinstance(target, bool)
                and target != 0
                and not _valid_port(target)
            ):
                out.append(
                    _cause("FieldValueInvalid", f"Invalid value: {target}: {_MSG_PORT}", f"{at}.targetPort")
                )
    if old is not None:
        out.extend(_cluster_ips_update(spec, old.get("spec")))
    return out


def _cluster_ips_update(spec: Obj, old_spec: Any) -> list[Cause]:
    """A set cluster IP may not change (except to or from an ExternalName Service)."""
    if not isinstance(old_spec, dict) or "ExternalName" in (spec.get("type"), old_spec.get("type")):
        return []
    old_ips = old_spec.get("clusterIPs") or ([old_spec["clusterIP"]] if old_spec.get("clusterIP") else [])
    new_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    if not isinstance(old_ips, list) or not isinstance(new_ips, list):
        return []
    for i, ip in enumerate(old_ips[:2]):
        if i < len(new_ips) and new_ips[i] and new_ips[i] != ip:
            return [
                _cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_go_json(new_ips)}: may not change once set",
                    f"spec.clusterIPs[{i}]",
                )
            ]
    return []


def _selector_matches(selector: Any, labels: dict[str, Any]) -> bool:
    """Whether a LabelSelector matches ``labels`` (a missing selector matches nothing)."""
    if not isinstance(selector, dict):
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        if not isinstance(expr, dict):
            continue
        key, op, values = str(expr.get("key")), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _empty_selector(selector: Any) -> bool:
    return (
        isinstance(selector, dict)
        and not selector.get("matchLabels")
        and not selector.get("matchExpressions")
    )


def _nonnegative(spec: Obj, key: str, path: str) -> list[Cause]:
    value = spec.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [
            _cause("FieldValueInvalid", f"Invalid value: {value}: must be greater than or equal to 0", path)
        ]
    return []


def _template_match(spec: Obj) -> list[Cause]:
    selector = spec.get("selector")
    labels = _at(spec, "template", "metadata", "labels")
    if _empty_selector(selector):
        return []
    if _selector_matches(selector, labels if isinstance(labels, dict) else {}):
        return []
    return [
        _cause(
            "FieldValueInvalid",
            f"Invalid value: {_go_json(labels)}: `selector` does not match template `labels`",
            "spec.template.metadata.labels",
        )
    ]


def _immutable(spec: Obj, old: Obj | None, key: str) -> list[Cause]:
    old_spec = old.get("spec") if old is not None else None
    if not isinstance(old_spec, dict) or spec.get(key) == old_spec.get(key):
        return []
    value = spec.get(key)
    shown = _quoted(value) if isinstance(value, str) else _go_json(value)
    return [_cause("FieldValueInvalid", f"Invalid value: {shown}: field is immutable", f"spec.{key}")]


def _workload(kind: str) -> Rule:
    """Rules of a Deployment, ReplicaSet, StatefulSet or DaemonSet spec."""

    def rule(obj: Obj, old: Obj | None) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return []
        out: list[Cause] = []
        if kind != "daemonsets":
            out.extend(_nonnegative(spec, "replicas", "spec.replicas"))
        out.extend(_template_match(spec))
        out.extend(pod_spec_causes(_at(spec, "template", "spec"), "spec.template.spec"))
        strategy = spec.get("strategy")
        if (
            kind == "deployments"
            and isinstance(strategy, dict)
            and strategy.get("type") == "Recreate"
            and strategy.get("rollingUpdate") is not None
        ):
            out.append(
                _cause(
                    "FieldValueForbidden",
                    "Forbidden: may not be specified when strategy `type` is 'Recreate'",
                    "spec.strategy.rollingUpdate",
                )
            )
        if old is not None:
            out.extend(_immutable(spec, old, "selector"))
            if kind == "statefulsets":
                out.extend(_immutable(spec, old, "serviceName"))
                out.extend(_replica_status(obj.get("status")))
        return out

    return rule


_REPLICA_COUNTS = ("readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas")


def _replica_status(status: Any) -> list[Cause]:
    """A StatefulSet's status counts: none negative, none above ``replicas``."""
    if not isinstance(status, dict):
        return []
    out: list[Cause] = []
    for key in ("replicas", *_REPLICA_COUNTS, "observedGeneration"):
        out.extend(_nonnegative(status, key, f"status.{key}"))
    replicas = status.get("replicas")
    if isinstance(replicas, int):
        for key in _REPLICA_COUNTS:
            value = status.get(key)
            if isinstance(value, int) and value > replicas:
                message = f"Invalid value: {value}: cannot be greater than status.replicas"
                out.append(_cause("FieldValueInvalid", message, f"status.{key}"))
    return out


# what a suspended Job's template may change (its scheduling directives)
_SCHEDULING = ("nodeSelector", "tolerations", "affinity", "schedulingGates")


def _job_template_update(spec: Obj, old: Obj) -> list[Cause]:
    """A Job's template is immutable, except the scheduling directives of a suspended Job."""
    old_spec = old.get("spec")
    template, old_template = spec.get("template"), _at(old_spec, "template")
    if not isinstance(template, dict) or not isinstance(old_template, dict) or template == old_template:
        return []
    pod, old_pod = template.get("spec"), old_template.get("spec")
    suspended = spec.get("suspend") is True and _at(old_spec, "suspend") is True
    if suspended and isinstance(pod, dict) and isinstance(old_pod, dict):
        pod = {k: v for k, v in pod.items() if k not in _SCHEDULING}
        old_pod = {k: v for k, v in old_pod.items() if k not in _SCHEDULING}
    if pod != old_pod:
        message = f"Invalid value: {_go_json(template.get('spec'))}: field is immutable"
        return [_cause("FieldValueInvalid", message, "spec.template.spec")]
    if not suspended and template.get("metadata") != old_template.get("metadata"):
        message = f"Invalid value: {_go_json(template)}: field is immutable"
        return [_cause("FieldValueInvalid", message, "spec.template")]
    return []


def _job_template(spec: Any, path: str) -> list[Cause]:
    """A Job's pod template must restart OnFailure or Never."""
    if not isinstance(spec, dict):
        return []
    out = pod_spec_causes(_at(spec, "template", "spec"), f"{path}.template.spec")
    policy = _at(spec, "template", "spec", "restartPolicy")
    if isinstance(_at(spec, "template", "spec"), dict) and policy not in ("OnFailure", "Never"):
        out.append(
            _cause(
                "FieldValueRequired",
                'Required value: valid values: "OnFailure", "Never"',
                f"{path}.template.spec.restartPolicy",
            )
        )
    return out


def _job(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    out: list[Cause] = []
    if spec.get("manualSelector") is True and old is None:
        if spec.get("selector") is None:
            out.append(_cause("FieldValueRequired", "Required value", "spec.selector"))
        out.extend(_template_match(spec))
    out.extend(_job_template(spec, "spec"))
    if old is not None:
        out.extend(_immutable(spec, old, "selector"))
        out.extend(_job_template_update(spec, old))
    return out


_CRON_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@every ")


def _cron_job(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    out: list[Cause] = []
    schedule = spec.get("schedule")
    if isinstance(schedule, str) and schedule and not schedule.startswith(_CRON_MACROS):
        body = schedule
        if body.startswith(("TZ=", "CRON_TZ=")) and " " in body:
            body = body.split(" ", 1)[1]
        found = body.split()
        if len(found) != 5:
            out.append(
                _cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_quoted(schedule)}: expected exactly 5 fields, found {len(found)}: "
                    f"[{' '.join(found)}]",
                    "spec.schedule",
                )
            )
    out.extend(
        _job_template(
            spec.get("jobTemplate", {}).get("spec") if isinstance(spec.get("jobTemplate"), dict) else None,
            "spec.jobTemplate.spec",
        )
    )
    return out


def _daemon_set(obj: Obj, old: Obj | None) -> list[Cause]:
    out = _workload("daemonsets")(obj, old)
    strategy = _at(obj, "spec", "updateStrategy")
    if isinstance(strategy, dict) and strategy.get("type") not in (None, "RollingUpdate", "OnDelete"):
        rolling = strategy.get("rollingUpdate")
        shown_rolling = (
            {"MaxUnavailable": rolling.get("maxUnavailable"), "MaxSurge": rolling.get("maxSurge")}
            if isinstance(rolling, dict)
            else None
        )
        shown = json.dumps(
            {"Type": strategy.get("type"), "RollingUpdate": shown_rolling}, separators=(",", ":")
        )
        out.append(
            _cause(
                "FieldValueNotSupported",
                f'Unsupported value: {shown}: supported values: "RollingUpdate", "OnDelete"',
                "spec.updateStrategy",
            )
        )
    return out


def _namespace(obj: Obj, old: Obj | None) -> list[Cause]:
    phase = (obj.get("status") or {}).get("phase") if isinstance(obj.get("status"), dict) else None
    if phase == "Terminating" and not (obj.get("metadata") or {}).get("deletionTimestamp"):
        message = "Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"
        return [_cause("FieldValueInvalid", message, "status.Phase")]
    return []


RULES: dict[tuple[str, str], Rule] = {
    ("", "namespaces"): _namespace,
    ("", "services"): _service,
    ("apps", "deployments"): _workload("deployments"),
    ("apps", "replicasets"): _workload("replicasets"),
    ("apps", "statefulsets"): _workload("statefulsets"),
    ("apps", "daemonsets"): _daemon_set,
    ("batch", "jobs"): _job,
    ("batch", "cronjobs"): _cron_job,
}
