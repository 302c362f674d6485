"""Health probes and the metrics endpoint, served by a running manager over real HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcr.manager import Manager
from mcr.manager.probes import parse_bind_address
from mcr.metrics import CLUSTER_ENGAGE_TOTAL, REGISTRY
from mcr.providers import ClustersProvider
from mcr.rest.config import load_config
from mcr.testing import eventually
from mcr_envtest import ServerThread


def test_bind_addresses() -> None:
    assert parse_bind_address(":8080") == ("0.0.0.0", 8080)
    assert parse_bind_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_bind_address("[::1]:9090") == ("::1", 9090)
    assert parse_bind_address("0") is None
    assert parse_bind_address("") is None
    with pytest.raises(ValueError, match="not a number"):
        parse_bind_address("localhost:http")


class _Flag:
    def __init__(self) -> None:
        self.ok = True

    async def check(self) -> None:
        if not self.ok:
            raise RuntimeError("backend unreachable")


@pytest.fixture
async def running() -> AsyncIterator[tuple[Manager, _Flag]]:
    flag = _Flag()
    mgr = Manager(metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0")
    mgr.add_healthz_check("ping", lambda: None)
    mgr.add_readyz_check("backend", flag.check)
    mgr.add_readyz_check("sync", lambda: True)
    task = asyncio.create_task(mgr.start(handle_signals=False))
    await eventually(lambda: mgr.health_probe_url and mgr.metrics_url, timeout=5)
    yield mgr, flag
    mgr.stop()
    await asyncio.wait_for(task, 10)


async def test_healthz_and_readyz_reflect_checks(running: tuple[Manager, _Flag]) -> None:
    mgr, flag = running
    async with aiohttp.ClientSession() as http:

        async def get(path: str) -> tuple[int, str]:
            async with http.get(f"{mgr.health_probe_url}{path}") as resp:
                return resp.status, await resp.text()

        assert await get("/healthz") == (200, "ok")
        assert await get("/readyz") == (200, "ok")
        status, body = await get("/readyz?verbose")
        assert status == 200
        assert "[+]backend ok" in body
        assert "[+]sync ok" in body

        flag.ok = False
        status, body = await get("/readyz")
        assert status == 500
        assert "[-]backend failed: RuntimeError: backend unreachable" in body
        assert "sync" not in body
        assert await get("/readyz/sync") == (200, "ok")
        assert (await get("/readyz/backend"))[0] == 500
        assert (await get("/readyz/nope"))[0] == 404
        assert await get("/healthz") == (200, "ok")

        flag.ok = True
        assert await get("/readyz") == (200, "ok")


async def test_duplicate_check_names_are_rejected() -> None:
    mgr = Manager(metrics_bind_address="0")
    mgr.add_healthz_check("a", lambda: None)
    with pytest.raises(ValueError, match="already registered"):
        mgr.add_healthz_check("a", lambda: None)


async def test_metrics_endpoint_serves_the_mcr_registry(running: tuple[Manager, _Flag]) -> None:
    mgr, _ = running
    CLUSTER_ENGAGE_TOTAL.labels("engaged").inc(0)  # make sure the series exists
    before = REGISTRY.get_sample_value("mcr_cluster_engage_total", {"result": "engaged"}) or 0.0
    CLUSTER_ENGAGE_TOTAL.labels("engaged").inc()
    async with aiohttp.ClientSession() as http, http.get(f"{mgr.metrics_url}/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = await resp.text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert "controller_runtime_reconcile" in families  # counters lose "_total" in the family name
    assert "workqueue_depth" in families
    assert "leader_election_master_status" in families
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for s in families["mcr_cluster_engage"].samples
    }
    assert samples[("mcr_cluster_engage_total", (("result", "engaged"),))] == before + 1
    assert not any(name.endswith("_created") for name, _ in samples)
    states = {s.labels["state"] for s in families["mcr_engaged_clusters"].samples}
    assert states == {"pending", "synced", "failed", "error"}


async def test_readyz_waits_for_the_manager_to_start(apiserver: ServerThread) -> None:
    mgr = Manager(load_config(apiserver.kubeconfig), metrics_bind_address="0")
    assert await mgr.readyz.run("caches-synced") == "RuntimeError: the manager has not started"


@pytest.mark.envtest_only("keeps the ConfigMap list failing with faults.fail_next until the test clears it")
async def test_readyz_fails_until_the_caches_have_synced(apiserver: ServerThread) -> None:
    provider = ClustersProvider()
    mgr = Manager(
        load_config(apiserver.kubeconfig),
        provider=provider,
        metrics_bind_address="0",
        health_probe_bind_address="127.0.0.1:0",
    )
    apiserver.faults.fail_next(1_000_000, status=500, methods=("GET",), path_contains="/configmaps")
    task = asyncio.create_task(mgr.start(handle_signals=False))
    try:
        await eventually(lambda: mgr.health_probe_url, timeout=10)
        cluster = mgr.local_cluster
        assert cluster is not None
        await cluster.cache.get_informer("v1/ConfigMap")
        async with aiohttp.ClientSession() as http:

            async def readyz() -> tuple[int, str]:
                async with http.get(f"{mgr.health_probe_url}/readyz?verbose") as resp:
                    return resp.status, await resp.text()

            status, body = await readyz()
            assert status == 500, body
            assert (
                "[-]caches-synced failed: RuntimeError: caches not synced: v1/ConfigMap in cluster ''" in body
            )
            assert "[+]provider-started ok" in body
            apiserver.faults.clear()

            async def ready() -> bool:
                return (await readyz())[0] == 200

            await eventually(
                ready, timeout=30, message="/readyz answers 200 once the ConfigMap list went through"
            )
            status, body = await readyz()
            assert "[+]caches-synced ok" in body
            assert "[+]provider-started ok" in body
            informer = await cluster.cache.get_informer("v1/ConfigMap")
            assert informer.has_synced
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 20)
