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


async def test_typed_objects(client: Client) -> None:
    cm = await client.create(V1ConfigMap(metadata=V1ObjectMeta(name="typed", namespace="default")))
    rec = EventRecorder(client, "ctrl")
    rec.event(cm, "Normal", "Created", "made it")
    rec.event(cm, "Normal", "Created", "made it")
    await rec.close()
    (event,) = await client.list("events.k8s.io/v1/Event", namespace="default")
    assert event["regarding"]["name"] == "typed"
    assert event["regarding"]["kind"] == "ConfigMap"
    assert event["regarding"]["uid"] == cm.metadata.uid
    assert event["reportingController"] == "ctrl"
    assert event["series"]["count"] == 2


@pytest.mark.envtest_only("answers the events.k8s.io POST with an injected 404 (faults.fail_next)")
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


@pytest.mark.parametrize(
    "refusal",
    [
        pytest.param(
            "slow-500",
            marks=pytest.mark.envtest_only(
                "answers slowly (faults.latency) with injected 500s (faults.fail_next)"
            ),
        ),
        "no-namespace",  # the server answers 404: the regarded object's namespace does not exist
    ],
)
async def test_never_raises_never_blocks(
    apiserver: Any, client: Client, caplog: pytest.LogCaptureFixture, refusal: str
) -> None:
    if refusal == "slow-500":
        obj = await _cm(client, "victim")
        apiserver.faults.fail_next(10, status=500, methods=("POST",))
        apiserver.faults.latency(0.2)
    else:
        meta = {"name": "victim", "namespace": "nowhere", "uid": "0b5c9d42-5d0e-4a8e-9a39-1c0c4c6f2a11"}
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    rec = EventRecorder(client, "ctrl")
    loop = asyncio.get_running_loop()
    start = loop.time()
    with caplog.at_level(logging.WARNING, logger="mcr.recorder"):
        rec.event(obj, "Normal", "Doomed", "will fail")
        rec.event(obj, "Sideways", "BadType", "rejected locally")
        rec.event(object(), "Normal", "NoObject", "cannot reference")
        assert loop.time() - start < 0.05  # returned without waiting for the server
        await rec.close()
    if refusal == "slow-500":
        apiserver.faults.latency(0)
    text = caplog.text
    assert "Doomed" in text
    assert f"{obj['metadata']['namespace']}/victim" in text
    if refusal == "no-namespace":
        assert 'namespaces "nowhere" not found' in text  # the server's answer, not a fallback's
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
