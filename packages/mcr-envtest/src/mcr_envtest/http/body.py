"""Request bodies and write parameters: content types, decoding (JSON, YAML, protobuf), the
body's type check, ``dryRun``, ``fieldManager``, ``fieldValidation`` and merge patches."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson
import yaml
from aiohttp import web

from mcr_envtest import errors, go_json, validation
from mcr_envtest.cel import rules as cel_rules
from mcr_envtest.resources import BUILTINS, ResourceInfo
from mcr_envtest.schema import protobuf
from mcr_envtest.schema.structural import crd_version_schema

from .context import Backend, Ctx

__all__ = [
    "APPLY",
    "JSON_PATCH",
    "MERGE_PATCH",
    "REVIEWS",
    "SMP",
    "check_type",
    "content_type",
    "decode",
    "dry_run",
    "field_manager",
    "field_validation",
    "merge_patch",
    "object_body",
    "options_invalid",
    "read_body",
    "refuse_custom_kind",
    "storage_info",
    "warn",
]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
SMP = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
APPLY_CBOR = "application/apply-patch+cbor"
BODY_TYPES = ["application/json", "application/yaml"]
REVIEWS = frozenset(
    {
        "selfsubjectaccessreviews",
        "selfsubjectreviews",
        "selfsubjectrulesreviews",
        "subjectaccessreviews",
        "tokenreviews",
    }
)


def content_type(ctx: Ctx) -> str:
    return (ctx.request.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()


async def read_body(ctx: Ctx) -> bytes:
    data = await ctx.request.read()
    if len(data) > errors.MAX_REQUEST_BODY_BYTES:
        raise errors.request_entity_too_large()
    return data


def decode(data: bytes, ctype: str) -> Any:
    if not data.strip():
        raise errors.bad_request("the request body is empty")
    if ctype in ("application/yaml", "text/yaml", APPLY):
        try:
            return yaml.safe_load(data)
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error decoding YAML: {exc}") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise errors.bad_request(f"error decoding JSON: {exc}") from None


async def object_body(ctx: Ctx) -> dict[str, Any]:
    ctype = content_type(ctx)
    if ctype == protobuf.PROTOBUF:
        data = await read_body(ctx)
        try:
            body = protobuf.decode_protobuf(data)
        except ValueError as exc:
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {ctx.info.kind}): {exc} "
                f"({data[:30].hex()} ...)"
            ) from None
    elif ctype not in ("application/json", "application/yaml", "text/yaml", "*/*"):
        # built-in kinds also decode protobuf bodies, and the refusal says so
        raise errors.unsupported_media_type(
            BODY_TYPES if ctx.info.is_custom else [*BODY_TYPES, "application/vnd.kubernetes.protobuf"]
        )
    else:
        data = await read_body(ctx)
        if not data.strip() and not ctx.info.is_custom and ctype == "application/json":
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {ctx.info.kind}): "
                "couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)"
            )
        fault = go_json.syntax_error(data) if ctype == "application/json" and not ctx.info.is_custom else None
        if fault is not None:
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {ctx.info.kind}): "
                f"couldn't get version/kind; json parse error: {fault} ({_summary(data)})"
            )
        body = decode(data, ctype)
        if ctx.query.get("fieldValidation") == "Strict" and ctype == "application/json":
            _refuse_duplicates(ctx, data)
        go_type = _GO_JSON_TYPES.get(type(body))
        if go_type and not ctx.info.is_custom and ctype == "application/json":
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {ctx.info.kind}): "
                f"couldn't get version/kind; json parse error: json: cannot unmarshal {go_type} into Go "
                'value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
                'Kind string "json:\\"kind,omitempty\\"" } '
                f"({_summary(data)})"
            )
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    check_type(ctx, body)
    return body


def _refuse_duplicates(ctx: Ctx, data: bytes) -> None:
    """Under ``fieldValidation=Strict``, a JSON object naming one field twice is a 400."""
    seen: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items]
        seen.extend(k for i, k in enumerate(keys) if k in keys[:i])
        return dict(items)

    json.loads(data, object_pairs_hook=pairs)
    if seen:
        kind, version = ctx.info.kind, ctx.info.version
        fields = ", ".join(f'duplicate field "{k}"' for k in seen)
        raise errors.bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: {fields}'
        )


_BUILTIN_GVKS = frozenset(i.gvk for i in BUILTINS)
_GO_JSON_TYPES: dict[type, str] = {list: "array", str: "string", bool: "bool", int: "number", float: "number"}


def _summary(data: bytes, limit: int = 30) -> str:
    """A request body as kube-apiserver quotes it in a decode error: JSON objects as text, the
    rest as hex, cut after ``limit`` bytes."""
    head, more = data[:limit], " ..." if len(data) > limit else ""
    if data[:1] == b"{":
        return head.decode(errors="replace") + more
    return head.hex() + more


def _not_handled(ctx: Ctx, av: str, kind: str) -> str:
    """kube-apiserver's words for a body of another kind or group-version than the resource's."""
    info = ctx.info
    group, _, version = av.rpartition("/")
    known = (group, version, kind) in _BUILTIN_GVKS
    head = f'{kind} in version "{version}" cannot be handled as a {info.kind}: '
    if not known:
        return (
            head + f'no kind "{kind}" is registered for version "{av}" in scheme "pkg/runtime/scheme.go:111"'
        )
    internal = info.group.split(".")[0] if info.group else "core"
    return head + f"converting ({version}.{kind}) to ({internal}.{info.kind}): unknown conversion"


def check_type(ctx: Ctx, body: dict[str, Any]) -> None:
    info = ctx.info
    av, kind = body.get("apiVersion"), body.get("kind")
    if body.get("metadata") is not None and not isinstance(body["metadata"], dict):
        raise errors.bad_request("metadata must be an object")
    if ctx.subresource in ("scale", "token") or info.plural in REVIEWS:
        return
    if info.is_custom and av == info.api_version and isinstance(kind, str) and kind:
        pass  # another kind of the same group-version: refused by refuse_custom_kind
    elif (av and av != info.api_version) or (kind and kind != info.kind):
        if isinstance(av, str) and isinstance(kind, str) and av and kind and not info.is_custom:
            raise errors.bad_request(_not_handled(ctx, av, kind))
        raise errors.bad_request(
            f"the API version in the data ({av}) does not match the expected API version ({info.api_version})"
            if av and av != info.api_version
            else f"the kind in the data ({kind}) does not match the expected kind ({info.kind})"
        )
    if info.group_resource == ("", "secrets") and isinstance(body.get("data"), dict):
        for value in body["data"].values():
            at = _bad_base64_at(value) if isinstance(value, str) else None
            if at is not None:
                raise errors.bad_request(
                    'Secret in version "v1" cannot be handled as a Secret: '
                    f"illegal base64 data at input byte {at}"
                )
    meta = body.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")


_B64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _bad_base64_at(text: str) -> int | None:
    """Where Go's padded standard base64 decoder gives up on ``text`` (None when it decodes)."""
    raw = text.replace("\r", "").replace("\n", "").encode()
    body = raw.rstrip(b"=")
    pad = len(raw) - len(body)
    for i, c in enumerate(body):
        if c not in _B64:
            return i
    if pad > 2 or len(raw) % 4:
        return len(raw) - len(raw) % 4 if len(raw) % 4 else len(body)
    if pad and len(body) % 4 == 1:
        return len(body) - 1
    return None


