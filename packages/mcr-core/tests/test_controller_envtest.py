"""Controllers against real mcr-envtest API servers: convergence, owner events, predicates, engagement."""

from __future__ import annotations

import asyncio
import copy
import functools
import operator
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcr import metrics
from mcr.builder import controller_managed_by
from mcr.cache import CacheOptions
from mcr.client import Client
from mcr.cluster import Cluster
from mcr.controller import Controller
from mcr.errors import NoKindMatchError, NotFoundError
from mcr.manager import Manager
from mcr.predicate import GenerationChanged
from mcr.reconcile import Request, Result, current_cluster
from mcr.rest.config import RestConfig
from mcr.source import Kind
from mcr.testing import eventually, running

WIDGET = "example.com/v1/Widget"
CM = "v1/ConfigMap"

_counter = 0


def unique(prefix: str) -> str:
    global _counter
    _counter += 1
    return f"{prefix}-{_counter}"


def _sample(metric: str, **labels: str) -> float:
    """A sample of mcr's registry, 0.0 when the series does not exist (yet)."""
    return metrics.REGISTRY.get_sample_value(metric, labels) or 0.0


def widget_crd() -> dict[str, Any]:
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": open_object, "status": open_object},
                        }
                    },
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def widget(name: str, message: str, ns: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"message": message},
    }


@pytest.fixture
async def admin() -> AsyncIterator[Any]:
    """``admin(server) -> Client`` with admin rights on ``server``; transports closed at teardown."""
    transports: list[Any] = []

    def make(server: Any) -> Client:
        t = RestConfig.from_kubeconfig(server.kubeconfig).transport(cluster_name="test-admin")
        transports.append(t)
        return Client(t)

    yield make
    for t in transports:
        await t.close()


async def install_crd(client: Client) -> None:
    await client.create(widget_crd())

    async def served() -> bool:
        try:
            await client.list(WIDGET, namespace="default")
        except (NotFoundError, NoKindMatchError) as exc:
            raise AssertionError(str(exc)) from exc
        return True

    await eventually(served, timeout=10, message="Widget CRD served")


async def get_or_none(client: Client, kind: str, name: str, ns: str = "default") -> Any:
    try:
        return await client.get(kind, name, namespace=ns)
    except NotFoundError:
        return None


def owner_reconciler(mgr: Manager, seen: list[Request]) -> Any:
    """Keeps ConfigMap ``<widget>-cm`` with ``data.message = spec.message``, owned by the widget."""

    async def reconcile(req: Request) -> Result | None:
        seen.append(req)
        cluster = await mgr.get_cluster(req.cluster_name)
        w = await get_or_none(cluster.client, WIDGET, req.name, req.namespace)
        if w is None:
            return None
        data = {"message": w["spec"]["message"]}
        cm = await get_or_none(cluster.client, CM, f"{req.name}-cm", req.namespace)
        if cm is None:
            await cluster.client.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": f"{req.name}-cm",
                        "namespace": req.namespace,
                        "ownerReferences": [
                            {
                                "apiVersion": "example.com/v1",
                                "kind": "Widget",
                                "name": req.name,
                                "uid": w["metadata"]["uid"],
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "data": data,
                }
            )
        elif cm.get("data") != data:
            cm = copy.deepcopy(cm)
            cm["data"] = data
            await cluster.client.update(cm)
        return None

    return reconcile


