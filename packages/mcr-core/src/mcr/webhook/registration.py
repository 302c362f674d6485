"""Webhook configurations in a cluster: what the registered handlers ask of each API server.

For one cluster, the validating handlers become one ValidatingWebhookConfiguration and the mutating
handlers one MutatingWebhookConfiguration, both named after the server; each handler is one webhook
whose client config points at the path naming that cluster (:mod:`mcr.webhook.routing`) and whose
rules name the handler's kind (its resource found by the cluster's REST mapper). A converter sets
its CRD's ``spec.conversion`` to the ``Webhook`` strategy. Writes are server-side applies by the
field manager ``mcr-webhook``, so a repeat call with the same input changes nothing.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcr.errors import is_not_found
from mcr.rest.kinds import GVK
from mcr.webhook.admission import Handler
from mcr.webhook.conversion import Converter
from mcr.webhook.routing import path_for

if TYPE_CHECKING:
    from mcr.cluster import Cluster

__all__ = ["AdmissionSpec", "ConversionSpec", "Endpoint", "register", "unregister"]

FIELD_MANAGER = "mcr-webhook"
_CONFIG_KINDS = {
    "validate": "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration",
    "mutate": "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration",
}
CRD_KIND = "apiextensions.k8s.io/v1/CustomResourceDefinition"


@dataclass(frozen=True)
class AdmissionSpec:
    """One admission handler and the webhook entry it is registered as."""

    operation: str  # "validate" | "mutate"
    gvk: GVK
    model: type[Any] | None
    handler: Handler
    name: str | None = None
    failure_policy: str = "Fail"
    side_effects: str = "None"
    timeout_seconds: int = 10
    operations: tuple[str, ...] = ("CREATE", "UPDATE")
    match_conditions: tuple[Mapping[str, str], ...] = ()
    namespace_selector: Mapping[str, Any] | None = None
    object_selector: Mapping[str, Any] | None = None
    reinvocation_policy: str | None = None  # mutating only: "Never" | "IfNeeded"

    def webhook_name(self, config_name: str) -> str:
        """The entry's name: given, or ``<kind>.<version>.<group>.<config name>`` (fully qualified)."""
        if self.name:
            return self.name
        return f"{self.gvk.kind.lower()}.{self.gvk.version}.{self.gvk.group or 'core'}.{config_name}"


@dataclass(frozen=True)
class ConversionSpec:
    """A converter for the CRD of ``gvk``'s group and kind (any version of it)."""

    gvk: GVK
    converter: Converter


@dataclass(frozen=True)
class Endpoint:
    """Where API servers reach the webhook server: a base ``url``, or a Service.

    ``service`` is ``(namespace, name, port)``; the path of each handler is appended to ``url``
    or set as the service's path.
    """

    url: str | None = None
    service: tuple[str, str, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def client_config(self, path: str, ca_bundle: bytes) -> dict[str, Any]:
        config: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle).decode()}
        if self.service is not None:
            namespace, name, port = self.service
            config["service"] = {"namespace": namespace, "name": name, "port": port, "path": path}
        else:
            assert self.url is not None
            config["url"] = self.url.rstrip("/") + path
        return config


async def _webhook(
    cluster: Cluster, cluster_name: str, spec: AdmissionSpec, config_name: str, endpoint: Endpoint, ca: bytes
) -> dict[str, Any]:
    mapping = await cluster.rest_mapper.mapping(spec.gvk)
    path = path_for(spec.operation, cluster_name, spec.gvk.group, spec.gvk.version, spec.gvk.kind)
    hook: dict[str, Any] = {
        "name": spec.webhook_name(config_name),
        "clientConfig": endpoint.client_config(path, ca),
        "rules": [
            {
                "apiGroups": [spec.gvk.group],
                "apiVersions": [spec.gvk.version],
                "resources": [mapping.gvr.resource],
                "operations": list(spec.operations),
                "scope": "*",
            }
        ],
        "failurePolicy": spec.failure_policy,
        "sideEffects": spec.side_effects,
        "timeoutSeconds": spec.timeout_seconds,
        "admissionReviewVersions": ["v1"],
    }
    if spec.match_conditions:
        hook["matchConditions"] = [dict(c) for c in spec.match_conditions]
    if spec.namespace_selector is not None:
        hook["namespaceSelector"] = dict(spec.namespace_selector)
    if spec.object_selector is not None:
        hook["objectSelector"] = dict(spec.object_selector)
    if spec.operation == "mutate" and spec.reinvocation_policy:
        hook["reinvocationPolicy"] = spec.reinvocation_policy
    return hook


async def register(
    cluster: Cluster,
    cluster_name: str,
    *,
    config_name: str,
    admissions: Sequence[AdmissionSpec],
    conversions: Sequence[ConversionSpec],
    endpoint: Endpoint,
    ca_bundle: bytes,
) -> list[str]:
    """Create or update the cluster's configurations and CRD conversions for these handlers.

    Returns the kinds the cluster does not serve (their handlers are left out; call again to add
    them once served). A configuration kind without handlers is deleted if it exists. Errors of
    the API server propagate.
    """
    missing: list[str] = []
    for operation, kind in _CONFIG_KINDS.items():
        hooks = []
        for spec in (s for s in admissions if s.operation == operation):
            try:
                hooks.append(await _webhook(cluster, cluster_name, spec, config_name, endpoint, ca_bundle))
            except LookupError:  # NoKindMatchError: not served by this cluster (yet)
                missing.append(str(spec.gvk))
        if not hooks:
            await _delete(cluster, kind, config_name)
            continue
        gvk = GVK.from_api_version("admissionregistration.k8s.io/v1", kind.rsplit("/", 1)[1])
        obj = {
            "apiVersion": gvk.api_version,
            "kind": gvk.kind,
            "metadata": {"name": config_name, "labels": {"app.kubernetes.io/managed-by": "mcr"}},
            "webhooks": hooks,
        }
        await cluster.client.apply(obj, field_manager=FIELD_MANAGER, force=True)
    for conv in conversions:
        try:
            mapping = await cluster.rest_mapper.mapping(conv.gvk)
        except LookupError:
            missing.append(str(conv.gvk))
            continue
        path = path_for("convert", cluster_name, conv.gvk.group, conv.gvk.version, conv.gvk.kind)
        patch = {
            "spec": {
                "conversion": {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": endpoint.client_config(path, ca_bundle),
                        "conversionReviewVersions": ["v1"],
                    },
                }
            }
        }
        await cluster.client.patch(
            CRD_KIND, f"{mapping.gvr.resource}.{conv.gvk.group}", patch, field_manager=FIELD_MANAGER
        )
    return missing


async def _delete(cluster: Cluster, kind: str, name: str) -> None:
    try:
        await cluster.client.delete(kind, name)
    except Exception as exc:
        if not is_not_found(exc):
            raise


async def unregister(cluster: Cluster, *, config_name: str, conversions: Sequence[ConversionSpec]) -> None:
    """Delete the cluster's configurations and set the converters' CRDs back to strategy ``None``.

    Objects already gone are not an error; other API errors propagate.
    """
    for kind in _CONFIG_KINDS.values():
        await _delete(cluster, kind, config_name)
    for conv in conversions:
        try:
            mapping = await cluster.rest_mapper.mapping(conv.gvk)
            patch = {"spec": {"conversion": {"strategy": "None", "webhook": None}}}
            await cluster.client.patch(
                CRD_KIND, f"{mapping.gvr.resource}.{conv.gvk.group}", patch, field_manager=FIELD_MANAGER
            )
        except Exception as exc:
            if not is_not_found(exc) and not isinstance(exc, LookupError):
                raise
