"""Registers the ``namespace`` provider with mcr (entry point group ``mcr``)."""

from __future__ import annotations

from mcr.plugins import RegisterProvider, hookimpl
from mcr_provider_namespace.provider import NamespaceProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register(
        "namespace", NamespaceProvider, description="each namespace of one cluster as a cluster of its own"
    )
