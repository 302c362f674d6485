"""Registers the ``capi`` provider with mcr (entry point group ``mcr``)."""

from __future__ import annotations

from mcr.plugins import RegisterProvider, hookimpl
from mcr_provider_capi.provider import ClusterAPIProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register(
        "capi",
        ClusterAPIProvider,
        description="clusters from Cluster API Clusters and their kubeconfig Secrets",
    )
