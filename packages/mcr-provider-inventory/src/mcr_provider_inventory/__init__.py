"""mcr's ClusterProfile provider: clusters from a hub's ClusterProfiles (KEP-4322, KEP-5339)."""

from __future__ import annotations

from mcr_provider_inventory.access import (
    ADDITIONAL_ARGS_EXTENSION,
    ADDITIONAL_ENVS_EXTENSION,
    AccessConfigError,
    AccessProvider,
    AccessProviders,
    NoAccessProviderError,
)
from mcr_provider_inventory.crd import CLUSTER_PROFILE_CRD
from mcr_provider_inventory.provider import (
    CLUSTER_PROFILE,
    CONSUMER_LABEL,
    PROFILE_LABEL,
    SECRET_KEY,
    ClusterProfileProvider,
    control_plane_healthy,
)

__version__ = "0.1.0"

__all__ = [
    "ADDITIONAL_ARGS_EXTENSION",
    "ADDITIONAL_ENVS_EXTENSION",
    "CLUSTER_PROFILE",
    "CLUSTER_PROFILE_CRD",
    "CONSUMER_LABEL",
    "PROFILE_LABEL",
    "SECRET_KEY",
    "AccessConfigError",
    "AccessProvider",
    "AccessProviders",
    "ClusterProfileProvider",
    "NoAccessProviderError",
    "__version__",
    "control_plane_healthy",
]
