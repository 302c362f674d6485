"""One replica of the scale-out bench: namespaces of one server as clusters, sharded by Leases.

``python -m bench.sharding._worker KUBECONFIG IDENTITY`` runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import sys

from mcr.builder import controller_managed_by
from mcr.manager import Manager
from mcr.reconcile import Request
from mcr.rest.config import RestConfig
from mcr.sharding import ShardedCoordinator
from mcr_provider_namespace import NamespaceProvider

SYSTEM = ("default", "kube-system", "kube-public", "kube-node-lease", "mcr-sharding")


async def main(kubeconfig: str, identity: str) -> None:
    mgr = Manager(
        RestConfig.from_kubeconfig(kubeconfig),
        provider=NamespaceProvider(exclude=SYSTEM),
        coordinator=ShardedCoordinator(namespace="mcr-sharding", identity=identity),
        metrics_bind_address="0",
        health_probe_bind_address="0",
    )

    async def reconcile(req: Request) -> None:
        return None

    controller_managed_by(mgr).named("bench-sharded").for_("v1/ConfigMap").complete(reconcile)
    await mgr.start()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