async def test_owner_controller_converges_on_create_update_delete(apiserver: Any, admin: Any) -> None:
    admin = admin(apiserver)
    await install_crd(admin)
    mgr = Manager(RestConfig.from_kubeconfig(apiserver.kubeconfig), metrics_bind_address="0")
    seen: list[Request] = []
    ctrl = controller_managed_by(mgr).for_(WIDGET).owns(CM).complete(owner_reconciler(mgr, seen))
    assert ctrl.name == "widget"
    async with running(mgr):
        await admin.create(widget("w1", "hello"))

        async def cm_message() -> str | None:
            cm = await get_or_none(admin, CM, "w1-cm")
            return None if cm is None else cm["data"]["message"]

        await eventually(lambda: _eq(cm_message(), "hello"), timeout=15)
        assert Request("default", "w1", "") in seen

        # update of the owner
        w = await admin.get(WIDGET, "w1", namespace="default")
        w["spec"]["message"] = "updated"
        await admin.update(w)
        await eventually(lambda: _eq(cm_message(), "updated"), timeout=15)

        # a change to the owned object enqueues its owner, which repairs it
        cm = await admin.get(CM, "w1-cm", namespace="default")
        cm["data"]["message"] = "tampered"
        before = len(seen)
        await admin.update(cm)
        await eventually(lambda: _eq(cm_message(), "updated"), timeout=15)
        assert len(seen) > before
        # deleting the owned object recreates it
        await admin.delete(CM, "w1-cm", namespace="default")
        await eventually(lambda: _eq(cm_message(), "updated"), timeout=15)

        # deleting the owner: the reconcile sees it gone, the server's GC removes the ConfigMap (a
        # real cluster's garbage collector learns of a new CRD from discovery every 30 s)
        await admin.delete(WIDGET, "w1", namespace="default")
        await eventually(lambda: _eq(cm_message(), None), timeout=90)
        assert all(r.cluster_name == "" for r in seen)


async def _eq(value: Any, expected: Any) -> bool:
    got = await value
    assert got == expected, f"{got!r} != {expected!r}"
    return True


async def test_generation_changed_predicate_filters_metadata_and_status_updates(
    apiserver: Any, admin: Any
) -> None:
    admin = admin(apiserver)
    await install_crd(admin)
    mgr = Manager(RestConfig.from_kubeconfig(apiserver.kubeconfig), metrics_bind_address="0")
    seen: list[Request] = []

    async def reconcile(req: Request) -> None:
        seen.append(req)

    controller_managed_by(mgr).named(unique("gen")).for_(WIDGET, predicates=[GenerationChanged()]).complete(
        reconcile
    )
    async with running(mgr):
        await admin.create(widget("w", "a"))
        await eventually(lambda: len(seen) == 1, timeout=15)  # create passes
        w = await admin.get(WIDGET, "w", namespace="default")
        w["metadata"]["labels"] = {"x": "y"}  # metadata only: generation unchanged
        w = await admin.update(w)
        w["status"] = {"phase": "done"}  # status only
        w = await admin.status.update(w)
        w["spec"]["message"] = "b"  # spec: generation + 1
        await admin.update(w)
        await eventually(lambda: len(seen) == 2, timeout=15)
        await asyncio.sleep(0.3)  # no further reconcile may show up for the filtered updates
        assert len(seen) == 2


async def test_key_never_reconciled_concurrently_with_four_workers(apiserver: Any, admin: Any) -> None:
    admin = admin(apiserver)
    mgr = Manager(RestConfig.from_kubeconfig(apiserver.kubeconfig), metrics_bind_address="0")
    active: set[Request] = set()
    overlaps: list[Request] = []
    count = 0

    async def reconcile(req: Request) -> None:
        nonlocal count
        if req in active:
            overlaps.append(req)
        active.add(req)
        await asyncio.sleep(0.01)
        active.discard(req)
        count += 1

    (
        controller_managed_by(mgr)
        .named(unique("overlap"))
        .for_(CM)
        .with_options(max_concurrent_reconciles=4)
        .complete(reconcile)
    )
    async with running(mgr):
        names = [f"cm-{i}" for i in range(4)]
        for n in names:
            await admin.create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "default"}}
            )
        for round_ in range(10):
            for n in names:
                await admin.patch(CM, n, {"data": {"round": str(round_)}}, namespace="default")
        await eventually(lambda: count >= 8 and not active, timeout=15)
    assert overlaps == []