def dry_run(ctx: Ctx) -> bool:
    values = ctx.query.getall("dryRun", [])
    if any(v != "All" for v in values):
        options = _OPTIONS.get(ctx.request.method, "CreateOptions")
        listed = ", ".join(f'"{v}"' for v in values)
        why = f'Unsupported value: [{listed}]: supported values: "All"'
        raise errors.StatusError(
            422,
            "Invalid",
            f'{options}.meta.k8s.io "" is invalid: dryRun: {why}',
            details={
                "group": "meta.k8s.io",
                "kind": options,
                "causes": [{"reason": "FieldValueNotSupported", "message": why, "field": "dryRun"}],
            },
        )
    return bool(values)


_OPTIONS = {"PUT": "UpdateOptions", "PATCH": "PatchOptions", "DELETE": "DeleteOptions"}


def options_invalid(ctx: Ctx, reason: str, field: str, message: str) -> errors.StatusError:
    """kube-apiserver's 422 for an invalid query parameter: the request's options kind
    (``PatchOptions.meta.k8s.io`` for a PATCH, ...) is what is invalid."""
    options = _OPTIONS.get(ctx.request.method, "CreateOptions")
    return errors.StatusError(
        422,
        "Invalid",
        f'{options}.meta.k8s.io "" is invalid: {field}: {message}',
        details={
            "group": "meta.k8s.io",
            "kind": options,
            "causes": [{"reason": reason, "message": message, "field": field}],
        },
    )


