"""InformerCache as the Client's reader: lazy informers, copies, models, indexes, scoping, CRDs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap

from mcr.cache import (
    ByObject,
    CacheNotStartedError,
    CacheOptions,
    IndexerConflictError,
    InformerCache,
    NamespaceConfig,
)
from mcr.client import Client
from mcr.errors import NotFoundError
from mcr.metrics import REGISTRY
from mcr.rest.config import load_config
from mcr.rest.mapper import RESTMapper
from mcr.rest.transport import Transport
from mcr.testing import eventually, open_sockets

CM = "v1/ConfigMap"
ROOT_CA = "kube-root-ca.crt"  # in every namespace of a real cluster (kube-controller-manager publishes it)


class Env:
    def __init__(self, srv: Any, transport: Transport) -> None:
        self.srv = srv
        self.transport = transport
        self.mapper = RESTMapper(transport)
        self.client = Client(transport, rest_mapper=self.mapper)
        self.caches: list[InformerCache] = []
        self.namespaces: set[str] = set()
        self.transports: list[Transport] = [transport]

    async def cache(self, **options: Any) -> InformerCache:
        cache = InformerCache(self.transport, self.mapper, CacheOptions(**options))
        self.caches.append(cache)
        await cache.start()
        return cache

    async def cm(
        self, name: str, namespace: str = "default", data: dict[str, str] | None = None, **labels: str
    ) -> None:
        if namespace not in self.namespaces:
            self.namespaces.add(namespace)
            if namespace != "default":
                ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
                await self.client.create(ns)
        meta = {"name": name, "namespace": namespace, "labels": labels}
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}
        await self.client.create(cm)


@pytest.fixture
async def env(apiserver: Any) -> AsyncIterator[Env]:
    sockets = open_sockets()
    e = Env(apiserver, load_config(apiserver.kubeconfig).transport("reader"))
    try:
        yield e
    finally:
        for cache in e.caches:
            await cache.stop()
        for transport in e.transports:
            await transport.close()
        await eventually(lambda: open_sockets() <= sockets, message="a connection stayed open")


def names(objs: list[Any]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def ours(objs: list[Any]) -> list[str]:
    """Names of the objects a test made in its namespaces ``ns<i>`` (a real cluster has ConfigMaps
    of its own, and ``kube-root-ca.crt`` in every namespace)."""
    return [
        n
        for o in objs
        if o["metadata"]["namespace"].startswith("ns") and (n := o["metadata"]["name"]) != ROOT_CA
    ]


def _requests(cluster: str) -> float:
    """Requests the transport of ``cluster`` has sent (every method, every answer)."""
    return sum(
        s.value
        for metric in REGISTRY.collect()
        if metric.name == "rest_client_requests"
        for s in metric.samples
        if s.name.endswith("_total") and s.labels.get("cluster") == cluster
    )


async def test_client_reads_come_from_memory_after_a_lazy_start(env: Env) -> None:
    await env.cm("a", data={"k": "v"})
    cache = await env.cache()
    assert cache.informers() == {}
    # the client has a transport of its own: every request it sends shows in that one's metrics
    own = load_config(env.srv.kubeconfig).transport("cached-client")
    env.transports.append(own)
    cached = Client(own, rest_mapper=env.mapper, reader=cache)
    obj = await cached.get(CM, "a", namespace="default")  # starts the informer, waits for sync
    assert obj["data"] == {"k": "v"}
    assert len(cache.informers()) == 1
    (reflector,) = (await cache.get_informer(CM)).reflectors
    sent = _requests("cached-client")
    for _ in range(20):
        await cached.get(CM, "a", namespace="default")
    assert _requests("cached-client") == sent  # no request per read
    assert reflector.lists == 1  # nor a list of the cache's
    with pytest.raises(NotFoundError, match="not found") as info:
        await cached.get(CM, "missing", namespace="default")
    assert info.value.code == 404
    assert info.value.status["details"]["name"] == "missing"
    # Writes go to the server; the cache follows.
    await cached.patch(CM, "a", {"data": {"k": "w"}}, namespace="default")

    async def patched() -> bool:
        obj = await cache.get(CM, "a", namespace="default")
        return bool(obj["data"] == {"k": "w"})

    await eventually(patched)


async def test_reads_are_copies_unless_unsafe_disable_deep_copy(env: Env) -> None:
    await env.cm("a", data={"k": "v"})
    cache = await env.cache()
    obj = await cache.get(CM, "a", namespace="default")
    obj["data"]["k"] = "mutated"
    assert (await cache.get(CM, "a", namespace="default"))["data"]["k"] == "v"
    unsafe = await env.cache(by_object={CM: ByObject(unsafe_disable_deep_copy=True)})
    first = await unsafe.get(CM, "a", namespace="default")
    assert first is await unsafe.get(CM, "a", namespace="default")


async def test_model_classes_get_models_and_dicts_stay_dicts(env: Env) -> None:
    await env.cm("a", data={"k": "v"})
    cache = await env.cache()
    model = await cache.get(V1ConfigMap, "a", namespace="default")
    assert isinstance(model, V1ConfigMap)
    assert model.data == {"k": "v"}
    listed = await cache.list(V1ConfigMap, namespace="default")
    assert [m.metadata.name for m in listed if m.metadata.name != ROOT_CA] == ["a"]
    informer = await cache.get_informer(V1ConfigMap)
    assert isinstance(informer.get("default/a"), dict)  # the cache itself holds dicts


async def test_list_filters_by_namespace_labels_and_indexed_fields(env: Env) -> None:
    await env.cm("a", "ns1", data={"owner": "x"}, app="web", tier="fe")
    await env.cm("b", "ns1", data={"owner": "y"}, app="db")
    await env.cm("c", "ns2", data={"owner": "x"}, app="web")
    cache = await env.cache()
    await cache.index_field(CM, "data.owner", lambda o: [o.get("data", {}).get("owner", "")])
    with pytest.raises(IndexerConflictError):
        await cache.index_field(CM, "data.owner", lambda o: [])
    assert ours(await cache.list(CM)) == ["a", "b", "c"]
    assert ours(await cache.list(CM, namespace="ns1")) == ["a", "b"]
    assert names(await cache.list(CM, label_selector="app=web")) == ["a", "c"]
    assert names(await cache.list(CM, label_selector={"app": "web", "tier": "fe"})) == ["a"]
    assert names(await cache.list(CM, label_selector="app in (db),!tier")) == ["b"]
    assert names(await cache.list(CM, field_selector="data.owner=x")) == ["a", "c"]
    assert names(await cache.list(CM, namespace="ns2", field_selector="data.owner=x")) == ["c"]
    assert names(await cache.list(CM, field_selector="metadata.name=b")) == ["b"]
    assert names(await cache.list(CM, namespace="ns1", limit=2)) == ["a", "b"]
    with pytest.raises(ValueError, match="index_field"):
        await cache.list(CM, field_selector="data.unindexed=1")
    informer = await cache.get_informer(CM)
    assert names(informer.by_index("field:data.owner", "y")) == ["b"]
    # The index follows changes.
    await env.client.patch(CM, "b", {"data": {"owner": "x"}}, namespace="ns1")
    await eventually(lambda: sorted(names(informer.by_index("field:data.owner", "x"))) == ["a", "b", "c"])
    assert informer.by_index("field:data.owner", "y") == []


async def test_namespace_and_selector_scoping_per_kind(env: Env) -> None:
    await env.cm("a", "ns1", app="web")
    await env.cm("b", "ns1", app="db")
    await env.cm("c", "ns2", app="web")
    await env.cm("d", "ns3", app="web")
    cache = await env.cache(
        default_namespaces={"ns1": NamespaceConfig(), "ns2": NamespaceConfig(label_selector="app=none")},
        by_object={CM: ByObject(label_selector="app=web")},
    )
    assert names(await cache.list(CM)) == ["a"]  # ns1 with the kind's selector; ns2's own selector
    informer = await cache.get_informer(CM)
    assert len(informer.reflectors) == 2
    # An object entering the selector arrives; one leaving it is deleted from the cache.
    await env.client.patch(CM, "b", {"metadata": {"labels": {"app": "web"}}}, namespace="ns1")
    await eventually(lambda: informer.get("ns1/b") is not None)
    await env.client.patch(CM, "a", {"metadata": {"labels": {"app": "gone"}}}, namespace="ns1")
    await eventually(lambda: informer.get("ns1/a") is None)
    assert names(await cache.list(CM)) == ["b"]


async def test_cluster_scoped_kinds_and_default_transform(env: Env) -> None:
    await env.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    cache = await env.cache(default_namespaces={"team-a": NamespaceConfig()})
    ns = await cache.get("v1/Namespace", "team-a")
    assert ns["metadata"]["name"] == "team-a"
    assert "managedFields" not in ns["metadata"]
    raw = await env.cache(default_transform=None)
    await env.cm("with-fields", data={"k": "v"})
    obj = await raw.get(CM, "with-fields", namespace="default")
    server_obj = await env.client.get(CM, "with-fields", namespace="default")
    assert server_obj["metadata"]["managedFields"]  # the server records the create's manager
    assert obj["metadata"]["managedFields"] == server_obj["metadata"]["managedFields"]
    default = await env.cache()
    assert "managedFields" not in (await default.get(CM, "with-fields", namespace="default"))["metadata"]


async def test_custom_resource_defined_at_runtime_can_be_cached(env: Env) -> None:
    cache = await env.cache()
    await env.client.create(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {
                    "plural": "widgets",
                    "singular": "widget",
                    "kind": "Widget",
                    "listKind": "WidgetList",
                },
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
    )
    kind = "example.com/v1/Widget"

    assert await cache.list(kind) == []
    await env.client.create(
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "default"}}
    )
    informer = await cache.get_informer(kind)
    await eventually(lambda: informer.get("default/w1") is not None)
    assert (await cache.get(kind, "w1", namespace="default"))["kind"] == "Widget"


async def test_reads_need_a_started_cache(env: Env) -> None:
    cache = InformerCache(env.transport, env.mapper)
    with pytest.raises(CacheNotStartedError, match="reader"):
        await cache.get(CM, "a", namespace="default")
    informer = await cache.get_informer(CM)  # created, not running until the cache starts
    assert not informer.started
    await cache.start()
    env.caches.append(cache)
    assert informer.started
    assert await cache.wait_for_cache_sync(10)
    await asyncio.wait_for(cache.stop(), 10)
    assert not informer.started


def test_deep_copy_is_an_exact_copy_sharing_no_containers() -> None:
    from mcr.cache.reader import deep_copy

    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"z": "1", "a": "ünïcode ✓"}, "finalizers": []},
        "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}], "priority": 2**40},
        "status": {"ratio": 0.25, "ready": True, "hostIP": None, "nested": [[1, [2, {"x": []}]]]},
    }
    copied = deep_copy(obj)
    assert copied == obj
    assert list(copied["metadata"]["labels"]) == ["z", "a"]  # key order kept

    def containers(o: Any) -> list[Any]:
        found = [o] if isinstance(o, (dict, list)) else []
        children = o.values() if isinstance(o, dict) else o if isinstance(o, list) else []
        for child in children:
            found.extend(containers(child))
        return found

    originals = {id(c) for c in containers(obj)}
    assert not originals & {id(c) for c in containers(copied)}
    copied["spec"]["containers"][0]["ports"][0]["containerPort"] = 81
    assert obj["spec"]["containers"][0]["ports"][0]["containerPort"] == 80