async def test_disengage_removes_handlers_purges_queue_and_cancels_reconciles(fleet: Any, admin: Any) -> None:
    servers = fleet(2).servers
    clusters = [Cluster.from_kubeconfig(s.kubeconfig, name=f"c{i}") for i, s in enumerate(servers)]
    for c in clusters:
        await c.start()
    started = asyncio.Event()
    cancelled: list[Request] = []
    seen: list[Request] = []

    async def reconcile(req: Request) -> None:
        seen.append(req)
        assert current_cluster() == req.cluster_name
        if req.name == "slow":
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(req)
                raise

    ctrl = Controller(unique("disengage"), reconcile, max_concurrent_reconciles=2)
    ctrl.watch(Kind(CM))
    runner = asyncio.create_task(ctrl.start())
    engagements = {f"c{i}": asyncio.create_task(ctrl.engage(f"c{i}", c)) for i, c in enumerate(clusters)}
    try:
        await eventually(lambda: ctrl.clusters() == {"c0": "synced", "c1": "synced"}, timeout=15)
        c0_informer = await clusters[0].cache.get_informer(CM)
        handlers_before = c0_informer.handler_count
        admin0 = admin(servers[0])
        admin1 = admin(servers[1])
        await admin0.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slow", "namespace": "default"}}
        )
        await asyncio.wait_for(started.wait(), 15)
        # queue more c0 work behind a failing item (backoff) while c1 keeps working
        ctrl.queue.add_rate_limited(Request("default", "backed-off", "c0"))
        ctrl.queue.add_after(Request("default", "later", "c0"), 30)
        engagements["c0"].cancel()
        await asyncio.wait([engagements["c0"]])
        assert engagements["c0"].cancelled()
        await eventually(lambda: cancelled == [Request("default", "slow", "c0")], timeout=5)
        assert c0_informer.handler_count == handlers_before - 1
        assert ctrl.queue.depth_by_cluster().get("c0", 0) == 0
        assert ctrl.queue.waiting() == 0
        assert ctrl.queue.num_requeues(Request("default", "backed-off", "c0")) == 0
        assert "c0" not in ctrl.clusters()
        # a request for the disengaged cluster is dropped, not retried
        ctrl.queue.add(Request("default", "dangling", "c0"))
        await admin1.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "default"}}
        )
        await eventually(lambda: Request("default", "b", "c1") in seen, timeout=15)
        await eventually(lambda: not ctrl.queue.processing() and len(ctrl.queue) == 0, timeout=5)
        assert Request("default", "dangling", "c0") not in seen
        await admin0.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after", "namespace": "default"}}
        )
        await asyncio.sleep(0.3)
        assert Request("default", "after", "c0") not in seen, "no events from a disengaged cluster"
    finally:
        for t in engagements.values():
            t.cancel()
        await asyncio.wait(list(engagements.values()))
        runner.cancel()
        await asyncio.wait([runner])
        for c in clusters:
            await c.stop()


