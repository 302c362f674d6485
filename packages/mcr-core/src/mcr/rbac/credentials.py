"""Credentials for one fleet cluster: a ServiceAccount bound to exactly the fleet role, its token.

:func:`issue` creates (server-side applies) the ServiceAccount, its namespace and the roles in
the fleet cluster, requests a token for it (TokenRequest) and returns a kubeconfig that uses that
token; :func:`kubeconfig_secret` wraps it in the Secret the ``kubeconfig`` provider reads.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import yaml

from mcr.client import Client
from mcr.rbac.manifests import fleet_objects
from mcr.rbac.rules import Rule
from mcr.rest.config import RestConfig

__all__ = ["DEFAULT_KEY", "DEFAULT_LABEL", "FIELD_MANAGER", "Issued", "issue", "kubeconfig_secret"]

FIELD_MANAGER = "mcr-fleet-credentials"
DEFAULT_LABEL = "sigs.k8s.io/multicluster-runtime-kubeconfig"
"""The label the ``kubeconfig`` provider selects its Secrets by (value ``"true"``)."""
DEFAULT_KEY = "kubeconfig"
"""The Secret data key the ``kubeconfig`` provider reads."""


@dataclass(frozen=True)
class Issued:
    """A kubeconfig for the ServiceAccount (YAML; holds the token) and when its token expires."""

    kubeconfig: str
    expiration: str

    def __repr__(self) -> str:  # never show the token
        return f"Issued(expiration={self.expiration!r})"


async def issue(
    config: RestConfig,
    rules: Sequence[Rule],
    *,
    name: str,
    namespace: str,
    cluster_name: str,
    token_seconds: int,
) -> Issued:
    """Set up ServiceAccount ``namespace/name`` in the cluster of ``config`` with the fleet side of
    ``rules`` (a ClusterRole and Roles named ``name``, bound to it) and issue a token.

    Repeating the call applies the roles again with ``rules`` and issues a fresh token (earlier
    tokens stay valid until they expire; a Role no longer among the rules is left in place).
    API errors propagate (e.g. :class:`~mcr.errors.ForbiddenError` when ``config``'s user may not
    create roles). The token is never logged.
    """
    subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        *fleet_objects(name, rules, subject),
    ]
    async with config.transport(cluster_name) as transport:
        client = Client(transport, field_manager=FIELD_MANAGER)
        for obj in objects:
            await client.apply(obj, force=True)
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": token_seconds},
        }
        resp = await transport.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            body=orjson.dumps(body),
            content_type="application/json",
        )
        status = resp.json().get("status") or {}
    token = status.get("token")
    if not isinstance(token, str) or not token:
        raise ValueError(
            f"cluster {cluster_name!r}: the TokenRequest for {namespace}/{name} returned no token"
        )
    return Issued(
        _kubeconfig(config, cluster_name, f"{namespace}-{name}", token),
        str(status.get("expirationTimestamp", "")),
    )


def _kubeconfig(config: RestConfig, cluster: str, user: str, token: str) -> str:
    entry: dict[str, Any] = {"server": config.host}
    if config.ca_data:
        entry["certificate-authority-data"] = base64.b64encode(config.ca_data).decode()
    if config.tls_server_name:
        entry["tls-server-name"] = config.tls_server_name
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": entry}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def kubeconfig_secret(
    name: str, namespace: str, kubeconfig: str, *, label: str = DEFAULT_LABEL, key: str = DEFAULT_KEY
) -> dict[str, Any]:
    """The Secret ``namespace/name`` holding ``kubeconfig`` under ``key``, labelled ``label=true``:
    the cluster ``name`` of a ``kubeconfig`` provider watching ``namespace``."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace, "labels": {label: "true"}},
        "data": {key: base64.b64encode(kubeconfig.encode()).decode()},
    }
