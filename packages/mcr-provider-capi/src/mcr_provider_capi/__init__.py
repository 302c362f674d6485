"""mcr's Cluster API provider: one cluster per initialised Cluster API ``Cluster``."""

from __future__ import annotations

from mcr_provider_capi.crd import CLUSTER_CRD
from mcr_provider_capi.provider import (
    CLUSTER,
    CLUSTER_NAME_LABEL,
    SECRET_KEY,
    ClusterAPIProvider,
    GetKubeconfig,
    IsReady,
    control_plane_initialized,
)

__version__ = "0.1.0"

__all__ = [
    "CLUSTER",
    "CLUSTER_CRD",
    "CLUSTER_NAME_LABEL",
    "SECRET_KEY",
    "ClusterAPIProvider",
    "GetKubeconfig",
    "IsReady",
    "__version__",
    "control_plane_initialized",
]