async def test_disengaged_cluster_metrics_reach_prometheus_and_stop_being_batched(
    apiserver: Any, admin: Any
) -> None:
    """Engaging many cluster names in turn does not grow the controller's metric batch."""
    await admin(apiserver).create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "seed", "namespace": "default", "labels": {"test": "retire"}},
        }
    )
    # the seed alone: one reconcile per engagement (a real cluster has ConfigMaps of its own)
    only_ours = CacheOptions(default_label_selector="test=retire")
    cluster = Cluster.from_kubeconfig(apiserver.kubeconfig, name="retire", cache_options=only_ours)
    await cluster.start()
    seen: list[str] = []

    async def reconcile(req: Request) -> None:
        seen.append(req.cluster_name)
        if req.cluster_name == "blocked":
            await asyncio.sleep(30)  # cancelled by the disengagement

    name = unique("retire-metrics")
    ctrl = Controller(name, reconcile)
    ctrl.watch(Kind(CM))
    runner = asyncio.create_task(ctrl.start())
    baseline = len(ctrl._batch.members)

    def sample(metric: str, cluster_name: str, **labels: str) -> float:
        return (
            metrics.REGISTRY.get_sample_value(metric, {"controller": name, "cluster": cluster_name, **labels})
            or 0.0
        )

    try:
        for i in range(20):
            cluster_name = f"c{i}"
            engagement = asyncio.create_task(ctrl.engage(cluster_name, cluster))
            await eventually(functools.partial(operator.contains, seen, cluster_name), timeout=15)
            engagement.cancel()
            await asyncio.wait([engagement])
            assert f"c{i}" not in ctrl._cluster_metrics
            assert len(ctrl._batch.members) == baseline
        for i in range(20):
            assert sample("controller_runtime_reconcile_total", f"c{i}", result="success") == 1.0
            assert sample("controller_runtime_reconcile_time_seconds_count", f"c{i}") == 1.0

        # A reconcile that the disengagement cancels: its cluster's metrics go once it has ended.
        engagement = asyncio.create_task(ctrl.engage("blocked", cluster))
        await eventually(lambda: "blocked" in seen, timeout=15)
        assert "blocked" in ctrl._cluster_metrics
        engagement.cancel()
        await asyncio.wait([engagement])
        await eventually(lambda: "blocked" not in ctrl._cluster_metrics, timeout=5)
        assert len(ctrl._batch.members) == baseline
        assert sample("controller_runtime_reconcile_time_seconds_count", "blocked") == 1.0
    finally:
        runner.cancel()
        await asyncio.wait([runner])
        await cluster.stop()


async def test_missing_kind_in_one_cluster_is_retried_without_blocking_others(fleet: Any, admin: Any) -> None:
    servers = fleet(2).servers
    clusters = [Cluster.from_kubeconfig(s.kubeconfig, name=f"k{i}") for i, s in enumerate(servers)]
    for c in clusters:
        await c.start()
    admins = [admin(s) for s in servers]
    await install_crd(admins[0])  # only k0 serves Widgets
    seen: list[Request] = []

    async def reconcile(req: Request) -> None:
        seen.append(req)

    ctrl = Controller(unique("missing"), reconcile, engage_retry=(0.1, 0.5))
    ctrl.watch(Kind(WIDGET))
    ctrl.watch(Kind(CM))
    runner = asyncio.create_task(ctrl.start())
    engagements = [asyncio.create_task(ctrl.engage(f"k{i}", c)) for i, c in enumerate(clusters)]
    try:
        await admins[0].create(widget("w0", "x"))
        await eventually(lambda: Request("default", "w0", "k0") in seen, timeout=15)
        await eventually(lambda: ctrl.clusters() == {"k0": "synced", "k1": "failed"}, timeout=15)
        # the ConfigMap watch of k1 works although its Widget watch does not
        await admins[1].create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
        )
        await eventually(lambda: Request("default", "c", "k1") in seen, timeout=15)
        # the CRD appears in k1: the watch is retried and starts
        await install_crd(admins[1])
        await admins[1].create(widget("w1", "y"))
        await eventually(lambda: Request("default", "w1", "k1") in seen, timeout=20)
        await eventually(lambda: ctrl.clusters() == {"k0": "synced", "k1": "synced"}, timeout=15)
    finally:
        for t in engagements:
            t.cancel()
        await asyncio.wait(engagements)
        runner.cancel()
        await asyncio.wait([runner])
        for c in clusters:
            await c.stop()


