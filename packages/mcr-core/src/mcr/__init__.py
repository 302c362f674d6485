"""mcr: Kubernetes controllers that reconcile across a dynamic fleet of clusters."""

from __future__ import annotations

__all__: list[str] = []
