"""One reconciler, every cluster: ConfigMaps across a fleet found in kubeconfig files.

The port of multicluster-runtime's ``examples/file``: the file provider turns every context of
every kubeconfig file into a cluster named ``<path>+<context>``; the same reconciler runs for the
ConfigMaps of each of them, logs each one with its cluster and records what it saw. Dropping a
kubeconfig file into the directory engages its cluster; deleting the file disengages it.

    python examples/uniform_reconciler.py --kubeconfig-dir ./fleet
    python examples/uniform_reconciler.py --kubeconfig ~/.kube/config --kubeconfig ./other.yaml

Ctrl-C stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence

from mcr.builder import controller_managed_by
from mcr.errors import ClusterNotFoundError, NotFoundError
from mcr.manager import Manager
from mcr.reconcile import Request, Result
from mcr_provider_file import DEFAULT_GLOBS, FileProvider

log = logging.getLogger("uniform-reconciler")


class ConfigMapReporter:
    """Reconciles every ConfigMap in every cluster: logs it and records its data per cluster.

    ``seen[cluster][namespace/name]`` holds the ConfigMap's data; a deleted ConfigMap (or one of a
    cluster that went away meanwhile) is forgotten.
    """

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr
        self.seen: defaultdict[str, dict[str, dict[str, str]]] = defaultdict(dict)

    async def reconcile(self, req: Request) -> Result | None:
        try:
            cluster = await self.mgr.get_cluster(req.cluster_name)
            configmap = await cluster.client.get("v1/ConfigMap", req.name, namespace=req.namespace)
        except (NotFoundError, ClusterNotFoundError):
            self.seen[req.cluster_name].pop(req.key, None)
            log.info("ConfigMap %s is gone from cluster %s", req.key, req.cluster_name)
            return None
        self.seen[req.cluster_name][req.key] = dict(configmap.get("data") or {})
        log.info("ConfigMap %s in cluster %s", req.key, req.cluster_name)
        return None


def setup(provider: FileProvider, *, metrics_bind_address: str = "0") -> tuple[Manager, ConfigMapReporter]:
    """A manager over ``provider``'s clusters with the reporter registered as a controller."""
    mgr = Manager(provider=provider, metrics_bind_address=metrics_bind_address)
    reporter = ConfigMapReporter(mgr)
    controller_managed_by(mgr).named("multicluster-configmaps").for_("v1/ConfigMap").complete(reporter)
    return mgr, reporter


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", action="append", default=[], help="a kubeconfig file (repeatable)")
    parser.add_argument("--kubeconfig-dir", action="append", default=[], help="a directory of kubeconfigs")
    parser.add_argument("--glob", action="append", default=[], help="file name pattern inside directories")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between file polls")
    return parser


async def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    provider = FileProvider(
        kubeconfigs=args.kubeconfig,
        directories=args.kubeconfig_dir,
        globs=args.glob or DEFAULT_GLOBS,
        poll_interval=args.interval,
    )
    mgr, _ = setup(provider)
    await mgr.start()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main())