async def test_unreachable_cluster_does_not_delay_others(fleet: Any, admin: Any) -> None:
    f = fleet(2)
    good = Cluster.from_kubeconfig(f.servers[0].kubeconfig, name="good")
    bad = Cluster.from_kubeconfig(f.servers[1].kubeconfig, name="bad")
    f.servers[1].stop()
    await good.start()
    await bad.start()
    seen: list[Request] = []

    async def reconcile(req: Request) -> None:
        seen.append(req)

    ctrl = Controller(unique("unreachable"), reconcile, cache_sync_timeout=0.5, engage_retry=(0.1, 0.2))
    ctrl.watch(Kind(CM))
    runner = asyncio.create_task(ctrl.start())
    engagements = [
        asyncio.create_task(ctrl.engage("bad", bad)),  # engaged first
        asyncio.create_task(ctrl.engage("good", good)),
    ]
    try:
        await eventually(lambda: ctrl.clusters().get("good") == "synced", timeout=10)
        assert ctrl.clusters()["bad"] in {"pending", "failed"}
        await admin(f.servers[0]).create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}
        )
        await eventually(lambda: Request("default", "x", "good") in seen, timeout=10)
        await eventually(lambda: ctrl.clusters()["bad"] == "failed", timeout=10)
    finally:
        for t in engagements:
            t.cancel()
        await asyncio.wait(engagements)
        runner.cancel()
        await asyncio.wait([runner])
        await good.stop()
        await bad.stop()


@pytest.mark.parametrize("with_provider", [False, True])
async def test_builder_engages_local_or_provider_clusters_by_default(
    fleet: Any, admin: Any, with_provider: bool
) -> None:
    from mcr.providers.clusters import ClustersProvider

    f = fleet(2)
    local, remote = f.servers
    provider = ClustersProvider() if with_provider else None
    mgr = Manager(RestConfig.from_kubeconfig(local.kubeconfig), provider=provider, metrics_bind_address="0")
    seen: list[Request] = []

    async def reconcile(req: Request) -> None:
        seen.append(req)

    controller_managed_by(mgr).named(unique("topology")).for_(CM).complete(reconcile)
    async with running(mgr):
        if provider is not None:
            await provider.add("remote", Cluster.from_kubeconfig(remote.kubeconfig, name="remote"))
        await admin(local).create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "in-local", "namespace": "default"},
            }
        )
        await admin(remote).create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "in-remote", "namespace": "default"},
            }
        )
        expected = (
            Request("default", "in-remote", "remote") if with_provider else Request("default", "in-local", "")
        )
        await eventually(lambda: expected in seen, timeout=15)
        await asyncio.sleep(0.3)
        local_seen = any(r.name == "in-local" for r in seen)
        assert local_seen is (not with_provider)


