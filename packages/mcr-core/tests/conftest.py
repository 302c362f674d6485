"""Shared fixtures for mcr-core tests: a Transport and a Client bound to the ``apiserver`` fixture.

The ``apiserver`` fixture (a fresh HTTPS mcr-envtest server per test) comes from the mcr-envtest
pytest plugin. Keep this file small; put fixtures used by one test module in that module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mcr.rest.config import RestConfig
from mcr.rest.transport import Transport


@pytest.fixture
def rest_config(apiserver: Any) -> RestConfig:
    """Admin settings for the ``apiserver`` fixture (from its kubeconfig dict)."""
    return RestConfig.from_kubeconfig(apiserver.kubeconfig)


@pytest.fixture
async def transport(rest_config: RestConfig) -> AsyncIterator[Transport]:
    """A Transport to ``apiserver``, closed at teardown."""
    t = rest_config.transport(cluster_name="test")
    try:
        yield t
    finally:
        await t.close()


@pytest.fixture
async def client(transport: Transport) -> Any:
    """An uncached :class:`mcr.client.Client` over ``transport``."""
    from mcr.client import Client

    return Client(transport)


@pytest.fixture
def commit_burst(apiserver: Any) -> Callable[[list[str], int], None]:
    """``commit_burst(names, round_)`` writes ConfigMaps ``default/<name>`` (``data.round``)
    straight into the server's store, one after the other without yielding: a watch then carries
    them back to back and the client reads several per read of the stream."""

    def burst(names: list[str], round_: int) -> None:
        for name in names:
            apiserver.store.commit(
                "",
                "configmaps",
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                    "data": {"round": str(round_)},
                },
            )

    return burst
