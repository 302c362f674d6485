"""Clusters from kubeconfig Secrets: a namespace inventory of every cluster, and a way to add one.

The port of multicluster-runtime's ``examples/kubeconfig``. ``run`` starts a controller over the
clusters whose kubeconfig Secrets live in ``--namespace`` of the host cluster (the cluster of
``--kubeconfig``, or ``$KUBECONFIG``): it reconciles the Namespaces of every cluster and keeps an
inventory of them per cluster, logging each change. ``create-secret`` turns one context of a
kubeconfig file into such a Secret (only that context, its cluster and its user; file references
inlined), so the running controller engages the cluster a moment later.

    python examples/kubeconfig.py create-secret --from ./prod-eu.kubeconfig --name prod-eu --namespace fleet
    python examples/kubeconfig.py run --namespace fleet

Ctrl-C stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from mcr.builder import controller_managed_by
from mcr.cluster import Cluster
from mcr.errors import ClusterNotFoundError, NotFoundError
from mcr.manager import Manager
from mcr.reconcile import Request
from mcr.rest.config import RestConfig, load_config
from mcr_provider_kubeconfig import KubeconfigProvider, kubeconfig_secret

log = logging.getLogger("kubeconfig-example")

_FILE_FIELDS = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
}


class NamespaceInventory:
    """``namespaces[cluster]`` is the set of Namespace names the cluster has."""

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr
        self.namespaces: dict[str, set[str]] = {}

    async def reconcile(self, req: Request) -> None:
        known = self.namespaces.setdefault(req.cluster_name, set())
        try:
            cluster = await self.mgr.get_cluster(req.cluster_name)
            await cluster.client.get("v1/Namespace", req.name)
        except (NotFoundError, ClusterNotFoundError):
            if req.name in known:
                known.discard(req.name)
                log.info("namespace %s is gone from cluster %s", req.name, req.cluster_name)
            return
        if req.name not in known:
            known.add(req.name)
            log.info("namespace %s in cluster %s", req.name, req.cluster_name)


def setup(host: RestConfig, provider: KubeconfigProvider) -> tuple[Manager, NamespaceInventory]:
    """A manager on the host with the inventory controller over the Secrets' clusters."""
    mgr = Manager(host, provider=provider, metrics_bind_address="0")
    inventory = NamespaceInventory(mgr)
    controller_managed_by(mgr).named("namespace-inventory").for_(
        "v1/Namespace", engage_with_local_cluster=False
    ).complete(inventory)
    return mgr, inventory


def standalone(path: str | os.PathLike[str], context: str | None = None) -> dict[str, Any]:
    """One context of the kubeconfig at ``path`` as a self-contained kubeconfig (files inlined)."""
    doc = yaml.safe_load(Path(path).read_text())
    name = context or doc.get("current-context")
    by = {
        section: {e["name"]: e for e in doc.get(section) or []}
        for section in ("contexts", "clusters", "users")
    }
    if name not in by["contexts"]:
        raise SystemExit(f"{path}: no context {name!r}")
    ctx = by["contexts"][name]["context"]
    cluster = dict(by["clusters"][ctx["cluster"]]["cluster"])
    user = dict(by["users"][ctx["user"]]["user"]) if ctx.get("user") else {}
    base = Path(path).resolve().parent
    for entry in (cluster, user):
        for field, data_field in _FILE_FIELDS.items():
            if field in entry:
                raw = (base / entry.pop(field)).read_bytes()
                entry[data_field] = base64.b64encode(raw).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": ctx["cluster"], "cluster": cluster}],
        "users": [{"name": ctx.get("user", "user"), "user": user}],
        "contexts": [{"name": name, "context": {**ctx, "user": ctx.get("user", "user")}}],
        "current-context": name,
    }


async def create_secret(host: RestConfig, name: str, namespace: str, kubeconfig: dict[str, Any]) -> None:
    """Apply the kubeconfig Secret ``namespace/name`` to the host (server-side apply)."""
    secret = kubeconfig_secret(name, namespace, yaml.safe_dump(kubeconfig))
    async with Cluster(host, name="host") as cluster:
        await cluster.api_reader.apply(secret, field_manager="mcr-kubeconfig-example", force=True)
    log.info("Secret %s/%s holds the kubeconfig of cluster %s", namespace, name, name)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", help="the host cluster's kubeconfig (default: $KUBECONFIG)")
    parser.add_argument("--namespace", required=True, help="namespace of the kubeconfig Secrets")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run", help="run the controller over the Secrets' clusters")
    create = commands.add_parser("create-secret", help="store a kubeconfig context as a cluster's Secret")
    create.add_argument("--from", dest="source", required=True, help="kubeconfig file of the new cluster")
    create.add_argument("--context", help="its context to use (default: its current context)")
    create.add_argument("--name", required=True, help="the cluster's name (the Secret's name)")
    return parser


async def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    host = RestConfig.from_kubeconfig(args.kubeconfig) if args.kubeconfig else load_config()
    if args.command == "create-secret":
        kubeconfig = await asyncio.to_thread(standalone, args.source, args.context)
        await create_secret(host, args.name, args.namespace, kubeconfig)
        return
    mgr, _ = setup(host, KubeconfigProvider(args.namespace))
    await mgr.start()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main())