async def test_engaging_a_name_again_replaces_the_old_cluster(fleet: Any, admin: Any) -> None:
    f = fleet(2)
    first = Cluster.from_kubeconfig(f.servers[0].kubeconfig, name="site")
    second = Cluster.from_kubeconfig(f.servers[1].kubeconfig, name="site")
    await first.start()
    await second.start()
    seen: list[tuple[Request, str]] = []

    async def reconcile(req: Request) -> None:
        seen.append((req, req.name))

    ctrl = Controller(unique("replace"), reconcile)
    ctrl.watch(Kind(CM))
    runner = asyncio.create_task(ctrl.start())
    old = asyncio.create_task(ctrl.engage("site", first))
    new: asyncio.Task[None] | None = None
    try:
        await eventually(lambda: ctrl.clusters() == {"site": "synced"}, timeout=10)
        first_informer = await first.cache.get_informer(CM)
        new = asyncio.create_task(ctrl.engage("site", second))
        await asyncio.wait_for(old, 10)  # the replaced engagement returns (no purge, no error)
        assert first_informer.handler_count == 0
        await eventually(lambda: ctrl.clusters() == {"site": "synced"}, timeout=10)
        await admin(f.servers[0]).create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "on-first", "namespace": "default"},
            }
        )
        await admin(f.servers[1]).create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "on-second", "namespace": "default"},
            }
        )
        await eventually(lambda: any(n == "on-second" for _, n in seen), timeout=10)
        await asyncio.sleep(0.3)
        assert not any(n == "on-first" for _, n in seen), "the replaced cluster's events no longer arrive"
    finally:
        tasks = [t for t in (old, new, runner) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.wait(tasks)
        await first.stop()
        await second.stop()


async def test_controller_filter_skips_clusters(fleet: Any, admin: Any) -> None:
    f = fleet(2)
    clusters = {
        n: Cluster.from_kubeconfig(s.kubeconfig, name=n)
        for n, s in zip(["prod-1", "dev-1"], f.servers, strict=True)
    }
    for c in clusters.values():
        await c.start()
    seen: list[Request] = []

    async def reconcile(req: Request) -> None:
        seen.append(req)

    ctrl = Controller(unique("filter"), reconcile, cluster_filter=lambda name, c: name.startswith("prod-"))
    ctrl.watch(Kind(CM))
    runner = asyncio.create_task(ctrl.start())
    engagements = [asyncio.create_task(ctrl.engage(n, c)) for n, c in clusters.items()]
    try:
        await eventually(lambda: ctrl.clusters() == {"prod-1": "synced", "dev-1": "filtered"}, timeout=10)
        for s in f.servers:
            await admin(s).create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}
            )
        await eventually(lambda: Request("default", "x", "prod-1") in seen, timeout=10)
        await asyncio.sleep(0.3)
        assert Request("default", "x", "dev-1") not in seen
    finally:
        for t in (*engagements, runner):
            t.cancel()
        await asyncio.wait([*engagements, runner])
        for c in clusters.values():
            await c.stop()


async def test_controller_added_to_a_running_manager_is_engaged_with_live_clusters(
    apiserver: Any, admin: Any
) -> None:
    mgr = Manager(RestConfig.from_kubeconfig(apiserver.kubeconfig), metrics_bind_address="0")
    seen: list[Request] = []

    async def reconcile(req: Request) -> None:
        seen.append(req)

    client = admin(apiserver)
    await client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "early", "namespace": "default"}}
    )
    async with running(mgr):
        await eventually(lambda: [c.name for c in mgr.clusters()] == [""], timeout=10)
        controller_managed_by(mgr).named(unique("late")).for_(CM).complete(reconcile)
        await eventually(lambda: Request("default", "early", "") in seen, timeout=15)
        await client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": "default"}}
        )
        await eventually(lambda: Request("default", "late", "") in seen, timeout=15)


@pytest.mark.envtest_only("makes one server answer every request 3 s late with faults.latency")
async def test_a_hanging_server_is_bounded_by_the_sync_timeout(fleet: Any, admin: Any) -> None:
    f = fleet(2)
    fast = Cluster.from_kubeconfig(f.servers[0].kubeconfig, name="fast")
    slow = Cluster.from_kubeconfig(f.servers[1].kubeconfig, name="slow")
    await fast.start()
    await slow.start()
    f.servers[1].faults.latency(3.0)  # every request takes six times the sync timeout
    seen: list[Request] = []

    async def reconcile(req: Request) -> None:
        seen.append(req)

    ctrl = Controller(unique("hanging"), reconcile, cache_sync_timeout=0.5, engage_retry=(0.2, 0.5))
    ctrl.watch(Kind(CM))
    runner = asyncio.create_task(ctrl.start())
    engagements = [
        asyncio.create_task(ctrl.engage("slow", slow)),
        asyncio.create_task(ctrl.engage("fast", fast)),
    ]
    try:
        await eventually(lambda: ctrl.clusters().get("fast") == "synced", timeout=10)
        await eventually(lambda: ctrl.clusters().get("slow") == "failed", timeout=5)
        await admin(f.servers[0]).create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}
        )
        await eventually(lambda: Request("default", "x", "fast") in seen, timeout=10)
        f.servers[1].faults.latency(0.0)  # the server recovers: the watch is retried and syncs
        await eventually(lambda: ctrl.clusters().get("slow") == "synced", timeout=30)
    finally:
        for t in (*engagements, runner):
            t.cancel()
        await asyncio.wait([*engagements, runner])
        await fast.stop()
        await slow.stop()


