"""Registers the ``namespace`` provider with mcr (entry point group ``mcr``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcr.plugins import RegisterProvider, hookimpl
from mcr_provider_namespace.provider import NamespaceProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register(
        "namespace", NamespaceProvider, description="each namespace of one cluster as a cluster of its own"
    )


@hookimpl
def mcr_provider_rbac(name: str, options: Mapping[str, Sequence[str]]) -> list[dict[str, Any]] | None:
    """Reading the Namespaces of the host cluster; its clusters are namespaces of the host, so the
    controllers' fleet rules are granted there too (``fleetInHub``)."""
    if name != "namespace":
        return None
    return [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
        {"fleetInHub": True},
    ]
