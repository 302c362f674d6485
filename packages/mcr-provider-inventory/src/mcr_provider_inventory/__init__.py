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
from mcr_provider_inventory.provider import CLUSTER_PROFILE, ClusterProfileProvider, control_plane_healthy
from mcr_provider_inventory.strategies import (
    CONSUMER_LABEL,
    PROFILE_LABEL,
    SECRET_KEY,
    AccessProviderStrategy,
    KubeconfigStrategy,
    NoKubeconfigError,
    ProfileKubeconfig,
    SecretStrategy,
    StrategyWatch,
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
    "AccessProviderStrategy",
    "AccessProviders",
    "ClusterProfileProvider",
    "KubeconfigStrategy",
    "NoAccessProviderError",
    "NoKubeconfigError",
    "ProfileKubeconfig",
    "SecretStrategy",
    "StrategyWatch",
    "__version__",
    "control_plane_healthy",
]