async def test_queue_and_reconcile_metrics_count_every_request_of_a_watch_burst(
    apiserver: Any, admin: Any
) -> None:
    # A list and a burst of watch updates reach the queue in batches (one add_many per list or
    # read), whose runs record their time in the queue once with a count, and the worker counts
    # successes per run: every reconcile must still be counted once in each series.
    client = admin(apiserver)
    names = [f"burst-{i}" for i in range(40)]
    for n in names:
        await client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "default"}}
        )
    seen: list[Request] = []

    async def reconcile(req: Request) -> None:
        seen.append(req)

    name = unique("burst-metrics")
    cluster = Cluster.from_kubeconfig(apiserver.kubeconfig, name="burst")
    await cluster.start()
    ctrl = Controller(name, reconcile)
    ctrl.watch(Kind(CM))
    runner = asyncio.create_task(ctrl.start())
    engagement = asyncio.create_task(ctrl.engage("burst", cluster))

    def reconciled(n: str) -> int:
        return sum(1 for r in seen if r.name == n)

    try:
        await eventually(lambda: all(reconciled(n) == 1 for n in names), timeout=15)
        for n in names:
            cm = await client.get(CM, n, namespace="default")
            cm["data"] = {"round": "1"}
            await client.update(cm)
        await eventually(lambda: all(reconciled(n) == 2 for n in names), timeout=15)
        await asyncio.sleep(0.1)  # nothing else is left to reconcile
        ctrl.flush_metrics()
        queue_labels = {"name": name, "controller": name}
        total = len(seen)
        assert (
            metrics.REGISTRY.get_sample_value("workqueue_queue_duration_seconds_count", queue_labels) == total
        )
        assert (
            metrics.REGISTRY.get_sample_value("workqueue_work_duration_seconds_count", queue_labels) == total
        )
        assert (
            metrics.REGISTRY.get_sample_value(
                "controller_runtime_reconcile_total",
                {"controller": name, "result": "success", "cluster": "burst"},
            )
            == total
        )
    finally:
        engagement.cancel()
        await asyncio.wait([engagement])
        runner.cancel()
        await asyncio.wait([runner])
        await cluster.stop()
        for n in names:
            await client.delete(CM, n, namespace="default")


