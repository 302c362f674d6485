"""During the graceful stop, runnables drain while the local cluster and the HTTP servers still work."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from mcr.manager import Manager
from mcr.rest.config import load_config
from mcr.testing import eventually
from mcr_envtest import ServerThread


class Drainer:
    """A leader-election runnable whose drain reads the local cluster and scrapes the manager."""

    need_leader_election = True

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr
        self.during_drain: dict[str, Any] = {}
        self.running = False

    async def start(self) -> None:
        self.running = True
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            cluster = self.mgr.local_cluster
            assert cluster is not None
            items = await cluster.api_reader.list("v1/Namespace")
            self.during_drain["namespaces"] = sorted(n["metadata"]["name"] for n in items)
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{self.mgr.metrics_url}/metrics") as resp:
                    self.during_drain["metrics"] = resp.status
                async with http.get(f"{self.mgr.health_probe_url}/readyz") as resp:
                    self.during_drain["readyz"] = resp.status
            raise


async def test_drain_runs_before_the_cluster_and_servers_stop(apiserver: ServerThread) -> None:
    mgr = Manager(
        load_config(apiserver.kubeconfig),
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
    )
    drainer = Drainer(mgr)
    mgr.add(drainer)
    task = asyncio.create_task(mgr.start(handle_signals=False))
    await eventually(lambda: drainer.running and mgr.metrics_url, timeout=10)
    cluster = mgr.local_cluster
    assert cluster is not None
    assert cluster.started
    mgr.stop()
    await asyncio.wait_for(task, 20)
    assert "default" in drainer.during_drain["namespaces"]
    assert drainer.during_drain["metrics"] == 200
    assert drainer.during_drain["readyz"] == 200
    # Afterwards: the local cluster is stopped and nothing listens any more.
    assert not cluster.started
    assert mgr.metrics_url is None
    assert mgr.health_probe_url is None
    assert not mgr.elected.is_set()
