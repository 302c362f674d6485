"""Context variables shared by the layers: defined at the bottom, so logging can read what the
controller sets without importing the layers above it."""

from __future__ import annotations

import contextvars
from typing import Any

__all__ = ["CURRENT_REQUEST"]

CURRENT_REQUEST: contextvars.ContextVar[Any] = contextvars.ContextVar("mcr_current_request", default=None)
"""The :class:`mcr.reconcile.Request` being reconciled in this task (``None`` outside a reconcile);
:mod:`mcr.reconcile` exposes it typed, :mod:`mcr.log` reads its cluster, namespace and name."""