async def test_reconcile_times_reach_both_histograms_in_their_buckets_and_sums(
    fleet: Any, admin: Any
) -> None:
    # The worker counts each reconcile's time into the slot of its bucket (the reconcile time per
    # cluster, mirrored into the queue's work duration) and adds each run's elapsed time as the
    # sum: slow and fast reconciles of two clusters, whose runs mix them, must each land in their
    # bucket of both histograms, and the sums must hold the slow ones' time.
    servers = fleet(2).servers
    clusters = [Cluster.from_kubeconfig(s.kubeconfig, name=f"t{i}") for i, s in enumerate(servers)]
    prefix = unique("timed")
    slow = {"t0": 2, "t1": 1}
    for i, server in enumerate(servers):
        client = admin(server)
        for n in [f"{prefix}-fast-{j}" for j in range(6)] + [
            f"{prefix}-slow-{j}" for j in range(slow[f"t{i}"])
        ]:
            await client.create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "default"}}
            )
    for c in clusters:
        await c.start()
    seen: list[Request] = []
    pause = 0.15

    async def reconcile(req: Request) -> None:
        seen.append(req)
        if "-slow-" in req.name:
            await asyncio.sleep(pause)

    name = unique("timed-metrics")
    ctrl = Controller(name, reconcile)
    ctrl.watch(Kind(CM))
    runner = asyncio.create_task(ctrl.start())
    engagements = [asyncio.create_task(ctrl.engage(f"t{i}", c)) for i, c in enumerate(clusters)]

    try:
        await eventually(lambda: sum(1 for r in seen if r.name.startswith(prefix)) == 15, timeout=15)
        await asyncio.sleep(0.2)  # nothing else is left to reconcile
        ctrl.flush_metrics()
        sums = 0.0
        for cluster_name, slow_count in slow.items():
            mine = [r for r in seen if r.cluster_name == cluster_name]
            labels = {"controller": name, "cluster": cluster_name}
            assert _sample("controller_runtime_reconcile_time_seconds_count", **labels) == len(mine)
            # A reconcile that does not sleep takes far less than 0.1 s; one that sleeps, more.
            fast = _sample("controller_runtime_reconcile_time_seconds_bucket", **labels, le="0.1")
            assert fast == len(mine) - slow_count
            total = _sample("controller_runtime_reconcile_time_seconds_sum", **labels)
            assert pause * slow_count <= total < pause * slow_count + 2.0
            sums += total
        queue = {"name": name, "controller": name}
        assert _sample("workqueue_work_duration_seconds_count", **queue) == len(seen)
        assert _sample("workqueue_work_duration_seconds_bucket", **queue, le="0.1") == len(seen) - 3
        assert _sample("workqueue_work_duration_seconds_sum", **queue) == pytest.approx(sums)
    finally:
        for t in (*engagements, runner):
            t.cancel()
        await asyncio.wait([*engagements, runner])
        for c in clusters:
            await c.stop()


async def test_a_run_cut_by_disengagement_counts_its_reconciles_before_the_metrics_go(
    apiserver: Any, admin: Any
) -> None:
    # The worker counts a run's successes and reconcile times per run; when a disengagement
    # cancels one of its reconciles, the cluster's metrics are handed to Prometheus and dropped,
    # and what the run counted before that reconcile (and the cancelled reconcile's time) must
    # be in them.
    client = admin(apiserver)
    fast = [f"a-{i}" for i in range(10)]
    for n in [*fast, "z-block"]:
        meta = {"name": n, "namespace": "default", "labels": {"test": "cut"}}
        await client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    # these alone, z-block last (a real cluster has ConfigMaps of its own)
    only_ours = CacheOptions(default_label_selector="test=cut")
    cluster = Cluster.from_kubeconfig(apiserver.kubeconfig, name="cut", cache_options=only_ours)
    await cluster.start()
    blocked = asyncio.Event()
    seen: list[str] = []

    async def reconcile(req: Request) -> None:
        seen.append(req.name)
        if req.name == "z-block":
            blocked.set()
            await asyncio.sleep(30)  # cancelled by the disengagement

    name = unique("cut-run")
    ctrl = Controller(name, reconcile)
    ctrl.watch(Kind(CM))
    runner = asyncio.create_task(ctrl.start())
    engagement = asyncio.create_task(ctrl.engage("cut", cluster))

    sample = functools.partial(_sample, controller=name, cluster="cut")

    try:
        await asyncio.wait_for(blocked.wait(), 15)
        await asyncio.sleep(0.2)
        engagement.cancel()
        await asyncio.wait([engagement])
        await eventually(lambda: "cut" not in ctrl._cluster_metrics, timeout=5)
        assert sorted(seen) == sorted([*fast, "z-block"])
        assert sample("controller_runtime_reconcile_total", result="success") == len(fast)
        assert sample("controller_runtime_reconcile_time_seconds_count") == len(fast) + 1
        assert sample("controller_runtime_reconcile_time_seconds_bucket", le="0.1") == len(fast)
        assert sample("controller_runtime_reconcile_time_seconds_sum") >= 0.2
    finally:
        runner.cancel()
        await asyncio.wait([runner])
        await cluster.stop()
