"""Port of upstream's watch_restart test: watches are closed every ~2 s while a Secret is patched
every 100 ms; a reader that resumes from its last resourceVersion sees exactly the writes."""

from __future__ import annotations

import asyncio
import base64

import orjson
import pytest

from mcr_envtest import ServerThread

from .conftest import Raw, abort_stream

SEC = "/api/v1/namespaces/default/secrets"


@pytest.mark.envtest_only("closes watches through mcr-envtest's fault injection")
async def test_resuming_reader_sees_exact_sequence(apiserver: ServerThread, raw: Raw) -> None:
    status, created = await raw.json("POST", SEC, json={"metadata": {"name": "s"}, "data": {"n": ""}})
    assert status == 201
    reference: list[str] = []
    done = asyncio.Event()

    async def writer() -> None:
        for i in range(80):
            patch = {"data": {"n": base64.b64encode(str(i).encode()).decode()}}
            status, obj = await raw.json(
                "PATCH",
                f"{SEC}/s",
                data=orjson.dumps(patch),
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert status == 200
            reference.append(obj["metadata"]["resourceVersion"])
            await asyncio.sleep(0.1)
        done.set()

    async def closer() -> None:
        while not done.is_set():
            await asyncio.sleep(2)
            await asyncio.to_thread(apiserver.faults.close_watches)

    seen: list[str] = []
    restarts = 0

    async def reader() -> None:
        nonlocal restarts
        last = created["metadata"]["resourceVersion"]
        while not (done.is_set() and reference and seen and seen[-1] == reference[-1]):
            async with raw.request(
                "GET",
                f"{SEC}?watch=1&resourceVersion={last}&fieldSelector=metadata.name%3Ds&timeoutSeconds=30",
            ) as resp:
                assert resp.status == 200
                async for line in resp.content:
                    ev = orjson.loads(line)
                    assert ev["type"] == "MODIFIED", ev
                    last = ev["object"]["metadata"]["resourceVersion"]
                    seen.append(last)
                    if done.is_set() and seen[-1] == reference[-1]:
                        abort_stream(resp)
                        return
            restarts += 1

    tasks = [asyncio.create_task(c) for c in (writer(), closer(), reader())]
    try:
        await asyncio.wait_for(asyncio.gather(tasks[0], tasks[2]), 60)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert seen == reference
    assert restarts >= 2  # the fault really interrupted the reader
