"""Deprecated alias of :mod:`mcr.rest.kinds`: re-exports its names; removed in a later release."""

from __future__ import annotations

import warnings

from mcr.rest.kinds import (
    GVK,
    GVR,
    KindLike,
    gvk_of,
    is_model_class,
    model_class_for,
    object_key,
    to_dict,
    to_model,
)

__all__ = [
    "GVK",
    "GVR",
    "KindLike",
    "gvk_of",
    "is_model_class",
    "model_class_for",
    "object_key",
    "to_dict",
    "to_model",
]

warnings.warn(
    "mcr.kinds is deprecated; import from mcr.rest.kinds instead",
    DeprecationWarning,
    stacklevel=2,
)
