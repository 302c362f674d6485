"""Cluster providers: the built-in utility providers and the registry that creates any installed one.

Each provider class works when constructed directly. :func:`create` builds a provider by its
registered name, from the built-ins or any installed plugin distribution (see :mod:`mcr.plugins`).
"""

from __future__ import annotations

from typing import Any

from mcr.providers.clusters import Clusters, ClustersProvider
from mcr.providers.discovery import registry
from mcr.providers.host import SourcedProvider, controller_name_for, host_cluster, run_controller, run_sourced
from mcr.providers.multi import MultiProvider, ProviderFailedError
from mcr.providers.nop import NopProvider
from mcr.providers.registry import ProviderInfo, UnknownProviderError
from mcr.providers.single import SingleProvider
from mcr.providers.sourced import (
    Problem,
    SourcedClusters,
    fingerprint,
    refuse_local_credentials,
)
from mcr.providers.tasks import cancel_and_wait

__all__ = [
    "Clusters",
    "ClustersProvider",
    "MultiProvider",
    "NopProvider",
    "Problem",
    "ProviderFailedError",
    "ProviderInfo",
    "SingleProvider",
    "SourcedClusters",
    "SourcedProvider",
    "UnknownProviderError",
    "available",
    "cancel_and_wait",
    "controller_name_for",
    "create",
    "fingerprint",
    "host_cluster",
    "refuse_local_credentials",
    "run_controller",
    "run_sourced",
]


def create(name: str, /, **options: Any) -> Any:
    """A new provider of the registered type ``name``, built with ``options``.

    Raises :class:`UnknownProviderError` (a ``LookupError``) listing the installed names when no
    plugin registers ``name``.
    """
    return registry().create(name, **options)


def available() -> list[ProviderInfo]:
    """Every installed provider, sorted by name."""
    return list(registry())
