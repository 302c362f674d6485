"""Registers the ``kind`` provider with mcr (entry point group ``mcr``)."""

from __future__ import annotations

from mcr.plugins import RegisterProvider, hookimpl
from mcr_provider_kind.provider import KindProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register("kind", KindProvider, description="local kind clusters, listed with the kind command")
