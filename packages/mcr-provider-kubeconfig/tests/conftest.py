"""A host server holding kubeconfig Secrets, and member servers they point at."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from mcr.cluster import Cluster
from mcr.errors import NotFoundError
from mcr.testing import RecordingAware, providers_started
from mcr_provider_kubeconfig import DEFAULT_LABEL, KubeconfigProvider, kubeconfig_secret


@dataclass
class Host:
    """The host server's admin cluster, the namespace of the Secrets and the member servers."""

    admin: Cluster
    namespace: str
    members: list[Any]

    async def put(self, name: str, kubeconfig: dict[str, Any] | bytes | None, **meta: Any) -> None:
        """Create or replace Secret ``name`` (``None``: no kubeconfig key at all)."""
        raw = yaml.safe_dump(kubeconfig).encode() if isinstance(kubeconfig, dict) else kubeconfig
        secret = kubeconfig_secret(name, self.namespace, raw or b"")
        if kubeconfig is None:
            secret["data"] = {}
        for field, value in meta.items():
            secret["metadata"][field] = value
        try:
            current = await self.admin.api_reader.get("v1/Secret", name, namespace=self.namespace)
        except NotFoundError:
            await self.admin.api_reader.create(secret)
            return
        secret["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await self.admin.api_reader.update(secret)

    async def delete(self, name: str) -> None:
        await self.admin.api_reader.delete("v1/Secret", name, namespace=self.namespace)

    async def unlabel(self, name: str) -> None:
        patch = {"metadata": {"labels": {DEFAULT_LABEL: None}}}
        await self.admin.api_reader.patch("v1/Secret", name, patch, namespace=self.namespace)


@pytest.fixture
async def host(fleet: Any) -> AsyncIterator[Host]:
    """Server 0 holds the Secrets in namespace ``fleet``; servers 1-3 are the members."""
    servers = fleet(4).servers
    admin = Cluster.from_kubeconfig(servers[0].kubeconfig, name="host-admin")
    await admin.api_reader.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet"}})
    try:
        yield Host(admin, "fleet", servers)
    finally:
        await admin.stop()


@pytest.fixture
async def run() -> AsyncIterator[Callable[[KubeconfigProvider], RecordingAware]]:
    """Start providers with a RecordingAware each; cancelled and awaited at the end of the test."""
    async with providers_started() as start:
        yield start
