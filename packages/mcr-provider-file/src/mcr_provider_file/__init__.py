"""mcr's file provider: one cluster per context of each kubeconfig file, followed as files change."""

from __future__ import annotations

from mcr_provider_file.provider import DEFAULT_GLOBS, FileProvider, Problem

__version__ = "0.1.0"

__all__ = ["DEFAULT_GLOBS", "FileProvider", "Problem", "__version__"]
