"""An mcr controller keeps converging while the API server misbehaves: watch streams cut, failed
with in-stream ERRORs or dropped; 409 conflict storms and concurrent writers; a CRD deleted and
re-created while watched; a namespace stuck terminating; long quiet periods kept alive by
bookmarks. Faults are injected by mcr-envtest (``srv.faults``); nothing is mocked."""

from __future__ import annotations

import asyncio
import collections
import copy
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mcr.builder import controller_managed_by
from mcr.cache import BackoffPolicy, CacheOptions
from mcr.client import Client
from mcr.errors import NotFoundError, is_conflict, is_forbidden
from mcr.manager import Manager
from mcr.reconcile import Request
from mcr.rest.config import RestConfig
from mcr.testing import eventually, running
from mcr_envtest import ServerThread

from .test_controller_envtest import install_crd, widget

CM = "v1/ConfigMap"
WIDGET = "example.com/v1/Widget"
FAST = BackoffPolicy(initial=0.02, cap=0.2, jitter=0.1)
SUFFIX = "-mirror"


def cm(name: str, data: dict[str, str], ns: str = "default", **labels: str) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data}


async def get_or_none(client: Client, kind: str, name: str, ns: str = "default") -> Any:
    try:
        return await client.get(kind, name, namespace=ns)
    except NotFoundError:
        return None


class Mirror:
    """Keeps ConfigMap ``<name>-mirror`` equal (data) to every ConfigMap labelled ``role=src``;
    a change to a mirror reconciles its source. Counts reconciles and the errors it saw."""

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr
        self.calls: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()
        self.last: dict[str, str] = {}

    async def __call__(self, req: Request) -> None:
        name = req.name.removesuffix(SUFFIX)
        key = f"{req.namespace}/{name}"
        self.calls[key] += 1
        client = (await self.mgr.get_cluster(req.cluster_name)).client
        try:
            src = await get_or_none(client, CM, name, req.namespace)
            if src is None or (src["metadata"].get("labels") or {}).get("role") != "src":
                self.last[key] = "gone"
                return
            data = dict(src.get("data") or {})
            mirror = await get_or_none(client, CM, name + SUFFIX, req.namespace)
            if mirror is None:
                await client.create(cm(name + SUFFIX, data, req.namespace, role="mirror"))
            elif mirror.get("data") != data:
                mirror = copy.deepcopy(mirror)
                mirror["data"] = data
                await client.update(mirror)  # carries the cached resourceVersion: may conflict
            self.last[key] = "ok"
        except Exception as exc:
            kind = (
                "conflict" if is_conflict(exc) else "forbidden" if is_forbidden(exc) else type(exc).__name__
            )
            self.errors[kind] += 1
            self.last[key] = kind
            raise


@pytest.fixture
async def admin(apiserver: ServerThread) -> AsyncIterator[Client]:
    transport = RestConfig.from_kubeconfig(apiserver.kubeconfig).transport(cluster_name="test-admin")
    yield Client(transport)
    await transport.close()


def manager(srv: Any) -> Manager:
    return Manager(
        RestConfig.from_kubeconfig(srv.kubeconfig),
        metrics_bind_address="0",
        cluster_options={"cache_options": CacheOptions(backoff=FAST, stall_timeout=5.0)},
    )


def mirror_controller(mgr: Manager) -> Mirror:
    mirror = Mirror(mgr)
    controller_managed_by(mgr).named("mirror").for_(CM).complete(mirror)
    return mirror


async def mirrored(admin: Client, names: list[str], ns: str = "default") -> bool:
    """Every source in ``names`` has a mirror with its data (read from the server)."""
    for name in names:
        src = await admin.get(CM, name, namespace=ns)
        mirror = await get_or_none(admin, CM, name + SUFFIX, ns)
        assert mirror is not None, f"{ns}/{name}: no mirror yet"
        assert mirror.get("data") == src.get("data"), (
            f"{ns}/{name}: {mirror.get('data')} != {src.get('data')}"
        )
    return True


async def churn(admin: Client, prefix: str, n: int, value: str) -> list[str]:
    """Create (or update) ``n`` sources ``<prefix><i>`` with ``data.v = value``."""
    names = [f"{prefix}{i}" for i in range(n)]
    for name in names:
        current = await get_or_none(admin, CM, name)
        if current is None:
            await admin.create(cm(name, {"v": value}, role="src"))
        else:
            await admin.patch(CM, name, {"data": {"v": value}}, namespace="default")
    return names


