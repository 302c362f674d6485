"""Clusters from Cluster API: publish each workload cluster's Cluster API identity inside it.

The port of multicluster-runtime's ``examples/cluster-api``: the Cluster API provider engages every
``Cluster`` (``cluster.x-k8s.io/v1beta2``) of the management cluster — the cluster of
``--kubeconfig`` — whose control plane is initialized, through its ``<name>-kubeconfig`` Secret,
named ``<namespace>/<name>``. The controller keeps a ConfigMap ``kube-public/cluster-identity`` in
each workload cluster saying which management-cluster object it is, and puts it back if someone
edits or deletes it. Rotating a cluster's kubeconfig Secret re-engages it without a restart.

    python examples/cluster_api.py --kubeconfig ./management.kubeconfig [--namespace tenants]

Ctrl-C stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Sequence

from mcr.builder import controller_managed_by
from mcr.errors import ClusterNotFoundError
from mcr.handler import EnqueueRequestsFromMapFunc
from mcr.manager import Manager
from mcr.reconcile import Request
from mcr.rest.config import RestConfig, load_config
from mcr_provider_capi import ClusterAPIProvider

log = logging.getLogger("cluster-api-example")

NAMESPACE, NAME = "kube-public", "cluster-identity"


def setup(management: RestConfig, provider: ClusterAPIProvider) -> Manager:
    """A manager on the management cluster whose controller publishes each workload cluster's identity."""
    mgr = Manager(management, provider=provider, metrics_bind_address="0")

    async def reconcile(req: Request) -> None:
        try:
            cluster = await mgr.get_cluster(req.cluster_name)
        except ClusterNotFoundError:
            return
        namespace, name = req.cluster_name.split("/", 1)
        identity = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "data": {"namespace": namespace, "cluster-name": name},
        }
        await cluster.client.apply(identity, field_manager="mcr-cluster-api-example", force=True)
        log.info("cluster %s knows its identity", req.cluster_name)

    def identity_request(_: object) -> list[Request]:
        return [Request(NAMESPACE, NAME)]

    # The namespace's appearance (every engaged cluster has one) and any change to the ConfigMap
    # itself lead to the same request: make the identity ConfigMap right.
    (
        controller_managed_by(mgr)
        .named("cluster-identity")
        .watches(
            "v1/Namespace", EnqueueRequestsFromMapFunc(identity_request), engage_with_local_cluster=False
        )
        .watches(
            "v1/ConfigMap", EnqueueRequestsFromMapFunc(identity_request), engage_with_local_cluster=False
        )
        .complete(reconcile)
    )
    return mgr


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", help="the management cluster's kubeconfig (default: $KUBECONFIG)")
    parser.add_argument("--namespace", help="only Clusters of this namespace (default: all)")
    return parser


async def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    management = RestConfig.from_kubeconfig(args.kubeconfig) if args.kubeconfig else load_config()
    await setup(management, ClusterAPIProvider(namespace=args.namespace)).start()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main())
