"""Object validation: names, required fields and metadata rules, reported as Status causes."""

from __future__ import annotations

from typing import Any


def validate_object(
    info: Any, obj: dict[str, Any], *, old: dict[str, Any] | None, registry: Any
) -> list[dict[str, Any]]:
    """Return the causes that make ``obj`` invalid (empty when it is valid)."""
    return []


def validate_name(info: Any, name: str) -> list[dict[str, Any]]:
    """Return the causes that make ``name`` invalid for ``info``'s kind (empty when valid)."""
    return []
