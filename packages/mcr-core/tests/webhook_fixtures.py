"""A webhook server for a fleet, for the webhook tests: certificates, a manager, clusters."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcr.cluster import Cluster
from mcr.manager import Manager
from mcr.providers import ClustersProvider
from mcr.testing import eventually, running
from mcr.webhook import WebhookServer
from mcr_envtest.certs import CA

VWC = "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration"
MWC = "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration"
NAME = "test-webhooks"


def write_pair(directory: Path, ca: CA) -> None:
    """Write a serving certificate of ``ca`` for 127.0.0.1, its key and the CA, each file
    replaced at once (a reader never sees half a file)."""
    pair = ca.serving(("127.0.0.1",))
    for name, data in (("tls.key", pair.key_pem), ("tls.crt", pair.cert_pem), ("ca.crt", ca.cert_pem)):
        tmp = directory / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, directory / name)


@dataclass
class WebhookFleet:
    server: WebhookServer
    provider: ClustersProvider
    manager: Manager
    admins: dict[str, Cluster]  # a separate admin client per cluster (the API server's own view)
    kubeconfigs: dict[str, Any]
    certs: Path

    async def configuration(self, cluster: str, kind: str = VWC) -> dict[str, Any] | None:
        items = await self.admins[cluster].api_reader.list(kind)
        found = [o for o in items if o["metadata"]["name"] == NAME]
        return found[0] if found else None


@contextlib.asynccontextmanager
async def webhook_fleet(
    servers: list[Any], tmp_path: Path, names: tuple[str, ...] = ("a", "b"), **server_kwargs: Any
) -> AsyncIterator[WebhookFleet]:
    """A manager with a provider of ``names`` (one per server) and a webhook server on an
    ephemeral port; handlers are registered on ``fleet.server`` inside the block."""
    certs = tmp_path / "certs"
    certs.mkdir()
    write_pair(certs, CA("webhook-ca-1"))
    kwargs: dict[str, Any] = dict(
        ca_file=certs / "ca.crt",
        port=0,
        name=NAME,
        remove_on_disengage=True,
        cert_poll_interval=0.2,
        rotation_delay=2.0,
        retry_interval=0.5,
    )
    kwargs.update(server_kwargs)
    server = WebhookServer(certs / "tls.crt", certs / "tls.key", **kwargs)
    provider = ClustersProvider()
    mgr = Manager(provider=provider, metrics_bind_address="0")
    mgr.add(server)
    admins = {
        n: Cluster.from_kubeconfig(s.kubeconfig, name=f"admin-{n}")
        for n, s in zip(names, servers, strict=False)
    }
    try:
        yield WebhookFleet(
            server,
            provider,
            mgr,
            admins,
            {n: s.kubeconfig for n, s in zip(names, servers, strict=False)},
            certs,
        )
    finally:
        for admin in admins.values():
            await admin.stop()


async def engage_all(fleet: WebhookFleet) -> None:
    """Add every cluster to the provider and wait until each has both configurations."""
    for name, kubeconfig in fleet.kubeconfigs.items():
        await fleet.provider.add(name, Cluster.from_kubeconfig(kubeconfig, name=name))


__all__ = [
    "MWC",
    "NAME",
    "VWC",
    "WebhookFleet",
    "engage_all",
    "eventually",
    "running",
    "webhook_fleet",
    "write_pair",
]
