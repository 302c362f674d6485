"""Registers the ``file`` provider with mcr (entry point group ``mcr``)."""

from __future__ import annotations

from mcr.plugins import RegisterProvider, hookimpl
from mcr_provider_file.provider import FileProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register("file", FileProvider, description="clusters from kubeconfig files, directories and globs")