def field_manager(ctx: Ctx) -> str:
    fm = ctx.query.get("fieldManager")
    if fm:
        if len(fm) > 128:
            raise errors.invalid(
                ctx.info,
                ctx.name,
                [
                    {
                        "type": "FieldValueTooLong",
                        "field": "fieldManager",
                        "message": "Too long: may not be more than 128 bytes",
                    }
                ],
            )
        return str(fm)
    ua = ctx.request.headers.get("User-Agent", "")
    return ua.split("/")[0] if ua else "unknown"


def field_validation(ctx: Ctx, info: ResourceInfo, obj: Any) -> list[str]:
    """Apply ``fieldValidation`` to the fields ``obj``'s schema does not declare: ``Strict`` → a
    400; otherwise they are dropped from a built-in object (as kube-apiserver's decoding into Go
    types drops them; custom resources are pruned by the writer) and, unless ``Ignore``, their
    warning texts are returned (``Warn`` is the default)."""
    mode = ctx.query.get("fieldValidation", "")
    if mode not in ("", "Ignore", "Strict", "Warn"):
        message = f'Unsupported value: "{mode}": supported values: "", "Ignore", "Strict", "Warn"'
        raise options_invalid(ctx, "FieldValueNotSupported", "fieldValidation", message)
    if not isinstance(obj, dict):
        return []
    unknown = validation.unknown_fields(info, obj)
    if not unknown:
        return []
    texts = [f'unknown field "{u.lstrip(".")}"' for u in unknown]
    if mode == "Strict":
        raise errors.bad_request(
            f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
            "strict decoding error: " + ", ".join(texts)
        )
    if not info.is_custom:
        for path in unknown:
            _drop(obj, path)
    return [] if mode == "Ignore" else texts


def _drop(obj: Any, path: str) -> None:
    """Remove the field at ``path`` (``.spec.containers[0].bogus``) when it is there."""
    steps: list[str | int] = []
    for part in path.lstrip(".").split("."):
        name, _, rest = part.partition("[")
        if name:
            steps.append(name)
        for index in rest.split("[") if rest else ():
            steps.append(int(index.rstrip("]")))
    for step in steps[:-1]:
        if isinstance(step, int):
            obj = obj[step] if isinstance(obj, list) and step < len(obj) else None
        else:
            obj = obj.get(step) if isinstance(obj, dict) else None
    if isinstance(obj, dict) and steps and isinstance(steps[-1], str):
        obj.pop(steps[-1], None)


def warn(resp: web.StreamResponse, warnings: list[str]) -> web.StreamResponse:
    for w in warnings:
        resp.headers.add("Warning", '299 - "' + w.replace('"', '\\"') + '"')
    return resp


def storage_info(api: Backend, info: ResourceInfo) -> ResourceInfo:
    return api.registry.storage_info(info.group, info.plural) or info


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def refuse_custom_kind(api: Backend, ctx: Ctx, info: ResourceInfo, body: dict[str, Any]) -> None:
    """A custom resource body naming another kind of its group-version is invalid, reported as
    kube-apiserver's validation reports it under the kind that was sent: the ``kind`` cause,
    then (the schema is not checked) the causes of the CRD's ``x-kubernetes-validations``
    rules."""
    kind = body.get("kind")
    if not ctx.info.is_custom or not isinstance(kind, str) or not kind or kind == ctx.info.kind:
        return
    message = f'Invalid value: "{kind}": must be {ctx.info.kind}'
    causes = [{"reason": "FieldValueInvalid", "message": message, "field": "kind"}]
    old = api.store.get(info.group, info.plural, ctx.namespace, ctx.name) if ctx.name else None
    # nothing is defaulted or pruned for a kind the CRD does not define: the rules see the body
    trial = {**body, "kind": info.kind, "metadata": dict(body.get("metadata") or {})}
    schema = crd_version_schema(info.crd, info.version) if info.crd is not None else None
    causes.extend(cel_rules.causes(schema, trial, old))
    name = str((body.get("metadata") or {}).get("name") or ctx.name or "")
    raise errors.invalid(dataclasses.replace(ctx.info, kind=kind), name, causes)
