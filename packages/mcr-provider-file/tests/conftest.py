"""Helpers shared by the file provider's tests."""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml


def kubeconfig_for(server: Any, context: str | None = None) -> dict[str, Any]:
    """``server``'s admin kubeconfig, its context renamed to ``context`` if given."""
    cfg: dict[str, Any] = copy.deepcopy(server.kubeconfig)
    if context is not None:
        cfg["contexts"][0]["name"] = context
        cfg["current-context"] = context
    return cfg


def merged(*configs: dict[str, Any]) -> dict[str, Any]:
    """One kubeconfig holding every cluster, user and context of ``configs``."""
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for i, original in enumerate(configs):
        cfg = copy.deepcopy(original)
        # Each server's kubeconfig uses the same user name: make the names unique per source.
        for section, ref in (("clusters", "cluster"), ("users", "user")):
            for entry in cfg[section]:
                entry["name"] = f"{entry['name']}-{i}"
            for ctx in cfg["contexts"]:
                ctx["context"][ref] = f"{ctx['context'][ref]}-{i}"
        for section in ("clusters", "users", "contexts"):
            out[section].extend(cfg[section])
    out["current-context"] = configs[0]["current-context"]
    return out


def write_atomic(path: Path, content: dict[str, Any] | str | bytes) -> Path:
    """Write ``content`` (a kubeconfig dict as YAML, or raw text/bytes) so readers never see half of it."""
    if isinstance(content, dict):
        content = yaml.safe_dump(content)
    data = content.encode() if isinstance(content, str) else content
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return path


@pytest.fixture(name="kubeconfig_for")
def _kubeconfig_for() -> Any:
    return kubeconfig_for


@pytest.fixture(name="merged")
def _merged() -> Any:
    return merged


@pytest.fixture(name="write_atomic")
def _write_atomic() -> Any:
    return write_atomic
