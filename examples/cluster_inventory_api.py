"""Clusters from a ClusterProfile inventory: stamp every ConfigMap with the profile it was reached by.

The port of multicluster-runtime's ``examples/cluster-inventory-api``: the ClusterProfile provider
reads ClusterProfiles (KEP-4322) from the hub cluster — the cluster of ``--kubeconfig`` — and
engages one cluster per ready profile, named ``<namespace>/<name>``, reached through a KEP-5339
exec plugin (``--access-providers``, the ``{"providers": [...]}`` JSON file) or through the kubeconfig
Secret the hub holds for this consumer (``--consumer-name``). The controller annotates every
ConfigMap of every cluster with ``example.mcr.dev/cluster-profile: <namespace>/<name>``, so you
can see which profile reached which cluster.

    python examples/cluster_inventory_api.py --access-providers clusterprofile-provider-file.json
    python examples/cluster_inventory_api.py --consumer-name my-controller --namespace fleet

Ctrl-C stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Sequence

from mcr.builder import controller_managed_by
from mcr.errors import ClusterNotFoundError, NotFoundError
from mcr.manager import Manager
from mcr.reconcile import Request
from mcr.rest.config import RestConfig, load_config
from mcr_provider_inventory import ClusterProfileProvider

log = logging.getLogger("cluster-inventory-api")

ANNOTATION = "example.mcr.dev/cluster-profile"


def setup(hub: RestConfig, provider: ClusterProfileProvider, *, metrics_bind_address: str = "0") -> Manager:
    """A manager on the hub whose controller stamps the ConfigMaps of every profile's cluster."""
    mgr = Manager(hub, provider=provider, metrics_bind_address=metrics_bind_address)

    async def reconcile(req: Request) -> None:
        try:
            cluster = await mgr.get_cluster(req.cluster_name)
            configmap = await cluster.client.get("v1/ConfigMap", req.name, namespace=req.namespace)
        except (NotFoundError, ClusterNotFoundError):
            return
        if (configmap["metadata"].get("annotations") or {}).get(ANNOTATION) == req.cluster_name:
            return
        patch = {"metadata": {"annotations": {ANNOTATION: req.cluster_name}}}
        await cluster.client.patch("v1/ConfigMap", req.name, patch, namespace=req.namespace)
        log.info("ConfigMap %s in cluster %s stamped", req.key, req.cluster_name)

    controller_managed_by(mgr).named("cluster-profile-stamper").for_(
        "v1/ConfigMap", engage_with_local_cluster=False
    ).complete(reconcile)
    return mgr


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", help="the hub's kubeconfig (default: $KUBECONFIG, in-cluster)")
    strategy = parser.add_mutually_exclusive_group(required=True)
    strategy.add_argument("--access-providers", help="KEP-5339 access-provider JSON file")
    strategy.add_argument("--consumer-name", help="use the hub's kubeconfig Secrets for this consumer")
    parser.add_argument("--namespace", help="only ClusterProfiles of this namespace (default: all)")
    return parser


async def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    hub = RestConfig.from_kubeconfig(args.kubeconfig) if args.kubeconfig else load_config()
    provider = ClusterProfileProvider(
        access_providers=args.access_providers, consumer_name=args.consumer_name, namespace=args.namespace
    )
    await setup(hub, provider).start()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main())