@pytest.mark.envtest_only("injects watch faults (cut, in-stream ERROR and 410, reset) through srv.faults")
@pytest.mark.parametrize(
    ("label", "arm"),
    [
        ("cut", lambda f: f.cut_watches_after(2)),
        ("error", lambda f: f.error_watches(after=1, status=500, count=None)),
        ("expired", lambda f: f.error_watches(after=1, status=410, count=None)),
        ("reset", lambda f: f.reset_watches_after(1, count=None)),
    ],
)
async def test_converges_under_watch_faults(
    apiserver: ServerThread, admin: Client, label: str, arm: Callable[[Any], None]
) -> None:
    mgr = manager(apiserver)
    mirror = mirror_controller(mgr)
    async with running(mgr):
        first = await churn(admin, "a", 3, "1")
        await eventually(lambda: mirrored(admin, first), timeout=15)
        arm(apiserver.faults)
        apiserver.faults.close_watches()  # faults apply to new watches: make the informer re-watch
        names = await churn(admin, "a", 6, "2")  # updates three, creates three
        await eventually(lambda: mirrored(admin, names), timeout=15, message=f"converged under {label}")
        names = await churn(admin, "a", 6, "3")
        await eventually(lambda: mirrored(admin, names), timeout=15, message=f"converged under {label}")
        apiserver.faults.clear()
        (reflector,) = (await (await mgr.get_cluster("")).cache.get_informer(CM)).reflectors
        assert reflector.watches >= 3, f"the {label} fault never hit a watch"
    # writes from a lagging cache may conflict (and are retried); nothing else fails
    assert set(mirror.errors) <= {"conflict"}


@pytest.mark.envtest_only("writes malformed lines into watch streams through faults.malform_watches")
async def test_converges_under_malformed_watch_lines(apiserver: ServerThread, admin: Client) -> None:
    mgr = manager(apiserver)
    mirror_controller(mgr)
    async with running(mgr):
        first = await churn(admin, "m", 2, "1")
        await eventually(lambda: mirrored(admin, first), timeout=15)
        apiserver.faults.malform_watches(after=0, count=2)
        apiserver.faults.close_watches()
        names = await churn(admin, "m", 4, "2")
        await eventually(lambda: mirrored(admin, names), timeout=5)


@pytest.mark.envtest_only("answers the controller's writes with a storm of injected 409s (faults.fail_next)")
async def test_converges_under_conflict_storms_and_concurrent_writers(
    apiserver: ServerThread, admin: Client
) -> None:
    mgr = manager(apiserver)
    mirror = mirror_controller(mgr)
    async with running(mgr):
        names = await churn(admin, "c", 4, "1")
        await eventually(lambda: mirrored(admin, names), timeout=15)
        # a storm of 409s on every write, then a rival writer fighting over the mirrors
        apiserver.faults.fail_next(8, status=409, methods=("POST", "PUT", "PATCH"), path_contains="-mirror")
        await churn(admin, "c", 6, "2")

        async def rival() -> None:
            for round_ in range(15):
                for name in names:
                    m = await get_or_none(admin, CM, name + SUFFIX)
                    if m is not None:
                        m["data"] = {"v": f"rival-{round_}"}
                        try:
                            await admin.update(m)
                        except Exception as exc:
                            if not is_conflict(exc):
                                raise
                await asyncio.sleep(0.01)

        await rival()
        names = [f"c{i}" for i in range(6)]
        await eventually(lambda: mirrored(admin, names), timeout=20, message="converged after the storm")
    assert mirror.errors["conflict"] >= 1
    assert set(mirror.errors) <= {"conflict"}


