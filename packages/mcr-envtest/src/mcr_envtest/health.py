"""The health endpoints ``/healthz``, ``/livez`` and ``/readyz`` as kube-apiserver 1.37 answers
them: ``ok``, or with ``?verbose`` one ``[+]<check> ok`` line per check and ``<endpoint> check
passed``; ``?exclude=<check>`` (repeatable) marks a check ``excluded: ok``; ``/<endpoint>/<check>``
answers one check, and an unknown check is a plain-text 404.

mcr-envtest has no failing checks: a server that answers is healthy."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ENDPOINTS", "check_body", "endpoint_body"]

_POST_START_HOOKS = (
    "start-apiserver-admission-initializer",
    "generic-apiserver-start-informers",
    "priority-and-fairness-config-consumer",
    "priority-and-fairness-filter",
    "storage-object-count-tracker-hook",
    "start-apiextensions-informers",
    "start-apiextensions-controllers",
    "crd-informer-synced",
    "start-system-namespaces-controller",
    "peer-endpoint-reconciler-controller",
    "start-cluster-authentication-info-controller",
    "start-kube-apiserver-identity-lease-controller",
    "start-kube-apiserver-identity-lease-garbage-collector",
    "storage-readiness",
    "start-legacy-token-tracking-controller",
    "start-service-ip-repair-controllers",
    "rbac/bootstrap-roles",
    "scheduling/bootstrap-system-priority-classes",
    "priority-and-fairness-config-producer",
    "bootstrap-controller",
    "start-kubernetes-service-cidr-controller",
    "start-kube-aggregator-informers",
    "apiservice-status-local-available-controller",
    "apiservice-status-remote-available-controller",
    "apiservice-registration-controller",
    "apiservice-discovery-controller",
    "kube-apiserver-autoregistration",
)
_LAST = (
    "autoregister-completion",
    "poststarthook/apiservice-openapi-controller",
    "poststarthook/apiservice-openapiv3-controller",
)


def _checks(first: Iterable[str], last: Iterable[str] = ()) -> tuple[str, ...]:
    return (*first, *(f"poststarthook/{h}" for h in _POST_START_HOOKS), *_LAST, *last)


ENDPOINTS: dict[str, tuple[str, ...]] = {
    "healthz": _checks(("ping", "log", "loopback-serving-certificate", "etcd")),
    "livez": _checks(("ping", "log", "loopback-serving-certificate", "etcd")),
    "readyz": _checks(("ping", "log", "etcd", "etcd-readiness", "informer-sync"), ("shutdown",)),
}


def endpoint_body(endpoint: str, *, verbose: bool, exclude: Iterable[str]) -> str:
    """The answer of ``/<endpoint>`` (``healthz``, ``livez`` or ``readyz``)."""
    if not verbose:
        return "ok"
    excluded = set(exclude)
    lines = []
    for check in ENDPOINTS[endpoint]:
        if check in excluded:
            excluded.discard(check)
            lines.append(f"[+]{check} excluded: ok")
        else:
            lines.append(f"[+]{check} ok")
    if excluded:
        unknown = ", ".join(f'"{c}"' for c in sorted(excluded))
        lines.append(f"warn: some health checks cannot be excluded: no matches for {unknown}")
    lines.append(f"{endpoint} check passed")
    return "\n".join(lines) + "\n"


def check_body(endpoint: str, check: str) -> str | None:
    """The answer of ``/<endpoint>/<check>``, None when the endpoint has no such check."""
    return "ok" if check in ENDPOINTS[endpoint] else None
