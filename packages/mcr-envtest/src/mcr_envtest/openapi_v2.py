"""The Swagger 2.0 document kube-apiserver serves at ``/openapi/v2``, built from the OpenAPI v3
documents of :mod:`.openapi`: every served group-version's definitions (built-in kinds under
upstream's names such as ``io.k8s.api.core.v1.ConfigMap``, custom resources as
``com.example.v1.Widget``) and paths, with ``#/definitions/`` references.

The document and its ETag are built on first request and cached per registry until the registry
changes (a CRD added, changed or removed).
"""

from __future__ import annotations

import copy
import hashlib
import weakref
from typing import TYPE_CHECKING, Any

import orjson

from . import openapi

if TYPE_CHECKING:
    from .resources import Registry

__all__ = ["JSON", "PROTOBUF_TYPES", "document", "negotiate"]

JSON = "application/json"
# What kube-apiserver also serves (the gnostic protobuf encoding; mcr-envtest does not).
PROTOBUF_TYPES = (
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
)
_V3_REF = "#/components/schemas/"
_V2_REF = "#/definitions/"
_PRODUCES = ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]

_cache: weakref.WeakKeyDictionary[Any, tuple[int, bytes, str]] = weakref.WeakKeyDictionary()


def negotiate(accept: str) -> str | None:
    """The media type to answer an ``Accept`` header with: JSON when it admits JSON (or says
    nothing), None when it admits only types mcr-envtest does not produce (answer 406)."""
    if not accept.strip():
        return JSON
    for part in accept.split(","):
        media = part.split(";", 1)[0].strip().lower()
        if media in (JSON, "*/*", "application/*"):
            return JSON
    return None


def document(registry: Registry) -> tuple[bytes, str]:
    """(JSON body, ETag) of the document for ``registry``'s current resources. The ETag is
    quoted, as an HTTP header carries it."""
    cached = _cache.get(registry)
    if cached is not None and cached[0] == registry.generation:
        return cached[1], cached[2]
    body = orjson.dumps(_build(registry))
    etag = '"' + hashlib.sha512(body).hexdigest().upper() + '"'
    _cache[registry] = (registry.generation, body, etag)
    return body, etag


def _refs_to_v2(node: Any) -> Any:
    """``node`` with v3 component references turned into v2 definition references, and
    ``allOf: [{$ref}]`` wrappers (v3's way to describe a reference) unwrapped as v2 writes them."""
    if isinstance(node, dict):
        out = {k: _refs_to_v2(v) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith(_V3_REF):
            out["$ref"] = _V2_REF + ref[len(_V3_REF) :]
        all_of = out.get("allOf")
        if (
            isinstance(all_of, list)
            and len(all_of) == 1
            and isinstance(all_of[0], dict)
            and "$ref" in all_of[0]
        ):
            del out["allOf"]
            out["$ref"] = all_of[0]["$ref"]
        return out
    if isinstance(node, list):
        return [_refs_to_v2(v) for v in node]
    return node


def _parameter(p: dict[str, Any]) -> dict[str, Any]:
    schema = p.get("schema") or {}
    out = {k: v for k, v in p.items() if k != "schema"}
    for key in ("type", "uniqueItems"):
        if key in schema:
            out[key] = schema[key]
    return out


def _operation(op: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": op.get("description", "")}
    body = op.get("requestBody")
    out["consumes"] = list((body or {}).get("content") or {}) or ["*/*"]
    out["produces"] = list(_PRODUCES)
    out["schemes"] = ["https"]
    for key in ("tags", "operationId"):
        if key in op:
            out[key] = op[key]
    params: list[dict[str, Any]] = []
    if body is not None:
        content: dict[str, Any] = body.get("content") or {}
        first: dict[str, Any] = next(iter(content.values()), {})
        schema: dict[str, Any] = first.get("schema") or {}
        if "$ref" not in schema:
            schema = {"$ref": _V2_REF + "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}
        params.append({"name": "body", "in": "body", "required": True, "schema": _refs_to_v2(schema)})
    params.extend(_parameter(p) for p in op.get("parameters") or [])
    if params:
        out["parameters"] = params
    responses: dict[str, Any] = {}
    for code, resp in (op.get("responses") or {}).items():
        entry: dict[str, Any] = {"description": resp.get("description", "")}
        content = resp.get("content") or {}
        if content:
            entry["schema"] = _refs_to_v2(next(iter(content.values())).get("schema") or {})
        responses[code] = entry
    responses["401"] = {"description": "Unauthorized"}
    out["responses"] = responses
    for key, value in op.items():
        if key.startswith("x-kubernetes-"):
            out[key] = copy.deepcopy(value)
    return out


def _build(registry: Registry) -> dict[str, Any]:
    definitions: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for group, versions in registry.groups():
        for version in versions:
            doc = openapi.group_version_document(registry, group, version)
            if doc is None:
                continue
            for name, schema in (doc.get("components") or {}).get("schemas", {}).items():
                definitions.setdefault(name, _refs_to_v2(schema))
            for path, item in (doc.get("paths") or {}).items():
                entry: dict[str, Any] = {}
                for method, op in item.items():
                    if method == "parameters":
                        entry["parameters"] = [_parameter(p) for p in op]
                    elif isinstance(op, dict):
                        entry[method] = _operation(op)
                paths[path] = entry
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "1.37"},
        "paths": dict(sorted(paths.items())),
        "definitions": dict(sorted(definitions.items())),
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "type": "apiKey",
                "name": "authorization",
                "in": "header",
            }
        },
        "security": [{"BearerToken": []}],
    }
