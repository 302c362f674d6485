"""Namespaces as clusters: a single-cluster controller, run once per namespace of one cluster.

The port of multicluster-runtime's ``examples/namespace``: the namespace provider presents every
namespace of the cluster of ``--kubeconfig`` as a cluster named after it, in which that namespace
is ``default``. The controller below is written for one cluster — it makes sure ``default`` holds a
ConfigMap ``tenant-settings`` — and runs for every namespace: each tenant namespace gets its own
``tenant-settings`` naming the tenant, and gets it back if it is deleted. Namespaces created later
are picked up; deleted ones are dropped. All namespaces share one cache of the cluster.

    python examples/namespace.py --kubeconfig ./cluster.kubeconfig --selector tenant=true

Ctrl-C stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Sequence

from mcr.builder import controller_managed_by
from mcr.errors import ClusterNotFoundError, NotFoundError
from mcr.handler import EnqueueRequestsFromMapFunc
from mcr.manager import Manager
from mcr.reconcile import Request
from mcr.rest.config import RestConfig, load_config
from mcr_provider_namespace import NamespaceProvider

log = logging.getLogger("namespace-example")

SETTINGS = "tenant-settings"


def setup(config: RestConfig, provider: NamespaceProvider) -> Manager:
    """A manager whose controller keeps ``tenant-settings`` in every namespace cluster's default."""
    mgr = Manager(config, provider=provider, metrics_bind_address="0")

    async def reconcile(req: Request) -> None:
        try:
            cluster = await mgr.get_cluster(req.cluster_name)
            await cluster.client.get("v1/ConfigMap", SETTINGS, namespace="default")
            return
        except ClusterNotFoundError:
            return
        except NotFoundError:
            pass
        settings = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": SETTINGS, "namespace": "default"},
            "data": {"tenant": req.cluster_name},
        }
        await cluster.client.apply(settings, field_manager="mcr-namespace-example", force=True)
        log.info("tenant %s has its settings", req.cluster_name)

    def settings_request(_: object) -> list[Request]:
        return [Request("default", SETTINGS)]

    # Any ConfigMap event in a namespace cluster checks its settings. Namespaces are cluster-scoped,
    # shared by every namespace cluster: their first list gives each cluster an event as it is
    # engaged, even a namespace without ConfigMaps.
    to_settings = EnqueueRequestsFromMapFunc(settings_request)
    (
        controller_managed_by(mgr)
        .named("tenant-settings")
        .watches("v1/ConfigMap", to_settings, engage_with_local_cluster=False)
        .watches("v1/Namespace", to_settings, engage_with_local_cluster=False)
        .complete(reconcile)
    )
    return mgr


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", help="the cluster's kubeconfig (default: $KUBECONFIG, in-cluster)")
    parser.add_argument("--selector", help="only namespaces matching this label selector")
    parser.add_argument("--exclude", action="append", default=[], help="a namespace to leave alone")
    return parser


async def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    config = RestConfig.from_kubeconfig(args.kubeconfig) if args.kubeconfig else load_config()
    provider = NamespaceProvider(label_selector=args.selector, exclude=args.exclude)
    await setup(config, provider).start()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main())
