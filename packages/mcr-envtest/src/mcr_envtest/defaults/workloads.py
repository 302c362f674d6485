"""Defaults of the workload kinds and of pods beyond the PodSpec basics, as kube-apiserver's
registry strategies, API defaulting and default admission plugins set them.

Each ``default_*`` function takes the object being written and the live one (``{}`` on create)
and changes the object in place; none raises for odd shapes (validation reports those).
:func:`status_defaults` fills the status fields kube-apiserver always serialises; it also runs
on writes to ``/status``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "default_cronjob",
    "default_daemon_set",
    "default_endpoints",
    "default_event",
    "default_events_v1",
    "default_hpa",
    "default_job",
    "default_pod_admission",
    "default_replication_controller",
    "default_stateful_set",
    "pod_spec_extras",
    "qos_class",
    "status_defaults",
]

Obj = dict[str, Any]

_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
_SYSTEM_PRIORITIES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
_DEFAULT_TOLERATIONS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"


def _dict(holder: Obj, key: str) -> Obj:
    value = holder.get(key)
    if not isinstance(value, dict):
        value = holder[key] = {}
    return value


def _meta(obj: Obj) -> Obj:
    return _dict(obj, "metadata")


def _field_ref(holder: Any) -> None:
    ref = holder.get("fieldRef") if isinstance(holder, dict) else None
    if isinstance(ref, dict):
        ref.setdefault("apiVersion", "v1")


def pod_spec_extras(spec: Obj) -> None:
    """Probe, downward-API and volume-mode defaults of a PodSpec (pods and templates)."""
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if not isinstance(c, dict):
            continue
        for key in ("livenessProbe", "readinessProbe", "startupProbe"):
            probe = c.get(key)
            if isinstance(probe, dict):
                for k, v in _PROBE_DEFAULTS.items():
                    probe.setdefault(k, v)
                if isinstance(probe.get("httpGet"), dict):
                    probe["httpGet"].setdefault("scheme", "HTTP")
        for env in c.get("env") or []:
            if isinstance(env, dict):
                _field_ref(env.get("valueFrom"))
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        for key in ("configMap", "secret", "downwardAPI", "projected"):
            source = volume.get(key)
            if isinstance(source, dict):
                source.setdefault("defaultMode", 420)
        for item in (volume.get("downwardAPI") or {}).get("items") or []:
            _field_ref(item)


def qos_class(spec: Obj) -> str:
    """The pod's QoS class from its containers' requests and limits."""
    guaranteed, any_set = True, False
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        res = c.get("resources") if isinstance(c, dict) else None
        res = res if isinstance(res, dict) else {}
        requests: Any = res.get("requests") or {}
        limits: Any = res.get("limits") or {}
        if not isinstance(requests, dict) or not isinstance(limits, dict):
            continue
        for name in ("cpu", "memory"):
            if name in requests or name in limits:
                any_set = True
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def default_requests(spec: Obj) -> None:
    """A new pod's containers request what they limit, unless they say otherwise."""
    for c in spec.get("containers") or []:
        res = c.get("resources") if isinstance(c, dict) else None
        if isinstance(res, dict) and isinstance(res.get("limits"), dict):
            requests = _dict(res, "requests")
            for name, value in res["limits"].items():
                requests.setdefault(name, value)


