"""Defaulting applied to every write, as kube-apiserver's registry strategies and CRD schemas do.

:func:`apply` runs on create and on every update (PUT, patch, apply) of the main resource:
built-in kinds get upstream's field defaults (a PUT that drops a defaulted field gets it back,
and values the server allocated, such as a Service's cluster IP, are carried over from the live
object); custom resources are pruned to their structural schema (unknown fields dropped unless
``x-kubernetes-preserve-unknown-fields``) and then defaulted from its ``default`` values. CRD
objects get their status conditions (NamesAccepted, Established).
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcr_envtest.schema.structural import apply_defaults, prune_unknown

from . import workloads as wl

if TYPE_CHECKING:
    from mcr_envtest.resources import ResourceInfo

__all__ = ["allocate", "apply", "crd_status", "status_defaults"]

Obj = dict[str, Any]
NS = ("", "namespaces")
CRD = ("apiextensions.k8s.io", "customresourcedefinitions")


def apply(info: ResourceInfo, obj: Obj, old: Obj | None, now: str, *, allocations: bool = True) -> Obj:
    """Return ``obj`` with defaults applied for a create (``old`` None) or an update of the main
    resource. Built-ins are defaulted in place (``obj`` is returned); custom resources come back
    as a new, pruned dict. Never raises for odd shapes: fields of the wrong type are left alone
    for validation to report.

    ``allocations`` False leaves out what the server sets after the request's fields are recorded
    in managedFields (see :func:`allocate`), for the caller to run then."""
    if info.is_custom:
        return apply_defaults(info, prune_unknown(info, obj))
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        # ObjectMeta omits them when empty: an update that empties one drops the field
        for key in _OMIT_EMPTY:
            if key in meta and not meta[key]:
                del meta[key]
    fn = _BUILTIN.get(info.group_resource)
    if fn is not None:
        fn(obj, old or {})
    if info.group_resource == CRD:
        crd_status(obj, now)
    if allocations:
        allocate(info, obj, old)
    wl.status_defaults(info.group_resource, obj)
    return obj


def allocate(info: ResourceInfo, obj: Obj, old: Obj | None) -> None:
    """Set what kube-apiserver sets after recording managedFields, so no manager owns it unless
    the request set it: a Service's cluster IPs, IP families and node ports (its registry), a
    Pod's service account, priority and tolerations (admission plugins), a new Job's generated
    selector and labels, a Namespace's finalizer. In place; a no-op for other kinds."""
    fn = _ALLOCATE.get(info.group_resource)
    if fn is not None:
        fn(obj, old or {})


def status_defaults(info: ResourceInfo, obj: Obj) -> None:
    """Fill the status fields kube-apiserver always serialises, after a write to ``/status``."""
    wl.status_defaults(info.group_resource, obj)


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


def _status(obj: Obj, old: Obj) -> Obj:
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = dict(old.get("status") or {}) if old else {}
    return status


_OMIT_EMPTY = ("labels", "annotations", "finalizers", "ownerReferences")


def _namespace(obj: Obj, old: Obj) -> None:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("name"), str):
        labels = meta.get("labels")
        if not isinstance(labels, dict):
            labels = meta["labels"] = {}
        labels["kubernetes.io/metadata.name"] = meta["name"]
    if not old:
        obj["status"] = {"phase": "Active"}
    elif not isinstance(obj.get("status"), dict) or "phase" not in obj["status"]:
        obj["status"] = old.get("status") or {"phase": "Active"}


