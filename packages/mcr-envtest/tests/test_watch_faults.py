"""Injected watch faults: cut streams lose nothing for a resuming client; in-stream ERROR events,
malformed lines and connection resets reach the client as a real server would send them."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest

from mcr_envtest import ServerThread

from .conftest import Raw
from .test_watch import CM, read_events

pytestmark = pytest.mark.envtest_only("fault injection into watch streams is mcr-envtest's")


async def create(raw: Raw, n: int, prefix: str) -> None:
    for i in range(n):
        status, _ = await raw.json("POST", CM, json={"metadata": {"name": f"{prefix}{i}"}})
        assert status == 201


async def resuming_watch(
    raw: Raw, start_rv: str, want: int, *, max_watches: int = 100
) -> tuple[list[Any], int]:
    """Watch from ``start_rv``, re-watching from the last resourceVersion seen (bookmarks
    included) whenever a stream ends, until ``want`` ADDED events arrived. Returns them and the
    number of watch requests made."""
    rv = start_rv
    added: list[Any] = []
    for n in range(1, max_watches + 1):
        query = f"resourceVersion={rv}&allowWatchBookmarks=true"
        for ev in await read_events(raw, query, until=want - len(added), timeout=10):
            assert ev["type"] in ("ADDED", "BOOKMARK"), ev
            rv = ev["object"]["metadata"]["resourceVersion"]
            if ev["type"] == "ADDED":
                added.append(ev["object"])
        if len(added) >= want:
            return added, n
    raise AssertionError(f"only {len(added)} of {want} events after {max_watches} watches")


async def test_cut_watches_lose_nothing_for_a_client_resuming_from_its_last_rv(
    apiserver: ServerThread, raw: Raw
) -> None:
    _, lst = await raw.json("GET", CM)
    start = lst["metadata"]["resourceVersion"]
    await create(raw, 9, "cut")  # a backlog of 9 events, more than one cut stream carries
    apiserver.faults.cut_watches_after(2)
    added, watches = await resuming_watch(raw, start, 9)
    names = [o["metadata"]["name"] for o in added]
    assert names == [f"cut{i}" for i in range(9)]  # all, once each, in order
    assert watches >= 5
    rvs = [int(o["metadata"]["resourceVersion"]) for o in added]
    assert rvs == sorted(rvs)
    # live events cut mid-batch are not skipped either
    _, lst = await raw.json("GET", CM)
    start = lst["metadata"]["resourceVersion"]
    watcher = asyncio.create_task(resuming_watch(raw, start, 12))
    await create(raw, 12, "live")
    added, _ = await watcher
    assert [o["metadata"]["name"] for o in added] == [f"live{i}" for i in range(12)]


async def test_cut_stream_sends_no_closing_bookmark(apiserver: ServerThread, raw: Raw) -> None:
    _, lst = await raw.json("GET", CM)
    await create(raw, 3, "b")
    apiserver.faults.cut_watches_after(1)
    events = await read_events(
        raw, f"resourceVersion={lst['metadata']['resourceVersion']}&allowWatchBookmarks=1"
    )
    assert [e["type"] for e in events] == ["ADDED"]


@pytest.mark.parametrize(
    ("status", "reason"), [(500, "InternalError"), (410, "Expired"), (503, "ServiceUnavailable")]
)
async def test_in_stream_error_event(apiserver: ServerThread, raw: Raw, status: int, reason: str) -> None:
    _, lst = await raw.json("GET", CM)
    await create(raw, 3, "e")
    apiserver.faults.error_watches(after=1, status=status)
    events = await read_events(raw, f"resourceVersion={lst['metadata']['resourceVersion']}")
    assert [e["type"] for e in events] == ["ADDED", "ERROR"]
    err = events[1]["object"]
    assert (err["kind"], err["status"], err["code"], err["reason"]) == ("Status", "Failure", status, reason)
    # count=1: the next watch is normal again
    events = await read_events(raw, f"resourceVersion={lst['metadata']['resourceVersion']}&timeoutSeconds=1")
    assert [e["type"] for e in events] == ["ADDED"] * 3


async def test_malformed_watch_line(apiserver: ServerThread, raw: Raw) -> None:
    await create(raw, 2, "m")
    apiserver.faults.malform_watches(after=1, count=2)
    for _ in range(2):
        async with raw.request("GET", f"{CM}?watch=1&resourceVersion=0") as resp:
            first = orjson.loads(await resp.content.readline())
            assert first["type"] == "ADDED"
            bad = await resp.content.readline()
            assert bad.endswith(b"\n")
            with pytest.raises(orjson.JSONDecodeError):
                orjson.loads(bad)
            assert await resp.content.readline() == b""
    events = await read_events(raw, "resourceVersion=0&timeoutSeconds=1")
    assert len(events) == 2


async def test_connection_reset_mid_stream(apiserver: ServerThread, raw: Raw) -> None:
    await create(raw, 3, "r")
    apiserver.faults.reset_watches_after(1, count=None)
    for _ in range(2):
        async with raw.request("GET", f"{CM}?watch=1&resourceVersion=0") as resp:
            assert resp.status == 200
            assert orjson.loads(await resp.content.readline())["type"] == "ADDED"
            with pytest.raises(aiohttp.ClientPayloadError):
                await asyncio.wait_for(resp.content.read(), 5)
    apiserver.faults.clear()
    assert len(await read_events(raw, "resourceVersion=0&timeoutSeconds=1")) == 3
    # the server is unharmed: ordinary requests still work
    status, _ = await raw.json("GET", CM)
    assert status == 200
