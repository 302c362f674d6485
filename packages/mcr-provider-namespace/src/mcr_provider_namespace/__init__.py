"""mcr's namespace provider: each namespace of a host cluster is a cluster of its own."""

from __future__ import annotations

from mcr_provider_namespace._scope import VIEW_NAMESPACE, NamespaceScopeError
from mcr_provider_namespace.cluster import NamespaceCluster
from mcr_provider_namespace.provider import NamespaceProvider

__version__ = "0.1.0"

__all__ = ["VIEW_NAMESPACE", "NamespaceCluster", "NamespaceProvider", "NamespaceScopeError", "__version__"]
