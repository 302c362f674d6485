"""One replica of a sharded controller, for the multi-process sharding tests.

``python sharding_worker.py HOST_KUBECONFIG FLEET_DIR IDENTITY LOG`` runs a manager whose local
cluster is the host (it holds the Leases), whose provider reads the fleet's kubeconfig files, and
whose coordinator is a ShardedCoordinator with short timings. Each reconcile of a ConfigMap
appends ``{"r": identity, "c": cluster, "s": start, "e": end}`` to LOG (one JSON line, written
when it ends). SIGTERM stops it gracefully; SIGKILL is the crash the tests inflict.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import TextIO

from mcr.builder import controller_managed_by
from mcr.config import RestConfig
from mcr.manager import Manager
from mcr.reconcile import Request
from mcr.sharding import ShardedCoordinator
from mcr_provider_file import FileProvider

TIMINGS = {
    "lease_duration": 2.0,
    "renew_period": 0.5,
    "retry_period": 0.3,
    "peer_ttl": 2.0,
    "drain_timeout": 2.0,
}


async def main(host: str, fleet_dir: str, identity: str, log: TextIO) -> None:
    coordinator = ShardedCoordinator(namespace="default", identity=identity, **TIMINGS)
    mgr = Manager(
        RestConfig.from_kubeconfig(host),
        provider=FileProvider(directories=[fleet_dir], interval=0.2),
        coordinator=coordinator,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        graceful_shutdown_timeout=10,
    )

    async def reconcile(req: Request) -> None:
        start = time.time()
        await asyncio.sleep(0.05)
        log.write(json.dumps({"r": identity, "c": req.cluster_name, "s": start, "e": time.time()}) + "\n")

    controller_managed_by(mgr).named("sharded").for_("v1/ConfigMap").complete(reconcile)
    await mgr.start()


if __name__ == "__main__":
    with open(sys.argv[4], "a", buffering=1) as reconcile_log:
        asyncio.run(main(*sys.argv[1:4], reconcile_log))
