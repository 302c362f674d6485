"""The objects that deploy an operator: Namespace, ServiceAccount, roles, bindings, Deployment.

:func:`hub_objects` renders them from :class:`Deployment` settings and the hub's rules;
:func:`fleet_objects` renders the roles a fleet cluster's credentials need. Both are pure: the
same input gives the same objects, in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcr.rbac.rules import Rule, merge

__all__ = [
    "DEFAULT_IMAGE",
    "FLEET_IN_HUB",
    "HEALTH_PORT",
    "METRICS_CERT_PATH",
    "METRICS_PORT",
    "Deployment",
    "Provider",
    "fleet_objects",
    "hub_objects",
    "lease_rules",
    "metrics_auth_rules",
    "place_fleet_in_hub",
    "provider_rules",
]

HEALTH_PORT = 8081
METRICS_PORT = 8080
METRICS_CERT_PATH = "/etc/mcr/metrics-certs"
"""Where the Deployment mounts the Secret ``<name>-metrics-cert`` with ``--metrics-secure``."""
DEFAULT_IMAGE = "mcr-operator:latest"
SHUTDOWN_MARGIN = 5
"""Seconds the pod's grace period adds to the manager's graceful shutdown timeout (for exit)."""


@dataclass(frozen=True)
class Provider:
    """A ``--provider [MEMBER=]NAME`` with its ``--provider-opt KEY=VALUE`` options, in order."""

    member: str
    name: str
    options: tuple[tuple[str, str], ...] = ()

    def args(self) -> list[str]:
        """The ``mcr run`` arguments that choose this provider."""
        out = ["--provider", self.name if self.member == self.name else f"{self.member}={self.name}"]
        for key, value in self.options:
            out += ["--provider-opt", f"{key}={value}"]
        return out

    def option_values(self) -> dict[str, list[str]]:
        """Each option key with its values, in order (what the RBAC hook receives)."""
        out: dict[str, list[str]] = {}
        for key, value in self.options:
            out.setdefault(key, []).append(value)
        return out


@dataclass(frozen=True)
class Deployment:
    """How the operator runs: ``mcr run APP`` in ``namespace`` under ServiceAccount ``name``."""

    name: str
    namespace: str
    app: str
    image: str = DEFAULT_IMAGE
    providers: tuple[Provider, ...] = ()
    leader_elect: bool = False
    shard: bool = False
    metrics_secure: bool = False
    replicas: int = 1
    graceful_shutdown_timeout: float = 30.0
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    def run_args(self) -> list[str]:
        """The arguments of ``mcr`` in the container."""
        args = ["run", self.app]
        for p in self.providers:
            args += p.args()
        args += [
            "--health-probe-bind-address",
            f":{HEALTH_PORT}",
            "--metrics-bind-address",
            f":{METRICS_PORT}",
            "--graceful-shutdown-timeout",
            f"{self.graceful_shutdown_timeout:g}",
        ]
        if self.leader_elect:
            args += ["--leader-elect", "--leader-election-id", self.name]
            args += ["--leader-election-namespace", self.namespace]
        if self.shard:
            args += ["--shard", "--shard-namespace", self.namespace]
        if self.metrics_secure:
            args += ["--metrics-secure", "--metrics-cert-path", METRICS_CERT_PATH]
        return args + list(self.extra_args)

    @property
    def metrics_cert_secret(self) -> str:
        """The Secret (``tls.crt``, ``tls.key``; e.g. cert-manager's) serving ``/metrics`` over HTTPS."""
        return f"{self.name}-metrics-cert"

    def grace_period(self) -> int:
        """``terminationGracePeriodSeconds``: the shutdown timeout plus a margin to exit."""
        if self.graceful_shutdown_timeout < 0:
            return 3600  # the manager waits for ever: give in-flight work an hour
        return math.ceil(self.graceful_shutdown_timeout) + SHUTDOWN_MARGIN


def lease_rules(namespace: str, *, leader_elect: bool, shard: bool) -> list[Rule]:
    """The Lease rules (``coordination.k8s.io``, in ``namespace``) leader election and sharding need."""
    verbs: set[str] = set()
    if leader_elect:
        verbs |= {"get", "create", "update"}
    if shard:
        verbs |= {"get", "list", "watch", "create", "update", "patch", "delete"}
    if not verbs:
        return []
    return [Rule(("coordination.k8s.io",), ("leases",), tuple(sorted(verbs)), namespace, "hub")]


def metrics_auth_rules() -> list[Rule]:
    """What ``--metrics-secure`` needs in the hub: reviewing the scrapers' tokens and access."""
    return [
        Rule(("authentication.k8s.io",), ("tokenreviews",), ("create",), None, "hub"),
        Rule(("authorization.k8s.io",), ("subjectaccessreviews",), ("create",), None, "hub"),
    ]


def provider_rules(hook: Any, provider: Provider) -> list[Rule] | None:
    """The hub rules ``provider`` needs, from the plugins' ``mcr_provider_rbac`` hook ``hook``.

    ``None`` when no plugin answers for its name. ``ValueError`` naming the provider when a plugin
    refuses the options or returns something that is not a list of rules.
    """
    try:
        answers = hook.mcr_provider_rbac(name=provider.name, options=provider.option_values())
    except ValueError as exc:
        raise ValueError(f"provider {provider.name!r}: {exc}") from None
    if not answers:
        return None
    out: list[Rule] = []
    for answer in answers:
        if not isinstance(answer, list):
            raise ValueError(f"provider {provider.name!r}: its RBAC hook returned {answer!r}, not a list")
        for i, d in enumerate(answer):
            if not isinstance(d, Mapping):
                raise ValueError(f"provider {provider.name!r}: RBAC rule {i} is {d!r}, not a mapping")
            if d.get(FLEET_IN_HUB) is True:
                if len(d) != 1:
                    raise ValueError(
                        f"provider {provider.name!r}: RBAC rule {i}: {FLEET_IN_HUB} stands alone"
                    )
                out.append(_FLEET_IN_HUB)
                continue
            out.append(Rule.from_policy(d, where=f"provider {provider.name!r}: RBAC rule {i}"))
    return out


FLEET_IN_HUB = "fleetInHub"
"""The key of the hook answer ``{"fleetInHub": True}``: the provider's clusters are views of the
hub itself (the namespace provider's namespaces), so the controllers' fleet rules are granted in
the hub."""

# What provider_rules returns for {"fleetInHub": True} (see place_fleet_in_hub): a rule that
# grants nothing, should it ever reach a role.
_MARK = "mcr.fleet-in-hub"
_FLEET_IN_HUB = Rule((_MARK,), (_MARK,), (_MARK,), None, "fleet")


def place_fleet_in_hub(rules: Sequence[Rule]) -> list[Rule]:
    """``rules`` for the hub when a provider answered ``{"fleetInHub": True}``: every fleet rule
    is also granted in the hub; without such an answer, ``rules`` as they are."""
    if _FLEET_IN_HUB not in rules:
        return list(rules)
    kept = [r for r in rules if r != _FLEET_IN_HUB]
    return kept + [
        Rule(r.api_groups, r.resources, r.verbs, r.namespace, "hub", r.resource_names)
        for r in kept
        if r.on == "fleet"
    ]


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "mcr"}
    return meta


