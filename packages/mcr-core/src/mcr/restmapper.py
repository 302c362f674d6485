"""Deprecated alias of :mod:`mcr.rest.mapper`: re-exports its names; removed in a later release."""

from __future__ import annotations

import warnings

from mcr.rest.mapper import (
    Mapping,
    RESTMapper,
)

__all__ = [
    "Mapping",
    "RESTMapper",
]

warnings.warn(
    "mcr.restmapper is deprecated; import from mcr.rest.mapper instead",
    DeprecationWarning,
    stacklevel=2,
)
