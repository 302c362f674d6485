"""A management server with the Cluster API Cluster CRD, and workload servers."""

from __future__ import annotations

import base64
import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from mcr.cluster import Cluster
from mcr.errors import NotFoundError
from mcr.testing import RecordingAware, eventually, providers_started
from mcr_provider_capi import CLUSTER, CLUSTER_CRD, CLUSTER_NAME_LABEL, ClusterAPIProvider


@dataclass
class Management:
    """The management server's admin cluster and the workload servers (``servers[0]`` is management)."""

    admin: Cluster
    servers: list[Any]

    async def cluster(self, name: str, *, ready: bool = True, namespace: str = "tenants") -> None:
        """Create Cluster ``name`` (if needed) and set whether its control plane is initialized."""
        try:
            obj = await self.admin.api_reader.get(CLUSTER, name, namespace=namespace)
        except NotFoundError:
            obj = await self.admin.api_reader.create(
                {
                    "apiVersion": "cluster.x-k8s.io/v1beta2",
                    "kind": "Cluster",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {"controlPlaneRef": {"kind": "KubeadmControlPlane", "name": f"{name}-cp"}},
                }
            )
        obj["status"] = {
            "initialization": {"controlPlaneInitialized": ready, "infrastructureProvisioned": True}
        }
        await self.admin.api_reader.status.update(obj)

    async def kubeconfig(
        self, cluster: str, server: Any, *, namespace: str = "tenants", raw: bytes | None = None
    ) -> None:
        """Create or replace the ``<cluster>-kubeconfig`` Secret (pointing at ``server``)."""
        data = raw if raw is not None else yaml.safe_dump(server.kubeconfig).encode()
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "cluster.x-k8s.io/secret",
            "metadata": {
                "name": f"{cluster}-kubeconfig",
                "namespace": namespace,
                "labels": {CLUSTER_NAME_LABEL: cluster},
            },
            "data": {"value": base64.b64encode(data).decode()} if data else {},
        }
        await self.admin.api_reader.apply(secret, field_manager="capi-test", force=True)


@pytest.fixture
async def management(fleet: Any) -> AsyncIterator[Management]:
    servers = fleet(4).servers
    admin = Cluster.from_kubeconfig(servers[0].kubeconfig, name="management-admin")
    await admin.api_reader.create(copy.deepcopy(CLUSTER_CRD))

    async def served() -> bool:
        try:
            await admin.api_reader.list(CLUSTER, namespace="tenants")
        except Exception:  # noqa: BLE001 -- not served yet
            return False
        return True

    await eventually(served, message="Cluster CRD served")
    await admin.api_reader.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenants"}})
    try:
        yield Management(admin, servers)
    finally:
        await admin.stop()


@pytest.fixture
async def run() -> AsyncIterator[Callable[[ClusterAPIProvider], RecordingAware]]:
    """Start providers with a RecordingAware each; cancelled and awaited at the end of the test."""
    async with providers_started() as start:
        yield start
