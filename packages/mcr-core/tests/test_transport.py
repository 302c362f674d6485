"""Transport against a real mcr-envtest server: requests, retries, errors, streams, close()."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest

from mcr.errors import NotFoundError, TooManyRequestsError, TransportError
from mcr.metrics import REGISTRY
from mcr.rest.config import RestConfig
from mcr.rest.session import TrackingConnector
from mcr.rest.transport import Transport
from mcr.testing import eventually


def _retries(code: str) -> float:
    total = 0.0
    for metric in REGISTRY.collect():
        if metric.name == "rest_client_request_retries":
            for s in metric.samples:
                if (
                    s.name.endswith("_total")
                    and s.labels.get("code") == code
                    and s.labels.get("cluster") == "test"
                ):
                    total += s.value
    return total


async def test_get_and_not_found(transport: Transport) -> None:
    resp = await transport.request("GET", "/api/v1/namespaces/default")
    assert resp.status == 200
    assert resp.json()["metadata"]["name"] == "default"
    with pytest.raises(NotFoundError) as err:
        await transport.request("GET", "/api/v1/namespaces/default/configmaps/nope")
    assert err.value.code == 404
    assert err.value.status["reason"] == "NotFound"
    assert "nope" in str(err.value)
    assert "test" in str(err.value)  # names the cluster


@pytest.mark.envtest_only("injects 429/5xx answers with Retry-After through faults.fail_next")
@pytest.mark.parametrize(("status", "text"), [(429, True), (503, False), (500, False)])
async def test_retry_after_is_honoured(apiserver: Any, transport: Transport, status: int, text: bool) -> None:
    before = _retries(str(status))
    apiserver.faults.fail_next(2, status=status, retry_after=0.1, text=text)
    body = orjson.dumps({"metadata": {"name": f"cm-{status}"}, "data": {"a": "b"}})
    resp = await transport.request(
        "POST", "/api/v1/namespaces/default/configmaps", body=body, content_type="application/json"
    )
    assert resp.status == 201
    assert _retries(str(status)) - before == 2


@pytest.mark.envtest_only("injects a 429 without Retry-After through faults.fail_next")
async def test_without_retry_after_is_not_retried(apiserver: Any, transport: Transport) -> None:
    apiserver.faults.fail_next(1, status=429, text=True)
    with pytest.raises(TooManyRequestsError) as err:
        await transport.request("GET", "/api/v1/namespaces")
    assert err.value.code == 429
    assert "Too many requests" in err.value.message


@pytest.mark.envtest_only("injects five 429 answers in a row through faults.fail_next")
async def test_retries_stop_after_max(apiserver: Any, rest_config: RestConfig) -> None:
    t = rest_config.copy(max_retries=2).transport("test")
    try:
        apiserver.faults.fail_next(5, status=429, retry_after=0.01)
        with pytest.raises(TooManyRequestsError) as err:
            await t.request("GET", "/api/v1/namespaces")
        assert err.value.retry_after == pytest.approx(0.01)
    finally:
        await t.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_server_fails_after_connect_timeout() -> None:
    port = _closed_port()
    config = RestConfig(host=f"https://127.0.0.1:{port}", connect_timeout=1.0)
    t = config.transport("far-away")
    try:
        start = time.monotonic()
        with pytest.raises(TransportError) as err:
            await t.request("GET", "/api/v1/namespaces")
        elapsed = time.monotonic() - start
    finally:
        await t.close()
    assert 0.5 <= elapsed < 5.0
    msg = str(err.value)
    assert "far-away" in msg
    assert f"https://127.0.0.1:{port}/api/v1/namespaces" in msg
    assert "unreachable" in msg


async def test_writes_are_not_retried_on_connection_errors() -> None:
    config = RestConfig(host=f"http://127.0.0.1:{_closed_port()}", connect_timeout=5.0)
    t = config.transport("x")
    try:
        start = time.monotonic()
        with pytest.raises(TransportError):
            await t.request("POST", "/api/v1/namespaces", body=b"{}")
        assert time.monotonic() - start < 1.0
    finally:
        await t.close()


async def test_stream_reads_watch_lines(apiserver: Any, transport: Transport) -> None:
    query = {"watch": "true", "timeoutSeconds": "5"}
    async with transport.stream("/api/v1/namespaces/default/configmaps", query=query) as lines:
        await transport.request(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            body=orjson.dumps({"metadata": {"name": "watched"}}),
            content_type="application/json",
        )
        async for line in lines:
            event = orjson.loads(line)
            if event["object"]["metadata"]["name"] == "watched":
                assert event["type"] == "ADDED"
                break


async def test_stream_read_block_hands_out_whole_lines(apiserver: Any, transport: Transport) -> None:
    # 300 objects of ~2 KiB arrive over many reads; every block holds whole lines only, each
    # between two newlines, and together the blocks carry every event once, in order.
    names = [f"block-{i:03d}" for i in range(300)]
    for name in names:
        await transport.request(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            body=orjson.dumps({"metadata": {"name": name}, "data": {"pad": "x" * 2048}}),
            content_type="application/json",
        )
    query = {"watch": "true", "resourceVersion": "0", "timeoutSeconds": "5"}
    seen: list[str] = []
    blocks = 0
    async with transport.stream("/api/v1/namespaces/default/configmaps", query=query) as lines:
        while len(seen) < len(names):
            block = await lines.read_block()
            assert block, "the stream ended early"
            blocks += 1
            assert block.startswith(b"\n")
            assert block.endswith(b"\n")
            for line in block[1:-1].split(b"\n"):
                seen.append(orjson.loads(line)["object"]["metadata"]["name"])
    assert [name for name in seen if name.startswith("block-")] == names
    assert 1 < blocks < len(seen)  # several reads, each with more than one line on average


async def test_close_leaves_no_connection_or_task(transport: Transport) -> None:
    tasks_before = asyncio.all_tasks()
    await transport.request("GET", "/api/v1/namespaces")
    stream = transport.stream("/api/v1/namespaces", query={"watch": "true"})
    lines = await stream.__aenter__()
    connector = transport.connector
    assert connector is not None
    reader = asyncio.create_task(anext(lines, None))
    await asyncio.sleep(0.05)
    await transport.close()
    await asyncio.wait_for(reader, 5)  # the open stream ends (or yields what it had) instead of hanging
    await stream.__aexit__(None, None, None)
    assert connector.closed
    assert not connector._conns  # no pooled connection left
    assert not connector._acquired  # no connection in use
    assert asyncio.all_tasks() - tasks_before - {asyncio.current_task()} == set()
    with pytest.raises(TransportError, match="closed"):
        await transport.request("GET", "/api/v1/namespaces")


def _sample(name: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    return value or 0.0


async def test_request_metrics(apiserver: Any, transport: Transport) -> None:
    labels = {"host": apiserver.url.removeprefix("https://"), "cluster": "test"}
    before_ok = _sample("rest_client_requests_total", code="200", method="GET", **labels)
    before_404 = _sample("rest_client_requests_total", code="404", method="GET", **labels)
    before_n = _sample("rest_client_request_duration_seconds_count", verb="GET", **labels)
    await transport.request("GET", "/api/v1/namespaces")
    with pytest.raises(NotFoundError):
        await transport.request("GET", "/api/v1/namespaces/absent")
    assert _sample("rest_client_requests_total", code="200", method="GET", **labels) == before_ok + 1
    assert _sample("rest_client_requests_total", code="404", method="GET", **labels) == before_404 + 1
    assert _sample("rest_client_request_duration_seconds_count", verb="GET", **labels) == before_n + 2


async def test_client_side_rate_limit(rest_config: RestConfig) -> None:
    t = rest_config.copy(qps=20.0, burst=2).transport("test")
    try:
        start = time.monotonic()
        await asyncio.gather(*(t.request("GET", "/version") for _ in range(8)))
        elapsed = time.monotonic() - start
    finally:
        await t.close()
    # 2 requests from the burst, 6 more at 20/s: at least ~0.3 s
    assert elapsed >= 0.25


async def test_rate_limit_is_off_by_default(rest_config: RestConfig) -> None:
    assert rest_config.qps is None
    t = rest_config.transport("test")
    try:
        assert t._limiter is None
    finally:
        await t.close()


@pytest.mark.envtest_only("delays the response headers with faults.latency")
async def test_slow_server_times_out_with_a_clear_error(apiserver: Any, transport: Transport) -> None:
    apiserver.faults.request_log.clear()
    apiserver.faults.latency(1.5)
    try:
        start = time.monotonic()
        with pytest.raises(TransportError) as err:
            await transport.request("GET", "/api/v1/namespaces", timeout=0.5)
        elapsed = time.monotonic() - start
    finally:
        apiserver.faults.latency(0)
    # let the server finish the abandoned request before it is stopped
    await eventually(lambda: len(apiserver.faults.request_log) >= 1, timeout=5)
    assert elapsed < 2.0  # the request timeout also bounds the retries
    assert "timed out" in str(err.value)
    assert "cluster 'test'" in str(err.value)
    assert "/api/v1/namespaces" in str(err.value)


async def test_an_answer_that_never_ends_times_out_with_a_clear_error(transport: Transport) -> None:
    start = time.monotonic()
    with pytest.raises(TransportError) as err:
        # a watch of a selection with nothing in it: the answer starts at once and never ends
        await transport.request(
            "GET",
            "/api/v1/namespaces/default/configmaps",
            query={"watch": "true", "labelSelector": "nothing=here", "timeoutSeconds": "60"},
            timeout=0.5,
        )
    assert time.monotonic() - start < 2.0
    assert "timed out" in str(err.value)
    assert "cluster 'test'" in str(err.value)
    assert "/api/v1/namespaces/default/configmaps" in str(err.value)


async def _slow_headers(apiserver: Any, transport: Transport) -> Any:
    apiserver.faults.latency(1.0)
    return await transport.request("GET", "/api/v1/namespaces")


async def _endless_body(apiserver: Any, transport: Transport) -> Any:
    return await transport.request(
        "GET", "/api/v1/namespaces", query={"watch": "true", "labelSelector": "nothing=here"}
    )


@pytest.mark.parametrize(
    "pending",
    [
        pytest.param(
            _slow_headers,
            id="headers",
            marks=pytest.mark.envtest_only("delays the response headers with faults.latency"),
        ),
        pytest.param(_endless_body, id="body"),
    ],
)
async def test_close_after_a_cancelled_request_releases_its_socket(
    apiserver: Any, transport: Transport, pending: Callable[[Any, Transport], Awaitable[Any]]
) -> None:
    await transport.request("GET", "/api/v1/namespaces")  # one pooled connection
    connector = transport.connector
    assert connector is not None
    request = asyncio.create_task(pending(apiserver, transport))
    await asyncio.sleep(0.2)  # the request is on the wire, waiting for the rest of its answer
    assert not request.done()
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    protocols = list(connector.protocols)  # type: ignore[attr-defined]  # mcr's tracking connector
    assert protocols  # the cancelled request's connection (the pooled one, reused)
    await transport.close()
    if not apiserver.real:
        apiserver.faults.clear()
    # Every connection this transport ever opened has finished closing (TLS shutdown included),
    # so nothing is left for the loop to report as an unclosed transport.
    assert all(p.closed is None or p.closed.done() for p in protocols)
    assert all(p.transport is None or p.transport.is_closing() for p in protocols)


async def test_close_releases_connections_still_being_made(rest_config: RestConfig) -> None:
    # close() lands at a different point of a new connection's TCP connect and TLS handshake on
    # each round; a connection completed after the close must be gone by the time close returns.
    caught_connecting = 0
    for yields in range(40):
        transport = rest_config.transport(cluster_name="test")
        request = asyncio.create_task(transport.request("GET", "/api/v1/namespaces"))
        for _ in range(yields):
            await asyncio.sleep(0)
        connector = transport.connector
        assert connector is None or isinstance(connector, TrackingConnector)
        if connector is not None and connector.connecting:
            caught_connecting += 1
        await transport.close()
        await asyncio.gather(request, return_exceptions=True)
        if connector is not None:
            protocols = list(connector.protocols)
            assert all(p.closed is None or p.closed.done() for p in protocols), yields
            assert not connector.connecting
    assert caught_connecting > 0  # some rounds closed the transport mid-connect