async def test_crd_deleted_and_recreated_while_watched(apiserver: ServerThread, admin: Client) -> None:
    await install_crd(admin)
    mgr = manager(apiserver)
    seen: dict[str, str] = {}

    async def reconcile(req: Request) -> None:
        client = (await mgr.get_cluster(req.cluster_name)).client
        w = await get_or_none(client, WIDGET, req.name, req.namespace)
        if w is None:
            seen[req.name] = "deleted"
            return
        seen[req.name] = w["spec"]["message"]
        if await get_or_none(client, CM, f"{req.name}-cm", req.namespace) is None:
            await client.create(cm(f"{req.name}-cm", {"message": w["spec"]["message"]}))

    controller_managed_by(mgr).for_(WIDGET).complete(reconcile)

    async with running(mgr):
        await admin.create(widget("w1", "one"))
        await eventually(lambda: seen.get("w1") == "one", timeout=15)
        await admin.delete("apiextensions.k8s.io/v1/CustomResourceDefinition", "widgets.example.com")
        # the CRD's removal deletes its objects: the controller sees w1 go
        await eventually(lambda: seen.get("w1") == "deleted", timeout=15)

        async def crd_gone() -> bool:
            return (
                await get_or_none(
                    admin, "apiextensions.k8s.io/v1/CustomResourceDefinition", "widgets.example.com", ""
                )
                is None
            )

        await eventually(crd_gone, timeout=15)
        await install_crd(admin)
        await admin.create(widget("w2", "two"))
        await eventually(
            lambda: seen.get("w2") == "two", timeout=20, message="watching again after re-creation"
        )

        async def w2_cm() -> bool:
            # the reconciler notes the widget first, then creates its ConfigMap
            got = await get_or_none(admin, CM, "w2-cm")
            assert got is not None, "no w2-cm yet"
            assert got["data"] == {"message": "two"}
            return True

        await eventually(w2_cm, timeout=15)


async def test_namespace_terminating(apiserver: ServerThread, admin: Client) -> None:
    await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}})
    # a source that holds the namespace in Terminating through its finalizer
    held = cm("held", {"v": "1"}, "doomed", role="src")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await admin.create(held)
    await admin.delete("v1/Namespace", "doomed")
    mgr = manager(apiserver)
    mirror = mirror_controller(mgr)
    async with running(mgr):
        # writes in the terminating namespace fail (403 NamespaceTerminating) ...
        await eventually(lambda: mirror.last.get("doomed/held") == "forbidden", timeout=15)
        # ... while the controller goes on elsewhere
        names = await churn(admin, "n", 2, "1")
        await eventually(lambda: mirrored(admin, names), timeout=15)
        # retries back off: no hot loop on the failing item
        calls = mirror.calls["doomed/held"]
        await eventually(lambda: mirror.errors["forbidden"] >= 3, timeout=15)
        assert mirror.calls["doomed/held"] < calls + 20
        # the namespace finishes once the finalizer goes; the controller then settles
        await admin.patch(CM, "held", {"metadata": {"finalizers": None}}, namespace="doomed")

        async def ns_gone() -> bool:
            return await get_or_none(admin, "v1/Namespace", "doomed", "") is None

        await eventually(ns_gone, timeout=15)
        await eventually(lambda: mirror.last.get("doomed/held") == "gone", timeout=15)
    # A retry that read the source from the cache just before the namespace went can meet its
    # absence (404, namespace not found), as against a real API server; nothing else may fail.
    assert set(mirror.errors) - {"NotFoundError"} == {"forbidden"}


@pytest.mark.envtest_only(
    "needs a 20-event watch history, bookmarks every 0.2 s and 1 s server-side watches (history_size,"
    " bookmark_interval, faults.watch_timeout)"
)
async def test_quiet_period_kept_alive_by_bookmarks() -> None:
    # a small history and short server-side watches: a watch that learned nothing for a while
    # would come back with a resourceVersion older than the history (410, relist); bookmarks
    # keep it current
    with ServerThread(history_size=20, bookmark_interval=0.2) as srv:
        srv.faults.watch_timeout(1.0)
        transport = RestConfig.from_kubeconfig(srv.kubeconfig).transport(cluster_name="admin")
        admin = Client(transport)
        mgr = Manager(
            RestConfig.from_kubeconfig(srv.kubeconfig),
            metrics_bind_address="0",
            cluster_options={"cache_options": CacheOptions(backoff=FAST, stall_timeout=0.8)},
        )
        mirror = mirror_controller(mgr)
        try:
            async with running(mgr):
                names = await churn(admin, "q", 1, "1")
                await eventually(lambda: mirrored(admin, names), timeout=15)
                (reflector,) = (await (await mgr.get_cluster("")).cache.get_informer(CM)).reflectors
                watches = reflector.watches
                # quiet for ConfigMaps while other writes run the history over several times
                for i in range(60):
                    await admin.create(
                        {
                            "apiVersion": "v1",
                            "kind": "Secret",
                            "metadata": {"name": f"s{i}", "namespace": "default"},
                        }
                    )
                await eventually(lambda: reflector.watches >= watches + 3, timeout=15)
                assert reflector.lists == 1  # never a 410 relist
                assert reflector.last_error is None  # never a stall either
                names = await churn(admin, "q", 2, "1")
                await eventually(lambda: mirrored(admin, names), timeout=15)
        finally:
            await transport.close()
    assert mirror.errors == {}
