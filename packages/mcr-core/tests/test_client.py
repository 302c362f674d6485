"""Client verbs against a real mcr-envtest server: built-ins typed and untyped, and a CRD
created at runtime."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap, V1Deployment, V1ObjectMeta, V1StatefulSet

from mcr.client import Client
from mcr.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    InvalidError,
    NotFoundError,
    UnsupportedMediaTypeError,
    is_already_exists,
    is_conflict,
    is_not_found,
)
from mcr.metrics import REGISTRY
from mcr.testing import eventually

# Every namespace of a real cluster holds this ConfigMap (kube-controller-manager's root-CA publisher).
ROOT_CA = "kube-root-ca.crt"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}


def cm(name: str, labels: dict[str, str] | None = None, ns: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "data": {"k": "v"},
    }


async def test_crud_dicts(client: Client) -> None:
    created = await client.create(cm("a"))
    assert created["metadata"]["uid"]
    got = await client.get("v1/ConfigMap", "a", namespace="default")
    assert got["data"] == {"k": "v"}
    assert got["kind"] == "ConfigMap"
    got["data"]["k"] = "w"
    updated = await client.update(got)
    assert updated["data"]["k"] == "w"
    with pytest.raises(ConflictError) as err:
        await client.update(created)  # stale resourceVersion
    assert is_conflict(err.value)
    with pytest.raises(AlreadyExistsError) as err2:
        await client.create(cm("a"))
    assert is_already_exists(err2.value)
    await client.delete("v1/ConfigMap", "a", namespace="default")
    with pytest.raises(NotFoundError) as err3:
        await client.get("ConfigMap", "a")
    assert is_not_found(err3.value)
    assert err3.value.status["details"]["name"] == "a"


async def test_typed_models(client: Client) -> None:
    obj = V1ConfigMap(metadata=V1ObjectMeta(name="typed", namespace="default"), data={"x": "1"})
    created = await client.create(obj)
    assert isinstance(created, V1ConfigMap)
    assert created.metadata is not None
    assert created.metadata.uid
    got = await client.get(V1ConfigMap, "typed", namespace="default")
    assert isinstance(got, V1ConfigMap)
    assert got.data == {"x": "1"}
    got.data = {"x": "2"}
    updated = await client.update(got)
    assert isinstance(updated, V1ConfigMap)
    assert updated.data == {"x": "2"}
    items = await client.list(V1ConfigMap, namespace="default")
    assert [i.metadata.name for i in items if i.metadata is not None and i.metadata.name != ROOT_CA] == [
        "typed"
    ]
    await client.delete(updated)
    with pytest.raises(NotFoundError):
        await client.get(V1ConfigMap, "typed", namespace="default")


async def test_typed_deployment_and_strategic_patch(client: Client) -> None:
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "c", "image": "nginx:1"}, {"name": "d", "image": "busybox"}]
                },
            },
        },
    }
    await client.create(dep)
    patched = await client.patch(
        V1Deployment,
        "web",
        {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}},
        patch_type="strategic",
        namespace="default",
    )
    assert isinstance(patched, V1Deployment)
    assert patched.spec is not None
    assert patched.spec.template.spec is not None
    images = {c.name: c.image for c in patched.spec.template.spec.containers}
    assert images == {"c": "nginx:2", "d": "busybox"}  # merged by name, not replaced


async def test_typed_apply_and_status_of_a_builtin(client: Client) -> None:
    # A StatefulSet: no controller of the real lane's control plane rewrites its status (the
    # Deployment controller would set readyReplicas back to 0: no kubelet runs its Pods).
    dep = V1StatefulSet.from_dict(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "typed-apply", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "t"}},
                "template": {
                    "metadata": {"labels": {"app": "t"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        }
    )
    applied = await client.apply(dep, field_manager="typed")
    assert isinstance(applied, V1StatefulSet)
    assert applied.spec.replicas == 1
    status = await client.status.patch(applied, patch={"status": {"replicas": 1, "readyReplicas": 1}})
    assert isinstance(status, V1StatefulSet)
    assert status.status is not None
    assert status.status.ready_replicas == 1
    got = await client.status.get(V1StatefulSet, "typed-apply", namespace="default")
    assert isinstance(got, V1StatefulSet)
    assert got.status is not None
    assert got.status.ready_replicas == 1
    scale = await client.subresource("scale").get(V1StatefulSet, "typed-apply", namespace="default")
    assert scale["kind"] == "Scale"  # a different kind than asked for: returned as a dict
    assert scale["spec"]["replicas"] == 1


async def test_merge_and_json_patch(client: Client) -> None:
    await client.create(cm("p"))
    out = await client.patch("v1/ConfigMap", "p", {"data": {"n": "1"}}, namespace="default")
    assert out["data"] == {"k": "v", "n": "1"}
    out = await client.patch(out, patch=[{"op": "remove", "path": "/data/k"}], patch_type="json")
    assert out["data"] == {"n": "1"}
    with pytest.raises(ValueError, match="patch_type"):
        await client.patch(out, patch={}, patch_type="nope")  # type: ignore[arg-type]  # deliberately wrong: the test checks the error


async def test_list_selectors_and_pagination(apiserver: Any, client: Client) -> None:
    for i in range(7):
        await client.create(cm(f"l{i}", {"app": "x" if i % 2 else "y", "i": str(i)}))
    await client.create(cm("other", {"app": "x"}, ns="kube-system"))
    all_x = await client.list("v1/ConfigMap", label_selector={"app": "x"})
    assert sorted(o["metadata"]["name"] for o in all_x) == ["l1", "l3", "l5", "other"]
    ns_x = await client.list("v1/ConfigMap", namespace="default", label_selector="app=x")
    assert len(ns_x) == 3
    by_field = await client.list("v1/ConfigMap", namespace="default", field_selector="metadata.name=l2")
    assert [o["metadata"]["name"] for o in by_field] == ["l2"]
    labels = {
        "code": "200",
        "method": "GET",
        "host": apiserver.url.removeprefix("https://"),
        "cluster": "test",
    }
    before = REGISTRY.get_sample_value("rest_client_requests_total", labels) or 0.0
    paged = await client.list("v1/ConfigMap", namespace="default", label_selector="i", limit=2)
    assert sorted(o["metadata"]["name"] for o in paged) == [f"l{i}" for i in range(7)]
    assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" for o in paged)
    assert (REGISTRY.get_sample_value("rest_client_requests_total", labels) or 0.0) - before == 4  # pages


@pytest.mark.envtest_only(
    "holds the second page back with faults.latency and fail_next while faults.compact expires its token"
)
async def test_expired_continue_relists(apiserver: Any, client: Client) -> None:
    for i in range(5):
        await client.create(cm(f"e{i}"))
    path = "/api/v1/namespaces/default/configmaps"
    apiserver.faults.request_log.clear()
    apiserver.faults.latency(0.3)
    listing = asyncio.create_task(client.list_object("v1/ConfigMap", namespace="default", limit=2))

    def first_page_served() -> bool:
        return any(r.path == path and "continue" not in r.query for r in apiserver.faults.request_log)

    await eventually(first_page_served)
    # hold the second page back (429 + Retry-After) while a write and a compaction expire its token
    apiserver.faults.fail_next(1, status=429, retry_after=0.5, methods=("GET",), path_contains="configmaps")
    apiserver.faults.latency(0)
    await client.create(cm("e5"))
    apiserver.faults.compact()
    lst = await listing
    assert sorted(o["metadata"]["name"] for o in lst["items"] if o["metadata"]["name"] != ROOT_CA) == [
        f"e{i}" for i in range(6)
    ]
    log = [(r.status, r.query) for r in apiserver.faults.request_log if r.path == path and r.method == "GET"]
    assert [status for status, _ in log] == [200, 429, 410, 200]  # the continue request expired
    assert "continue" not in log[-1][1]
    assert "limit" not in log[-1][1]


async def test_apply_dry_run_and_field_validation(client: Client) -> None:
    applied = await client.apply(cm("ap"), field_manager="mgr-a")
    assert applied["data"] == {"k": "v"}
    managers = {f["manager"] for f in applied["metadata"]["managedFields"]}
    assert "mgr-a" in managers
    other = cm("ap")
    other["data"] = {"k": "other"}
    with pytest.raises(ConflictError):
        await client.apply(other, field_manager="mgr-b")
    forced = await client.apply(other, field_manager="mgr-b", force=True)
    assert forced["data"] == {"k": "other"}
    with pytest.raises(ValueError, match="field_manager"):
        await client.apply(other)

    dry = await client.create(cm("dry"), dry_run=True)
    assert dry["metadata"]["name"] == "dry"
    with pytest.raises(NotFoundError):
        await client.get("v1/ConfigMap", "dry", namespace="default")

    strict = await client.create(cm("strict"), field_validation="Strict", field_manager="me")
    assert [f["manager"] for f in strict["metadata"]["managedFields"]] == ["me"]
    unknown = cm("unknown")
    unknown["spec"] = {"x": 1}
    with pytest.raises(BadRequestError, match='unknown field "spec"'):
        await client.create(unknown, field_validation="Strict")
    ignored = await client.create(unknown, field_validation="Ignore")
    assert ignored["metadata"]["name"] == "unknown"
    with pytest.raises(ValueError, match="field_validation"):
        await client.create(cm("x"), field_validation="Loose")
    with pytest.raises(InvalidError) as err:
        await client.create(cm("Not_A_Valid_Name"))
    assert err.value.code == 422


async def test_delete_options(client: Client) -> None:
    created = await client.create(cm("d"))
    with pytest.raises(ConflictError):
        await client.delete(created, preconditions={"uid": "not-the-uid"})
    await client.delete(
        created, preconditions={"uid": created["metadata"]["uid"]}, propagation_policy="Foreground"
    )

    async def deleted() -> bool:
        # a foreground deletion is finished by the garbage collector: until then the object stays,
        # marked for deletion
        try:
            got = await client.get("v1/ConfigMap", "d")
        except NotFoundError:
            return True
        assert got["metadata"]["deletionTimestamp"]
        assert "foregroundDeletion" in got["metadata"]["finalizers"]
        return False

    await eventually(deleted, timeout=30)
    for i in range(3):
        await client.create(cm(f"all{i}", {"group": "g"}))
    await client.create(cm("keep"))
    await client.delete_all_of("v1/ConfigMap", namespace="default", label_selector={"group": "g"})
    left = await eventually(lambda: client.list("v1/ConfigMap", namespace="default"))
    assert [o["metadata"]["name"] for o in left if o["metadata"]["name"] != ROOT_CA] == ["keep"]


async def test_crd_created_at_runtime(client: Client) -> None:
    await client.rest_mapper.refresh()  # discovery loaded before the CRD exists
    await client.create(WIDGET_CRD)
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "default", "labels": {"tier": "gold"}},
        "spec": {"size": 3},
    }
    created = await client.create(widget)
    assert created["spec"] == {"size": 3}
    assert (await client.get("example.com/v1/Widget", "w1", namespace="default"))["spec"]["size"] == 3
    assert [w["metadata"]["name"] for w in await client.list("Widget", label_selector="tier=gold")] == ["w1"]

    with_status = await client.status.patch(created, patch={"status": {"ready": True}})
    assert with_status["status"] == {"ready": True}
    # status updates do not change spec; spec updates do not change status
    got = await client.get("example.com/v1/Widget", "w1", namespace="default")
    got["status"] = {"ready": False}
    got["spec"] = {"size": 4}
    after_status = await client.status.update(got)
    assert after_status["status"] == {"ready": False}
    assert after_status["spec"] == {"size": 3}
    status_only = await client.status.get("example.com/v1/Widget", "w1", namespace="default")
    assert status_only["status"] == {"ready": False}

    applied = await client.status.apply(
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w1", "namespace": "default"},
            "status": {"phase": "Up"},
        },
        field_manager="ctrl",
    )
    assert applied["status"]["phase"] == "Up"

    with pytest.raises(UnsupportedMediaTypeError):
        await client.patch(created, patch={"spec": {"size": 5}}, patch_type="strategic")
    merged = await client.patch(created, patch={"spec": {"size": 5}})
    assert merged["spec"]["size"] == 5
    await client.delete("example.com/v1/Widget", "w1", namespace="default")


async def test_cache_reader_is_used_for_reads(client: Client) -> None:
    class Reader:
        def __init__(self) -> None:
            self.calls: list[str] = []

        async def get(self, kind: Any, name: str, namespace: str | None = None) -> Any:
            self.calls.append(f"get {name}")
            return cm(name)

        async def list(
            self,
            kind: Any,
            *,
            namespace: str | None = None,
            label_selector: str | None = None,
            field_selector: str | None = None,
        ) -> list[Any]:
            self.calls.append(f"list {label_selector}")
            return [cm("from-reader")]

    reader = Reader()
    cached = client.with_reader(reader)
    got = await cached.get(V1ConfigMap, "x", namespace="default")
    assert isinstance(got, V1ConfigMap)
    assert [o["metadata"]["name"] for o in await cached.list("v1/ConfigMap", label_selector={"a": "b"})] == [
        "from-reader"
    ]
    assert reader.calls == ["get x", "list a=b"]
    await cached.create(cm("written"))  # writes go to the server
    assert (await cached.api_reader.get("v1/ConfigMap", "written"))["metadata"]["name"] == "written"
    assert cached.api_reader.reader is None
