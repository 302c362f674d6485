"""Events through the core ``v1`` API and ``events.k8s.io/v1``: one storage, each Event readable,
listable, watchable and writable through both with kube-apiserver's field mapping (both lanes)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .conftest import Raw, fresh_namespace

INVOLVED = {
    "apiVersion": "v1",
    "kind": "Pod",
    "name": "p",
    "uid": "u1",
    "fieldPath": "spec.containers{x}",
}


@pytest.fixture
async def ns(raw: Raw) -> AsyncIterator[str]:
    async for name in fresh_namespace(raw, "ev"):
        yield name


def paths(ns: str) -> tuple[str, str]:
    return f"/api/v1/namespaces/{ns}/events", f"/apis/events.k8s.io/v1/namespaces/{ns}/events"


def body_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without the server's metadata."""
    out = dict(obj)
    out["metadata"] = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace", "labels")}
    return out


async def test_a_core_event_reads_through_events_k8s_io(raw: Raw, ns: str) -> None:
    core, events = paths(ns)
    involved = {**INVOLVED, "namespace": ns}
    first = {
        "metadata": {"name": "c1", "labels": {"a": "b"}},
        "involvedObject": involved,
        "reason": "Started",
        "message": "hello",
        "type": "Normal",
        "count": 3,
        "source": {"component": "kubelet", "host": "node1"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:01:00Z",
        "action": "Start",
        "related": {"kind": "Node", "name": "node1"},
    }
    status, created = await raw.json("POST", core, json=first)
    assert status == 201, created
    status, got = await raw.json("GET", f"{events}/c1")
    assert status == 200, got
    assert body_of(got) == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "c1", "namespace": ns, "labels": {"a": "b"}},
        "action": "Start",
        "reason": "Started",
        "note": "hello",
        "type": "Normal",
        "regarding": involved,
        "related": {"kind": "Node", "name": "node1"},
        "eventTime": None,
        "deprecatedCount": 3,
        "deprecatedSource": {"component": "kubelet", "host": "node1"},
        "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z",
        "deprecatedLastTimestamp": "2026-01-01T00:01:00Z",
    }
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    series = {
        "metadata": {"name": "c2"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
        "reason": "R",
        "message": "m",
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingComponent": "ctl",
        "reportingInstance": "inst-1",
        "action": "Do",
        "series": {"count": 2, "lastObservedTime": "2026-01-01T00:02:00.000000Z"},
        "type": "Warning",
    }
    status, created = await raw.json("POST", core, json=series)
    assert status == 201, created
    status, got = await raw.json("GET", f"{events}/c2")
    assert status == 200, got
    assert body_of(got) == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "c2", "namespace": ns},
        "action": "Do",
        "reason": "R",
        "note": "m",
        "type": "Warning",
        "regarding": {"kind": "Pod", "name": "p", "namespace": ns},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "ctl",
        "reportingInstance": "inst-1",
        "series": {"count": 2, "lastObservedTime": "2026-01-01T00:02:00.000000Z"},
        "deprecatedSource": {},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    }


async def test_an_events_k8s_io_event_reads_through_core(raw: Raw, ns: str) -> None:
    core, events = paths(ns)
    new = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-1",
        "action": "Scale",
        "reason": "Scaled",
        "note": "scaled up",
        "type": "Normal",
        "regarding": {"kind": "Deployment", "name": "d", "namespace": ns, "apiVersion": "apps/v1"},
        "related": {"kind": "ReplicaSet", "name": "rs"},
        "series": {"count": 4, "lastObservedTime": "2026-01-01T00:03:00.000000Z"},
    }
    status, created = await raw.json("POST", events, json=new)
    assert status == 201, created
    status, got = await raw.json("GET", f"{core}/e1")
    assert status == 200, got
    assert body_of(got) == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1", "namespace": ns},
        "action": "Scale",
        "reason": "Scaled",
        "message": "scaled up",
        "type": "Normal",
        "involvedObject": new["regarding"],
        "related": {"kind": "ReplicaSet", "name": "rs"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "series": {"count": 4, "lastObservedTime": "2026-01-01T00:03:00.000000Z"},
        "reportingComponent": "example.com/ctl",
        "reportingInstance": "ctl-1",
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
    }
    # both lists hold it, and field selectors of each API find it
    for path, selector in ((core, "involvedObject.name=d"), (events, "regarding.name=d")):
        status, listed = await raw.json("GET", f"{path}?fieldSelector={selector}")
        assert status == 200, listed
        assert [i["metadata"]["name"] for i in listed["items"]] == ["e1"], path
    # a merge patch through core changes what events.k8s.io reads
    status, patched = await raw.json(
        "PATCH",
        f"{core}/e1",
        json={"message": "scaled down", "count": 2},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200, patched
    assert (patched["message"], patched["count"]) == ("scaled down", 2)
    status, got = await raw.json("GET", f"{events}/e1")
    assert status == 200, got
    assert (got["note"], got["deprecatedCount"], got["reportingController"]) == (
        "scaled down",
        2,
        "example.com/ctl",
    )
    # deleted through either API, gone from both
    assert await raw.status("DELETE", f"{events}/e1") == 200
    assert await raw.status("GET", f"{core}/e1") == 404


async def test_an_events_k8s_io_event_may_not_set_the_deprecated_fields(raw: Raw, ns: str) -> None:
    _, events = paths(ns)
    new = {
        "metadata": {"name": "old"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "c",
        "reportingInstance": "i",
        "action": "A",
        "reason": "R",
        "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": ns},
        "deprecatedSource": {"component": "old"},
        "deprecatedCount": 7,
    }
    status, body = await raw.json("POST", events, json=new)
    assert status == 422, body
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        ("count", 'Invalid value: "": needs to be unset'),
        ("source", 'Invalid value: "": needs to be unset'),
    ]


async def test_a_watch_through_one_api_sees_writes_through_the_other(raw: Raw, ns: str) -> None:
    core, events = paths(ns)
    status, listed = await raw.json("GET", events)
    assert status == 200, listed
    rv = listed["metadata"]["resourceVersion"]
    old_style = {
        "metadata": {"name": "w"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
        "reason": "R",
        "message": "m",
    }
    status, created = await raw.json("POST", core, json=old_style)
    assert status == 201, created
    async with raw.request("GET", f"{events}?watch=1&resourceVersion={rv}&timeoutSeconds=5") as resp:
        assert resp.status == 200
        event = json.loads(await resp.content.readline())
    assert event["type"] == "ADDED"
    obj = event["object"]
    assert (obj["apiVersion"], obj["metadata"]["name"], obj["note"]) == ("events.k8s.io/v1", "w", "m")
    assert obj["regarding"] == {"kind": "Pod", "name": "p", "namespace": ns}


async def test_an_event_outside_default_names_its_objects_namespace(raw: Raw, ns: str) -> None:
    core, _ = paths(ns)
    lost = {"metadata": {"name": "lost"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R"}
    status, body = await raw.json("POST", core, json=lost)
    assert status == 422, body
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        ("involvedObject.namespace", 'Invalid value: "": does not match event.namespace')
    ]
    elsewhere = {**lost, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "other"}}
    status, body = await raw.json("POST", core, json=elsewhere)
    assert status == 422, body
    assert body["details"]["causes"][0]["message"] == 'Invalid value: "other": does not match event.namespace'
