"""A single-cluster controller: ConfigMaps labelled ``example.io/greet=true`` get a greeting.

For every labelled ConfigMap the controller makes sure ``data.greeting`` is ``hello, <name>``; edit
or remove the greeting and it comes back. It is the smallest complete program on mcr: a manager
for the cluster your kubeconfig points at, one controller built with the fluent builder, health
probes, metrics, structured logs, optional leader election, and a clean stop on SIGTERM/Ctrl-C.

The reconciler only ever sees ``Request(cluster_name="", namespace, name)``: the very same code
runs unchanged per cluster when the manager is given a provider.

    python examples/single_cluster/greeter.py --kubeconfig ~/.kube/config \
        --metrics-bind-address :8080 --health-probe-bind-address :8081 [--leader-elect]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from mcr.builder import controller_managed_by
from mcr.controller import Controller
from mcr.errors import NotFoundError
from mcr.log import setup_logging
from mcr.manager import Manager
from mcr.reconcile import Request
from mcr.rest.config import load_config

log = logging.getLogger("greeter")

GREET = "example.io/greet"


def greeting_for(name: str) -> str:
    return f"hello, {name}"


def add_greeter(mgr: Manager) -> Controller:
    """Build the greeter controller and add it to ``mgr``."""

    async def reconcile(req: Request) -> None:
        cluster = await mgr.get_cluster(req.cluster_name)
        try:
            cm: dict[str, Any] = await cluster.client.get("v1/ConfigMap", req.name, namespace=req.namespace)
        except NotFoundError:
            return  # deleted meanwhile: nothing to do
        labels = (cm.get("metadata") or {}).get("labels") or {}
        if labels.get(GREET) != "true":
            return
        want = greeting_for(req.name)
        if (cm.get("data") or {}).get("greeting") == want:
            return
        # Read-modify-write with the resourceVersion we read: a conflict raises and is retried.
        cm["data"] = {**(cm.get("data") or {}), "greeting": want}
        await cluster.client.update(cm)
        log.info("greeted")  # the log record carries controller, cluster, namespace and name

    return controller_managed_by(mgr).named("greeter").for_("v1/ConfigMap").complete(reconcile)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG, in-cluster)"
    )
    parser.add_argument("--context", default=None)
    parser.add_argument("--metrics-bind-address", default=":8080", help='"0" disables the metrics server')
    parser.add_argument("--health-probe-bind-address", default=":8081", help='"0" disables the probes')
    parser.add_argument("--leader-elect", action="store_true", help="run only while holding the Lease")
    parser.add_argument("--leader-election-namespace", default=None)
    parser.add_argument("--log-format", choices=["kv", "json"], default="kv")
    return parser.parse_args(argv)


async def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    setup_logging(logging.INFO, fmt=args.log_format)
    mgr = Manager(
        load_config(args.kubeconfig, context=args.context),
        metrics_bind_address=args.metrics_bind_address,
        health_probe_bind_address=args.health_probe_bind_address,
        leader_election=args.leader_elect,
        leader_election_id="greeter.example.io",
        leader_election_namespace=args.leader_election_namespace,
    )
    mgr.add_healthz_check("ping", lambda: None)
    mgr.add_readyz_check("ping", lambda: None)
    add_greeter(mgr)
    await mgr.start()  # until SIGTERM / Ctrl-C; raises if the grace period or the lease is lost


if __name__ == "__main__":
    asyncio.run(main())
