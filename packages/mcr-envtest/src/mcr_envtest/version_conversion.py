"""The built-in resources served at more than one version (or through two APIs) whose objects
differ by more than their ``apiVersion``, and the function converting each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import event_conversion, hpa_conversion

__all__ = ["Converter", "converter_for"]

Converter = Callable[[dict[str, Any], str], dict[str, Any]]

_CONVERTERS: dict[tuple[str, str], Converter] = {
    hpa_conversion.RESOURCE: hpa_conversion.convert,
    **{gr: event_conversion.convert for gr in event_conversion.RESOURCES},
}


def converter_for(group_resource: tuple[str, str]) -> Converter | None:
    """``convert(obj, api_version)`` for a built-in (group, resource) that needs one, else None."""
    return _CONVERTERS.get(group_resource)
