"""Local kind clusters: every cluster of the fleet learns which other clusters it runs with.

The port of multicluster-runtime's ``examples/kind``: the kind provider lists local kind clusters
(``kind get clusters``) every two seconds and engages those whose name starts with ``--prefix``.
The controller keeps a ConfigMap ``kube-public/kind-fleet`` in each cluster listing every engaged
cluster, re-checked every ``--resync`` seconds, so creating or deleting a kind cluster shows up in
all the others.

    kind create cluster --name dev-a && kind create cluster --name dev-b
    python examples/kind.py --prefix dev-

Without Docker, ``mcr-envtest kind`` (``mcr-envtest-kind``, placed on PATH as ``kind``) gives the same
commands backed by local mcr-envtest servers. Ctrl-C stops it cleanly.
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
from mcr.reconcile import Request, Result
from mcr_provider_kind import KindProvider

log = logging.getLogger("kind-example")

NAMESPACE, NAME = "kube-public", "kind-fleet"


def setup(provider: KindProvider, *, resync: float = 10.0) -> Manager:
    """A manager over the kind clusters whose controller publishes the fleet in each of them."""
    mgr = Manager(provider=provider, metrics_bind_address="0")

    async def reconcile(req: Request) -> Result:
        try:
            cluster = await mgr.get_cluster(req.cluster_name)
        except ClusterNotFoundError:
            return Result()
        members = ",".join(provider.names())
        fleet = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "data": {"self": req.cluster_name, "members": members},
        }
        await cluster.client.apply(fleet, field_manager="mcr-kind-example", force=True)
        log.info("cluster %s runs with %s", req.cluster_name, members)
        return Result(requeue_after=resync)

    def fleet_request(_: object) -> list[Request]:
        return [Request(NAMESPACE, NAME)]

    # kube-public exists in every cluster: its first list starts each cluster's loop.
    controller_managed_by(mgr).named("kind-fleet").watches(
        "v1/Namespace", EnqueueRequestsFromMapFunc(fleet_request)
    ).complete(reconcile)
    return mgr


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--prefix", default="", help="only kind clusters whose name starts with this")
    parser.add_argument("--resync", type=float, default=10.0, help="seconds between checks of each cluster")
    parser.add_argument("--kind", default="kind", help="the kind command")
    return parser


async def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    provider = KindProvider(prefix=args.prefix, kind_command=args.kind)
    await setup(provider, resync=args.resync).start()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main())
