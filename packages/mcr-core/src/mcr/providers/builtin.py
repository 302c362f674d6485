"""Registers mcr's built-in providers through the same hook external providers use."""

from __future__ import annotations

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
