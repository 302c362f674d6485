"""Objects every kube-apiserver serves from its first moment: the ``default/kubernetes`` Service,
one local APIService per built-in group-version (``v1.``, ``v1.apps``, ...), the default RBAC
policy (ClusterRoles such as ``cluster-admin``, ``admin``, ``edit``, ``view`` and the
``system:*`` roles, their bindings, the Roles and RoleBindings in ``kube-system`` and
``kube-public``) and the system PriorityClasses.

The RBAC objects and PriorityClasses are ``data/bootstrap.json``, read from a kube-apiserver
1.37 after its bootstrap (aggregated ClusterRoles with the rules its aggregation controller
filled in)."""

from __future__ import annotations

import functools
import importlib.resources
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import orjson

from .resources import Registry, ResourceInfo
from .write_rules import deep_copy, now_rfc3339
from .writer import Writer

__all__ = ["objects", "seed"]

KUBERNETES_SERVICE_IP = "10.96.0.1"


_DATA_KINDS = (
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole"),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass"),
)


@functools.cache
def _data() -> bytes:
    return importlib.resources.files("mcr_envtest").joinpath("data/bootstrap.json").read_bytes()


# The data objects as a create stores them (defaults, managedFields), built once per process:
# seeding a new server then copies them instead of running ~150 creates.
_prepared: list[tuple[tuple[str, str, str], dict[str, Any]]] | None = None
_prepared_lock = threading.Lock()


def _prepare(writer: Writer) -> list[tuple[tuple[str, str, str], dict[str, Any]]]:
    global _prepared
    with _prepared_lock:
        if _prepared is None:
            data = orjson.loads(_data())
            out = []
            for group, version, plural, kind in _DATA_KINDS:
                info = writer.registry.lookup(group, version, plural)
                if info is None:
                    continue
                for obj in data.get(kind) or []:
                    ns = obj["metadata"].get("namespace", "")
                    created = writer.create(info, obj, ns, dry_run=True, manager="kube-apiserver")
                    out.append(((group, version, plural), created))
            _prepared = out
        return _prepared


def seed(writer: Writer) -> None:
    """Store the default RBAC policy and the system PriorityClasses the store lacks (each with a
    new uid and the current time, as if created now). Safe to call from several threads."""
    now = now_rfc3339()
    for (group, version, plural), template in _prepare(writer):
        info = writer.registry.lookup(group, version, plural)
        meta = template["metadata"]
        ns = meta.get("namespace", "")
        if info is None or writer.store.get(group, plural, ns, meta["name"]) is not None:
            continue
        obj = deep_copy(template)
        meta = obj["metadata"]
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now
        for entry in meta.get("managedFields") or []:
            entry["time"] = now
        writer.store.commit(group, plural, obj)


# kube-apiserver 1.37's priorities of its local APIServices: (groupPriorityMinimum, versionPriority)
_PRIORITIES: dict[str, tuple[int, int]] = {
    "v1.": (18000, 1),
    "v1.apps": (17800, 15),
    "v1.events.k8s.io": (17750, 15),
    "v1.authentication.k8s.io": (17700, 15),
    "v1.authorization.k8s.io": (17600, 15),
    "v1.autoscaling": (17500, 15),
    "v2.autoscaling": (17500, 30),
    "v1.batch": (17400, 15),
    "v1.certificates.k8s.io": (17300, 15),
    "v1.networking.k8s.io": (17200, 15),
    "v1.policy": (17100, 15),
    "v1.rbac.authorization.k8s.io": (17000, 15),
    "v1.storage.k8s.io": (16800, 15),
    "v1.admissionregistration.k8s.io": (16700, 15),
    "v1.apiextensions.k8s.io": (16700, 15),
    "v1.scheduling.k8s.io": (16600, 15),
    "v1.coordination.k8s.io": (16500, 15),
    "v1.node.k8s.io": (16300, 15),
    "v1.discovery.k8s.io": (16200, 15),
    "v1.resource.k8s.io": (16200, 21),
    "v1.flowcontrol.apiserver.k8s.io": (16100, 21),
    "v1.storagemigration.k8s.io": (15800, 15),
}


def objects(registry: Registry) -> Iterator[tuple[ResourceInfo, dict[str, Any]]]:
    """(resource, object) pairs to create when the store lacks them (the Service and the
    APIServices; :func:`seed` stores the rest)."""
    svc = registry.lookup("", "v1", "services")
    if svc is not None:
        yield (
            svc,
            {
                "metadata": {
                    "name": "kubernetes",
                    "namespace": "default",
                    "labels": {"component": "apiserver", "provider": "kubernetes"},
                },
                "spec": {
                    "type": "ClusterIP",
                    "clusterIP": KUBERNETES_SERVICE_IP,
                    "clusterIPs": [KUBERNETES_SERVICE_IP],
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                },
            },
        )
    api_service = registry.lookup("apiregistration.k8s.io", "v1", "apiservices")
    if api_service is None:
        return
    seen: set[tuple[str, str]] = set()
    builtins = [i for i in registry.all() if registry.is_builtin(i)]
    for rank, info in enumerate(builtins):
        if (info.group, info.version) in seen:
            continue
        seen.add((info.group, info.version))
        yield (
            api_service,
            {
                "metadata": {
                    "name": f"{info.version}.{info.group}",
                    "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"},
                },
                "spec": {
                    "group": info.group,
                    "version": info.version,
                    "groupPriorityMinimum": _PRIORITIES.get(
                        f"{info.version}.{info.group}", (max(100, 18000 - 100 * rank), 15)
                    )[0],
                    "versionPriority": _PRIORITIES.get(f"{info.version}.{info.group}", (0, 15))[1],
                },
            },
        )
