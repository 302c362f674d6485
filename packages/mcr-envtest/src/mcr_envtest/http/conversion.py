"""Objects at the version a request names: custom resources through the CRD's conversion webhook
when it has one (``spec.conversion.strategy: Webhook``), HorizontalPodAutoscalers and Events
between their versions (:mod:`mcr_envtest.version_conversion`); other kinds and CRDs are left
to :func:`~mcr_envtest.http.render.convert`."""

from __future__ import annotations

from typing import Any

from mcr_envtest.admission import conversion
from mcr_envtest.resources import ResourceInfo
from mcr_envtest.version_conversion import converter_for

from .context import Backend

__all__ = ["to_version", "webhook_converts"]


def _crd(api: Backend, info: ResourceInfo) -> dict[str, Any] | None:
    if not info.is_custom:
        return None
    crd = api.store.get(
        "apiextensions.k8s.io", "customresourcedefinitions", "", f"{info.plural}.{info.group}"
    )
    return crd if conversion.webhook_config(crd) is not None else None


def webhook_converts(api: Backend, info: ResourceInfo) -> bool:
    """True when ``info``'s resource converts by more than its ``apiVersion``: a custom resource
    converted by a webhook, or a built-in resource of :mod:`mcr_envtest.version_conversion`."""
    return converter_for(info.group_resource) is not None or _crd(api, info) is not None


async def to_version(
    api: Backend, info: ResourceInfo, objects: list[dict[str, Any]], api_version: str
) -> list[dict[str, Any]]:
    """``objects`` (of ``info``'s resource) at ``api_version``; unchanged unless the CRD converts
    through a webhook or the resource is a built-in one mcr-envtest converts (the list is returned
    as it is when no object changes). Raises the webhook's failure as a StatusError."""
    builtin = converter_for(info.group_resource)
    if builtin is not None:
        out = [builtin(o, api_version) for o in objects]
        return objects if all(a is b for a, b in zip(out, objects, strict=True)) else out
    crd = _crd(api, info)
    if crd is None:
        return objects
    return await conversion.convert(api.store, crd, objects, api_version)
