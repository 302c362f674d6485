"""Clusters that leave the fleet take their metric series with them, after a retention period.

A real manager with a controller over a fleet of mcr-envtest servers, scraped over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from mcr.builder import controller_managed_by
from mcr.cluster import Cluster
from mcr.manager import Manager
from mcr.metrics import registry as metrics
from mcr.providers.clusters import ClustersProvider
from mcr.reconcile import Request
from mcr.rest.config import RestConfig
from mcr.testing import eventually

Scrape = Callable[[], Awaitable[dict[str, set[str]]]]


async def _seed(kubeconfig: dict[str, Any], name: str) -> None:
    """A ConfigMap for the controller to reconcile (and a POST for the REST client metrics)."""
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).encode()
    async with RestConfig.from_kubeconfig(kubeconfig).transport() as t:
        await t.request(
            "POST", "/api/v1/namespaces/default/configmaps", body=body, content_type="application/json"
        )


@contextlib.asynccontextmanager
async def _run(
    retention: float | None,
) -> AsyncIterator[tuple[Manager, ClustersProvider, Scrape]]:
    provider = ClustersProvider()
    mgr = Manager(provider=provider, metrics_bind_address="127.0.0.1:0", metrics_cluster_retention=retention)

    async def reconcile(req: Request) -> None:
        cluster = await mgr.get_cluster(req.cluster_name)
        await cluster.api_reader.get("v1/ConfigMap", req.name, namespace=req.namespace)  # a REST call

    controller_managed_by(mgr).named("departed-series").for_("v1/ConfigMap").complete(reconcile)
    task = asyncio.create_task(mgr.start(handle_signals=False))
    http = aiohttp.ClientSession()

    async def scrape() -> dict[str, set[str]]:
        """The names of the metric families that have series, by the ``cluster`` they name."""
        async with http.get(f"{mgr.metrics_url}/metrics") as resp:
            text = await resp.text()
        by_cluster: dict[str, set[str]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if "cluster" in sample.labels:
                    by_cluster.setdefault(sample.labels["cluster"], set()).add(family.name)
        return by_cluster

    try:
        await eventually(lambda: mgr.metrics_url is not None, timeout=10)
        yield mgr, provider, scrape
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 20)
        await http.close()
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "mcr-departed-series"]


async def _engage(provider: ClustersProvider, scrape: Scrape, name: str, kubeconfig: dict[str, Any]) -> None:
    await provider.add(name, Cluster.from_kubeconfig(kubeconfig, name=name))

    async def reconciled() -> bool:
        families = (await scrape()).get(name, set())
        return {"controller_runtime_reconcile", "rest_client_requests"} <= families

    await eventually(reconciled, timeout=15)


async def test_a_departed_clusters_series_go_after_the_retention(fleet: Any) -> None:
    stays, goes = fleet(2).servers
    await _seed(stays.kubeconfig, "seed")
    await _seed(goes.kubeconfig, "seed")
    async with _run(retention=0.5) as (mgr, provider, scrape):
        await _engage(provider, scrape, "series-stays", stays.kubeconfig)
        await _engage(provider, scrape, "series-goes", goes.kubeconfig)
        series = (await scrape())["series-goes"]
        assert "controller_runtime_reconcile_time_seconds" in series
        await provider.remove("series-goes")
        assert (await scrape()).get("series-goes") == series  # served until the retention is over

        async def gone() -> bool:
            return "series-goes" not in await scrape()

        await eventually(gone, timeout=5)
        left = (await scrape())["series-stays"]
        assert {"controller_runtime_reconcile", "rest_client_requests"} <= left
        assert mgr.clusters()[0].name == "series-stays"


async def test_a_name_engaged_again_within_the_retention_keeps_its_series(fleet: Any) -> None:
    (server,) = fleet(1).servers
    await _seed(server.kubeconfig, "seed")
    async with _run(retention=1.0) as (_, provider, scrape):
        await _engage(provider, scrape, "series-back", server.kubeconfig)
        await provider.remove("series-back")
        await provider.add("series-back", Cluster.from_kubeconfig(server.kubeconfig, name="series-back"))
        await asyncio.sleep(2.0)  # past 1.5 x the retention: the latest a departed name is forgotten
        assert "controller_runtime_reconcile" in (await scrape()).get("series-back", set())


async def test_no_retention_keeps_every_clusters_series(fleet: Any) -> None:
    (server,) = fleet(1).servers
    await _seed(server.kubeconfig, "seed")
    async with _run(retention=None) as (_, provider, scrape):
        assert not [t for t in asyncio.all_tasks() if t.get_name() == "mcr-departed-series"]
        await _engage(provider, scrape, "series-kept", server.kubeconfig)
        await provider.remove("series-kept")
        await asyncio.sleep(0.5)
        assert "controller_runtime_reconcile" in (await scrape()).get("series-kept", set())


async def test_engaging_distinct_names_keeps_no_lock_per_departed_name(fleet: Any) -> None:
    (server,) = fleet(1).servers
    async with _run(retention=60.0) as (mgr, provider, _):
        for i in range(20):
            name = f"series-churn-{i}"
            await provider.add(name, Cluster.from_kubeconfig(server.kubeconfig, name=name))
            await eventually(lambda n=name: n in mgr._engagements._locks, timeout=10)  # engaged
            await provider.remove(name)
        await provider.add("series-churn-last", Cluster.from_kubeconfig(server.kubeconfig, name="x"))
        await eventually(lambda: [i.name for i in mgr.clusters()] == ["series-churn-last"], timeout=10)
        assert set(mgr._engagements._locks) <= {"series-churn-last"}  # none for the 20 that left


def _series_of(cluster_names: tuple[str, ...]) -> None:
    values = {"controller": "x", "result": "success", "code": "200", "method": "GET", "verb": "GET"}
    for metric in metrics.PER_CLUSTER:
        for cluster in cluster_names:
            labels = {n: values.get(n, "h") for n in metric._labelnames if n != "cluster"}
            metric.labels(**labels, cluster=cluster)


def _clusters_with_series() -> set[str]:
    return {
        s.labels["cluster"]
        for metric in metrics.PER_CLUSTER
        for family in metric.collect()
        for s in family.samples
        if "cluster" in s.labels
    }


def test_every_metric_with_a_cluster_label_is_forgotten_with_its_cluster() -> None:
    """PER_CLUSTER lists every metric of mcr's registry that has a ``cluster`` label."""
    per_cluster = {family.name for metric in metrics.PER_CLUSTER for family in metric.describe()}
    for metric in metrics.PER_CLUSTER:
        assert "cluster" in metric._labelnames  # prometheus_client has no public view of these
    for collector in list(metrics.REGISTRY._collector_to_names):
        labelnames = getattr(collector, "_labelnames", ())
        if "cluster" in labelnames:
            assert {f.name for f in collector.describe()} <= per_cluster, collector
    _series_of(("forget-1", "forget-2", "keep-me"))
    metrics.forget_clusters(["forget-1", "forget-2"])
    clusters = _clusters_with_series()
    assert not {"forget-1", "forget-2"} & clusters
    assert "keep-me" in clusters
    metrics.forget_clusters(["keep-me"])
    assert "keep-me" not in _clusters_with_series()


def test_both_ways_of_forgetting_remove_the_same_series() -> None:
    """The one-pass removal (prometheus_client's layout, used here) and the public per-name one."""
    _series_of(("by-pass", "by-name", "neither"))
    for metric in metrics.PER_CLUSTER:
        assert metrics._forget_in_one_pass(metric, frozenset({"by-pass"}))
        metrics._forget_by_name(metric, frozenset({"by-name"}))
    clusters = _clusters_with_series()
    assert not {"by-pass", "by-name"} & clusters
    assert "neither" in clusters
    metrics.forget_clusters(["neither"])
