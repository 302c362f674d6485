"""Deprecated alias of :mod:`mcr.rest.config`: re-exports its names; removed in a later release."""

from __future__ import annotations

import warnings

from mcr.rest.config import (
    RestConfig,
    load_config,
    load_config_async,
    load_yaml,
)

__all__ = [
    "RestConfig",
    "load_config",
    "load_config_async",
    "load_yaml",
]

warnings.warn(
    "mcr.config is deprecated; import from mcr.rest.config instead",
    DeprecationWarning,
    stacklevel=2,
)
