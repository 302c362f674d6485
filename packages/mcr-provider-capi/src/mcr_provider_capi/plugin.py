"""Registers the ``capi`` provider with mcr (entry point group ``mcr``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcr.plugins import RegisterProvider, hookimpl
from mcr_provider_capi.provider import ClusterAPIProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register(
        "capi",
        ClusterAPIProvider,
        description="clusters from Cluster API Clusters and their kubeconfig Secrets",
    )


@hookimpl
def mcr_provider_rbac(name: str, options: Mapping[str, Sequence[str]]) -> list[dict[str, Any]] | None:
    """Reading Cluster API Clusters and their kubeconfig Secrets (in ``namespace``, else everywhere)."""
    if name != "capi":
        return None
    namespace = (options.get("namespace") or [""])[-1]
    scope: dict[str, Any] = {"namespace": namespace} if namespace else {}
    read = ["get", "list", "watch"]
    return [
        {"apiGroups": ["cluster.x-k8s.io"], "resources": ["clusters"], "verbs": read, **scope},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": read, **scope},
    ]
