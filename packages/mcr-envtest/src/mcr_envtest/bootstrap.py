"""Objects every kube-apiserver serves from its first moment: the ``default/kubernetes`` Service
and one local APIService per built-in group-version (``v1.``, ``v1.apps``, ...)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .resources import Registry, ResourceInfo

__all__ = ["objects"]

KUBERNETES_SERVICE_IP = "10.96.0.1"


def objects(registry: Registry) -> Iterator[tuple[ResourceInfo, dict[str, Any]]]:
    """(resource, object) pairs to create when the store lacks them (built-ins only)."""
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
                    "groupPriorityMinimum": max(100, 18000 - 100 * rank),
                    "versionPriority": 15,
                },
            },
        )
