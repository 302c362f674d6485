"""Shared helpers for mcr-envtest's own tests."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest
from kubernetes import client, config

from mcr.testing import eventually
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
        """(status, decoded JSON body); a body that is not JSON (kube-apiserver answers unknown
        paths with ``404 page not found``) comes back as text."""
        async with self.request(method, path, **kwargs) as resp:
            text = await resp.read()
            try:
                return resp.status, orjson.loads(text) if text else None
            except orjson.JSONDecodeError:
                return resp.status, text.decode(errors="replace")

    async def status(self, method: str, path: str, **kwargs: Any) -> int:
        async with self.request(method, path, **kwargs) as resp:
            await resp.read()
            return resp.status

    async def close(self) -> None:
        await self.session.close()


async def fresh_namespace(raw: Raw, prefix: str) -> AsyncIterator[str]:
    """A fresh namespace named ``<prefix>-<random>`` (deleted afterwards)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    status, body = await raw.json("POST", "/api/v1/namespaces", json={"metadata": {"name": name}})
    assert status == 201, body
    yield name
    await raw.status("DELETE", f"/api/v1/namespaces/{name}")


async def workload_namespace(raw: Raw, prefix: str) -> AsyncIterator[str]:
    """A :func:`fresh_namespace` that can hold Pods.

    kube-apiserver's ServiceAccount admission needs the ``default`` account, which its controller
    makes asynchronously (mcr-envtest makes it with the namespace): it is created here too.
    """
    async for name in fresh_namespace(raw, prefix):
        status, body = await raw.json(
            "POST", f"/api/v1/namespaces/{name}/serviceaccounts", json={"metadata": {"name": "default"}}
        )
        assert status in (201, 409), body
        yield name


async def crd_served(raw: Raw, crd: dict[str, Any]) -> None:
    """Wait until every served version of ``crd`` (just created) is served: kube-apiserver
    establishes a CRD asynchronously (mcr-envtest at once), so clients wait for it."""
    group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
    for version in (v["name"] for v in crd["spec"]["versions"] if v.get("served")):
        path = f"/apis/{group}/{version}/{plural}"

        async def served(path: str = path) -> bool:
            return await raw.status("GET", path) == 200

        await eventually(served, timeout=30, interval=0.05, message=f"{path} is served")


def crd_served_sync(srv: Any, crd: dict[str, Any], timeout: float = 30.0) -> None:
    """:func:`crd_served` for sync tests."""
    import ssl
    import time
    import urllib.error
    import urllib.request

    ctx = ssl.create_default_context(cafile=srv.ca_file)
    group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
    for version in (v["name"] for v in crd["spec"]["versions"] if v.get("served")):
        req = urllib.request.Request(
            f"{srv.url}/apis/{group}/{version}/{plural}",
            headers={"Authorization": f"Bearer {srv.admin_token}"},
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=10):
                    break
            except urllib.error.HTTPError as err:
                err.close()
                if time.monotonic() > deadline:
                    raise AssertionError(f"{req.full_url} not served within {timeout:g}s") from None
                time.sleep(0.05)


@pytest.fixture
async def raw(apiserver: ServerThread) -> Any:
    r = Raw(apiserver)
    yield r
    await r.close()
