"""Copy labelled ConfigMaps from the local cluster to every fleet cluster, and revert drift there.

A multi-cluster-aware controller (multicluster-runtime's ``sync-local-to-remote`` example, in one
controller): ConfigMaps labelled ``example.io/propagate=true`` in the local cluster are copied, with
the label ``example.io/propagated-from=<namespace>.<name>``, into the same namespace of every
cluster the file provider finds. Editing or deleting a copy in a fleet cluster is reverted; changing
the source updates every copy; deleting the source deletes the copies. A cluster that joins the
fleet gets its copies as soon as it is engaged.

How the pieces fit:

* one controller watches ConfigMaps in the local cluster (sources) and in the fleet (copies);
  its requests name the cluster they are about;
* a request for the local cluster fans out: one request per fleet cluster, through a channel source;
* a request for a fleet cluster makes that cluster's copy match the source;
* :class:`SeedNewClusters` is *aware*: the manager engages it with every cluster, and for each new
  fleet cluster it asks for that cluster's copies to be made.

    python examples/copy_configmaps.py --local-kubeconfig ./hub.kubeconfig --kubeconfig-dir ./fleet
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from mcr.builder import controller_managed_by
from mcr.cluster import Cluster
from mcr.errors import ClusterNotFoundError, NotFoundError
from mcr.manager import Manager
from mcr.predicate import predicate_from
from mcr.reconcile import Request, Result
from mcr.rest.config import load_config
from mcr.source import Channel, GenericEvent
from mcr_provider_file import FileProvider

log = logging.getLogger("copy-configmaps")

PROPAGATE = "example.io/propagate"
PROPAGATED_FROM = "example.io/propagated-from"
LOCAL = ""


def _labels(obj: Any) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def is_source(obj: Any) -> bool:
    return _labels(obj).get(PROPAGATE) == "true"


def is_copy(obj: Any) -> bool:
    return PROPAGATED_FROM in _labels(obj)


def desired_copy(source: dict[str, Any]) -> dict[str, Any]:
    """The copy of ``source`` every fleet cluster should hold."""
    meta = source["metadata"]
    labels = {k: v for k, v in _labels(source).items() if k != PROPAGATE}
    labels[PROPAGATED_FROM] = f"{meta['namespace']}.{meta['name']}"
    copy: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": labels},
    }
    for field in ("data", "binaryData"):
        if source.get(field):
            copy[field] = source[field]
    return copy


class ConfigMapCopier:
    """The reconciler: fans a source out (local requests) or fixes one copy (fleet requests)."""

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr
        self.fan_out: asyncio.Queue[GenericEvent] = asyncio.Queue()

    def request_copies(self, cluster_name: str, namespace: str, name: str) -> None:
        """Ask for ``cluster_name``'s copy of the source ``namespace/name`` to be reconciled."""
        stub = {"metadata": {"namespace": namespace, "name": name}}
        self.fan_out.put_nowait(GenericEvent(stub, cluster_name))

    async def reconcile(self, req: Request) -> Result | None:
        if req.cluster_name == LOCAL:
            for info in self.mgr.clusters():
                if info.name != LOCAL:
                    self.request_copies(info.name, req.namespace, req.name)
            return None
        await self.sync_copy(req.cluster_name, req.namespace, req.name)
        return None

    async def sync_copy(self, cluster_name: str, namespace: str, name: str) -> None:
        """Make ``cluster_name``'s copy of ``namespace/name`` match the local source (or remove it)."""
        local = await self.mgr.get_cluster(LOCAL)
        try:
            source = await local.client.get("v1/ConfigMap", name, namespace=namespace)
        except NotFoundError:
            source = None
        try:
            remote = await self.mgr.get_cluster(cluster_name)
        except ClusterNotFoundError:
            return  # left the fleet meanwhile: nothing to copy to
        try:
            current = await remote.client.get("v1/ConfigMap", name, namespace=namespace)
        except NotFoundError:
            current = None

        if source is None or not is_source(source):
            if current is not None and is_copy(current):
                log.info("deleting copy %s/%s from cluster %s", namespace, name, cluster_name)
                with contextlib.suppress(NotFoundError):  # already gone is fine
                    await remote.client.delete("v1/ConfigMap", name, namespace=namespace)
            return
        want = desired_copy(source)
        if current is None:
            log.info("copying %s/%s to cluster %s", namespace, name, cluster_name)
            await remote.client.create(want)
            return
        drifted = any(current.get(f) != want.get(f) for f in ("data", "binaryData")) or any(
            _labels(current).get(k) != v for k, v in want["metadata"]["labels"].items()
        )
        if drifted:
            log.info("reverting drift of %s/%s in cluster %s", namespace, name, cluster_name)
            current_meta = current["metadata"]
            fixed = {
                **want,
                "metadata": {**current_meta, "labels": {**_labels(current), **want["metadata"]["labels"]}},
            }
            await remote.client.update(fixed)


class SeedNewClusters:
    """Aware of clusters: each fleet cluster the manager engages is given its copies at once.

    ``engage`` runs for as long as the cluster is engaged; its work is a quick fan-out, then it waits
    for the disengagement (cancellation) like every aware runnable.
    """

    def __init__(self, copier: ConfigMapCopier) -> None:
        self.copier = copier

    async def engage(self, name: str, cluster: Cluster) -> None:
        if name != LOCAL:
            local = await self.copier.mgr.get_cluster(LOCAL)
            for source in await local.client.list("v1/ConfigMap", label_selector={PROPAGATE: "true"}):
                meta = source["metadata"]
                self.copier.request_copies(name, meta["namespace"], meta["name"])
        await asyncio.get_running_loop().create_future()  # engaged until cancelled


def setup(
    local_kubeconfig: Any, provider: FileProvider, *, metrics_bind_address: str = "0"
) -> tuple[Manager, ConfigMapCopier]:
    """A manager for the local cluster and ``provider``'s fleet, with the copier registered."""
    mgr = Manager(load_config(local_kubeconfig), provider=provider, metrics_bind_address=metrics_bind_address)
    copier = ConfigMapCopier(mgr)
    relevant = predicate_from(lambda obj: is_source(obj) or is_copy(obj))
    (
        controller_managed_by(mgr)
        .named("copy-configmaps")
        .for_(
            "v1/ConfigMap",
            predicates=[relevant],
            engage_with_local_cluster=True,
            engage_with_provider_clusters=True,
        )
        .watches(Channel(copier.fan_out))
        .complete(copier)
    )
    mgr.add(SeedNewClusters(copier))
    return mgr, copier


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Copy labelled ConfigMaps to every fleet cluster.")
    parser.add_argument("--local-kubeconfig", required=True, help="kubeconfig of the local (source) cluster")
    parser.add_argument(
        "--kubeconfig", action="append", default=[], help="a fleet kubeconfig file (repeatable)"
    )
    parser.add_argument(
        "--kubeconfig-dir", action="append", default=[], help="a directory of fleet kubeconfigs"
    )
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between file polls")
    return parser


async def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    provider = FileProvider(
        kubeconfigs=args.kubeconfig, directories=args.kubeconfig_dir, poll_interval=args.interval
    )
    mgr, _ = setup(args.local_kubeconfig, provider)
    await mgr.start()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main())
