"""Kubeconfig dicts and files for the users of a server."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml

__all__ = ["build", "write"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def build(
    *,
    server: str,
    ca_pem: bytes | None,
    user: str,
    token: str | None = None,
    client_cert_pem: bytes | None = None,
    client_key_pem: bytes | None = None,
    cluster_name: str = "envtest",
    namespace: str | None = None,
) -> dict[str, Any]:
    """A one-context kubeconfig dict (CA and client credentials embedded)."""
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = _b64(ca_pem)
    creds: dict[str, Any] = {}
    if token is not None:
        creds["token"] = token
    if client_cert_pem is not None and client_key_pem is not None:
        creds["client-certificate-data"] = _b64(client_cert_pem)
        creds["client-key-data"] = _b64(client_key_pem)
    context_name = f"{user}@{cluster_name}"
    ctx: dict[str, Any] = {"cluster": cluster_name, "user": user}
    if namespace:
        ctx["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": context_name, "context": ctx}],
        "current-context": context_name,
    }


def write(config: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a kubeconfig as YAML (mode 0600, since it holds credentials); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    os.replace(tmp, p)  # readers never see a half-written file
    return p
