"""mcr against the Go original (multicluster-runtime) and kopf: ``python -m bench anchors``."""

from __future__ import annotations

from bench.anchors.run import main

__all__ = ["main"]
