"""Objects at the version a request names: custom resources through the CRD's conversion webhook
when it has one (``spec.conversion.strategy: Webhook``), HorizontalPodAutoscalers between
``autoscaling/v1`` and ``v2`` (:mod:`mcr_envtest.hpa_conversion`); other kinds and CRDs are left
to :func:`~mcr_envtest.http.render.convert`."""

from __future__ import annotations

from typing import Any

from mcr_envtest import hpa_conversion
from mcr_envtest.admission import conversion
from mcr_envtest.resources import ResourceInfo

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
    converted by a webhook, or a HorizontalPodAutoscaler."""
    return info.group_resource == hpa_conversion.RESOURCE or _crd(api, info) is not None


async def to_version(
    api: Backend, info: ResourceInfo, objects: list[dict[str, Any]], api_version: str
) -> list[dict[str, Any]]:
    """``objects`` (of ``info``'s resource) at ``api_version``; unchanged unless the CRD converts
    through a webhook or is a HorizontalPodAutoscaler (the list is returned as it is when no object
    changes). Raises the webhook's failure as a StatusError."""
    if info.group_resource == hpa_conversion.RESOURCE:
        out = [hpa_conversion.convert(o, api_version) for o in objects]
        return objects if all(a is b for a, b in zip(out, objects, strict=True)) else out
    crd = _crd(api, info)
    if crd is None:
        return objects
    return await conversion.convert(api.store, crd, objects, api_version)
