"""A host server whose namespaces are the clusters, and helpers to run the provider on it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mcr.cluster import Cluster
from mcr.errors import AlreadyExistsError, NotFoundError
from mcr.testing import RecordingAware, eventually, providers_started
from mcr_provider_namespace import NamespaceProvider


async def make_namespace(admin: Cluster, name: str, labels: dict[str, str] | None = None) -> None:
    with contextlib.suppress(AlreadyExistsError):
        await admin.api_reader.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}
        )


async def delete_namespace(admin: Cluster, name: str) -> None:
    await admin.api_reader.delete("v1/Namespace", name)

    async def gone() -> bool:
        try:
            await admin.api_reader.get("v1/Namespace", name)
        except NotFoundError:
            return True
        return False

    await eventually(gone, message=f"namespace {name} deleted")


def configmap(name: str, data: dict[str, str] | None = None, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data or {},
    }


@pytest.fixture
async def host(apiserver: Any) -> AsyncIterator[Cluster]:
    """The host cluster (started; stopped at teardown)."""
    cluster = Cluster.from_kubeconfig(apiserver.kubeconfig, name="host")
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


@pytest.fixture
async def admin(apiserver: Any) -> AsyncIterator[Cluster]:
    """An independent client of the host server, to check what really reached it."""
    cluster = Cluster.from_kubeconfig(apiserver.kubeconfig, name="admin")
    try:
        yield cluster
    finally:
        await cluster.stop()


@pytest.fixture
async def run() -> AsyncIterator[Callable[[NamespaceProvider], RecordingAware]]:
    """Start providers with a RecordingAware each; cancelled and awaited at the end of the test."""
    async with providers_started() as start:
        yield start
