"""Registers the ``file`` provider with mcr (entry point group ``mcr``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcr.plugins import RegisterProvider, hookimpl
from mcr_provider_file.provider import FileProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register("file", FileProvider, description="clusters from kubeconfig files, directories and globs")


@hookimpl
def mcr_provider_rbac(name: str, options: Mapping[str, Sequence[str]]) -> list[dict[str, Any]] | None:
    """Nothing: the provider reads kubeconfig files, not the API."""
    return [] if name == "file" else None
