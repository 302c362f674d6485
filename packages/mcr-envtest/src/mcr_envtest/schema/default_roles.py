"""RBAC data shared by the authorizer: upstream's default ClusterRoles and label selectors.

Kept apart from :mod:`.auth` so the authorizer module holds behaviour, this one the tables.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AGGREGATES", "DEFAULT_CLUSTER_ROLES", "labels_match"]


# Upstream's bootstrap ClusterRoles (aggregated view/edit/admin, abridged to the resources served
# here), used when the store does not define one of these names. "view" cannot read secrets.
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]
_READ = ["get", "list", "watch"]
_VIEW_RESOURCES: list[dict[str, Any]] = [
    {
        "apiGroups": [""],
        "resources": [
            "configmaps",
            "endpoints",
            "events",
            "namespaces",
            "namespaces/status",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "pods",
            "pods/log",
            "pods/status",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "replicationcontrollers/status",
            "serviceaccounts",
            "services",
            "services/status",
        ],
    },
    {
        "apiGroups": ["apps"],
        "resources": [
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
    },
    {"apiGroups": ["batch"], "resources": ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"]},
]
_EDIT_EXTRA: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["secrets"], "verbs": [*_READ, *_WRITE]},
    {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": [*_READ, *_WRITE]},
]
_VIEW = [{**r, "verbs": _READ} for r in _VIEW_RESOURCES]
_EDIT = [{**r, "verbs": [*_READ, *_WRITE]} for r in _VIEW_RESOURCES] + _EDIT_EXTRA
DEFAULT_CLUSTER_ROLES: dict[str, list[dict[str, Any]]] = {
    "cluster-admin": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ],
    "admin": [
        *_EDIT,
        {
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["roles", "rolebindings"],
            "verbs": [*_READ, *_WRITE],
        },
    ],
    "edit": _EDIT,
    "view": _VIEW,
}
# Which aggregate-to-<x> labels each default role collects (upstream: admin ⊇ edit ⊇ view).
AGGREGATES = {"admin": ("admin", "edit", "view"), "edit": ("edit", "view"), "view": ("view",)}


def labels_match(selector: Any, labels: dict[str, Any]) -> bool:
    """matchLabels plus In/NotIn/Exists/DoesNotExist matchExpressions of a LabelSelector."""
    if not isinstance(selector, dict):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(op, False)
        if not ok:
            return False
    return bool(selector.get("matchLabels") or selector.get("matchExpressions"))
