"""mcr's kubeconfig provider: one cluster per labelled kubeconfig Secret of a namespace."""

from __future__ import annotations

from mcr_provider_kubeconfig.provider import DEFAULT_KEY, DEFAULT_LABEL, KubeconfigProvider, kubeconfig_secret

__version__ = "0.1.0"

__all__ = ["DEFAULT_KEY", "DEFAULT_LABEL", "KubeconfigProvider", "__version__", "kubeconfig_secret"]