def _service(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if spec["type"] in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if spec["type"] == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    for p in spec.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
            if "port" in p:
                p.setdefault("targetPort", p["port"])
    if not isinstance(obj.get("status"), dict):
        obj["status"] = old.get("status") or {"loadBalancer": {}}


def _service_allocations(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    old_spec = old.get("spec") or {}
    kind = spec.get("type", "ClusterIP")
    if kind != "ExternalName":
        # allocated values survive an update that omits them
        for key in ("clusterIP", "clusterIPs"):
            if key not in spec and key in old_spec:
                spec[key] = old_spec[key]
        spec.setdefault("clusterIP", f"10.96.{random.randint(0, 255)}.{random.randint(1, 254)}")
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    local = spec.get("externalTrafficPolicy") == "Local"
    if kind == "LoadBalancer" and local and not spec.get("healthCheckNodePort"):
        spec["healthCheckNodePort"] = old_spec.get("healthCheckNodePort") or random.randint(30000, 32767)
    if kind not in ("NodePort", "LoadBalancer"):
        return
    allocated = {
        (p.get("port"), p.get("protocol", "TCP")): p["nodePort"]
        for p in old_spec.get("ports") or []
        if isinstance(p, dict) and p.get("nodePort")
    }
    for p in spec.get("ports") or []:
        if isinstance(p, dict) and not p.get("nodePort"):
            p["nodePort"] = allocated.get((p.get("port"), p.get("protocol"))) or random.randint(30000, 32767)


def _pod_spec(spec: Any) -> None:
    """Upstream's PodSpec defaults (pods and every pod template)."""
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if isinstance(c, dict):
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
            image = str(c.get("image", ""))
            latest = image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]
            c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            for p in c.get("ports") or []:
                if isinstance(p, dict):
                    p.setdefault("protocol", "TCP")
    for volume in spec.get("volumes") or []:
        host_path = volume.get("hostPath") if isinstance(volume, dict) else None
        if isinstance(host_path, dict):
            host_path.setdefault("type", "")
    wl.pod_spec_extras(spec)


def _template(holder: Any) -> None:
    template = holder.get("template") if isinstance(holder, dict) else None
    if isinstance(template, dict):
        _pod_spec(template.get("spec"))


def _pod(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    _pod_spec(spec)
    spec.setdefault("enableServiceLinks", True)
    if not old:
        wl.default_requests(spec)
    status = _status(obj, old)
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", wl.qos_class(spec))


def _pod_admission(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("serviceAccountName", "default")
    wl.default_pod_admission(spec, old.get("spec") or {})


def _job_selector(obj: Obj, old: Obj) -> None:
    if not old:
        wl.job_selector(_spec(obj), obj)


def _namespace_finalizer(obj: Obj, old: Obj) -> None:
    _spec(obj).setdefault("finalizers", ["kubernetes"])


def _replicas(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("replicas", 1)
    _template(spec)


def _strategy(spec: Obj, key: str, default_type: str, rolling: Obj) -> None:
    strategy = spec.get(key)
    if not isinstance(strategy, dict):
        strategy = spec[key] = {}
    strategy.setdefault("type", default_type)
    if strategy["type"] == default_type and rolling:
        ru = strategy.get("rollingUpdate")
        if not isinstance(ru, dict):
            ru = strategy["rollingUpdate"] = {}
        for k, v in rolling.items():
            ru.setdefault(k, v)


def _deployment(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _strategy(spec, "strategy", "RollingUpdate", {"maxSurge": "25%", "maxUnavailable": "25%"})
    _template(spec)


def _stateful_set(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    _strategy(spec, "updateStrategy", "RollingUpdate", {"partition": 0})
    _template(spec)
    wl.default_stateful_set(spec, obj, old)


def _daemon_set(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("revisionHistoryLimit", 10)
    _strategy(spec, "updateStrategy", "RollingUpdate", {"maxSurge": 0, "maxUnavailable": 1})
    _template(spec)
    wl.default_daemon_set(spec, obj, old)


def _job(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    _template(spec)
    wl.default_job(spec, obj, old)


def _cronjob(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_spec = (spec.get("jobTemplate") or {}).get("spec")
    if isinstance(job_spec, dict):
        _template(job_spec)
    wl.default_cronjob(spec, obj, old)


def _secret(obj: Obj, old: Obj) -> None:
    # stringData is write-only: its values land base64-encoded in data (winning over data's own
    # value for the same key) and it is never stored.
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = obj.get("data")
        if not isinstance(data, dict):
            data = obj["data"] = {}
        for key, value in string_data.items():
            if isinstance(value, str):
                data[key] = base64.b64encode(value.encode()).decode()
            else:  # left for validation to report
                obj.setdefault("stringData", {})[key] = value
    obj.setdefault("type", "Opaque")


def _persistent_volume(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    if isinstance(spec.get("hostPath"), dict):
        spec["hostPath"].setdefault("type", "")
    status = _status(obj, old)
    status.setdefault("phase", "Pending")
    if not old:
        status.setdefault("lastPhaseTransitionTime", (obj.get("metadata") or {}).get("creationTimestamp"))


def _persistent_volume_claim(obj: Obj, old: Obj) -> None:
    _spec(obj).setdefault("volumeMode", "Filesystem")
    _status(obj, old).setdefault("phase", "Pending")


def _ingress(obj: Obj, old: Obj) -> None:
    _status(obj, old).setdefault("loadBalancer", {})  # (networking.k8s.io/v1 requires pathType)


def _network_policy(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("podSelector", {})  # a struct, never a pointer: always there
    for direction in ("ingress", "egress"):
        for rule in spec.get(direction) or []:
            for port in (rule.get("ports") or []) if isinstance(rule, dict) else []:
                if isinstance(port, dict) and port.get("protocol") is None:
                    port["protocol"] = "TCP"
    if not spec.get("policyTypes"):  # Ingress always, Egress when there are egress rules
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def _limit_range(obj: Obj, old: Obj) -> None:
    """A Container item's default limits come from its max, its default requests from its default
    limits, then from its min (each only where unset)."""
    for item in _spec(obj).get("limits") or []:
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        default = dict(item.get("default") or {})
        request = dict(item.get("defaultRequest") or {})
        for source, target in ((item.get("max"), default), (default, request), (item.get("min"), request)):
            for key, value in (source or {}).items():
                target.setdefault(key, value)
        for key, values in (("default", default), ("defaultRequest", request)):
            if values:
                item[key] = values


def _priority_class(obj: Obj, old: Obj) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _rc(obj: Obj, old: Obj) -> None:
    _replicas(obj, old)
    wl.default_replication_controller(_spec(obj), obj, old)


def _hpa(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("minReplicas", 1)
    wl.default_hpa(spec, obj, old)
    if not spec.get("metrics"):
        spec["metrics"] = [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            }
        ]


def _endpoint_slice(obj: Obj, old: Obj) -> None:
    for p in obj.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")


def _webhooks(mutating: bool) -> Callable[[Obj, Obj], None]:
    def default(obj: Obj, old: Obj) -> None:
        for hook in obj.get("webhooks") or []:
            if not isinstance(hook, dict):
                continue
            hook.setdefault("failurePolicy", "Fail")
            hook.setdefault("matchPolicy", "Equivalent")
            hook.setdefault("namespaceSelector", {})
            hook.setdefault("objectSelector", {})
            hook.setdefault("timeoutSeconds", 10)
            if mutating:
                hook.setdefault("reinvocationPolicy", "Never")
            for rule in hook.get("rules") or []:
                if isinstance(rule, dict):
                    rule.setdefault("scope", "*")
            svc = (hook.get("clientConfig") or {}).get("service")
            if isinstance(svc, dict):
                svc.setdefault("port", 443)

    return default


def _api_service(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    svc = spec.get("service")
    if isinstance(svc, dict):
        svc.setdefault("port", 443)
    else:
        svc = None
    if not isinstance(obj.get("status"), dict) or not obj["status"].get("conditions"):
        local = svc is None
        where = f'service/{(svc or {}).get("name")} in "{(svc or {}).get("namespace")}"'
        obj["status"] = {
            "conditions": [
                {
                    "type": "Available",
                    "status": "True" if local else "False",
                    "lastTransitionTime": (old.get("metadata") or {}).get("creationTimestamp")
                    or (obj.get("metadata") or {}).get("creationTimestamp"),
                    "reason": "Local" if local else "ServiceNotFound",
                    "message": "Local APIServices are always available"
                    if local
                    else f"{where} is not present",
                }
            ]
        }


def _crd(obj: Obj, old: Obj) -> None:
    spec = _spec(obj)
    names = spec.get("names")
    if isinstance(names, dict) and names.get("kind"):
        names.setdefault("listKind", f"{names['kind']}List")
    if not isinstance(spec.get("conversion"), dict):
        spec["conversion"] = {"strategy": "None"}


def _rules(obj: Obj, old: Obj) -> None:
    obj.setdefault("rules", None)  # upstream's Role and ClusterRole always carry rules, null when unset


_BUILTIN: dict[tuple[str, str], Callable[[Obj, Obj], None]] = {
    CRD: _crd,
    ("rbac.authorization.k8s.io", "roles"): _rules,
    ("rbac.authorization.k8s.io", "clusterroles"): _rules,
    NS: _namespace,
    ("", "services"): _service,
    ("", "pods"): _pod,
    ("", "secrets"): _secret,
    ("", "persistentvolumes"): _persistent_volume,
    ("", "persistentvolumeclaims"): _persistent_volume_claim,
    ("", "limitranges"): _limit_range,
    ("", "replicationcontrollers"): _rc,
    ("", "endpoints"): wl.default_endpoints,
    ("", "nodes"): lambda obj, old: wl.default_node(obj),
    ("", "events"): wl.default_event,
    ("events.k8s.io", "events"): wl.default_events_v1,
    ("apps", "deployments"): _deployment,
    ("apps", "replicasets"): _replicas,
    ("apps", "statefulsets"): _stateful_set,
    ("apps", "daemonsets"): _daemon_set,
    ("batch", "jobs"): _job,
    ("batch", "cronjobs"): _cronjob,
    ("networking.k8s.io", "ingresses"): _ingress,
    ("networking.k8s.io", "networkpolicies"): _network_policy,
    ("scheduling.k8s.io", "priorityclasses"): _priority_class,
    ("autoscaling", "horizontalpodautoscalers"): _hpa,
    ("discovery.k8s.io", "endpointslices"): _endpoint_slice,
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): _webhooks(True),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): _webhooks(False),
    ("apiregistration.k8s.io", "apiservices"): _api_service,
}


_ALLOCATE: dict[tuple[str, str], Callable[[Obj, Obj], None]] = {
    NS: _namespace_finalizer,
    ("", "services"): _service_allocations,
    ("", "pods"): _pod_admission,
    ("batch", "jobs"): _job_selector,
}


def crd_status(obj: Obj, now: str) -> None:
    """Set a CRD's status: accepted names (with listKind and singular filled in), the
    NamesAccepted and Established conditions, and storedVersions (older ones kept)."""
    spec = obj.get("spec") or {}
    names = dict(spec.get("names") or {})
    if names.get("kind") and not names.get("listKind"):
        names["listKind"] = names["kind"] + "List"
    if names.get("kind") and not names.get("singular"):
        names["singular"] = str(names["kind"]).lower()
    stored = [v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("storage")]
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    old_stored = [s for s in (status or {}).get("storedVersions") or [] if s not in stored]
    # a condition that stays True keeps its transition time (so an unchanged CRD stays unchanged)
    since = {
        c.get("type"): c.get("lastTransitionTime")
        for c in (status or {}).get("conditions") or []
        if isinstance(c, dict) and c.get("status") == "True"
    }
    obj["status"] = {
        "acceptedNames": names,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": since.get("NamesAccepted") or now,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": since.get("Established") or now,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
        "storedVersions": old_stored + stored,
    }
