"""The ClusterProfile CustomResourceDefinition (``multicluster.x-k8s.io/v1alpha1``, KEP-4322).

:data:`CLUSTER_PROFILE_CRD` is a structural schema of the fields this provider reads (spec,
``status.conditions``, ``status.accessProviders`` and the deprecated
``status.credentialProviders``), with the status subresource. Install it in a test API server
(mcr-envtest) to exercise the provider; production clusters get the CRD from the cluster
inventory project or the cluster manager that publishes ClusterProfiles.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CLUSTER_PROFILE_CRD", "GROUP", "KIND", "VERSION"]

GROUP = "multicluster.x-k8s.io"
VERSION = "v1alpha1"
KIND = "ClusterProfile"

_OPEN: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

_ACCESS_PROVIDERS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            # A kubeconfig ``clusters[].cluster`` entry: server, certificate-authority-data,
            # tls-server-name, proxy-url, extensions, ...
            "cluster": _OPEN,
        },
    },
}

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "displayName": {"type": "string"},
                "clusterManager": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                },
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "conditions": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["type", "status"],
                        "properties": {
                            "type": {"type": "string"},
                            "status": {"type": "string"},
                            "reason": {"type": "string"},
                            "message": {"type": "string"},
                            "lastTransitionTime": {"type": "string"},
                            "observedGeneration": {"type": "integer"},
                        },
                    },
                },
                "version": _OPEN,
                "properties": {"type": "array", "items": _OPEN},
                "accessProviders": _ACCESS_PROVIDERS,
                "credentialProviders": _ACCESS_PROVIDERS,
            },
        },
    },
}

CLUSTER_PROFILE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"clusterprofiles.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {
            "plural": "clusterprofiles",
            "singular": "clusterprofile",
            "kind": KIND,
            "listKind": f"{KIND}List",
        },
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": _SCHEMA},
            }
        ],
    },
}
"""The ClusterProfile CRD (treat as read-only; ``copy.deepcopy`` it to modify)."""
