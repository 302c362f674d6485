"""EventRecorder against a real mcr-envtest server."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta

from mcr.client import Client
from mcr.recorder import EventRecorder
from mcr.testing import eventually


async def _cm(client: Client, name: str) -> dict[str, Any]:
    created: dict[str, Any] = await client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
    )
    return created


async def test_events_v1_with_series_aggregation(client: Client) -> None:
    obj = await _cm(client, "subject")
    other = await _cm(client, "other")
    rec = EventRecorder(client, "my-controller")
    rec.event(obj, "Normal", "Synced", "all good", action="Sync", related=other)
    for _ in range(2):
        rec.event(obj, "Normal", "Synced", "all good", action="Sync", related=other)
    rec.event(obj, "Warning", "Broken", "not good")
    await rec.close()

    events = await client.list("events.k8s.io/v1/Event", namespace="default")
    synced = [e for e in events if e["reason"] == "Synced"]
    assert len(synced) == 1
    e = synced[0]
    assert e["regarding"]["name"] == "subject"
    assert e["regarding"]["uid"] == obj["metadata"]["uid"]
    assert e["related"]["name"] == "other"
    assert e["reportingController"] == "my-controller"
    assert e["action"] == "Sync"
    assert e["note"] == "all good"
    assert e["series"]["count"] == 3
    broken = [e for e in events if e["reason"] == "Broken"]
    assert broken[0]["type"] == "Warning"
    assert broken[0]["action"] == "Broken"


async def test_typed_objects_and_core_v1_fallback(apiserver: Any, client: Client) -> None:
    cm = await client.create(V1ConfigMap(metadata=V1ObjectMeta(name="typed", namespace="default")))
    rec = EventRecorder(client, "ctrl")
    # the events.k8s.io path answers 404 as on a server that does not serve the events API
    apiserver.faults.fail_next(1, status=404, methods=("POST",), path_contains="/apis/events.k8s.io/")
    rec.event(cm, "Normal", "Created", "made it")
    rec.event(cm, "Normal", "Created", "made it")
    await rec.close()
    core = await client.list("v1/Event", namespace="default")
    assert len(core) == 1
    assert core[0]["involvedObject"]["name"] == "typed"
    assert core[0]["involvedObject"]["kind"] == "ConfigMap"
    assert core[0]["source"]["component"] == "ctrl"
    assert core[0]["count"] == 2


async def test_never_raises_never_blocks(
    apiserver: Any, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    obj = await _cm(client, "victim")
    rec = EventRecorder(client, "ctrl")
    apiserver.faults.fail_next(10, status=500, methods=("POST",))
    apiserver.faults.latency(0.2)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with caplog.at_level(logging.WARNING, logger="mcr.recorder"):
        rec.event(obj, "Normal", "Doomed", "will fail")
        rec.event(obj, "Sideways", "BadType", "rejected locally")
        rec.event(object(), "Normal", "NoObject", "cannot reference")
        assert loop.time() - start < 0.05  # returned without waiting for the server
        await rec.close()
    apiserver.faults.latency(0)
    text = caplog.text
    assert "Doomed" in text
    assert "default/victim" in text
    assert "BadType" in text
    assert "NoObject" in text
    rec.event(obj, "Normal", "AfterClose", "ignored")
    assert "recorder is closed" in caplog.text
    assert not [t for t in asyncio.all_tasks() if "event-recorder" in t.get_name()]


async def test_close_waits_for_pending(client: Client) -> None:
    obj = await _cm(client, "many")
    rec = EventRecorder(client, "ctrl")
    for i in range(20):
        rec.event(obj, "Normal", f"R{i}", "m")
    await rec.close()
    events = await eventually(lambda: client.list("events.k8s.io/v1/Event", namespace="default"))
    assert len(events) == 20
