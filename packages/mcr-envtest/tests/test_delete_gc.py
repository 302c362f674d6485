"""DELETE semantics: preconditions, finalizers, propagation policies, namespaces, deletecollection."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client

from mcr.testing import eventually

from .conftest import Raw
from .test_watch import ROOT_CA

CM = "/api/v1/namespaces/default/configmaps"


def owner_ref(obj: Any, block: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "blockOwnerDeletion": block,
    }


async def make(raw: Raw, name: str, **meta: Any) -> dict[str, Any]:
    status, obj = await raw.json("POST", CM, json={"metadata": {"name": name, **meta}})
    assert status == 201, obj
    return obj


async def exists(raw: Raw, name: str) -> bool:
    status, _ = await raw.json("GET", f"{CM}/{name}")
    return status == 200


async def test_immediate_delete_returns_success_status(raw: Raw) -> None:
    obj = await make(raw, "a")
    status, body = await raw.json("DELETE", f"{CM}/a")
    assert status == 200
    assert body["status"] == "Success"
    assert body["details"] == {"name": "a", "kind": "configmaps", "uid": obj["metadata"]["uid"]}


async def test_preconditions(raw: Raw) -> None:
    await make(raw, "p")
    status, body = await raw.json("DELETE", f"{CM}/p", json={"preconditions": {"uid": "nope"}})
    assert status == 409
    assert body["message"].startswith(
        'Operation cannot be fulfilled on ConfigMap "p": the UID in the precondition (nope) does not match'
    )
    assert body["details"] == {"name": "p", "kind": "ConfigMap"}
    status, body = await raw.json("DELETE", f"{CM}/p", json={"preconditions": {"resourceVersion": "1"}})
    assert status == 409
    assert body["message"].endswith("The object might have been modified")


async def test_finalizers_hold_the_object(raw: Raw) -> None:
    await make(raw, "f", finalizers=["example.com/hold"])
    status, body = await raw.json("DELETE", f"{CM}/f")
    assert status == 200
    assert body["metadata"]["deletionTimestamp"]
    status, again = await raw.json("DELETE", f"{CM}/f")
    assert again["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]
    status, _bad = await raw.json(
        "PATCH",
        f"{CM}/f",
        data=b'{"metadata":{"finalizers":["example.com/hold","x/y"]}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 422
    status, _ = await raw.json(
        "PATCH",
        f"{CM}/f",
        data=b'{"metadata":{"finalizers":null}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200
    assert not await exists(raw, "f")


async def test_background_gc_collects_dependents(raw: Raw) -> None:
    owner = await make(raw, "owner")
    await make(raw, "dep1", ownerReferences=[owner_ref(owner)])
    await make(raw, "dep2", ownerReferences=[owner_ref(owner)])
    await raw.json("DELETE", f"{CM}/owner", json={"propagationPolicy": "Background"})

    async def collected() -> bool:
        return not await exists(raw, "dep1") and not await exists(raw, "dep2")

    await eventually(collected, timeout=5)


async def test_gc_collects_a_dependent_whose_owners_never_existed(raw: Raw) -> None:
    missing = {"apiVersion": "v1", "kind": "ConfigMap", "name": "nobody", "uid": str(uuid.uuid4())}
    await make(raw, "dangling", ownerReferences=[missing])
    owner = await make(raw, "solid-owner")
    await make(raw, "half", ownerReferences=[missing, owner_ref(owner)])

    async def collected() -> bool:
        status, half = await raw.json("GET", f"{CM}/half")
        assert status == 200, half
        # a dependent with a live owner stays, without the reference to the missing one
        refs = [r["uid"] for r in half["metadata"]["ownerReferences"]]
        return not await exists(raw, "dangling") and refs == [owner["metadata"]["uid"]]

    await eventually(collected, timeout=30)  # kube-controller-manager's collector takes its time


async def test_foreground_deletes_dependents_first(raw: Raw) -> None:
    owner = await make(raw, "fg")
    await make(raw, "fgdep", ownerReferences=[owner_ref(owner, block=True)])
    status, body = await raw.json("DELETE", f"{CM}/fg", json={"propagationPolicy": "Foreground"})
    assert status == 200
    assert "foregroundDeletion" in body["metadata"]["finalizers"]

    async def both_gone() -> bool:
        return not await exists(raw, "fg") and not await exists(raw, "fgdep")

    await eventually(both_gone, timeout=5)


async def test_orphan_keeps_dependents(raw: Raw) -> None:
    owner = await make(raw, "or")
    await make(raw, "ordep", ownerReferences=[owner_ref(owner)])
    await raw.json("DELETE", f"{CM}/or?propagationPolicy=Orphan")

    async def orphaned() -> bool:
        status, dep = await raw.json("GET", f"{CM}/ordep")
        return not await exists(raw, "or") and status == 200 and not dep["metadata"].get("ownerReferences")

    await eventually(orphaned, timeout=5)


async def test_namespace_termination(raw: Raw) -> None:
    await raw.json("POST", "/api/v1/namespaces", json={"metadata": {"name": "doomed"}})
    nscm = "/api/v1/namespaces/doomed/configmaps"
    await raw.json("POST", nscm, json={"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
    await raw.json("POST", nscm, json={"metadata": {"name": "free"}})
    status, ns = await raw.json("DELETE", "/api/v1/namespaces/doomed")
    assert status == 200
    assert ns["status"]["phase"] == "Terminating"
    status, body = await raw.json("POST", nscm, json={"metadata": {"name": "late"}})
    assert status == 403
    assert body["details"]["causes"][0]["reason"] == "NamespaceTerminating"

    async def contents_deleted() -> bool:
        s1, _ = await raw.json("GET", f"{nscm}/free")
        s2, held = await raw.json("GET", f"{nscm}/held")
        return s1 == 404 and s2 == 200 and bool(held["metadata"].get("deletionTimestamp"))

    await eventually(contents_deleted, timeout=60)  # a real namespace controller takes its time
    status, _ = await raw.json("GET", "/api/v1/namespaces/doomed")
    assert status == 200  # the finalizer on "held" keeps the namespace
    await raw.json(
        "PATCH",
        f"{nscm}/held",
        data=b'{"metadata":{"finalizers":null}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )

    async def ns_gone() -> bool:
        s, _ = await raw.json("GET", "/api/v1/namespaces/doomed")
        return s == 404

    await eventually(ns_gone, timeout=60)


def test_immortal_namespaces(core: client.CoreV1Api) -> None:
    with pytest.raises(client.ApiException) as exc:
        core.delete_namespace("default")
    assert exc.value.status == 403
    assert "may not be deleted" in exc.value.body


async def test_delete_collection_with_selector(raw: Raw) -> None:
    await make(raw, "l1", labels={"tier": "a"})
    await make(raw, "l2", labels={"tier": "a"})
    await make(raw, "l3", labels={"tier": "b"})
    status, _ = await raw.json("DELETE", f"{CM}?labelSelector=tier%3Da")
    assert status == 200
    status, lst = await raw.json("GET", CM)
    assert [i["metadata"]["name"] for i in lst["items"] if i["metadata"]["name"] != ROOT_CA] == ["l3"]


async def test_dry_run_persists_nothing(raw: Raw) -> None:
    status, obj = await raw.json("POST", f"{CM}?dryRun=All", json={"metadata": {"name": "dry"}})
    assert status == 201
    assert obj["metadata"]["name"] == "dry"
    assert not await exists(raw, "dry")
    status, body = await raw.json("POST", f"{CM}?dryRun=Some", json={"metadata": {"name": "dry"}})
    assert status == 422
    assert body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: '
        'Unsupported value: ["Some"]: supported values: "All"'
    )


def test_delete_return_types_match_the_official_client(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(
        "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    deleted = core.delete_namespaced_pod("p", "default")
    assert isinstance(deleted, client.V1Pod)
    assert deleted.metadata.name == "p"
    core.create_namespaced_config_map("default", {"metadata": {"name": "c", "labels": {"x": "y"}}})
    status = core.delete_namespaced_config_map("c", "default")  # typed as `object` by the client
    assert status["kind"] == "Status"
    assert status["status"] == "Success"
    core.create_namespaced_config_map("default", {"metadata": {"name": "d", "labels": {"x": "y"}}})
    core.delete_collection_namespaced_config_map("default", label_selector="x=y")
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] in ([], [ROOT_CA])
