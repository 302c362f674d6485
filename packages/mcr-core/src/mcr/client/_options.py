"""Query parameters, patch content types and DeleteOptions bodies shared by the client verbs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import orjson

from mcr.rest.kinds import to_dict

__all__ = ["PATCH_CONTENT_TYPES", "PatchType", "delete_options", "encode_body", "write_query"]

PatchType: TypeAlias = Literal["merge", "json", "strategic", "apply"]

PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    # Server-side apply bodies are YAML by content type; JSON is valid YAML, so mcr sends JSON.
    "apply": "application/apply-patch+yaml",
}

FieldValidation: TypeAlias = Literal["Strict", "Warn", "Ignore"]


def write_query(
    *,
    dry_run: bool = False,
    field_manager: str | None = None,
    field_validation: str | None = None,
    force: bool | None = None,
) -> dict[str, str]:
    """The query string of a write (create, update, patch, apply)."""
    q: dict[str, str] = {}
    if dry_run:
        q["dryRun"] = "All"
    if field_manager:
        q["fieldManager"] = field_manager
    if field_validation:
        if field_validation not in ("Strict", "Warn", "Ignore"):
            raise ValueError(f"field_validation must be Strict, Warn or Ignore, not {field_validation!r}")
        q["fieldValidation"] = field_validation
    if force is not None:
        q["force"] = "true" if force else "false"
    return q


def delete_options(
    *,
    propagation_policy: str | None = None,
    preconditions: Mapping[str, str] | None = None,
    grace_period_seconds: int | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """A ``DeleteOptions`` body.

    ``propagation_policy``: ``"Orphan"``, ``"Background"`` or ``"Foreground"``;
    ``preconditions``: ``{"uid": ..., "resourceVersion": ...}`` (either or both).
    """
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if propagation_policy is not None:
        if propagation_policy not in ("Orphan", "Background", "Foreground"):
            raise ValueError(
                f"propagation_policy must be Orphan, Background or Foreground, not {propagation_policy!r}"
            )
        body["propagationPolicy"] = propagation_policy
    if preconditions:
        unknown = set(preconditions) - {"uid", "resourceVersion"}
        if unknown:
            raise ValueError(f"unknown preconditions {sorted(unknown)}; use uid and resourceVersion")
        body["preconditions"] = dict(preconditions)
    if grace_period_seconds is not None:
        body["gracePeriodSeconds"] = int(grace_period_seconds)
    if dry_run:
        body["dryRun"] = ["All"]
    return body


def encode_body(body: object) -> bytes:
    """Request body bytes: bytes and str as given, dicts/lists as JSON, models in wire form."""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    if isinstance(body, dict | list):
        return orjson.dumps(body)
    return orjson.dumps(to_dict(body))
