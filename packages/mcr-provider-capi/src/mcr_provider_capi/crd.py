"""A minimal Cluster API ``Cluster`` CustomResourceDefinition (``cluster.x-k8s.io/v1beta2``).

:data:`CLUSTER_CRD` has the fields this provider reads (``spec`` kept as is, and
``status.initialization.controlPlaneInitialized``) and the status subresource. Install it in a
test API server (mcr-envtest) to exercise the provider; real management clusters get the full
CRD from Cluster API.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CLUSTER_CRD", "GROUP", "KIND", "VERSION"]

GROUP = "cluster.x-k8s.io"
VERSION = "v1beta2"
KIND = "Cluster"

CLUSTER_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"clusters.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "clusters", "singular": "cluster", "kind": KIND, "listKind": f"{KIND}List"},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                                "properties": {
                                    "initialization": {
                                        "type": "object",
                                        "properties": {
                                            "infrastructureProvisioned": {"type": "boolean"},
                                            "controlPlaneInitialized": {"type": "boolean"},
                                        },
                                    },
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}
"""The Cluster CRD (treat as read-only; ``copy.deepcopy`` it to modify)."""
