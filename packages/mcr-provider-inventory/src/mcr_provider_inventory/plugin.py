"""Registers the ``inventory`` provider with mcr (entry point group ``mcr``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcr.plugins import RegisterProvider, hookimpl
from mcr_provider_inventory.provider import ClusterProfileProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register(
        "inventory",
        ClusterProfileProvider,
        description="clusters from ClusterProfiles (KEP-4322) with access providers or kubeconfig Secrets",
    )


@hookimpl
def mcr_provider_rbac(name: str, options: Mapping[str, Sequence[str]]) -> list[dict[str, Any]] | None:
    """Reading ClusterProfiles (in ``namespace``, else everywhere), and with ``consumer_name`` the
    kubeconfig Secrets beside them."""
    if name != "inventory":
        return None
    namespace = (options.get("namespace") or [""])[-1]
    scope: dict[str, Any] = {"namespace": namespace} if namespace else {}
    read = ["get", "list", "watch"]
    rules = [
        {"apiGroups": ["multicluster.x-k8s.io"], "resources": ["clusterprofiles"], "verbs": read, **scope}
    ]
    if options.get("consumer_name"):
        rules.append({"apiGroups": [""], "resources": ["secrets"], "verbs": read, **scope})
    return rules
