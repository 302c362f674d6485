"""A NamespaceCluster's client, cache, watches, indexes and events, against an mcr-envtest host."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta

import mcr
from mcr.cluster import Cluster
from mcr.errors import ForbiddenError, NotFoundError
from mcr.testing import eventually
from mcr_provider_namespace import NamespaceCluster, NamespaceProvider, NamespaceScopeError

from .conftest import configmap, make_namespace


async def engaged(provider: NamespaceProvider, name: str) -> NamespaceCluster:
    await eventually(lambda: name in provider.names(), message=f"{name} engaged")
    cluster = await provider.get(name)
    assert isinstance(cluster, NamespaceCluster)
    return cluster


async def test_every_client_verb_reads_and_writes_the_real_namespace(
    host: Cluster, admin: Cluster, run: Any
) -> None:
    await make_namespace(admin, "team-a")
    await make_namespace(admin, "team-b")
    provider = NamespaceProvider(host)
    run(provider)
    a = await engaged(provider, "team-a")
    b = await engaged(provider, "team-b")

    created = await a.client.create(configmap("settings", {"mode": "blue"}))
    assert created["metadata"]["namespace"] == "default"
    real = await admin.api_reader.get("v1/ConfigMap", "settings", namespace="team-a")
    assert real["data"] == {"mode": "blue"}
    with pytest.raises(NotFoundError):
        await admin.api_reader.get("v1/ConfigMap", "settings", namespace="default")

    # Reads: cached client, uncached reader, cache; lists see only their namespace.
    await eventually(lambda: _has(a.client, "settings"))
    got = await a.client.get("v1/ConfigMap", "settings")
    assert (got["metadata"]["namespace"], got["data"]) == ("default", {"mode": "blue"})
    assert (await a.api_reader.get("v1/ConfigMap", "settings", namespace="default"))["data"] == {
        "mode": "blue"
    }
    assert [
        o["metadata"]["name"]
        for o in await a.client.list("v1/ConfigMap")
        if o["metadata"]["name"] == "settings"
    ]
    assert not [o for o in await b.client.list("v1/ConfigMap") if o["metadata"]["name"] == "settings"]
    assert all(o["metadata"]["namespace"] == "default" for o in await a.cache.list("v1/ConfigMap"))
    with pytest.raises(NotFoundError):
        await b.api_reader.get("v1/ConfigMap", "settings")

    # update, merge / strategic / JSON patches, server-side apply, typed models.
    got["data"]["mode"] = "green"
    await a.client.update(got)
    await a.client.patch("v1/ConfigMap", "settings", {"data": {"merge": "yes"}})
    await a.client.patch("v1/ConfigMap", "settings", {"data": {"strategic": "yes"}}, patch_type="strategic")
    await a.client.patch(
        "v1/ConfigMap", "settings", [{"op": "add", "path": "/data/json", "value": "yes"}], patch_type="json"
    )
    await a.client.apply(configmap("applied", {"by": "ssa"}), field_manager="test", force=True)
    await a.client.patch(
        "v1/ConfigMap", "applied", configmap("applied", {"by": "apply-patch"}), patch_type="apply",
        field_manager="test", force=True,
    )  # fmt: skip
    model = await a.api_reader.create(V1ConfigMap(metadata=V1ObjectMeta(name="typed"), data={"t": "1"}))
    assert isinstance(model, V1ConfigMap)
    assert model.metadata.namespace == "default"
    real = await admin.api_reader.get("v1/ConfigMap", "settings", namespace="team-a")
    assert real["data"] == {"mode": "green", "merge": "yes", "strategic": "yes", "json": "yes"}
    applied = await admin.api_reader.get("v1/ConfigMap", "applied", namespace="team-a")
    assert applied["data"] == {"by": "apply-patch"}
    assert (await admin.api_reader.get("v1/ConfigMap", "typed", namespace="team-a"))["data"] == {"t": "1"}

    # Status subresource (a namespaced kind with status: a Service is not needed; use a Pod-less
    # kind with status in envtest: ResourceQuota).
    quota = await a.client.create(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "q"},
            "spec": {"hard": {"pods": "3"}},
        }
    )
    quota["status"] = {"hard": {"pods": "3"}, "used": {"pods": "1"}}
    updated = await a.client.status.update(quota)
    assert updated["metadata"]["namespace"] == "default"
    real_quota = await admin.api_reader.get("v1/ResourceQuota", "q", namespace="team-a")
    assert real_quota["status"]["used"] == {"pods": "1"}
    await a.client.status.patch("v1/ResourceQuota", "q", {"status": {"used": {"pods": "2"}}})
    assert (await admin.api_reader.get("v1/ResourceQuota", "q", namespace="team-a"))["status"]["used"] == {
        "pods": "2"
    }
    assert (await a.api_reader.status.get("v1/ResourceQuota", "q"))["status"]["used"] == {"pods": "2"}

    # Deletes.
    await a.client.delete("v1/ConfigMap", "typed")
    with pytest.raises(NotFoundError):
        await admin.api_reader.get("v1/ConfigMap", "typed", namespace="team-a")
    await b.client.create(configmap("kept"))
    await a.client.delete_all_of("v1/ConfigMap")
    assert not [o for o in await admin.api_reader.list("v1/ConfigMap", namespace="team-a")
                if o["metadata"]["name"] in ("settings", "applied")]  # fmt: skip
    assert await admin.api_reader.get("v1/ConfigMap", "kept", namespace="team-b")

    # What a namespace cluster cannot do is a clear error naming the cluster and the object.
    with pytest.raises(
        NamespaceScopeError,
        match=r"cluster 'team-a' .* has only namespace 'default': ConfigMap x names namespace 'kube-system'",
    ):
        await a.client.create(configmap("x", namespace="kube-system"))
    with pytest.raises(NamespaceScopeError, match="namespace 'team-b'"):
        await a.client.get("v1/ConfigMap", "kept", namespace="team-b")
    with pytest.raises(NamespaceScopeError, match="cluster-scoped, shared by every namespace cluster"):
        await a.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sneaky"}})
    # Cluster-scoped objects are readable.
    assert (await a.client.get("v1/Namespace", "team-b"))["metadata"]["name"] == "team-b"


async def _has(client: Any, name: str) -> bool:
    try:
        await client.get("v1/ConfigMap", name)
    except NotFoundError:
        return False
    return True


async def _grant(admin: Cluster, user: str) -> None:
    """``user`` reads everything, and writes ConfigMaps and Events only in team-a and team-b."""
    rbac = "rbac.authorization.k8s.io/v1"
    await admin.api_reader.create({
        "apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "read-all"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}],
    })  # fmt: skip
    await admin.api_reader.create({
        "apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": f"{user}-read-all"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "read-all"},
        "subjects": [{"kind": "User", "name": user}],
    })  # fmt: skip
    for ns in ("team-a", "team-b"):
        await admin.api_reader.create({
            "apiVersion": rbac, "kind": "Role", "metadata": {"name": "write", "namespace": ns},
            "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "update", "patch"]},
                {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
            ],
        })  # fmt: skip
        await admin.api_reader.create({
            "apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": f"{user}-write", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "write"},
            "subjects": [{"kind": "User", "name": user}],
        })  # fmt: skip


async def test_a_controller_reconciles_each_namespace_as_a_cluster(apiserver: Any, admin: Cluster) -> None:
    """The builder's controller over namespace clusters: requests name the namespace cluster and
    see objects in default; indexes, events and writes land in the real namespace; a namespace
    where the controller may not write fails alone, the others go on."""
    for ns in ("team-a", "team-b", "locked"):
        await make_namespace(admin, ns)
    await _grant(admin, "ns-controller")
    host = Cluster.from_kubeconfig(
        apiserver.add_user("ns-controller", token="ns-controller-token"), name="host"
    )
    provider = NamespaceProvider(host, exclude=["default", "kube-system", "kube-public", "kube-node-lease"])
    mgr = mcr.Manager(provider=provider, metrics_bind_address="0", health_probe_bind_address="0")
    await mgr.get_field_indexer().index_field(
        "v1/ConfigMap", "data.owner", lambda o: [o.get("data", {}).get("owner", "")]
    )
    seen: dict[tuple[str, str], str] = {}
    failures: list[str] = []

    async def reconcile(req: mcr.Request) -> None:
        cluster = await mgr.get_cluster(req.cluster_name)
        try:
            cm = await cluster.client.get("v1/ConfigMap", req.name, namespace=req.namespace)
        except NotFoundError:
            seen[(req.cluster_name, req.name)] = "deleted"
            return
        seen[(req.cluster_name, req.name)] = cm["metadata"]["namespace"]
        if cm["metadata"].get("labels", {}).get("reply") != "yes":
            return
        mine = await cluster.client.list("v1/ConfigMap", field_selector={"data.owner": "me"})
        reply = configmap(
            f"{req.name}-reply", {"owned": ",".join(sorted(o["metadata"]["name"] for o in mine))}
        )
        try:
            await cluster.client.apply(reply, field_manager="ns-test", force=True)
        except ForbiddenError:
            failures.append(req.cluster_name)
            raise
        cluster.event_recorder("ns-test").event(cm, "Normal", "Replied", "reply written")

    mcr.controller_managed_by(mgr).named("namespaces").for_("v1/ConfigMap").complete(reconcile)
    runner = asyncio.create_task(mgr.start(handle_signals=False))
    try:
        for ns in ("locked", "team-a", "team-b"):
            await admin.api_reader.create(configmap("owned", {"owner": "me"}, namespace=ns))
            ask = configmap("ask", {"owner": "someone"}, namespace=ns)
            ask["metadata"]["labels"] = {"reply": "yes"}
            await admin.api_reader.create(ask)
        await eventually(lambda: failures.count("locked") >= 2, message="locked namespace fails and retries")
        for ns in ("team-a", "team-b"):
            reply = await _eventually_get(admin, "ask-reply", ns)
            assert reply["data"] == {"owned": "owned"}  # the index, scoped to the namespace
        assert seen[("team-a", "ask")] == seen[("team-b", "ask")] == "default"
        assert set(failures) == {"locked"}
        # Events about the real object, in the real namespace.
        await eventually(lambda: _event_about(admin, "team-a", "ask"), message="event recorded in team-a")
        # Deletions reach the right cluster's reconciler.
        await admin.api_reader.delete("v1/ConfigMap", "owned", namespace="team-b")
        await eventually(lambda: seen.get(("team-b", "owned")) == "deleted")
        assert seen[("team-a", "owned")] == "default"
    finally:
        mgr.stop()
        await asyncio.wait_for(runner, 30)
        await host.stop()


async def _eventually_get(admin: Cluster, name: str, namespace: str) -> dict[str, Any]:
    async def get() -> dict[str, Any] | None:
        try:
            return dict(await admin.api_reader.get("v1/ConfigMap", name, namespace=namespace))
        except NotFoundError:
            return None

    return await eventually(get, message=f"{namespace}/{name} written")  # type: ignore[no-any-return]


async def _event_about(admin: Cluster, namespace: str, name: str) -> bool:
    events = await admin.api_reader.list("events.k8s.io/v1/Event", namespace=namespace)
    return any(
        e.get("regarding", {}).get("name") == name and e.get("regarding", {}).get("namespace") == namespace
        for e in events
    )
