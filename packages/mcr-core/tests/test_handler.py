from __future__ import annotations

import logging
from typing import Any

import pytest

from mcr.handler import (
    BulkQueue,
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    request_for,
    requests_for,
)
from mcr.reconcile import Request, current_cluster
from mcr.workqueue import LOW_PRIORITY, WorkQueue


def cm(name: str, ns: str = "ns", owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def owner_ref(
    kind: str, name: str, api_version: str = "example.com/v1", controller: bool = True
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": "u-" + name,
        "controller": controller,
    }


def drain(q: WorkQueue[Request]) -> list[Request]:
    out = []
    while (item := q.get_nowait()) is not None:
        out.append(item)
        q.done(item)
    return out


async def test_enqueue_for_object_carries_the_cluster() -> None:
    q: WorkQueue[Request] = WorkQueue()
    h = EnqueueRequestForObject()
    h.create("c1", cm("a"), q, 0)
    h.update("c2", cm("b"), cm("b"), q, 0)
    h.delete("", cm("c", ns=""), q, 0)
    h.generic("c1", cm("a"), q, 0)  # dedup with the create
    assert drain(q) == [Request("ns", "a", "c1"), Request("ns", "b", "c2"), Request("", "c", "")]


async def test_initial_list_priority_is_passed_to_the_queue() -> None:
    q: WorkQueue[Request] = WorkQueue()
    h = EnqueueRequestForObject()
    h.create("c", cm("initial"), q, LOW_PRIORITY)
    h.create("c", cm("live"), q, 0)
    assert [r.name for r in drain(q)] == ["live", "initial"]


async def test_enqueue_for_owner_controller_only() -> None:
    q: WorkQueue[Request] = WorkQueue()
    h = EnqueueRequestForOwner("example.com/v1/Widget")
    owners = [
        owner_ref("Widget", "w-controller"),
        owner_ref("Widget", "w-other", controller=False),
        owner_ref("Gadget", "g", controller=True),
        owner_ref("Widget", "w-other-group", api_version="other.io/v1"),
    ]
    h.create("east", cm("a", owners=owners), q, 0)
    assert drain(q) == [Request("ns", "w-controller", "east")]


async def test_enqueue_for_owner_every_owner_and_version_ignored() -> None:
    q: WorkQueue[Request] = WorkQueue()
    h = EnqueueRequestForOwner("example.com/v1/Widget", only_controller=False)
    owners = [
        owner_ref("Widget", "w1", api_version="example.com/v2"),
        owner_ref("Widget", "w2", controller=False),
    ]
    h.create("", cm("a", owners=owners), q, 0)
    assert drain(q) == [Request("ns", "w1", ""), Request("ns", "w2", "")]


async def test_enqueue_for_owner_update_enqueues_old_and_new_owner() -> None:
    q: WorkQueue[Request] = WorkQueue()
    h = EnqueueRequestForOwner("apps/v1/Deployment")
    old = cm("a", owners=[owner_ref("Deployment", "old", api_version="apps/v1")])
    new = cm("a", owners=[owner_ref("Deployment", "new", api_version="apps/v1")])
    h.update("c", old, new, q, 0)
    assert drain(q) == [Request("ns", "old", "c"), Request("ns", "new", "c")]


async def test_enqueue_for_owner_core_group() -> None:
    q: WorkQueue[Request] = WorkQueue()
    h = EnqueueRequestForOwner("v1/Service")
    h.create("c", cm("a", owners=[owner_ref("Service", "svc", api_version="v1")]), q, 0)
    assert drain(q) == [Request("ns", "svc", "c")]


async def test_map_func_injects_the_event_cluster_and_allows_cross_cluster() -> None:
    q: WorkQueue[Request] = WorkQueue()
    seen: list[str] = []

    def fn(o: dict[str, Any]) -> list[Request]:
        seen.append(current_cluster())
        return [Request("ns", "same"), Request("hub-ns", "hub", "hub")]

    h = EnqueueRequestsFromMapFunc(fn)
    h.create("spoke-1", cm("a"), q, 0)
    assert seen == ["spoke-1"]
    assert set(drain(q)) == {Request("ns", "same", "spoke-1"), Request("hub-ns", "hub", "hub")}
    assert current_cluster() == ""


async def test_map_func_preserve_cluster_targets_local() -> None:
    q: WorkQueue[Request] = WorkQueue()
    h = EnqueueRequestsFromMapFunc(lambda o: [Request("ns", "local")], preserve_cluster=True)
    h.create("spoke", cm("a"), q, 0)
    assert drain(q) == [Request("ns", "local", "")]


async def test_map_func_rejects_bad_items_and_names_them(caplog: pytest.LogCaptureFixture) -> None:
    q: WorkQueue[Request] = WorkQueue()

    def bad(o: dict[str, Any]) -> list[Any]:
        return [Request("ns", "ok"), ("ns", "tuple"), Request("ns", "x", 42)]  # type: ignore[arg-type]  # deliberately wrong: the test checks the error

    h = EnqueueRequestsFromMapFunc(bad)
    with caplog.at_level(logging.ERROR, logger="mcr.handler"):
        h.create("c", cm("obj"), q, 0)
    assert drain(q) == [Request("ns", "ok", "c")]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert all("bad" in m and "ns/obj" in m and "'c'" in m for m in messages)


def test_map_func_needs_a_function() -> None:
    with pytest.raises(TypeError, match="needs a function"):
        EnqueueRequestsFromMapFunc("nope")  # type: ignore[arg-type]  # deliberately wrong: the test checks the error


def test_request_for_dicts_models_and_nameless_objects() -> None:
    class Model:  # a typed model whose metadata is a mapping
        metadata = {"name": "m", "namespace": "ns2"}

    assert request_for("c1", cm("a")) == Request("ns", "a", "c1")
    assert request_for("c1", {"metadata": {"name": "x"}}) == Request("", "x", "c1")  # cluster-scoped
    assert request_for("c1", Model()) == Request("ns2", "m", "c1")
    assert request_for("c1", {"metadata": {"namespace": "ns"}}) is None
    assert requests_for("c2", [cm("a"), cm("b", "other")]) == [
        Request("ns", "a", "c2"),
        Request("other", "b", "c2"),
    ]
    with pytest.raises(KeyError):
        requests_for("c2", [{"metadata": {}}])  # callers fall back to request_for
    assert isinstance(WorkQueue(), BulkQueue)
    assert not isinstance([], BulkQueue)
