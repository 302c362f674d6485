"""Splitting a kubeconfig file into one self-contained kubeconfig per context.

Pure functions (no I/O besides what the caller passes in), so the provider can run them in a
worker thread. Nothing here logs or returns credential values: problems name the file, the context
and the field.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

import yaml

from mcr.rest.config import load_yaml

__all__ = ["ContextSpec", "KubeconfigProblem", "split_contexts"]

# Fields holding file paths, which kubectl resolves relative to the kubeconfig's directory.
_CLUSTER_PATHS = ("certificate-authority",)
_USER_PATHS = ("client-certificate", "client-key", "tokenFile")


class KubeconfigProblem(Exception):
    """The file (or one of its contexts) cannot be used; ``context`` is ``None`` for the whole file."""

    def __init__(self, reason: str, *, context: str | None = None) -> None:
        self.reason = reason
        self.context = context
        super().__init__(reason)


@dataclass(frozen=True)
class ContextSpec:
    """One context as a self-contained kubeconfig dict, and a fingerprint of its connection settings.

    Two specs with the same ``fingerprint`` connect the same way (same server, TLS settings and
    credentials), so a cluster built from one needs no re-engagement when the other appears.
    """

    context: str
    kubeconfig: dict[str, Any]
    fingerprint: str


def _named(items: Any, section: str) -> dict[str, dict[str, Any]]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise KubeconfigProblem(f"{section!r} must be a list")
    out: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise KubeconfigProblem(f"{section}[{i}] must be a mapping with a string 'name'")
        if item["name"] in out:
            # client-go refuses such a file too: which entry is meant is ambiguous.
            raise KubeconfigProblem(f"{section} has two entries named {item['name']!r}")
        out[item["name"]] = item
    return out


def _absolutize(entry: dict[str, Any], key: str, fields: tuple[str, ...], base: str) -> dict[str, Any]:
    body = entry.get(key)
    if not isinstance(body, dict):
        return entry
    body = dict(body)
    for field in fields:
        value = body.get(field)
        if isinstance(value, str) and value and not os.path.isabs(value):
            body[field] = os.path.normpath(os.path.join(base, value))
    return {**entry, key: body}


def split_contexts(data: bytes, path: str) -> tuple[list[ContextSpec], list[KubeconfigProblem]]:
    """Parse the kubeconfig ``data`` read from ``path``.

    Returns a spec per usable context and a problem per unusable context (a context whose cluster or
    user is not defined, or whose cluster has no server). Raises :class:`KubeconfigProblem` when the
    whole file is unusable (malformed YAML, not a kubeconfig mapping, no contexts). Relative file
    paths inside the kubeconfig are resolved against ``path``'s directory, as kubectl does.
    """
    try:
        doc = load_yaml(data)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise KubeconfigProblem(f"malformed YAML{where}: {problem}") from None
    if not isinstance(doc, dict):
        raise KubeconfigProblem(f"not a kubeconfig: the document is a {type(doc).__name__}, not a mapping")
    clusters = _named(doc.get("clusters"), "clusters")
    users = _named(doc.get("users"), "users")
    contexts = _named(doc.get("contexts"), "contexts")
    if not contexts:
        raise KubeconfigProblem("defines no contexts")
    base = os.path.dirname(os.path.abspath(path))
    specs: list[ContextSpec] = []
    problems: list[KubeconfigProblem] = []
    for name, ctx in contexts.items():
        body = ctx.get("context")
        if not isinstance(body, dict):
            problems.append(KubeconfigProblem("has no 'context' mapping", context=name))
            continue
        cluster_name = body.get("cluster")
        user_name = body.get("user") or ""
        cluster = clusters.get(cluster_name) if isinstance(cluster_name, str) else None
        if cluster is None:
            problems.append(
                KubeconfigProblem(f"refers to cluster {cluster_name!r}, which is not defined", context=name)
            )
            continue
        server = (
            (cluster.get("cluster") or {}).get("server") if isinstance(cluster.get("cluster"), dict) else None
        )
        if not server:
            problems.append(KubeconfigProblem(f"cluster {cluster_name!r} has no server", context=name))
            continue
        selected_users: list[dict[str, Any]] = []
        if user_name:
            user = users.get(user_name)
            if user is None:
                problems.append(
                    KubeconfigProblem(f"refers to user {user_name!r}, which is not defined", context=name)
                )
                continue
            selected_users.append(_absolutize(user, "user", _USER_PATHS, base))
        kubeconfig: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [_absolutize(cluster, "cluster", _CLUSTER_PATHS, base)],
            "users": selected_users,
            "contexts": [ctx],
            "current-context": name,
        }
        canonical = json.dumps(kubeconfig, sort_keys=True, separators=(",", ":"), default=str)
        specs.append(ContextSpec(name, kubeconfig, hashlib.sha256(canonical.encode()).hexdigest()))
    return specs, problems
