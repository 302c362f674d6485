"""Fault injection: failures, Retry-After, watch closing/stalling/capping, latency, compaction,
restarts with and without state, and the request log."""

from __future__ import annotations

import asyncio
import errno
import socket
import time

import pytest
from kubernetes import client

from mcr_envtest import ServerThread

from .conftest import Raw, close_client, sync_client
from .test_watch import CM, read_events

pytestmark = pytest.mark.envtest_only("fault injection and the request log are mcr-envtest's")


async def test_fail_next_json_and_text(apiserver: ServerThread, raw: Raw) -> None:
    apiserver.faults.fail_next(1, status=429, retry_after=2)
    async with raw.request("GET", CM) as resp:
        assert resp.status == 429
        assert resp.headers["Retry-After"] == "2"
        body = await resp.json()
        assert body["reason"] == "TooManyRequests"
        assert body["details"]["retryAfterSeconds"] == 2
    apiserver.faults.fail_next(1, status=429, text=True)
    async with raw.request("GET", CM) as resp:
        assert resp.status == 429
        assert resp.content_type == "text/plain"
        assert await resp.text() == "Too many requests, please try again later.\n"
    apiserver.faults.fail_next(2, status=503, methods=("POST",))
    status, _ = await raw.json("GET", CM)
    assert status == 200
    statuses = [(await raw.json("POST", CM, json={"metadata": {"name": f"x{i}"}}))[0] for i in range(3)]
    assert statuses == [503, 503, 201]


async def test_close_watches_ends_streams(apiserver: ServerThread, raw: Raw) -> None:
    reader = asyncio.create_task(read_events(raw, "resourceVersion=0", timeout=10))
    await asyncio.sleep(0.3)
    t0 = time.monotonic()
    await asyncio.to_thread(apiserver.faults.close_watches)
    assert await reader == []
    assert time.monotonic() - t0 < 3


async def test_stall_then_resume(apiserver: ServerThread, raw: Raw) -> None:
    _status, lst = await raw.json("GET", CM)
    rv = lst["metadata"]["resourceVersion"]
    apiserver.faults.stall_watches(1.0)
    reader = asyncio.create_task(read_events(raw, f"resourceVersion={rv}", until=1, timeout=10))
    await raw.json("POST", CM, json={"metadata": {"name": "s"}})
    await asyncio.sleep(0.5)
    assert not reader.done()  # stalled: connection open, nothing written
    events = await reader
    assert events[0]["type"] == "ADDED"


async def test_latency(apiserver: ServerThread, raw: Raw) -> None:
    apiserver.faults.latency(0.3)
    t0 = time.monotonic()
    await raw.json("GET", CM)
    assert time.monotonic() - t0 >= 0.3
    apiserver.faults.latency(0)


async def test_compact_forces_410(apiserver: ServerThread, raw: Raw) -> None:
    _status, lst = await raw.json("GET", CM)
    rv = lst["metadata"]["resourceVersion"]
    await raw.json("POST", CM, json={"metadata": {"name": "c"}})
    apiserver.faults.compact()
    events = await read_events(raw, f"resourceVersion={rv}")
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410


async def test_watch_timeout_caps_watches(apiserver: ServerThread, raw: Raw) -> None:
    apiserver.faults.watch_timeout(0.5)
    t0 = time.monotonic()
    await read_events(raw, "resourceVersion=0&timeoutSeconds=30")
    assert time.monotonic() - t0 < 3


def test_restart_keeping_state_same_port() -> None:
    with ServerThread() as srv:
        api = sync_client(srv.kubeconfig)
        try:
            core = client.CoreV1Api(api)
            cm = core.create_namespaced_config_map("default", {"metadata": {"name": "keep"}})
            port = srv.port
            srv.stop()
            srv.start()
            assert srv.port == port
            assert core.read_namespaced_config_map("keep", "default").metadata.uid == cm.metadata.uid
        finally:
            close_client(api)


def test_stopped_server_holds_its_port() -> None:
    with ServerThread() as srv:
        port = srv.port
        srv.stop()
        # while down, no other socket may take the port the server comes back on ...
        other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            with pytest.raises(OSError, match="in use") as taken:
                other.bind(("127.0.0.1", port))
            assert taken.value.errno == errno.EADDRINUSE
        finally:
            other.close()
        # ... and clients are refused, as by a stopped kube-apiserver
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        srv.start()
        assert srv.port == port
        api = sync_client(srv.kubeconfig)
        try:
            assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
        finally:
            close_client(api)
    # closed for good, the port is free again
    free = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        free.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        free.bind(("127.0.0.1", port))
    finally:
        free.close()


async def test_restart_losing_state_expires_old_rvs() -> None:
    with ServerThread() as srv:
        r = Raw(srv)
        try:
            status, cm = await r.json("POST", CM, json={"metadata": {"name": "lost"}})
            old_rv = int(cm["metadata"]["resourceVersion"])
            await asyncio.to_thread(srv.restart, False)
            status, _ = await r.json("GET", f"{CM}/lost")
            assert status == 404
            events = await read_events(r, f"resourceVersion={old_rv}")
            assert events[0]["type"] == "ERROR"
            assert events[0]["object"]["reason"] == "Expired"
            status, fresh = await r.json("POST", CM, json={"metadata": {"name": "new"}})
            assert int(fresh["metadata"]["resourceVersion"]) > old_rv
        finally:
            await r.close()


async def test_request_log(apiserver: ServerThread, raw: Raw) -> None:
    await raw.json("GET", f"{CM}?limit=5")
    await raw.json("GET", f"{CM}/missing")
    log = apiserver.faults.requests(path_contains="/configmaps")
    assert [(r.method, r.path, r.query, r.status) for r in log] == [
        ("GET", CM, "limit=5", 200),
        ("GET", f"{CM}/missing", "", 404),
    ]
    assert log[0].user == "envtest-admin"


async def test_cut_watch_after_events(apiserver: ServerThread, raw: Raw) -> None:
    for i in range(5):
        await raw.json("POST", CM, json={"metadata": {"name": f"e{i}"}})
    apiserver.faults.cut_watches_after(2)
    events = await read_events(raw, "resourceVersion=0")
    assert len(events) == 2
    assert [e["object"]["metadata"]["name"] for e in events] == ["e0", "e1"]
