"""Writing status through the client: every Widget of every cluster reports what its controller saw.

A Widget (``widgets.status.example.mcr.dev``, a CRD with the ``status`` subresource) asks for a
``spec.size``; the reconciler writes ``status.observedGeneration``, ``status.size`` and a ``Ready``
condition through ``cluster.client.status``. A status write changes neither ``spec`` nor
``metadata.generation``, so it does not start another round of reconciles with new work; the
reconciler also skips the write when the status already says what it would write.

``status.update`` sends the object as read, ``resourceVersion`` included: when someone wrote the
Widget in between, the server answers 409 Conflict, the reconcile fails and the controller retries
it with backoff against the newer object (``status.patch`` with a merge patch would not check).

    python examples/widget_status.py --kubeconfig ./cluster-a.yaml --kubeconfig ./cluster-b.yaml

``--install-crd`` creates the CRD in each cluster first. Ctrl-C stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import logging
from collections.abc import Sequence
from typing import Any

from mcr.builder import controller_managed_by
from mcr.cluster import Cluster
from mcr.errors import AlreadyExistsError, ClusterNotFoundError, NotFoundError
from mcr.manager import Manager
from mcr.providers import ClustersProvider
from mcr.reconcile import Request, Result

log = logging.getLogger("widget-status")

WIDGET = "status.example.mcr.dev/v1/Widget"


def widget_crd() -> dict[str, Any]:
    """The Widget CRD: ``spec.size`` (an integer), a free-form ``status``, the status subresource."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.status.example.mcr.dev"},
        "spec": {
            "group": "status.example.mcr.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                }
            ],
        },
    }


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class WidgetStatus:
    """Reconciles each Widget by writing its status (a deleted Widget needs nothing)."""

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr

    async def reconcile(self, req: Request) -> Result | None:
        try:
            cluster = await self.mgr.get_cluster(req.cluster_name)
            widget = await cluster.client.get(WIDGET, req.name, namespace=req.namespace)
        except (NotFoundError, ClusterNotFoundError):
            return None
        generation = widget["metadata"].get("generation", 0)
        size = int((widget.get("spec") or {}).get("size") or 0)
        status = dict(widget.get("status") or {})
        if status.get("observedGeneration") == generation and status.get("size") == size:
            return None  # already says so: no write
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        status.update(
            observedGeneration=generation,
            size=size,
            conditions=[
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Observed",
                    "message": f"size {size} observed in cluster {req.cluster_name or '(local)'}",
                    "observedGeneration": generation,
                    # The transition time stays while the condition's status does not change.
                    "lastTransitionTime": ready["lastTransitionTime"]
                    if ready is not None and ready.get("status") == "True"
                    else _now(),
                }
            ],
        )
        widget["status"] = status
        await cluster.client.status.update(widget)
        log.info("status of Widget %s in cluster %s written", req.key, req.cluster_name)
        return None


def setup(provider: ClustersProvider, *, metrics_bind_address: str = "0") -> tuple[Manager, WidgetStatus]:
    """A manager over ``provider``'s clusters with the status writer registered as a controller."""
    mgr = Manager(provider=provider, metrics_bind_address=metrics_bind_address)
    reconciler = WidgetStatus(mgr)
    controller_managed_by(mgr).named("widget-status").for_(WIDGET).complete(reconciler)
    return mgr, reconciler


async def install_crd(cluster: Cluster) -> None:
    """Create the Widget CRD in ``cluster`` unless it exists."""
    with contextlib.suppress(AlreadyExistsError):
        await cluster.api_reader.create(widget_crd())


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kubeconfig", action="append", required=True, help="a cluster's kubeconfig (repeatable)"
    )
    parser.add_argument(
        "--install-crd", action="store_true", help="create the Widget CRD in each cluster first"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    provider = ClustersProvider()
    for i, path in enumerate(args.kubeconfig):
        cluster = Cluster.from_kubeconfig(path, name=f"cluster-{i}")
        if args.install_crd:
            await install_crd(cluster)
        await provider.add(f"cluster-{i}", cluster)
    mgr, _ = setup(provider)
    await mgr.start()


if __name__ == "__main__":
    asyncio.run(main())