def default_pod_admission(spec: Obj, old_spec: Obj) -> None:
    """What the Priority, ServiceAccount and DefaultTolerationSeconds admission plugins set on
    create; an update that omits them keeps the live values (a pod's spec is immutable)."""
    if old_spec:
        for key in ("priority", "preemptionPolicy", "serviceAccount", "tolerations"):
            if key not in spec and key in old_spec:
                spec[key] = old_spec[key]
        return
    if "priority" not in spec:
        spec["priority"] = _SYSTEM_PRIORITIES.get(str(spec.get("priorityClassName") or ""), 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    if isinstance(spec.get("serviceAccountName"), str):
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
    tolerations = spec.get("tolerations")
    if tolerations is None:
        tolerations = spec["tolerations"] = []
    if isinstance(tolerations, list):
        for key in _DEFAULT_TOLERATIONS:
            if not any(
                isinstance(t, dict) and t.get("key") == key and t.get("effect") in ("NoExecute", None, "")
                for t in tolerations
            ):
                tolerations.append(
                    {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                )


def default_stateful_set(spec: Obj, obj: Obj, old: Obj) -> None:
    """StatefulSet fields beyond those of every workload (claim templates, retention)."""
    policy = _dict(spec, "persistentVolumeClaimRetentionPolicy")
    policy.setdefault("whenDeleted", "Retain")
    policy.setdefault("whenScaled", "Retain")
    strategy = spec.get("updateStrategy")
    if isinstance(strategy, dict) and isinstance(strategy.get("rollingUpdate"), dict):
        strategy["rollingUpdate"].setdefault("maxUnavailable", 1)
    for claim in spec.get("volumeClaimTemplates") or []:
        if isinstance(claim, dict):
            claim.setdefault("apiVersion", "v1")
            claim.setdefault("kind", "PersistentVolumeClaim")
            _dict(claim, "spec").setdefault("volumeMode", "Filesystem")
            _dict(claim, "status").setdefault("phase", "Pending")


def default_daemon_set(spec: Obj, obj: Obj, old: Obj) -> None:
    """The template-generation annotation: 1 on create, one more whenever the template changes."""
    key = "deprecated.daemonset.template.generation"
    old_value = ((old.get("metadata") or {}).get("annotations") or {}).get(key)
    try:
        generation = int(old_value) if old_value is not None else 0
    except ValueError:
        generation = 0
    old_template = (old.get("spec") or {}).get("template")
    if not old or spec.get("template") != old_template:
        generation += 1
    _dict(_meta(obj), "annotations")[key] = str(max(generation, 1))


def default_job(spec: Obj, obj: Obj, old: Obj) -> None:
    """``manualSelector: false`` unless it is true, the template's labels copied to a Job without
    labels, and an empty status (the generated selector comes later: :func:`job_selector`)."""
    meta = _meta(obj)
    if spec.get("manualSelector") is not True:
        spec.setdefault("manualSelector", False)
    old_spec = old.get("spec") or {}
    if "selector" not in spec and "selector" in old_spec:
        spec["selector"] = old_spec["selector"]
    template_meta = _dict(_dict(spec, "template"), "metadata")
    if not meta.get("labels") and isinstance(template_meta.get("labels"), dict) and template_meta["labels"]:
        meta["labels"] = dict(template_meta["labels"])
    if not isinstance(obj.get("status"), dict):
        obj["status"] = dict(old.get("status") or {})


def job_selector(spec: Obj, obj: Obj) -> None:
    """A new Job's generated selector and the labels it selects, on its template and on the Job
    when its labels are the template's (unless ``manualSelector``), as the Job registry sets
    them after the request's fields are recorded."""
    meta = _meta(obj)
    uid, name = meta.get("uid"), meta.get("name")
    if spec.get("manualSelector") is True or not uid or not name:
        return
    template_meta = _dict(_dict(spec, "template"), "metadata")
    labels = _dict(template_meta, "labels")
    copied = not meta.get("labels") or meta.get("labels") == labels
    for key, value in (
        ("controller-uid", uid),
        (_JOB_UID_LABEL, uid),
        ("job-name", name),
        ("batch.kubernetes.io/job-name", name),
    ):
        labels.setdefault(key, value)
    spec.setdefault("selector", {"matchLabels": {_JOB_UID_LABEL: uid}})
    if copied:
        meta["labels"] = dict(labels)


def default_cronjob(spec: Obj, obj: Obj, old: Obj) -> None:
    """Empty metadata on the job template and its pod template, and an empty status."""
    job_template = _dict(spec, "jobTemplate")
    _dict(job_template, "metadata")
    _dict(_dict(_dict(job_template, "spec"), "template"), "metadata")
    if not isinstance(obj.get("status"), dict):
        obj["status"] = dict(old.get("status") or {})


def default_replication_controller(spec: Obj, obj: Obj, old: Obj) -> None:
    """Selector and labels from the template's labels when unset, and a zero status."""
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if isinstance(template_labels, dict) and template_labels:
        if not spec.get("selector"):
            spec["selector"] = dict(template_labels)
        meta = _meta(obj)
        if not meta.get("labels"):
            meta["labels"] = dict(template_labels)
    if not isinstance(obj.get("status"), dict):
        obj["status"] = dict(old.get("status") or {"replicas": 0})


# autoscaling/v2 scaling rules' defaults: (stabilizationWindowSeconds, policies)
_HPA_RULES: dict[str, tuple[int, list[Obj]]] = {
    "scaleUp": (
        0,
        [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ],
    ),
    "scaleDown": (300, [{"type": "Percent", "value": 100, "periodSeconds": 15}]),
}


def default_hpa(spec: Obj, obj: Obj, old: Obj) -> None:
    if not isinstance(obj.get("status"), dict):
        obj["status"] = dict(old.get("status") or {"desiredReplicas": 0, "currentMetrics": None})
    behavior = spec.get("behavior")
    if not isinstance(behavior, dict):
        return
    for direction, (window, policies) in _HPA_RULES.items():
        rules = behavior.get(direction)
        if not isinstance(rules, dict):
            rules = behavior[direction] = {}
        rules.setdefault("stabilizationWindowSeconds", window)
        rules.setdefault("selectPolicy", "Max")
        if not rules.get("policies"):
            rules["policies"] = [dict(p) for p in policies]


def default_endpoints(obj: Obj, old: Obj) -> None:
    for subset in obj.get("subsets") or []:
        for port in (subset.get("ports") or []) if isinstance(subset, dict) else []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")


def default_event(obj: Obj, old: Obj) -> None:
    """core/v1 Event fields kube-apiserver always serialises (null or empty when unset)."""
    for key in ("eventTime", "firstTimestamp", "lastTimestamp"):
        obj.setdefault(key, None)
    obj.setdefault("reportingComponent", "")
    obj.setdefault("reportingInstance", "")
    if not isinstance(obj.get("source"), dict):
        obj["source"] = {}


def default_events_v1(obj: Obj, old: Obj) -> None:
    """events.k8s.io/v1 Event fields kube-apiserver always serialises."""
    obj.setdefault("deprecatedFirstTimestamp", None)
    obj.setdefault("deprecatedLastTimestamp", None)
    if not isinstance(obj.get("deprecatedSource"), dict):
        obj["deprecatedSource"] = {}


def _sts_status(status: Obj) -> None:
    status.setdefault("replicas", 0)
    status.setdefault("availableReplicas", 0)


def _ds_status(status: Obj) -> None:
    for key in ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"):
        status.setdefault(key, 0)


def _pod_status(status: Obj) -> None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict):
            cond.setdefault("lastProbeTime", None)
            cond.setdefault("lastTransitionTime", None)


def _service_status(status: Obj) -> None:
    for ingress in (status.get("loadBalancer") or {}).get("ingress") or []:
        if isinstance(ingress, dict) and ingress.get("ip"):
            ingress.setdefault("ipMode", "VIP")


_NODE_INFO = (
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
)


def _node_status(status: Obj) -> None:
    """A Node's status: allocatable defaults to the capacity; the kubelet endpoint and node info
    structs are always serialised."""
    if isinstance(status.get("capacity"), dict) and status.get("allocatable") is None:
        status["allocatable"] = dict(status["capacity"])
    status.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 0}})
    status.setdefault("nodeInfo", dict.fromkeys(_NODE_INFO, ""))


def default_node(obj: Obj) -> None:
    """A Node's spec (``podCIDRs`` from ``podCIDR``) and its always-serialised status."""
    spec = obj.get("spec")
    if isinstance(spec, dict) and spec.get("podCIDR") and not spec.get("podCIDRs"):
        spec["podCIDRs"] = [spec["podCIDR"]]
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = {}
    _node_status(status)


_STATUS = {
    ("", "nodes"): _node_status,
    ("apps", "statefulsets"): _sts_status,
    ("apps", "daemonsets"): _ds_status,
    ("", "pods"): _pod_status,
    ("", "services"): _service_status,
}


def status_defaults(group_resource: tuple[str, str], obj: Obj) -> None:
    """Fill the status fields kube-apiserver serialises even when unset (zero counts, null
    condition times, a load balancer ingress's ``ipMode``); a missing status is created only for
    the kinds whose status is never omitted."""
    fn = _STATUS.get(group_resource)
    if fn is None:
        return
    status = obj.get("status")
    if not isinstance(status, dict):
        if group_resource not in (("apps", "statefulsets"), ("apps", "daemonsets")):
            return
        status = obj["status"] = {}
    fn(status)
