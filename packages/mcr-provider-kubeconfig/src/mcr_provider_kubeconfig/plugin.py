"""Registers the ``kubeconfig`` provider with mcr (entry point group ``mcr``)."""

from __future__ import annotations

from mcr.plugins import RegisterProvider, hookimpl
from mcr_provider_kubeconfig.provider import KubeconfigProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register(
        "kubeconfig",
        KubeconfigProvider,
        description="clusters from labelled kubeconfig Secrets of one namespace",
    )
