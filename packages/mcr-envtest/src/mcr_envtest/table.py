"""meta.k8s.io/v1 Table rendering for ``kubectl get`` (first cut: Name and Created At)."""

from __future__ import annotations

from typing import Any

_COLUMNS = [
    {"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0},
    {"name": "Created At", "type": "date", "format": "", "description": "Created At", "priority": 0},
]


def _row(obj: dict[str, Any], include_object: str) -> dict[str, Any]:
    md = obj.get("metadata", {})
    row: dict[str, Any] = {"cells": [md.get("name", ""), md.get("creationTimestamp")]}
    if include_object == "Object":
        row["object"] = obj
    elif include_object != "None":
        row["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": md,
        }
    return row


def to_table(
    info: Any,
    objects: list[dict[str, Any]],
    *,
    include_object: str,
    resource_version: str,
    continue_token: str | None,
) -> dict[str, Any]:
    """Render ``objects`` as a Table."""
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": list(_COLUMNS),
        "rows": [_row(o, include_object) for o in objects],
    }


def table_event_object(info: Any, obj: dict[str, Any], *, include_object: str, first: bool) -> dict[str, Any]:
    """Render one watch event's object as a Table (column definitions only when ``first``)."""
    table = to_table(info, [obj], include_object=include_object, resource_version="", continue_token=None)
    if not first:
        table["columnDefinitions"] = []
    table["metadata"] = {"resourceVersion": obj.get("metadata", {}).get("resourceVersion", "")}
    return table
