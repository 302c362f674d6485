"""mcr-envtest: a Kubernetes-compatible API server for tests and local fleets."""

from __future__ import annotations

__all__: list[str] = []
