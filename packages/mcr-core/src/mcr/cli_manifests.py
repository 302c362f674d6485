"""``mcr manifests``, ``mcr fleet-rbac`` and ``mcr fleet-credentials``: deploying an operator.

Each imports ``APP`` as ``mcr run`` does and calls its ``setup(mgr)`` on a manager that is never
started (no cluster is contacted), then reads the RBAC rules its controllers need (see
:mod:`mcr.rbac`). ``manifests`` prints the hub's YAML (Namespace, ServiceAccount, roles and
bindings, Deployment running ``mcr run``); ``fleet-rbac`` prints the role a fleet cluster's
credentials need; ``fleet-credentials`` creates a ServiceAccount with that role in a fleet cluster
and prints (or applies in the hub) the kubeconfig Secret the ``kubeconfig`` provider reads.

Exit status 0 on success; 1 when the app's import or ``setup`` fails or a server refuses a
request; 2 for bad input, on one line naming what is wrong. See docs/deployment.md.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

import yaml

from mcr.cli_providers import UsageError, parse_specs, resolve
from mcr.cli_run import ProviderItem, load_app

__all__ = ["add_manifests_parsers"]

MIN_TOKEN_SECONDS = 600
"""The shortest token Kubernetes issues through TokenRequest."""


def _common(p: argparse.ArgumentParser, *, providers: bool) -> None:
    p.add_argument("app", metavar="APP", help="app.py or pkg.module; defines setup(mgr)")
    p.add_argument("--name", help="name of the ServiceAccount and roles (default: the app's name)")
    p.add_argument("--events", action="store_true", help="grant writing Events (the event recorder)")
    if providers:
        p.add_argument("--provider", action=ProviderItem, metavar="[MEMBER=]NAME", help="as for mcr run")
        p.add_argument("--provider-opt", action=ProviderItem, metavar="KEY=VALUE", help="as for mcr run")


def add_manifests_parsers(sub: Any) -> None:
    """Add ``manifests``, ``fleet-rbac`` and ``fleet-credentials`` to the ``mcr`` subparsers ``sub``."""
    m = sub.add_parser(
        "manifests",
        help="print the YAML that deploys APP's controllers (RBAC derived from the code)",
        description="Print Namespace, ServiceAccount, ClusterRole/Roles with bindings and a Deployment "
        "running `mcr run APP`, the rules derived from what APP's controllers watch, own and declare.",
    )
    _common(m, providers=True)
    m.add_argument("--namespace", help="namespace of the operator (default: NAME-system)")
    m.add_argument(
        "--image", default=None, help="container image with mcr and APP (default mcr-operator:latest)"
    )
    m.add_argument("--leader-elect", action="store_true", help="run with leader election (grants Leases)")
    m.add_argument("--shard", action="store_true", help="run sharded (grants Leases)")
    m.add_argument(
        "--metrics-secure",
        action="store_true",
        help="serve /metrics over HTTPS behind TokenReview/SubjectAccessReview (certificate from a Secret)",
    )
    m.add_argument("--replicas", type=int, default=1, help="replicas of the Deployment (default 1)")
    m.add_argument(
        "--graceful-shutdown-timeout", type=float, default=30.0, help="seconds the stop waits (default 30)"
    )
    m.set_defaults(func=_manifests)
    f = sub.add_parser(
        "fleet-rbac",
        help="print the ClusterRole a fleet cluster's credentials need for APP's controllers",
    )
    _common(f, providers=False)
    f.set_defaults(func=_fleet_rbac)
    c = sub.add_parser(
        "fleet-credentials",
        help="create a ServiceAccount with APP's fleet role in a cluster; print its kubeconfig Secret",
        description="In the cluster of --kubeconfig/--context: apply Namespace, ServiceAccount and the "
        "fleet role of APP, request a token, and print the kubeconfig Secret for the kubeconfig provider "
        "(or apply it in the hub with --apply). The Secret holds a credential: keep the output private.",
    )
    _common(c, providers=False)
    c.add_argument(
        "--kubeconfig", help="kubeconfig of the fleet cluster (default: $KUBECONFIG, ~/.kube/config)"
    )
    c.add_argument("--context", help="context of the fleet cluster (default: the current one)")
    c.add_argument(
        "--namespace", default="mcr-system", help="namespace of the ServiceAccount (default mcr-system)"
    )
    c.add_argument("--cluster-name", help="name of the Secret, i.e. of the cluster (default: the context's)")
    c.add_argument("--secret-namespace", required=True, help="the kubeconfig provider's namespace in the hub")
    c.add_argument(
        "--token-seconds", type=int, default=365 * 24 * 3600, help="token lifetime (default 1 year)"
    )
    c.add_argument("--label", default=None, help="the provider's Secret label (default its own)")
    c.add_argument("--key", default=None, help="the provider's Secret data key (default kubeconfig)")
    c.add_argument("--apply", action="store_true", help="apply the Secret in the hub instead of printing it")
    c.add_argument("--hub-kubeconfig", help="kubeconfig of the hub (with --apply)")
    c.add_argument("--hub-context", help="context of the hub (with --apply)")
    c.set_defaults(func=_fleet_credentials)


def _dns_name(raw: str, what: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")[:63].strip("-")
    if not name:
        raise UsageError(f"{what} {raw!r} gives no valid Kubernetes name: pass --name")
    return name


def _app_name(args: argparse.Namespace) -> str:
    if args.name:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", args.name):
            raise UsageError(f"--name {args.name!r} is not a valid Kubernetes name (lower-case, digits, '-')")
        return str(args.name)
    stem = Path(args.app).stem if args.app.endswith(".py") else args.app.rsplit(".", 1)[-1]
    return _dns_name(stem, "APP")


def _rules(args: argparse.Namespace, *, with_provider: bool) -> Any:
    from mcr.rbac import derive, events

    module = load_app(args.app)
    setup = getattr(module, "setup", None)
    if not callable(setup):
        raise UsageError(f"{args.app} defines no setup(mgr) function (called with the Manager)")
    derived = asyncio.run(derive(setup, with_provider=with_provider))
    if args.events:
        derived.rules.extend(events())
    return derived


def _providers(args: argparse.Namespace, plugins: Iterable[object]) -> tuple[list[Any], list[Any]]:
    """The chosen providers and the hub rules they need (from the plugins' RBAC hook)."""
    from mcr.plugins import load_registry, plugin_manager
    from mcr.rbac import Rule
    from mcr.rbac.manifests import Provider, provider_rules

    specs = parse_specs(list(getattr(args, "provider_items", None) or []))
    if not specs:
        return [], []
    pm = plugin_manager(plugins=plugins)
    reg = load_registry(pm)
    chosen: list[Provider] = []
    rules: list[Rule] = []
    for spec in specs:
        resolve(reg, spec.name)  # an unknown name: the closest installed one in the error
        provider = Provider(spec.member, spec.name, tuple(spec.options))
        try:
            needed = provider_rules(pm.hook, provider)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if needed is None:
            print(
                f"mcr manifests: provider {spec.name!r} declares no RBAC rules (its plugin has no "
                "mcr_provider_rbac hook); grant what it reads with mcr.rbac.declare",
                file=sys.stderr,
            )
        chosen.append(provider)
        rules.extend(needed or ())
    return chosen, rules


class _Dumper(yaml.SafeDumper):
    """Plain YAML: a mapping used twice is written twice, never as an anchor and alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _dump(objects: list[dict[str, Any]], out: TextIO) -> None:
    yaml.dump_all(objects, out, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def _manifests(args: argparse.Namespace, out: TextIO, plugins: Iterable[object]) -> int:
    from mcr.rbac.manifests import (
        DEFAULT_IMAGE,
        Deployment,
        hub_objects,
        lease_rules,
        metrics_auth_rules,
        place_fleet_in_hub,
    )

    def body() -> int:
        if args.replicas < 1:
            raise UsageError(f"--replicas must be at least 1, not {args.replicas}")
        name = _app_name(args)
        namespace = args.namespace or f"{name}-system"
        _dns_name(namespace, "--namespace")
        providers, provider_needs = _providers(args, plugins)
        derived = _rules(args, with_provider=bool(providers))
        deployment = Deployment(
            name=name,
            namespace=namespace,
            app=args.app,
            image=args.image or DEFAULT_IMAGE,
            providers=tuple(providers),
            leader_elect=args.leader_elect,
            shard=args.shard,
            metrics_secure=args.metrics_secure,
            replicas=args.replicas,
            graceful_shutdown_timeout=args.graceful_shutdown_timeout,
        )
        leases = lease_rules(namespace, leader_elect=args.leader_elect, shard=args.shard)
        metrics = metrics_auth_rules() if args.metrics_secure else []
        rules = place_fleet_in_hub([*derived.rules, *provider_needs, *leases, *metrics])
        _dump(hub_objects(deployment, rules), out)
        return 0

    return _guarded("manifests", body)


def _fleet_rbac(args: argparse.Namespace, out: TextIO, plugins: Iterable[object]) -> int:
    from mcr.rbac.manifests import fleet_objects

    def body() -> int:
        name = _app_name(args)
        derived = _rules(args, with_provider=True)
        objects = fleet_objects(name, derived.rules)
        if not objects:
            print(f"mcr fleet-rbac: {args.app}'s controllers watch no fleet cluster", file=sys.stderr)
        _dump(objects, out)
        return 0

    return _guarded("fleet-rbac", body)


def _fleet_credentials(args: argparse.Namespace, out: TextIO, plugins: Iterable[object]) -> int:
    from mcr.rbac.credentials import DEFAULT_KEY, DEFAULT_LABEL, issue, kubeconfig_secret
    from mcr.rest.config import load_config

    def body() -> int:
        if args.token_seconds < MIN_TOKEN_SECONDS:
            raise UsageError(
                f"--token-seconds must be at least {MIN_TOKEN_SECONDS}, not {args.token_seconds}"
            )
        if (args.hub_kubeconfig or args.hub_context) and not args.apply:
            raise UsageError("--hub-kubeconfig and --hub-context choose where --apply writes: pass --apply")
        name = _app_name(args)
        derived = _rules(args, with_provider=True)
        if not derived.on("fleet"):
            raise UsageError(f"{args.app}'s controllers watch no fleet cluster: there is nothing to grant")
        try:
            config = load_config(args.kubeconfig, context=args.context)
        except Exception as exc:  # noqa: BLE001 -- a bad kubeconfig or context: bad input
            raise UsageError(str(exc)) from None
        cluster = _dns_name(args.cluster_name or config.context or "", "--cluster-name")
        hub = None
        if args.apply:
            try:
                hub = load_config(args.hub_kubeconfig, context=args.hub_context)
            except Exception as exc:  # noqa: BLE001 -- a bad kubeconfig or context: bad input
                raise UsageError(f"hub: {exc}") from None

        async def run() -> None:
            issued = await issue(
                config,
                derived.rules,
                name=name,
                namespace=args.namespace,
                cluster_name=cluster,
                token_seconds=args.token_seconds,
            )
            secret = kubeconfig_secret(
                cluster,
                args.secret_namespace,
                issued.kubeconfig,
                label=args.label or DEFAULT_LABEL,
                key=args.key or DEFAULT_KEY,
            )
            print(
                f"mcr fleet-credentials: ServiceAccount {args.namespace}/{name} in {cluster!r}, "
                f"token expires {issued.expiration or 'per the server'}",
                file=sys.stderr,
            )
            if hub is None:
                _dump([secret], out)
                return
            from mcr.client import Client
            from mcr.rbac.credentials import FIELD_MANAGER

            async with hub.transport("hub") as transport:
                await Client(transport, field_manager=FIELD_MANAGER).apply(secret, force=True)
            print(
                f"mcr fleet-credentials: applied Secret {args.secret_namespace}/{cluster} in the hub",
                file=sys.stderr,
            )

        asyncio.run(run())
        return 0

    return _guarded("fleet-credentials", body)


def _guarded(command: str, body: Any) -> int:
    from mcr.errors import MCRError

    try:
        status: int = body()
    except UsageError as exc:
        print(f"mcr {command}: {exc}", file=sys.stderr)
        return 2
    except MCRError as exc:
        print(f"mcr {command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 -- the app's import or setup failed: show where, exit 1
        traceback.print_exc()
        print(f"mcr {command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return status
