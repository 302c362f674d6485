"""Scale out: several replicas share the namespaces of one cluster, each namespace on one replica.

The port of multicluster-runtime's ``examples/sharded-namespace``: every namespace of the cluster of
``--kubeconfig`` is a cluster (the namespace provider), and the sharded coordinator spreads them
over the replicas running this program with Leases in ``--lease-namespace``: each replica announces
itself (``mcr-peer-<identity>``), and owns a namespace only while it holds its fence Lease
(``mcr-shard-<namespace>-<hash>``). The controller writes, in each namespace it owns, a ConfigMap
``shard-owner`` naming the replica — watch it move as replicas come and go:

    python examples/sharded_namespace.py --identity replica-1 &
    python examples/sharded_namespace.py --identity replica-2 &
    kubectl get configmap shard-owner -A -o custom-columns=NS:.metadata.namespace,OWNER:.data.replica

Stopping a replica (Ctrl-C, SIGTERM) hands its namespaces over at once; one that dies loses them
after the lease duration.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from mcr.builder import controller_managed_by
from mcr.errors import ClusterNotFoundError
from mcr.handler import EnqueueRequestsFromMapFunc
from mcr.manager import Manager
from mcr.reconcile import Request
from mcr.rest.config import RestConfig, load_config
from mcr.sharding import ShardedCoordinator
from mcr_provider_namespace import NamespaceProvider

log = logging.getLogger("sharded-namespace")

SYSTEM = ("default", "kube-system", "kube-public", "kube-node-lease")


def setup(
    config: RestConfig,
    *,
    identity: str | None,
    lease_namespace: str,
    controller_name: str = "shard-owner",
    **timings: Any,
) -> Manager:
    """One replica: namespaces as clusters, sharded with the other replicas by Leases.

    ``controller_name`` (and the provider's, derived from it) must be unique in the process: tests
    run several replicas in one.
    """
    coordinator = ShardedCoordinator(namespace=lease_namespace, identity=identity, **timings)
    me = coordinator.identity
    provider = NamespaceProvider(
        exclude=(*SYSTEM, lease_namespace), controller_name=f"{controller_name}-namespaces"
    )
    mgr = Manager(config, provider=provider, coordinator=coordinator, metrics_bind_address="0")

    async def reconcile(req: Request) -> None:
        try:
            cluster = await mgr.get_cluster(req.cluster_name)
        except ClusterNotFoundError:
            return
        marker = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "shard-owner", "namespace": "default"},
            "data": {"replica": me},
        }
        await cluster.client.apply(marker, field_manager="mcr-sharded-namespace", force=True)
        log.info("namespace %s is handled by %s", req.cluster_name, me)

    def marker_request(_: object) -> list[Request]:
        return [Request("default", "shard-owner")]

    # Namespaces are shared by every namespace cluster: their first list starts each cluster.
    to_marker = EnqueueRequestsFromMapFunc(marker_request)
    (
        controller_managed_by(mgr)
        .named(controller_name)
        .watches("v1/Namespace", to_marker, engage_with_local_cluster=False)
        .watches("v1/ConfigMap", to_marker, engage_with_local_cluster=False)
        .complete(reconcile)
    )
    return mgr


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", help="the cluster's kubeconfig (default: $KUBECONFIG, in-cluster)")
    parser.add_argument("--identity", help="this replica's unique name (default: hostname-pid-random)")
    parser.add_argument("--lease-namespace", default="default", help="namespace of the sharding Leases")
    return parser


async def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    config = RestConfig.from_kubeconfig(args.kubeconfig) if args.kubeconfig else load_config()
    await setup(config, identity=args.identity, lease_namespace=args.lease_namespace).start()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main())
