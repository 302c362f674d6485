"""Strategic merge patch for built-in kinds (first cut: JSON merge patch semantics)."""

from __future__ import annotations

import copy
from typing import Any


def strategic_merge(info: Any, original: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Return ``original`` with ``patch`` applied; raise ValueError for a malformed patch."""
    if not isinstance(patch, dict):
        raise ValueError("strategic merge patch must be a JSON object")
    return _merge(copy.deepcopy(original), patch)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = _merge(target.get(k), v)
    return target
