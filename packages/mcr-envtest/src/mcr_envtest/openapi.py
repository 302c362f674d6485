"""OpenAPI v3 documents served at ``/openapi/v3`` (first cut: index and per-kind PATCH paths)."""

from __future__ import annotations

from typing import Any


def root_document(registry: Any) -> dict[str, Any]:
    """Return the ``/openapi/v3`` index: one ``serverRelativeURL`` per served group-version."""
    paths: dict[str, Any] = {}
    for info in registry.all():
        key = f"api/{info.version}" if not info.group else f"apis/{info.group}/{info.version}"
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash=0"}
    return {"paths": paths}


def group_version_document(registry: Any, group: str, version: str) -> dict[str, Any] | None:
    """Return the OpenAPI v3 document of one group-version, or None when it is not served."""
    return None
