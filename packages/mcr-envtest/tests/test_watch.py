"""Watch semantics: resume from RV, initial events, bookmarks, selectors, timeouts, 410 Expired."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest
from kubernetes import client, watch

from mcr_envtest import ServerThread

from .conftest import Raw, abort_stream, close_client, sync_client

CM = "/api/v1/namespaces/default/configmaps"


# kube-controller-manager publishes this ConfigMap in every namespace of a real cluster
ROOT_CA = "kube-root-ca.crt"


async def read_events(
    raw: Raw, query: str, *, until: int | None = None, timeout: float = 10
) -> list[dict[str, Any]]:
    """Read watch events until the stream ends or ``until`` events arrived (events of
    :data:`ROOT_CA` are left out)."""
    events: list[dict[str, Any]] = []
    async with raw.request("GET", f"{CM}?watch=true&{query}") as resp:
        assert resp.status == 200
        deadline = time.monotonic() + timeout
        while until is None or len(events) < until:
            line = await asyncio.wait_for(resp.content.readline(), max(0.01, deadline - time.monotonic()))
            if not line:
                break
            event = orjson.loads(line)
            if event["object"].get("metadata", {}).get("name") != ROOT_CA:
                events.append(event)
        else:
            abort_stream(resp)
    return events


def test_sync_client_watch_resumes_from_resource_version(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "w"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("w", "default", {"data": {"a": "2"}})
    core.delete_namespaced_config_map("w", "default")
    seen = [
        (e["type"], e["object"].metadata.name, e["object"].metadata.resource_version)
        for e in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=1
        )
    ]
    assert [t for t, _, _ in seen] == ["ADDED", "MODIFIED", "DELETED"]
    rvs = [int(rv) for _, _, rv in seen]
    assert rvs == sorted(rvs)
    assert len(set(rvs)) == 3
    # resuming from the middle yields exactly the tail
    tail = [
        e["type"]
        for e in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=str(rvs[0]), timeout_seconds=1
        )
    ]
    assert tail == ["MODIFIED", "DELETED"]


async def test_watch_without_rv_sends_synthetic_added(apiserver: ServerThread, raw: Raw) -> None:
    for i in range(3):
        status, _ = await raw.json("POST", CM, json={"metadata": {"name": f"c{i}"}})
        assert status == 201
    events = await read_events(raw, "timeoutSeconds=1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "c0"),
        ("ADDED", "c1"),
        ("ADDED", "c2"),
    ]
    assert all(e["object"]["kind"] == "ConfigMap" and e["object"]["apiVersion"] == "v1" for e in events)


async def test_send_initial_events_ends_with_annotated_bookmark(raw: Raw) -> None:
    await raw.json("POST", CM, json={"metadata": {"name": "x"}})
    status, lst = await raw.json("GET", CM)
    events = await read_events(
        raw,
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=",
        until=2,
    )
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(events[1]["object"]["metadata"]["resourceVersion"]) >= int(lst["metadata"]["resourceVersion"])
    status, body = await raw.json("GET", f"{CM}?watch=true&sendInitialEvents=true")
    assert status == 422
    assert body["reason"] == "Invalid"
    status, _body = await raw.json("GET", f"{CM}?watch=true&resourceVersionMatch=NotOlderThan")
    assert status == 422


@pytest.mark.envtest_only("a 0.2 s bookmark interval is an mcr-envtest speed control")
async def test_periodic_bookmarks() -> None:
    with ServerThread(bookmark_interval=0.2) as srv:
        r = Raw(srv)
        try:
            _status, lst = await r.json("GET", CM)
            rv = lst["metadata"]["resourceVersion"]
            events = await read_events(r, f"resourceVersion={rv}&allowWatchBookmarks=true", until=2)
            assert [e["type"] for e in events] == ["BOOKMARK", "BOOKMARK"]
            assert events[0]["object"]["kind"] == "ConfigMap"
            assert int(events[0]["object"]["metadata"]["resourceVersion"]) >= int(rv)
        finally:
            await r.close()


async def test_timeout_seconds_ends_stream_cleanly(raw: Raw) -> None:
    t0 = time.monotonic()
    events = await read_events(raw, "timeoutSeconds=1&resourceVersion=0")
    assert events == []
    assert 0.8 < time.monotonic() - t0 < 5


async def test_label_selector_transitions(raw: Raw) -> None:
    _, lst = await raw.json("GET", CM)
    rv = lst["metadata"]["resourceVersion"]
    await raw.json("POST", CM, json={"metadata": {"name": "t", "labels": {"app": "db"}}})
    await raw.json(
        "PATCH",
        f"{CM}/t",
        data=orjson.dumps({"metadata": {"labels": {"app": "web"}}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    await raw.json(
        "PATCH",
        f"{CM}/t",
        data=orjson.dumps({"data": {"k": "v"}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    _status, last = await raw.json(
        "PATCH",
        f"{CM}/t",
        data=orjson.dumps({"metadata": {"labels": {"app": "db"}}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    # replayed from the history: the same selector logic as live events
    events = await read_events(raw, f"resourceVersion={rv}&labelSelector=app%3Dweb", until=3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    # the DELETED on leaving the selector carries the previous content at the new RV
    assert events[2]["object"]["metadata"]["labels"] == {"app": "web"}
    assert events[2]["object"]["metadata"]["resourceVersion"] == last["metadata"]["resourceVersion"]


async def test_field_selector_on_name(raw: Raw) -> None:
    await raw.json("POST", CM, json={"metadata": {"name": "a"}})
    await raw.json("POST", CM, json={"metadata": {"name": "b"}})
    status, lst = await raw.json("GET", f"{CM}?fieldSelector=metadata.name%3Db")
    assert [i["metadata"]["name"] for i in lst["items"]] == ["b"]
    status, _body = await raw.json("GET", f"{CM}?fieldSelector=spec.nope%3Dx")
    assert status == 400


@pytest.mark.envtest_only("a 3-event watch history (history_size) is mcr-envtest's")
async def test_watch_from_compacted_rv_gets_410_event() -> None:
    with ServerThread(history_size=3) as srv:
        r = Raw(srv)
        try:
            _status, lst = await r.json("GET", CM)
            old = lst["metadata"]["resourceVersion"]
            for i in range(6):
                await r.json("POST", CM, json={"metadata": {"name": f"n{i}"}})
            events = await read_events(r, f"resourceVersion={old}")
            assert len(events) == 1
            assert events[0]["type"] == "ERROR"
            st = events[0]["object"]
            assert (st["code"], st["reason"], st["kind"]) == (410, "Expired", "Status")
            assert "too old resource version" in st["message"]
        finally:
            await r.close()


@pytest.mark.envtest_only("a 2-event watch history (history_size) is mcr-envtest's")
def test_official_client_raises_410_after_retry() -> None:
    with ServerThread(history_size=2) as srv:
        api = sync_client(srv.kubeconfig)
        try:
            core = client.CoreV1Api(api)
            old = core.list_namespaced_config_map("default").metadata.resource_version
            for i in range(5):
                core.create_namespaced_config_map("default", {"metadata": {"name": f"n{i}"}})
            with pytest.raises(client.ApiException) as exc:
                list(
                    watch.Watch().stream(
                        core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=2
                    )
                )
            assert exc.value.status == 410
        finally:
            close_client(api)
