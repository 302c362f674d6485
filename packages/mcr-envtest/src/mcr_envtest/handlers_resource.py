"""Write verbs over HTTP: create, update, patch (json, merge, strategic, apply), delete,
deletecollection and the subresources (status, scale, token, finalize, access reviews)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jsonpatch
import orjson
import yaml
from aiohttp import web

from . import _schema_proto, auth, errors, strategic, validation
from . import apply as applymod
from .handlers import Ctx, json_response
from .handlers_read import render_object
from .handlers_write import deep_copy, now_rfc3339
from .resources import ResourceInfo
from .selectors import parse_field_selector, parse_label_selector

if TYPE_CHECKING:
    from .handlers import Api

__all__ = ["handle"]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
SMP = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
APPLY_CBOR = "application/apply-patch+cbor"
# Upstream answers an immediate DELETE of these with the deleted object, not a Status (the
# official client's return types depend on it).
RETURNS_DELETED_OBJECT = frozenset(
    {
        ("", "pods"),
        ("", "services"),
        ("", "serviceaccounts"),
        ("", "persistentvolumeclaims"),
        ("", "persistentvolumes"),
        ("", "podtemplates"),
        ("", "resourcequotas"),
    }
)
BODY_TYPES = ["application/json", "application/yaml"]
REVIEWS = frozenset({"selfsubjectaccessreviews", "selfsubjectreviews", "selfsubjectrulesreviews"})


def _ctype(ctx: Ctx) -> str:
    return (ctx.request.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()


async def _read_body(ctx: Ctx) -> bytes:
    data = await ctx.request.read()
    if len(data) > errors.MAX_REQUEST_BODY_BYTES:
        raise errors.request_entity_too_large()
    return data


def _decode(data: bytes, ctype: str) -> Any:
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


async def _object_body(ctx: Ctx) -> dict[str, Any]:
    ctype = _ctype(ctx)
    if ctype == _schema_proto.PROTOBUF:
        try:
            body = _schema_proto.decode_protobuf(await _read_body(ctx))
        except ValueError as exc:
            raise errors.StatusError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(BODY_TYPES)} ({exc})",
            ) from None
    elif ctype not in ("application/json", "application/yaml", "text/yaml", "*/*"):
        raise errors.unsupported_media_type(ctype, BODY_TYPES)
    else:
        body = _decode(await _read_body(ctx), ctype)
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    _check_type(ctx, body)
    return body


def _check_type(ctx: Ctx, body: dict[str, Any]) -> None:
    info = ctx.info
    av, kind = body.get("apiVersion"), body.get("kind")
    if body.get("metadata") is not None and not isinstance(body["metadata"], dict):
        raise errors.bad_request("metadata must be an object")
    if ctx.subresource in ("scale", "token") or info.plural in REVIEWS:
        return
    if (av and av != info.api_version) or (kind and kind != info.kind):
        raise errors.bad_request(
            f"the API version in the data ({av}) does not match the expected API version ({info.api_version})"
            if av and av != info.api_version
            else f"the kind in the data ({kind}) does not match the expected kind ({info.kind})"
        )
    meta = body.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")


def _dry_run(ctx: Ctx) -> bool:
    values = ctx.query.getall("dryRun", [])
    for v in values:
        if v != "All":
            raise errors.bad_request(f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return bool(values)


def _manager(ctx: Ctx) -> str:
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


def _field_validation(ctx: Ctx, info: ResourceInfo, obj: Any) -> list[str]:
    """Apply ``fieldValidation``: Strict → 400 for unknown fields; Warn → the warning texts to send.

    Without the parameter nothing is checked (keeps the write path lean).
    """
    mode = ctx.query.get("fieldValidation", "")
    if not mode or mode == "Ignore" or not isinstance(obj, dict):
        if mode not in ("", "Ignore", "Strict", "Warn"):
            raise errors.bad_request(
                f'fieldValidation: Unsupported value: "{mode}": supported values: "Ignore", "Strict", "Warn"'
            )
        return []
    if mode not in ("Strict", "Warn"):
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{mode}": supported values: "Ignore", "Strict", "Warn"'
        )
    unknown = validation.unknown_fields(info, obj)
    if not unknown:
        return []
    texts = [f'unknown field "{u.lstrip(".")}"' for u in unknown]
    if mode == "Strict":
        raise errors.bad_request(
            f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
            "strict decoding error: " + ", ".join(texts)
        )
    return texts


def _warn(resp: web.StreamResponse, warnings: list[str]) -> web.StreamResponse:
    for w in warnings:
        resp.headers.add("Warning", '299 - "' + w.replace('"', '\\"') + '"')
    return resp


def _storage(api: Api, info: ResourceInfo) -> ResourceInfo:
    return api.registry.storage_info(info.group, info.plural) or info


async def handle(api: Api, ctx: Ctx) -> web.StreamResponse:
    info = ctx.info
    if info.plural in REVIEWS:
        return await _review(api, ctx)
    sub = ctx.subresource
    if sub == "token":
        return await _token(api, ctx)
    if sub == "scale":
        return await _scale(api, ctx)
    if sub == "finalize":
        return await _finalize(api, ctx)
    if ctx.verb == "get":  # /status GET
        obj = api.store.get(info.group, info.plural, ctx.namespace, ctx.name)
        if obj is None:
            raise errors.not_found(info, ctx.name)
        return render_object(ctx, obj)
    if ctx.verb == "create":
        return await _create(api, ctx)
    if ctx.verb == "update":
        return await _update(api, ctx)
    if ctx.verb == "patch":
        return await _patch(api, ctx)
    if ctx.verb == "delete":
        return await _delete(api, ctx)
    if ctx.verb == "deletecollection":
        return await _delete_collection(api, ctx)
    raise errors.method_not_allowed()


def _reject_force(ctx: Ctx) -> None:
    if "force" in ctx.query:
        raise errors.invalid(
            ctx.info,
            ctx.name,
            [
                {
                    "type": "FieldValueForbidden",
                    "field": "force",
                    "message": "Forbidden: may not be specified for non-apply patch",
                }
            ],
        )


async def _create(api: Api, ctx: Ctx) -> web.StreamResponse:
    body = await _object_body(ctx)
    _reject_force(ctx)
    dry = _dry_run(ctx)
    warnings = _field_validation(ctx, ctx.info, body)
    obj = api.writer.create(_storage(api, ctx.info), body, ctx.namespace, dry_run=dry, manager=_manager(ctx))
    return _warn(render_object(ctx, obj, 201), warnings)


async def _update(api: Api, ctx: Ctx) -> web.StreamResponse:
    body = await _object_body(ctx)
    dry = _dry_run(ctx)
    warnings = _field_validation(ctx, ctx.info, body)
    obj = api.writer.update(
        _storage(api, ctx.info),
        body,
        ctx.namespace,
        ctx.name,
        subresource=ctx.subresource or None,
        dry_run=dry,
        manager=_manager(ctx),
    )
    return _warn(render_object(ctx, obj), warnings)


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


async def _patch(api: Api, ctx: Ctx) -> web.StreamResponse:
    info = _storage(api, ctx.info)
    ctype = _ctype(ctx)
    accepted = [JSON_PATCH, MERGE_PATCH, APPLY] if info.is_custom else [JSON_PATCH, MERGE_PATCH, SMP, APPLY]
    if ctype not in accepted:
        raise errors.unsupported_media_type(ctype, accepted)
    data = await _read_body(ctx)
    patch = _decode(data, ctype)
    dry = _dry_run(ctx)
    current = api.store.get(info.group, info.plural, ctx.namespace, ctx.name)
    if ctype == APPLY:
        return await _apply(api, ctx, info, current, patch, dry)
    _reject_force(ctx)
    if current is None:
        raise errors.not_found(info, ctx.name)
    base = deep_copy(current)
    if ctx.info.api_version != info.api_version:
        base["apiVersion"] = ctx.info.api_version
    try:
        if ctype == JSON_PATCH:
            if not isinstance(patch, list):
                raise errors.bad_request("json patch must be a list of operations")
            if len(patch) > 10000:
                raise errors.StatusError(
                    413, "RequestEntityTooLarge", "The allowed maximum operations in a JSON patch is 10000"
                )
            new = jsonpatch.JsonPatch(patch).apply(base)
        elif ctype == MERGE_PATCH:
            if not isinstance(patch, dict):
                raise errors.bad_request("merge patch must be a JSON object")
            new = merge_patch(base, patch)
        else:
            if not isinstance(patch, dict):
                raise errors.bad_request("strategic merge patch must be a JSON object")
            new = strategic.strategic_merge(info, base, patch)
    except errors.StatusError:
        raise
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        raise errors.StatusError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
        ) from None
    except (ValueError, TypeError, KeyError) as exc:
        raise errors.bad_request(
            f"the server rejected our request due to an error in our request: {exc}"
        ) from None
    if not isinstance(new, dict):
        raise errors.bad_request("the patched object is not a JSON object")
    if not isinstance(new.get("metadata"), dict):
        new["metadata"] = {}
    new["apiVersion"] = info.api_version
    new["kind"] = info.kind
    warnings = _field_validation(ctx, info, new)
    obj = api.writer.update(
        info,
        new,
        ctx.namespace,
        ctx.name,
        subresource=ctx.subresource or None,
        dry_run=dry,
        manager=_manager(ctx),
        require_rv=False,
    )
    return _warn(render_object(ctx, obj), warnings)


async def _apply(
    api: Api, ctx: Ctx, info: ResourceInfo, current: dict[str, Any] | None, patch: Any, dry: bool
) -> web.StreamResponse:
    fm = ctx.query.get("fieldManager")
    if not fm:
        raise errors.invalid(
            info,
            ctx.name,
            [
                {
                    "type": "FieldValueRequired",
                    "field": "fieldManager",
                    "message": "Required value: is required for apply patch",
                }
            ],
        )
    if not isinstance(patch, dict):
        raise errors.bad_request("apply patch must be a YAML or JSON object")
    force_s = ctx.query.get("force", "false").lower()
    force = force_s in ("1", "true")
    _check_type(ctx, patch)
    meta = patch.get("metadata") or {}
    if meta.get("name") and meta["name"] != ctx.name:
        raise errors.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({ctx.name})"
        )
    if info.namespaced and meta.get("namespace") and meta["namespace"] != ctx.namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if current is None and ctx.subresource:
        raise errors.not_found(info, ctx.name)
    now = now_rfc3339()
    try:
        new = applymod.apply_patch(
            info,
            deep_copy(current) if current is not None else None,
            patch,
            manager=fm,
            force=force,
            now=now,
            subresource=ctx.subresource or None,
        )
    except applymod.ApplyConflict as exc:
        raise errors.StatusError(
            409,
            "Conflict",
            exc.message,
            details={
                "name": ctx.name,
                "kind": info.plural,
                "causes": exc.causes,
                **({"group": info.group} if info.group else {}),
            },
        ) from None
    except ValueError as exc:
        raise errors.bad_request(str(exc)) from None
    new.setdefault("metadata", {})
    new["metadata"]["name"] = ctx.name
    new["apiVersion"] = info.api_version
    new["kind"] = info.kind
    if current is None:
        obj = api.writer.create(info, new, ctx.namespace, dry_run=dry, manager=fm, from_apply=True)
        return render_object(ctx, obj, 201)
    new["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
    obj = api.writer.update(
        info,
        new,
        ctx.namespace,
        ctx.name,
        subresource=ctx.subresource or None,
        dry_run=dry,
        manager=fm,
        require_rv=False,
        operation="Apply",
        managed=True,
    )
    return render_object(ctx, obj)


async def _delete_options(ctx: Ctx) -> dict[str, Any]:
    data = await _read_body(ctx)
    opts: dict[str, Any] = {}
    if data.strip():
        body = _decode(data, "application/json")
        if not isinstance(body, dict):
            raise errors.bad_request("DeleteOptions must be a JSON object")
        opts = body
    q = ctx.query
    if "propagationPolicy" in q:
        opts["propagationPolicy"] = q["propagationPolicy"]
    if "orphanDependents" in q:
        opts["orphanDependents"] = q["orphanDependents"] in ("true", "1")
    if "gracePeriodSeconds" in q:
        opts["gracePeriodSeconds"] = q["gracePeriodSeconds"]
    if opts.get("dryRun"):
        dr = opts["dryRun"]
        if dr != ["All"]:
            raise errors.bad_request(f'dryRun: Unsupported value: "{dr}": supported values: "All"')
    return opts


def _success(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    details: dict[str, Any] = {"name": meta.get("name", ""), "kind": info.plural, "uid": meta.get("uid", "")}
    if info.group:
        details["group"] = info.group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


async def _delete(api: Api, ctx: Ctx) -> web.StreamResponse:
    info = _storage(api, ctx.info)
    opts = await _delete_options(ctx)
    dry = _dry_run(ctx) or bool(opts.get("dryRun"))
    obj, removed = api.writer.delete(info, ctx.namespace, ctx.name, opts, dry_run=dry)
    if removed:
        if info.group_resource in RETURNS_DELETED_OBJECT:
            return render_object(ctx, obj)
        return json_response(_success(info, obj))
    return render_object(ctx, obj)


async def _delete_collection(api: Api, ctx: Ctx) -> web.StreamResponse:
    info = _storage(api, ctx.info)
    opts = await _delete_options(ctx)
    dry = _dry_run(ctx) or bool(opts.get("dryRun"))
    labels = parse_label_selector(ctx.query.get("labelSelector"))
    fields = parse_field_selector(ctx.query.get("fieldSelector"), info)
    deleted = []
    for obj in api.store.list_objects(info.group, info.plural, ctx.namespace or None):
        if labels is not None and not labels(obj):
            continue
        if fields is not None and not fields(obj):
            continue
        meta = obj["metadata"]
        try:
            out, _ = api.writer.delete(
                info,
                meta.get("namespace", ""),
                meta["name"],
                {k: v for k, v in opts.items() if k != "preconditions"},
                dry_run=dry,
            )
        except errors.StatusError as exc:
            if exc.code == 404:
                continue
            raise
        deleted.append(out)
    return json_response(
        {
            "kind": info.list_kind,
            "apiVersion": info.api_version,
            "metadata": {"resourceVersion": str(api.store.rv)},
            "items": deleted,
        }
    )


# ---------------------------------------------------------------------- subresources
def _get_or_404(api: Api, ctx: Ctx) -> dict[str, Any]:
    obj = api.store.get(ctx.info.group, ctx.info.plural, ctx.namespace, ctx.name)
    if obj is None:
        raise errors.not_found(ctx.info, ctx.name)
    return obj


def _replicas_paths(info: ResourceInfo) -> tuple[str, str, str | None]:
    if info.crd is not None:
        for v in (info.crd.get("spec") or {}).get("versions") or []:
            if v.get("name") == info.version:
                sc = (v.get("subresources") or {}).get("scale") or {}
                return (
                    sc.get("specReplicasPath", ".spec.replicas"),
                    sc.get("statusReplicasPath", ".status.replicas"),
                    sc.get("labelSelectorPath"),
                )
    return (".spec.replicas", ".status.replicas", None)


def _get_path(obj: Any, path: str) -> Any:
    for part in path.strip(".").split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    for part in parts[:-1]:
        nxt = obj.get(part)
        if not isinstance(nxt, dict):
            nxt = obj[part] = {}
        obj = nxt
    obj[parts[-1]] = value


def _scale_of(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    spec_p, status_p, _sel = _replicas_paths(info)
    meta = obj["metadata"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": _get_path(obj, spec_p) or 0},
        "status": {"replicas": _get_path(obj, status_p) or 0},
    }


async def _scale(api: Api, ctx: Ctx) -> web.StreamResponse:
    info = _storage(api, ctx.info)
    obj = _get_or_404(api, ctx)
    if ctx.verb == "get":
        return json_response(_scale_of(info, obj))
    if ctx.verb not in ("update", "patch"):
        raise errors.method_not_allowed()
    current = _scale_of(info, obj)
    ctype = _ctype(ctx)
    data = _decode(await _read_body(ctx), ctype)
    if ctx.verb == "update":
        scale = data
    elif ctype == JSON_PATCH:
        scale = jsonpatch.JsonPatch(data).apply(current)
    else:
        scale = merge_patch(current, data)
    if not isinstance(scale, dict):
        raise errors.bad_request("Scale must be an object")
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv and rv != obj["metadata"]["resourceVersion"]:
        raise errors.conflict(info, ctx.name, errors.STALE)
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or replicas < 0:
        raise errors.invalid(
            info,
            ctx.name,
            [
                {
                    "type": "FieldValueInvalid",
                    "field": "spec.replicas",
                    "message": "Invalid value: must be greater than or equal to 0",
                }
            ],
        )
    new = deep_copy(obj)
    _set_path(new, _replicas_paths(info)[0], replicas)
    out = api.writer.update(
        info, new, ctx.namespace, ctx.name, dry_run=_dry_run(ctx), manager=_manager(ctx), require_rv=False
    )
    return json_response(_scale_of(info, out))


async def _finalize(api: Api, ctx: Ctx) -> web.StreamResponse:
    if ctx.verb != "update":
        raise errors.method_not_allowed()
    body = await _object_body(ctx)
    obj = _get_or_404(api, ctx)
    new = deep_copy(obj)
    new["spec"] = dict(new.get("spec") or {}, finalizers=(body.get("spec") or {}).get("finalizers") or [])
    api.store.commit("", "namespaces", new)
    if not new["spec"]["finalizers"] and new["metadata"].get("deletionTimestamp"):
        api.writer.finish_namespace(ctx.name)
    return render_object(ctx, new)


async def _token(api: Api, ctx: Ctx) -> web.StreamResponse:
    if ctx.verb != "create":
        raise errors.method_not_allowed()
    body = await _object_body(ctx)
    sa = _get_or_404(api, ctx)
    out = auth.token_request(api.authenticator, ctx.namespace, ctx.name, sa["metadata"].get("uid", ""), body)
    return json_response(out, 201)


async def _review(api: Api, ctx: Ctx) -> web.StreamResponse:
    if ctx.verb != "create":
        raise errors.method_not_allowed()
    body = await _object_body(ctx)
    if ctx.info.plural == "selfsubjectreviews":
        out = auth.self_subject_review(ctx.user, body)
    elif ctx.info.plural == "selfsubjectrulesreviews":
        out = await auth.self_subject_rules_review(api.authorizer, ctx.user, body)
    else:
        out = await auth.self_subject_access_review(api.authorizer, ctx.user, body)
    return json_response(out, 201)
