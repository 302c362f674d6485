"""The process-wide TLS context cache: one build per trust setting, shared, held weakly.

Against a real mcr-envtest HTTPS server (a fresh CA per test): the contexts the cache builds are
the ones the connections use.
"""

from __future__ import annotations

import asyncio
import gc
import ssl
from typing import Any

import pytest

from mcr.errors import ConfigError
from mcr.rest.config import RestConfig
from mcr.rest.tls import SSL_CONTEXTS, _SSLContextCache


async def _namespaces_over(transports: list[Any]) -> list[int]:
    responses = await asyncio.gather(*(t.request("GET", "/api/v1/namespaces") for t in transports))
    return [r.status for r in responses]


async def test_clusters_connecting_at_once_share_one_build(apiserver: Any) -> None:
    """Twenty clusters of one CA connecting together build one context, not twenty (the first
    connection of each used to miss the cache while the first build ran)."""
    # A client certificate of this test's own: trust settings no earlier test has built.
    kubeconfig = apiserver.add_user("tls-burst", groups=["system:masters"], client_cert=True)
    before = SSL_CONTEXTS.builds
    configs = [RestConfig.from_kubeconfig(kubeconfig) for _ in range(20)]
    transports = [c.transport(cluster_name=f"c{i}") for i, c in enumerate(configs)]
    try:
        assert await _namespaces_over(transports) == [200] * 20
        assert SSL_CONTEXTS.builds - before == 1
        contexts = await asyncio.gather(*(c.ssl_context() for c in configs))
        assert all(ctx is contexts[0] for ctx in contexts)
        assert SSL_CONTEXTS.builds - before == 1
    finally:
        await asyncio.gather(*(t.close() for t in transports))


async def test_contexts_nobody_uses_are_released_and_rebuilt_on_demand(apiserver: Any) -> None:
    """Beyond the most recently used, a context nobody uses is released (rotating client
    certificates and cluster churn would otherwise grow the cache for the life of the process);
    the most recently used stay, for a cluster rebuilt or engaged again soon after."""
    cache = _SSLContextCache(recent=1)
    ca = RestConfig.from_kubeconfig(apiserver.kubeconfig).ca_data

    async def get(verify: bool) -> Any:  # two trust settings: two contexts
        return await cache.get(ca, None, None, verify, source="test", context=None)

    async def released() -> None:
        await asyncio.sleep(0)  # the loop's handle that resumed this task still holds a result
        gc.collect()

    ctx = await get(True)
    assert await get(True) is ctx
    assert (len(cache), cache.builds) == (1, 1)
    del ctx
    await released()
    assert (len(cache), cache.builds) == (1, 1)  # the most recently used: kept
    assert isinstance(await get(True), ssl.SSLContext)
    assert cache.builds == 1
    assert isinstance(await get(False), ssl.SSLContext)  # now the most recently used
    await released()
    assert (len(cache), cache.builds) == (1, 2)  # the verifying context was released
    assert isinstance(await get(False), ssl.SSLContext)
    assert cache.builds == 2
    assert isinstance(await get(True), ssl.SSLContext)
    assert cache.builds == 3


async def test_a_cancelled_waiter_does_not_cancel_the_build_for_the_others(apiserver: Any) -> None:
    cache = _SSLContextCache()
    ca = RestConfig.from_kubeconfig(apiserver.kubeconfig).ca_data
    waiters = [
        asyncio.create_task(cache.get(ca, None, None, True, source="test", context=None)) for _ in range(3)
    ]
    await asyncio.sleep(0)  # each waiter is now awaiting the one shared build
    waiters[0].cancel()  # the waiter that started it
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert isinstance(results[1], ssl.SSLContext)
    assert results[2] is results[1]
    assert cache.builds == 1


