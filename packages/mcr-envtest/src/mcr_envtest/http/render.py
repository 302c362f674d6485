"""Representations of objects in responses: content negotiation (JSON, Table, PartialObjectMetadata,
YAML) and the object as served at the request's version."""

from __future__ import annotations

from typing import Any

import yaml
from aiohttp import web

from mcr_envtest import errors, table
from mcr_envtest.schema.protobuf_encode import encode_object
from mcr_envtest.version_conversion import converter_for

from .context import PROTOBUF, Ctx, json_response, protobuf_response

__all__ = [
    "convert",
    "include_object",
    "needs_convert",
    "negotiate",
    "partial_metadata",
    "prefers_protobuf",
    "render_object",
]


_TYPES = "application/json, application/yaml, " + PROTOBUF
_STREAMS = f", application/json;stream=watch, {PROTOBUF};stream=watch"


def _not_acceptable(builtin: bool, collection: bool) -> errors.StatusError:
    # kube-apiserver words this differently for built-in kinds (their REST handlers) and CRs
    if not builtin:
        return errors.StatusError(
            406, "NotAcceptable", f"only the following media types are accepted: {_TYPES}"
        )
    listed = _TYPES + (_STREAMS if collection else "")
    return errors.StatusError(
        406,
        "NotAcceptable",
        f"406: Not Acceptable\n\nAvailable representations: {listed}",
        details=errors.EMPTY_DETAILS,
    )


def negotiate(accept: str, *, protobuf: bool = False, builtin: bool = False, collection: bool = False) -> str:
    """The representation to answer with: ``json``, ``table``, ``pom`` (PartialObjectMetadata),
    ``yaml``, or ``protobuf`` when ``protobuf`` (the kind has a protobuf encoding) and Accept
    prefers it; raises 406 when nothing in Accept can be served (worded for a ``builtin`` kind or
    a custom resource, listing the watch streams for a ``collection``)."""
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
        if mt == PROTOBUF and protobuf and as_ is None:
            return "protobuf"
    raise _not_acceptable(builtin, collection)


def prefers_protobuf(accept: str) -> bool:
    """True when the first type in Accept that kube-apiserver serves is protobuf (errors are
    then encoded as protobuf Status objects)."""
    for part in accept.split(","):
        mt = part.split(";", 1)[0].strip().lower()
        if mt == PROTOBUF:
            return True
        if mt in ("application/json", "*/*", "application/*", "application/yaml", "text/yaml"):
            return False
    return False


def convert(ctx: Ctx, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as served at the request's version (None conversion for CRDs)."""
    builtin = converter_for(ctx.info.group_resource)
    if builtin is not None:
        return builtin(obj, ctx.info.api_version)
    if obj.get("apiVersion") != ctx.info.api_version:
        obj = dict(obj)
        obj["apiVersion"] = ctx.info.api_version
    return obj


def needs_convert(ctx: Ctx) -> bool:
    return not ctx.info.storage_version or converter_for(ctx.info.group_resource) is not None


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
    if ctx.output == "protobuf":
        return protobuf_response(encode_object(convert(ctx, obj)), status)
    if raw is not None and not needs_convert(ctx):
        return json_response(raw, status)
    return json_response(convert(ctx, obj), status)


def include_object(ctx: Ctx) -> str:
    v = ctx.query.get("includeObject", "Metadata") or "Metadata"
    if v not in ("None", "Metadata", "Object"):
        raise errors.bad_request(f'includeObject: Unsupported value: "{v}"')
    return v
