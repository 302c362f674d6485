"""mcr.controllerutil against a server: owner references the garbage collector follows, finalizers
the server honours, and create-or-update / create-or-patch writing only what changed."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta

from mcr.client import Client
from mcr.controllerutil import (
    AlreadyOwnedError,
    CrossClusterOwnerError,
    OperationResult,
    add_finalizer,
    contains_finalizer,
    create_or_patch,
    create_or_update,
    has_controller_reference,
    has_owner_reference,
    remove_finalizer,
    remove_owner_reference,
    set_controller_reference,
    set_owner_reference,
)
from mcr.errors import ConflictError, NotFoundError
from mcr.testing import eventually


def cm(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    }


def owner_obj(name: str = "owner", namespace: str | None = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": str(uuid.uuid4())}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta}


def test_controller_reference_is_set_once_and_a_second_controller_is_refused() -> None:
    owner, obj = owner_obj(), cm("child")
    assert set_controller_reference(owner, obj) is True
    assert set_controller_reference(owner, obj) is False  # already there: unchanged
    [ref] = obj["metadata"]["ownerReferences"]
    assert ref == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": True,
        "controller": True,
    }
    assert has_controller_reference(obj)
    assert has_owner_reference(owner, obj)
    with pytest.raises(
        AlreadyOwnedError, match="ConfigMap default/child is already controlled by Deployment owner"
    ):
        set_controller_reference(owner_obj("other"), obj)
    # Another owner that is not a controller is fine, and removable.
    other = owner_obj("other")
    assert set_owner_reference(other, obj) is True
    assert len(obj["metadata"]["ownerReferences"]) == 2
    assert remove_owner_reference(other, obj) is True
    assert remove_owner_reference(other, obj) is False
    assert remove_owner_reference(owner, obj) is True
    assert "ownerReferences" not in obj["metadata"]
    assert not has_controller_reference(obj)


def test_owners_in_other_clusters_and_namespaces_are_refused_with_the_reason() -> None:
    with pytest.raises(
        CrossClusterOwnerError, match=r"cluster 'hub'.*cluster 'member-1'.*docs/cross-cluster.md"
    ):
        set_controller_reference(owner_obj(), cm("x"), owner_cluster="hub", cluster="member-1")
    set_owner_reference(owner_obj(), cm("x"), owner_cluster="a", cluster="a")  # same cluster: fine
    with pytest.raises(ValueError, match="must be in the same namespace"):
        set_controller_reference(owner_obj(namespace="other"), cm("x"))
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    with pytest.raises(ValueError, match="cluster-scoped Node n cannot have the namespaced owner"):
        set_owner_reference(owner_obj(), node)
    with pytest.raises(ValueError, match="has no name or uid yet"):
        set_owner_reference(cm("unsaved"), cm("x"))


def test_finalizers_on_dicts_and_models() -> None:
    for obj in (cm("f"), V1ConfigMap(metadata=V1ObjectMeta(name="f", namespace="default"))):
        assert not contains_finalizer(obj, "example.com/cleanup")
        assert add_finalizer(obj, "example.com/cleanup") is True
        assert add_finalizer(obj, "example.com/cleanup") is False
        assert contains_finalizer(obj, "example.com/cleanup")
        assert remove_finalizer(obj, "example.com/cleanup") is True
        assert remove_finalizer(obj, "example.com/cleanup") is False
    model = V1ConfigMap(metadata=V1ObjectMeta(name="f", namespace="default"))
    add_finalizer(model, "a/b")
    assert model.metadata.finalizers == ["a/b"]


async def test_the_garbage_collector_follows_a_controller_reference(client: Client) -> None:
    owner = await client.create(cm("gc-owner"))
    child = cm("gc-child")
    set_controller_reference(owner, child)
    await client.create(child)
    await client.delete("v1/ConfigMap", "gc-owner", namespace="default")

    async def collected() -> bool:
        try:
            await client.get("v1/ConfigMap", "gc-child", namespace="default")
        except NotFoundError:
            return True
        return False

    await eventually(collected, timeout=30, message="the child was garbage-collected")


async def test_a_finalizer_holds_deletion_until_removed(client: Client) -> None:
    obj = cm("held")
    add_finalizer(obj, "example.com/cleanup")
    await client.create(obj)
    await client.delete("v1/ConfigMap", "held", namespace="default")
    stored = await client.get("v1/ConfigMap", "held", namespace="default")
    assert stored["metadata"].get("deletionTimestamp")
    assert remove_finalizer(stored, "example.com/cleanup")
    await client.update(stored)

    async def gone() -> bool:
        try:
            await client.get("v1/ConfigMap", "held", namespace="default")
        except NotFoundError:
            return True
        return False

    await eventually(gone, timeout=10, message="deleted once the finalizer went")


async def test_create_or_update_creates_updates_and_leaves_unchanged(client: Client) -> None:
    def desired(obj: Any) -> None:
        obj.setdefault("data", {})["mode"] = "on"

    result, stored = await create_or_update(client, cm("cou"), desired)
    assert result is OperationResult.CREATED
    assert stored["data"] == {"mode": "on"}
    result, again = await create_or_update(client, cm("cou"), desired)
    assert result is OperationResult.NONE
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]

    async def more(obj: Any) -> None:  # a coroutine function works too
        obj["data"]["extra"] = "1"

    result, updated = await create_or_update(client, cm("cou"), more)
    assert result is OperationResult.UPDATED
    assert updated["data"] == {"mode": "on", "extra": "1"}

    def rename(obj: Any) -> None:
        obj["metadata"]["name"] = "elsewhere"

    with pytest.raises(ValueError, match="mutate changed the namespace/name of default/cou"):
        await create_or_update(client, cm("cou"), rename)


async def test_create_or_update_of_a_model_and_a_conflicting_writer(client: Client) -> None:
    model = V1ConfigMap(metadata=V1ObjectMeta(name="typed", namespace="default"))

    def desired(obj: Any) -> None:
        obj.data = {**(obj.data or {}), "k": "v"}

    result, stored = await create_or_update(client, model, desired)
    assert result is OperationResult.CREATED
    assert isinstance(stored, V1ConfigMap)
    assert stored.data == {"k": "v"}

    async def races(obj: Any) -> None:  # another writer changes the object between read and write
        await client.patch("v1/ConfigMap", "typed", {"data": {"other": "x"}}, namespace="default")
        obj.data = {**(obj.data or {}), "k": "w"}

    with pytest.raises(ConflictError):
        await create_or_update(
            client, V1ConfigMap(metadata=V1ObjectMeta(name="typed", namespace="default")), races
        )


async def test_create_or_patch_writes_spec_and_status_separately(client: Client) -> None:
    dep = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "cop", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "cop"}},
            "template": {
                "metadata": {"labels": {"app": "cop"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }

    def nothing(obj: Any) -> None:
        return None

    result, _ = await create_or_patch(client, dep, nothing)
    assert result is OperationResult.CREATED
    result, _ = await create_or_patch(client, {**dep, "metadata": dict(dep["metadata"])}, nothing)
    assert result is OperationResult.NONE

    def label(obj: Any) -> None:
        obj["metadata"].setdefault("labels", {})["tier"] = "web"

    def status(obj: Any) -> None:
        obj.setdefault("status", {})["availableReplicas"] = 0
        obj["status"]["replicas"] = 1

    def both(obj: Any) -> None:
        obj["spec"]["replicas"] = 2
        obj["status"]["replicas"] = 2

    result, out = await create_or_patch(client, dict(dep), label)
    assert result is OperationResult.UPDATED
    assert out["metadata"]["labels"] == {"tier": "web"}
    result, out = await create_or_patch(client, dict(dep), status)
    assert result is OperationResult.UPDATED_STATUS_ONLY
    assert out["status"]["replicas"] == 1
    result, out = await create_or_patch(client, dict(dep), both)
    assert result is OperationResult.UPDATED_STATUS
    stored = await client.get("apps/v1/StatefulSet", "cop", namespace="default")
    assert stored["spec"]["replicas"] == 2
    assert stored["status"]["replicas"] == 2
    assert stored["metadata"]["labels"] == {"tier": "web"}