async def test_a_failed_build_reaches_every_waiter_and_is_retried_later(apiserver: Any) -> None:
    """A certificate and a key that do not match: every cluster waiting gets the error naming the
    kubeconfig; nothing stays cached or in flight, so the next attempt builds again."""
    cache = _SSLContextCache()
    ca = RestConfig.from_kubeconfig(apiserver.kubeconfig).ca_data
    cert = RestConfig.from_kubeconfig(apiserver.add_user("tls-a", client_cert=True)).client_cert_data
    key = RestConfig.from_kubeconfig(apiserver.add_user("tls-b", client_cert=True)).client_key_data
    results = await asyncio.gather(
        *(cache.get(ca, cert, key, True, source="fleet/c7.kubeconfig", context="c7") for _ in range(5)),
        return_exceptions=True,
    )
    assert all(isinstance(r, ConfigError) for r in results)
    err = results[0]
    assert isinstance(err, ConfigError)
    assert (err.source, err.context) == ("fleet/c7.kubeconfig", "c7")
    assert "do not match" in str(err)
    # The five join one build, unless the build thread fails before the last of them has asked
    # (a loaded machine): that one starts the retry itself. Never one build per waiter.
    builds = cache.builds
    assert 1 <= builds < 5
    assert len(cache) == 0
    with pytest.raises(ConfigError):
        await cache.get(ca, cert, key, True, source="fleet/c7.kubeconfig", context="c7")
    assert cache.builds == builds + 1


# --- asyncio's TLS read buffer --------------------------------------------------------------------


@pytest.fixture
def fresh_buffer_limit(monkeypatch: pytest.MonkeyPatch) -> Any:
    """asyncio's own buffer size and mcr's not-yet-limited state, restored after the test."""
    from asyncio import sslproto

    import mcr.rest.tls as tls

    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", 256 * 1024)
    monkeypatch.setattr(tls, "_limited", False)
    monkeypatch.delenv("MCR_TLS_READ_BUFFER", raising=False)
    return sslproto.SSLProtocol


async def test_the_first_tls_cluster_limits_the_read_buffer(apiserver: Any, fresh_buffer_limit: Any) -> None:
    transport = RestConfig.from_kubeconfig(apiserver.kubeconfig).transport(cluster_name="buffer")
    try:
        # A 600 KB ConfigMap list still arrives whole through 64 KiB reads.
        namespace = "tls-buffer"
        await transport.request(
            "POST",
            "/api/v1/namespaces",
            body=b'{"metadata": {"name": "tls-buffer"}}',
            content_type="application/json",
        )
        for i in range(3):
            body = f'{{"metadata": {{"name": "big-{i}"}}, "data": {{"v": "{"x" * 200_000}"}}}}'.encode()
            resp = await transport.request(
                "POST",
                f"/api/v1/namespaces/{namespace}/configmaps",
                body=body,
                content_type="application/json",
            )
            assert resp.status == 201
        listed = (await transport.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")).json()
        sizes = sorted(
            len(item["data"]["v"]) for item in listed["items"] if item["metadata"]["name"].startswith("big")
        )
        assert sizes == [200_000] * 3
    finally:
        await transport.close()
    assert fresh_buffer_limit.max_size == 64 * 1024


def test_the_read_buffer_setting(fresh_buffer_limit: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcr.rest.tls import limit_tls_read_buffer

    monkeypatch.setenv("MCR_TLS_READ_BUFFER", "off")
    assert limit_tls_read_buffer() is None
    assert fresh_buffer_limit.max_size == 256 * 1024
    monkeypatch.setenv("MCR_TLS_READ_BUFFER", "32768")
    assert limit_tls_read_buffer() == 32768
    assert fresh_buffer_limit.max_size == 32768
    monkeypatch.setenv("MCR_TLS_READ_BUFFER", str(1024 * 1024))  # never raised
    assert limit_tls_read_buffer() == 32768
    assert fresh_buffer_limit.max_size == 32768
    for bad in ("4096", "lots"):
        monkeypatch.setenv("MCR_TLS_READ_BUFFER", bad)
        with pytest.raises(ConfigError, match=r"MCR_TLS_READ_BUFFER=.*at least 16384"):
            limit_tls_read_buffer()
