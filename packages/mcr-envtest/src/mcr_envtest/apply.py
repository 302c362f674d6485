"""Server-side apply and managedFields (first cut)."""

from __future__ import annotations

import copy
from typing import Any


class ApplyConflict(Exception):
    """Raised when an apply would take fields owned by other managers without ``force``."""

    def __init__(self, causes: list[dict[str, Any]]) -> None:
        self.causes = causes
        n = len(causes)
        self.message = f"Apply failed with {n} conflict{'s' if n != 1 else ''}: " + "; ".join(
            f"{c['message']}: {c['field']}" for c in causes
        )
        super().__init__(self.message)


def apply_patch(
    info: Any, current: dict[str, Any] | None, applied: dict[str, Any], *, manager: str, force: bool, now: str
) -> dict[str, Any]:
    """Return the object after applying ``applied`` as ``manager``."""
    out = copy.deepcopy(current) if current is not None else {}
    for k, v in applied.items():
        if k == "metadata" and isinstance(v, dict):
            md = out.setdefault("metadata", {})
            md.update(copy.deepcopy(v))
        else:
            out[k] = copy.deepcopy(v)
    return out


def record_update(
    info: Any,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    operation: str,
    subresource: str | None,
    now: str,
) -> dict[str, Any]:
    """Return ``new`` with managedFields updated for a non-apply write."""
    return new
