"""Registers mcr's built-in providers through the same hook external providers use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcr.providers.clusters import ClustersProvider
from mcr.providers.hooks import RegisterProvider, hookimpl
from mcr.providers.multi import MultiProvider
from mcr.providers.nop import NopProvider
from mcr.providers.single import SingleProvider


@hookimpl
def mcr_register_providers(register: RegisterProvider) -> None:
    register("clusters", ClustersProvider, description="clusters added and removed by the program at runtime")
    register("single", SingleProvider, description="one named cluster")
    register("nop", NopProvider, description="no clusters")
    register(
        "multi", MultiProvider, description="several providers composed, clusters named <provider>#<cluster>"
    )


@hookimpl
def mcr_provider_rbac(name: str, options: Mapping[str, Sequence[str]]) -> list[dict[str, Any]] | None:
    # The built-ins read nothing from the hub: their clusters come from the program.
    return [] if name in ("clusters", "single", "nop", "multi") else None
