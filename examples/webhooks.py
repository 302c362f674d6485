"""Admission webhooks for a fleet: one webhook server, each cluster's calls answered with its own cache.

A validating webhook refuses new ConfigMaps in a namespace whose cluster holds a ConfigMap named
``freeze`` there (read from that cluster's cache), and a mutating webhook notes in an annotation which
cluster admitted a ConfigMap. Each cluster named on the command line gets its own
ValidatingWebhookConfiguration and MutatingWebhookConfiguration, pointing at a path that names it;
they are removed when the example stops.

    python examples/webhooks.py --cert tls.crt --key tls.key --ca ca.crt \\
        --cluster east=./east.kubeconfig --cluster west=./west.kubeconfig

The certificate must be valid for the address API servers call (``--host``, default 127.0.0.1).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path

from kubernetes.client import V1ConfigMap

from mcr.cluster import Cluster
from mcr.errors import NotFoundError
from mcr.manager import Manager
from mcr.providers import ClustersProvider
from mcr.webhook import AdmissionRequest, Response, WebhookServer, denied, webhook_managed_by

# --8<-- [start:webhooks]
FROZEN_BY = "freeze"  # a ConfigMap of this name freezes its namespace, in its own cluster only
ADMITTED_IN = "example.io/admitted-in"


async def refuse_in_frozen_namespaces(req: AdmissionRequest) -> Response | None:
    """Validator: the cluster the request came from decides, from its own cache."""
    if req.name == FROZEN_BY:
        return None
    try:
        await req.cluster.client.get("v1/ConfigMap", FROZEN_BY, namespace=req.namespace)
    except NotFoundError:
        return None  # allowed
    return denied(f"namespace {req.namespace} is frozen in cluster {req.cluster_name!r}")


def note_the_cluster(req: AdmissionRequest) -> V1ConfigMap:
    """Defaulter: returns the object to admit; mcr answers with the JSON patch to it."""
    cm: V1ConfigMap = req.object
    assert cm.metadata is not None
    cm.metadata.annotations = {**(cm.metadata.annotations or {}), ADMITTED_IN: req.cluster_name}
    return cm


async def build(
    clusters: Mapping[str, str | Path], cert: str | Path, key: str | Path, ca: str | Path, *, port: int = 9443
) -> tuple[Manager, WebhookServer]:
    """A manager serving both webhooks for ``clusters`` (name → kubeconfig file)."""
    provider = ClustersProvider()
    mgr = Manager(provider=provider, metrics_bind_address="0")
    server = WebhookServer(
        cert, key, ca_file=ca, port=port, name="example-webhooks", remove_on_disengage=True
    )
    mgr.add(server)
    mgr.add_readyz_check("webhook", server.check_ready)
    webhook_managed_by(server).for_(V1ConfigMap).with_validator(
        refuse_in_frozen_namespaces, operations=["CREATE"]
    ).complete()
    webhook_managed_by(server).for_(V1ConfigMap).with_defaulter(
        note_the_cluster, failure_policy="Ignore"
    ).complete()
    for name, kubeconfig in clusters.items():
        await provider.add(name, Cluster.from_kubeconfig(str(kubeconfig), name=name))
    return mgr, server


# --8<-- [end:webhooks]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cert", required=True, help="serving certificate (PEM)")
    parser.add_argument("--key", required=True, help="its private key (PEM)")
    parser.add_argument("--ca", required=True, help="the CA API servers trust the certificate by (PEM)")
    parser.add_argument("--port", type=int, default=9443)
    parser.add_argument("--cluster", action="append", default=[], metavar="NAME=KUBECONFIG", required=True)
    return parser.parse_args(argv)


async def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    clusters = dict(item.split("=", 1) for item in args.cluster)
    mgr, _ = await build(clusters, args.cert, args.key, args.ca, port=args.port)
    await mgr.start()


if __name__ == "__main__":
    asyncio.run(main())
