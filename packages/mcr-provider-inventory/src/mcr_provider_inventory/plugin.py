"""Registers the ``inventory`` provider with mcr (entry point group ``mcr``)."""

from __future__ import annotations

from mcr.plugins import RegisterProvider, hookimpl
from mcr_provider_inventory.provider import ClusterProfileProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register(
        "inventory",
        ClusterProfileProvider,
        description="clusters from ClusterProfiles (KEP-4322) with access providers or kubeconfig Secrets",
    )
