"""Representations of objects in responses: content negotiation (JSON, Table, PartialObjectMetadata,
YAML) and the object as served at the request's version."""

from __future__ import annotations

from typing import Any

import yaml
from aiohttp import web

from mcr_envtest import errors, table

from .context import Ctx, json_response

__all__ = ["convert", "include_object", "needs_convert", "negotiate", "partial_metadata", "render_object"]


def negotiate(accept: str) -> str:
    """The representation to answer with: ``json``, ``table``, ``pom`` (PartialObjectMetadata),
    ``yaml``; raises 406 when nothing in Accept can be served."""
    if not accept:
        return "json"
    for part in accept.split(","):
        items = [p.strip() for p in part.split(";")]
        mt = items[0].lower()
        params = dict(p.split("=", 1) for p in items[1:] if "=" in p)
        as_ = params.get("as")
        if mt in ("application/json", "*/*", "application/*", "application/json-seq"):
            if as_ is None:
                return "json"
            if as_ == "Table" and params.get("g") == "meta.k8s.io":
                return "table"
            if (
                as_ in ("PartialObjectMetadata", "PartialObjectMetadataList")
                and params.get("g") == "meta.k8s.io"
            ):
                return "pom"
            continue
        if mt in ("application/yaml", "text/yaml"):
            return "yaml"
    raise errors.StatusError(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml",
    )


def convert(ctx: Ctx, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as served at the request's version (None conversion for CRDs)."""
    if obj.get("apiVersion") != ctx.info.api_version:
        obj = dict(obj)
        obj["apiVersion"] = ctx.info.api_version
    return obj


def needs_convert(ctx: Ctx) -> bool:
    return not ctx.info.storage_version


def partial_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def render_object(ctx: Ctx, obj: dict[str, Any], status: int = 200, raw: bytes | None = None) -> web.Response:
    """One object in the negotiated representation."""
    if ctx.output == "table":
        rv = obj.get("metadata", {}).get("resourceVersion", "")
        return json_response(
            table.to_table(
                ctx.info,
                [convert(ctx, obj)],
                include_object=include_object(ctx),
                resource_version=rv,
                continue_token=None,
            ),
            status,
        )
    if ctx.output == "pom":
        return json_response(partial_metadata(obj), status)
    if ctx.output == "yaml":
        return web.Response(
            text=yaml.safe_dump(convert(ctx, obj)), status=status, content_type="application/yaml"
        )
    if raw is not None and not needs_convert(ctx):
        return json_response(raw, status)
    return json_response(convert(ctx, obj), status)


def include_object(ctx: Ctx) -> str:
    v = ctx.query.get("includeObject", "Metadata") or "Metadata"
    if v not in ("None", "Metadata", "Object"):
        raise errors.bad_request(f'includeObject: Unsupported value: "{v}"')
    return v
