"""Shared helpers for mcr-envtest's own tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from mcr_envtest import ServerThread


def sync_client(kubeconfig: dict[str, Any]) -> client.ApiClient:
    """An official sync ApiClient for a kubeconfig dict."""
    return config.new_client_from_config_dict(kubeconfig)


def close_client(api: client.ApiClient) -> None:
    """Close an ApiClient including its urllib3 connections (ApiClient.close leaves them open)."""
    api.close()
    api.rest_client.pool_manager.clear()


@pytest.fixture
def api_client(apiserver: ServerThread) -> Iterator[client.ApiClient]:
    api = sync_client(apiserver.kubeconfig)
    yield api
    close_client(api)


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def abort_stream(resp: Any) -> None:
    """Drop a still-open streaming response's connection at once.

    A graceful TLS close waits for the server's close_notify, which may arrive after the test's
    event loop is gone; aborting leaves no socket behind.
    """
    conn = resp.connection
    if conn is not None and conn.transport is not None:
        conn.transport.abort()
    resp.close()


class Raw:
    """A raw aiohttp session to a server (admin bearer token, TLS verified against its CA)."""

    def __init__(self, srv: Any, token: str | None = None) -> None:
        import ssl

        import aiohttp

        self.url = srv.url
        ctx = ssl.create_default_context(cafile=srv.ca_file)
        headers = {"Authorization": f"Bearer {token or srv.admin_token}"}
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx), headers=headers)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.session.request(method, self.url + path, **kwargs)

    async def json(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        async with self.request(method, path, **kwargs) as resp:
            return resp.status, await resp.json(content_type=None)

    async def close(self) -> None:
        await self.session.close()


@pytest.fixture
async def raw(apiserver: ServerThread) -> Any:
    r = Raw(apiserver)
    yield r
    await r.close()
