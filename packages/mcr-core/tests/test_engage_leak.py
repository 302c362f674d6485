"""1000 engage/disengage cycles of one real cluster with a real controller leave nothing behind."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import tracemalloc
from typing import Any

import pytest

from mcr.builder import controller_managed_by
from mcr.cluster import Cluster
from mcr.manager import ClusterState, Manager
from mcr.providers.clusters import ClustersProvider
from mcr.reconcile import Request
from mcr.rest.config import load_config
from mcr.testing import eventually
from mcr_envtest import ServerThread

CYCLES = 1000
WARMUP = 50


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _snapshot() -> tracemalloc.Snapshot:
    # asyncio keeps every task in a WeakSet whose hash table only grows: its capacity follows the
    # number of dead-but-uncollected tasks (the GC policy raises thresholds), which is not a leak.
    return tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, "*/_weakrefset.py"), tracemalloc.Filter(False, tracemalloc.__file__)]
    )


def _state(mgr: Manager, name: str) -> str | None:
    return next((i.state for i in mgr.clusters() if i.name == name), None)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_engage_disengage_cycles_leak_nothing(apiserver: ServerThread) -> None:
    config = load_config(apiserver.kubeconfig)
    async with config.transport() as t:
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed"}}).encode()
        await t.request(
            "POST", "/api/v1/namespaces/default/configmaps", body=body, content_type="application/json"
        )

    reconciled: list[Request] = []

    async def reconcile(req: Request) -> None:
        reconciled.append(req)

    provider = ClustersProvider(start_clusters=False)
    mgr = Manager(provider=provider, metrics_bind_address="0")
    ctrl = controller_managed_by(mgr).named("leak-check").for_("v1/ConfigMap").complete(reconcile)
    cluster = Cluster(config, name="c")
    await cluster.start()
    task = asyncio.create_task(mgr.start(handle_signals=False))
    try:

        async def cycle() -> None:
            await provider.add("c", cluster)
            await eventually(lambda: _state(mgr, "c") == ClusterState.SYNCED, timeout=10, interval=0.001)
            await provider.remove("c")
            assert _state(mgr, "c") is None

        for _ in range(WARMUP):
            await cycle()
        assert any(r.cluster_name == "c" for r in reconciled), "the controller never reconciled cluster c"
        reconciled.clear()
        # Observations wait up to a second for their batch's flush: bounded by time, not by
        # cycles, so each snapshot is taken with none pending.
        ctrl.flush_metrics()
        gc.collect()
        tracemalloc.start()
        tasks_before = len(asyncio.all_tasks())
        fds_before = _open_fds()
        snap_before = _snapshot()

        for _ in range(CYCLES):
            await cycle()

        await asyncio.sleep(0.05)  # let cancelled reconciles and callbacks settle
        reconciled.clear()
        ctrl.flush_metrics()
        gc.collect()
        snap_after = _snapshot()
        tasks_after = len(asyncio.all_tasks())
        fds_after = _open_fds()
        tracemalloc.stop()
        leftover: list[Any] = [t.get_name() for t in asyncio.all_tasks()]
        assert tasks_after <= tasks_before, leftover
        assert fds_after <= fds_before + 2, (fds_before, fds_after)
        diff = snap_after.compare_to(snap_before, "lineno")
        growth = sum(stat.size_diff for stat in diff)
        top = "\n".join(str(stat) for stat in diff[:5])
        assert growth < 64 * 1024, f"memory grew by {growth} bytes over {CYCLES} cycles:\n{top}"
        assert mgr.clusters() == []
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 20)
        await cluster.stop()