def _namespace_meta(namespace: str, d: Deployment) -> dict[str, Any]:
    # Only the operator's own namespace is labelled as the operator's: the others (a provider's)
    # are shared with whoever else uses them.
    return _meta(namespace) if namespace == d.namespace else {"name": namespace}


def _roles(name: str, rules: Iterable[Rule], subject: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    rbac = "rbac.authorization.k8s.io/v1"
    for namespace, policy in merge(rules).items():
        kind = "ClusterRole" if namespace is None else "Role"
        objects.append(
            {"apiVersion": rbac, "kind": kind, "metadata": _meta(name, namespace), "rules": policy}
        )
        if subject is None:
            continue
        objects.append(
            {
                "apiVersion": rbac,
                "kind": f"{kind}Binding",
                "metadata": _meta(name, namespace),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
                "subjects": [dict(subject)],
            }
        )
    return objects


def _probe(path: str, period: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": "health"}, "periodSeconds": period, "timeoutSeconds": 5}


def _deployment(d: Deployment) -> dict[str, Any]:
    container = {
        "name": "manager",
        "image": d.image,
        "command": ["mcr"],
        "args": d.run_args(),
        "env": [
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        ],
        "ports": [
            {"name": "metrics", "containerPort": METRICS_PORT},
            {"name": "health", "containerPort": HEALTH_PORT},
        ],
        "livenessProbe": {**_probe("/healthz", 20), "initialDelaySeconds": 15},
        "readinessProbe": {**_probe("/readyz", 10), "initialDelaySeconds": 5},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    labels = {"app.kubernetes.io/name": d.name}
    volumes: list[dict[str, Any]] = []
    if d.metrics_secure:
        container["volumeMounts"] = [
            {"name": "metrics-certs", "mountPath": METRICS_CERT_PATH, "readOnly": True}
        ]
        volumes.append({"name": "metrics-certs", "secret": {"secretName": d.metrics_cert_secret}})
    pod: dict[str, Any] = {
        "serviceAccountName": d.name,
        "terminationGracePeriodSeconds": d.grace_period(),
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }
    if volumes:
        pod["volumes"] = volumes
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(d.name, d.namespace),
        "spec": {
            "replicas": d.replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": pod,
            },
        },
    }


def hub_objects(d: Deployment, rules: Sequence[Rule]) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, the roles granting ``rules`` (hub side) and their bindings,
    and the Deployment, in the order they can be applied."""
    subject = {"kind": "ServiceAccount", "name": d.name, "namespace": d.namespace}
    hub = [r for r in rules if r.applies_to("hub")]
    namespaces = sorted({d.namespace} | {r.namespace for r in hub if r.namespace is not None})
    return [
        *({"apiVersion": "v1", "kind": "Namespace", "metadata": _namespace_meta(ns, d)} for ns in namespaces),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(d.name, d.namespace)},
        *_roles(d.name, hub, subject),
        *_metrics_reader(d),
        _deployment(d),
    ]


def _metrics_reader(d: Deployment) -> list[dict[str, Any]]:
    """With ``--metrics-secure``: the ClusterRole a scraper (Prometheus) is bound to, unbound here."""
    if not d.metrics_secure:
        return []
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(f"{d.name}-metrics-reader"),
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        }
    ]


def fleet_objects(
    name: str, rules: Sequence[Rule], subject: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The ClusterRole (and Roles, for namespaced rules) granting the fleet side of ``rules``,
    bound to ``subject`` when given."""
    return _roles(name, [r for r in rules if r.applies_to("fleet")], subject)
