"""State snapshots: the store as one JSON file in a state directory (atomic replace)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

__all__ = ["load_state", "save_state", "state_file"]


def state_file(state_dir: str | os.PathLike[str]) -> Path:
    """The snapshot file inside ``state_dir``."""
    return Path(state_dir) / "state.json"


def save_state(state_dir: str | os.PathLike[str], data: dict[str, Any]) -> Path:
    """Write ``data`` atomically (temp file + rename); returns the file path."""
    path = state_file(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(orjson.dumps(data))
    os.replace(tmp, path)
    return path


def load_state(state_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The saved snapshot, or None when there is none. Raises ValueError naming the file when corrupt."""
    path = state_file(state_dir)
    if not path.exists():
        return None
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{path}: corrupt envtest state snapshot: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: corrupt envtest state snapshot: not an object")
    return data
