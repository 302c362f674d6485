"""Registers the ``kubeconfig`` provider with mcr (entry point group ``mcr``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcr.plugins import RegisterProvider, hookimpl
from mcr_provider_kubeconfig.provider import KubeconfigProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register(
        "kubeconfig",
        KubeconfigProvider,
        description="clusters from labelled kubeconfig Secrets of one namespace",
    )


@hookimpl
def mcr_provider_rbac(name: str, options: Mapping[str, Sequence[str]]) -> list[dict[str, Any]] | None:
    """Reading the kubeconfig Secrets of the provider's namespace (a Role there)."""
    if name != "kubeconfig":
        return None
    namespace = (options.get("namespace") or [""])[-1]
    if not namespace:
        raise ValueError("needs --provider-opt namespace=... (the namespace of its kubeconfig Secrets)")
    return [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "verbs": ["get", "list", "watch"],
            "namespace": namespace,
        }
    ]
