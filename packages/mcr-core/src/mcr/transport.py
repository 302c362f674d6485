"""Deprecated alias of :mod:`mcr.rest.transport`: re-exports its names; removed in a later release."""

from __future__ import annotations

import warnings

from mcr.rest.transport import (
    Response,
    Transport,
)

__all__ = [
    "Response",
    "Transport",
]

warnings.warn(
    "mcr.transport is deprecated; import from mcr.rest.transport instead",
    DeprecationWarning,
    stacklevel=2,
)
