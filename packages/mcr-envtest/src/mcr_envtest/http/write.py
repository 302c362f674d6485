"""Write verbs over HTTP: create, update, patch (json, merge, strategic, apply), delete,
deletecollection and the subresources (status, scale, token, finalize, access reviews)."""

from __future__ import annotations

import logging
from typing import Any

import jsonpatch
from aiohttp import web

from mcr_envtest import apply as applymod
from mcr_envtest import errors, hpa_conversion, strategic
from mcr_envtest.cel import rules as cel_rules
from mcr_envtest.resources import ResourceInfo
from mcr_envtest.schema.structural import undeclared_field
from mcr_envtest.selectors import parse_field_selector, parse_label_selector
from mcr_envtest.version_conversion import converter_for
from mcr_envtest.write_rules import deep_copy, now_rfc3339

from . import subresources
from .admit import admit_delete, admit_write
from .body import (
    APPLY,
    JSON_PATCH,
    MERGE_PATCH,
    REVIEWS,
    SMP,
    check_type,
    content_type,
    decode,
    dry_run,
    field_manager,
    field_validation,
    merge_patch,
    object_body,
    options_invalid,
    read_body,
    refuse_custom_kind,
    storage_info,
    warn,
)
from .context import Backend, Ctx, json_response
from .conversion import to_version, webhook_converts
from .render import render_object

__all__ = ["handle"]

log = logging.getLogger(__name__)

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


async def handle(api: Backend, ctx: Ctx) -> web.StreamResponse:
    token = applymod.REQUEST_VERSION.set(ctx.info.api_version)
    try:
        return await _handle(api, ctx)
    finally:
        applymod.REQUEST_VERSION.reset(token)


async def _handle(api: Backend, ctx: Ctx) -> web.StreamResponse:
    info = ctx.info
    if info.plural in REVIEWS:
        return await subresources.review(api, ctx)
    sub = ctx.subresource
    if sub == "token":
        return await subresources.token(api, ctx)
    if sub == "scale":
        return await subresources.scale(api, ctx)
    if sub == "finalize":
        return await subresources.finalize(api, ctx)
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


_WEBHOOK_CONFIGS = (
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
)


def _condition_warnings(obj: dict[str, Any]) -> list[str]:
    """For a webhook configuration write: one warning (also logged) per matchCondition
    mcr-envtest cannot evaluate (its evaluation fails, so the webhook's failurePolicy decides)."""
    out: list[str] = []
    name = (obj.get("metadata") or {}).get("name", "")
    for i, hook in enumerate(obj.get("webhooks") or []):
        for j, cond in enumerate((hook.get("matchConditions") or []) if isinstance(hook, dict) else []):
            why = cel_rules.unsupported_expression(str((cond or {}).get("expression", "")))
            if why is not None:
                line = (
                    f"webhooks[{i}].matchConditions[{j}]: {why} is not supported by mcr-envtest; "
                    "the condition fails and the webhook's failurePolicy decides"
                )
                log.warning("%s: %s", name, line)
                out.append(line)
    return out


def _rule_warnings(info: ResourceInfo, obj: dict[str, Any]) -> list[str]:
    """For a CRD write: one warning (also logged) per validation rule mcr-envtest cannot evaluate,
    since such a rule is not enforced on its custom resources (and likewise for matchConditions
    of a webhook configuration)."""
    if info.group_resource in _WEBHOOK_CONFIGS:
        return _condition_warnings(obj)
    if info.group_resource != ("apiextensions.k8s.io", "customresourcedefinitions"):
        return []
    found = cel_rules.unsupported(obj)
    name = (obj.get("metadata") or {}).get("name", "")
    for line in found:
        log.warning("CustomResourceDefinition %s: %s; the rule is not enforced", name, line)
    return [f"{line}; the rule is not enforced" for line in found]


def _reject_force(ctx: Ctx) -> None:
    if "force" in ctx.query:
        raise options_invalid(
            ctx, "FieldValueForbidden", "force", "Forbidden: may not be specified for non-apply patch"
        )


async def _create(api: Backend, ctx: Ctx) -> web.StreamResponse:
    body = await object_body(ctx)
    _reject_force(ctx)
    dry = dry_run(ctx)
    warnings = field_validation(ctx, ctx.info, body)
    info = storage_info(api, ctx.info)
    refuse_custom_kind(api, ctx, info, body)
    manager = field_manager(ctx)
    obj, admitted = await admit_write(
        api,
        ctx,
        info,
        body,
        None,
        dry,
        lambda b, d: api.writer.create(info, b, ctx.namespace, dry_run=d, manager=manager),
    )
    return warn(render_object(ctx, obj, 201), warnings + admitted + _rule_warnings(ctx.info, obj))


async def _update(api: Backend, ctx: Ctx) -> web.StreamResponse:
    body = await object_body(ctx)
    dry = dry_run(ctx)
    warnings = field_validation(ctx, ctx.info, body)
    info = storage_info(api, ctx.info)
    refuse_custom_kind(api, ctx, info, body)
    manager = field_manager(ctx)

    def write(b: dict[str, Any], d: bool) -> dict[str, Any]:
        return api.writer.update(
            info, b, ctx.namespace, ctx.name, subresource=ctx.subresource or None, dry_run=d, manager=manager
        )

    old = api.store.get(info.group, info.plural, ctx.namespace, ctx.name)
    if old is None:  # the writer answers 404
        return render_object(ctx, write(body, dry))
    obj, admitted = await admit_write(api, ctx, info, body, old, dry, write)
    return warn(render_object(ctx, obj), warnings + admitted + _rule_warnings(ctx.info, obj))


_GO_JSON_TYPES: dict[type, str] = {
    dict: "object",
    str: "string",
    bool: "bool",
    int: "number",
    float: "number",
}


async def _patch(api: Backend, ctx: Ctx) -> web.StreamResponse:
    info = storage_info(api, ctx.info)
    ctype = content_type(ctx)
    accepted = [JSON_PATCH, MERGE_PATCH, APPLY] if info.is_custom else [JSON_PATCH, MERGE_PATCH, SMP, APPLY]
    if ctype not in accepted:
        if not info.is_custom:  # refused by the route itself, before the patch handler
            message = "415: Unsupported Media Type"
            raise errors.StatusError(415, "UnsupportedMediaType", message, details=errors.EMPTY_DETAILS)
        raise errors.unsupported_media_type(accepted)
    data = await read_body(ctx)
    try:
        patch = decode(data, ctype)
    except errors.StatusError:
        if ctype == MERGE_PATCH and data.strip():
            raise errors.bad_request("invalid JSON patch") from None  # upstream's words
        raise
    dry = dry_run(ctx)
    current = api.store.get(info.group, info.plural, ctx.namespace, ctx.name)
    if ctype == APPLY:
        return await _apply(api, ctx, info, current, patch, dry)
    _reject_force(ctx)
    if current is None:
        raise errors.not_found(info, ctx.name)
    converting = ctx.info.api_version != info.api_version and webhook_converts(api, info)
    if converting:  # the patch applies to the object at the request's version
        (base,) = await to_version(api, info, [deep_copy(current)], ctx.info.api_version)
    else:
        base = deep_copy(current)
        builtin = converter_for(info.group_resource)
        if builtin is not None:  # an Event stored through the other API
            base = builtin(base, info.api_version)
        if ctx.info.api_version != info.api_version:
            base["apiVersion"] = ctx.info.api_version
    try:
        if ctype == JSON_PATCH:
            if not isinstance(patch, list):
                found = _GO_JSON_TYPES.get(type(patch), "object")
                raise errors.bad_request(
                    f"error decoding patch: json: cannot unmarshal {found} into Go value of type "
                    "[]handlers.jsonPatchOp"
                )
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
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
        # upstream says no more than this (with empty details) for a JSON patch that fails to apply
        raise errors.StatusError(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
            details=errors.EMPTY_DETAILS,
        ) from None
    except (ValueError, TypeError, KeyError) as exc:
        raise errors.bad_request(
            f"the server rejected our request due to an error in our request: {exc}"
        ) from None
    if not isinstance(new, dict):
        raise errors.bad_request("the patched object is not a JSON object")
    if not isinstance(new.get("metadata"), dict):
        new["metadata"] = {}
    new["apiVersion"] = ctx.info.api_version if converting else info.api_version
    new["kind"] = info.kind
    # a built-in kind converted here is checked against the request version's schema
    warnings = field_validation(ctx, ctx.info if converting and not info.is_custom else info, new)
    manager = field_manager(ctx)

    def write(b: dict[str, Any], d: bool) -> dict[str, Any]:
        return api.writer.update(
            info,
            b,
            ctx.namespace,
            ctx.name,
            subresource=ctx.subresource or None,
            dry_run=d,
            manager=manager,
            require_rv=False,
        )

    obj, admitted = await admit_write(api, ctx, info, new, current, dry, write)
    return warn(render_object(ctx, obj), warnings + admitted + _rule_warnings(info, obj))


async def _apply(
    api: Backend, ctx: Ctx, info: ResourceInfo, current: dict[str, Any] | None, patch: Any, dry: bool
) -> web.StreamResponse:
    fm = ctx.query.get("fieldManager")
    if not fm:
        raise options_invalid(
            ctx, "FieldValueRequired", "fieldManager", "Required value: is required for apply patch"
        )
    if not isinstance(patch, dict):
        raise errors.bad_request("apply patch must be a YAML or JSON object")
    force_s = ctx.query.get("force", "false").lower()
    force = force_s in ("1", "true")
    av, kind = patch.get("apiVersion"), patch.get("kind")
    if (
        isinstance(av, str)
        and isinstance(kind, str)
        and av
        and kind
        and (av, kind) != (ctx.info.api_version, ctx.info.kind)
    ):
        group, _, version = av.rpartition("/")  # upstream prints the GroupVersionKind
        raise errors.bad_request(f"invalid object type: {group}/{version}, Kind={kind}")
    check_type(ctx, patch)
    if info.group_resource == hpa_conversion.RESOURCE and ctx.info.api_version != info.api_version:
        # applied at the storage version, as kube-apiserver applies to the converted object
        patch = hpa_conversion.convert({**patch, "apiVersion": ctx.info.api_version}, info.api_version)
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
    unknown = undeclared_field(info, patch)
    if unknown is not None:  # kube-apiserver refuses such a configuration, it does not prune it
        where = f"{meta.get('namespace') or ''}/{ctx.name}; {info.api_version}, Kind={info.kind}"
        message = f"failed to create typed patch object ({where}): {unknown}: field not declared in schema"
        raise errors.StatusError(500, "", message)
    now = now_rfc3339()
    live = deep_copy(current) if current is not None else None
    builtin = converter_for(info.group_resource)
    if live is not None and builtin is not None:  # an Event stored through the other API
        live = builtin(live, info.api_version)
    try:
        new = applymod.apply_patch(
            info,
            live,
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
            details={"causes": exc.causes},  # upstream names no object here
        ) from None
    except ValueError as exc:
        raise errors.bad_request(str(exc)) from None
    new.setdefault("metadata", {})
    new["metadata"]["name"] = ctx.name
    new["apiVersion"] = info.api_version
    new["kind"] = info.kind
    if current is None:
        obj, admitted = await admit_write(
            api,
            ctx,
            info,
            new,
            None,
            dry,
            lambda b, d: api.writer.create(info, b, ctx.namespace, dry_run=d, manager=fm, from_apply=True),
        )
        return warn(render_object(ctx, obj, 201), admitted)
    new["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")

    def write(b: dict[str, Any], d: bool) -> dict[str, Any]:
        return api.writer.update(
            info,
            b,
            ctx.namespace,
            ctx.name,
            subresource=ctx.subresource or None,
            dry_run=d,
            manager=fm,
            require_rv=False,
            operation="Apply",
            managed=True,
        )

    obj, admitted = await admit_write(api, ctx, info, new, current, dry, write)
    return warn(render_object(ctx, obj), admitted)


async def _delete_options(ctx: Ctx) -> dict[str, Any]:
    data = await read_body(ctx)
    opts: dict[str, Any] = {}
    if data.strip():
        body = decode(data, "application/json")
        if not isinstance(body, dict):
            raise errors.bad_request("DeleteOptions must be a JSON object")
        kind = body.get("kind")
        if kind and kind != "DeleteOptions":
            version = str(body.get("apiVersion") or "")
            scheme = "pkg/runtime/scheme.go:111"
            raise errors.bad_request(
                f'no kind "{kind}" is registered for version "{version}" in scheme "{scheme}"'
            )
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


async def _delete(api: Backend, ctx: Ctx) -> web.StreamResponse:
    info = storage_info(api, ctx.info)
    opts = await _delete_options(ctx)
    dry = dry_run(ctx) or bool(opts.get("dryRun"))
    admitted = await admit_delete(api, ctx, info, ctx.namespace, ctx.name, opts, dry)
    obj, removed = api.writer.delete(info, ctx.namespace, ctx.name, opts, dry_run=dry)
    if removed:
        if info.group_resource in RETURNS_DELETED_OBJECT:
            return warn(render_object(ctx, obj), admitted)
        return warn(json_response(_success(info, obj)), admitted)
    return warn(render_object(ctx, obj), admitted)


async def _delete_collection(api: Backend, ctx: Ctx) -> web.StreamResponse:
    info = storage_info(api, ctx.info)
    opts = await _delete_options(ctx)
    dry = dry_run(ctx) or bool(opts.get("dryRun"))
    labels = parse_label_selector(ctx.query.get("labelSelector"))
    fields = parse_field_selector(ctx.query.get("fieldSelector"), info)
    deleted = []
    for obj in api.store.list_objects(info.group, info.plural, ctx.namespace or None):
        if labels is not None and not labels(obj):
            continue
        if fields is not None and not fields(obj):
            continue
        meta = obj["metadata"]
        item_opts = {k: v for k, v in opts.items() if k != "preconditions"}
        await admit_delete(api, ctx, info, meta.get("namespace", ""), meta["name"], item_opts, dry)
        try:
            out, _ = api.writer.delete(
                info,
                meta.get("namespace", ""),
                meta["name"],
                item_opts,
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
            # custom resource lists always carry a (here empty) continue token, as upstream's do
            "metadata": {"continue": "", "resourceVersion": str(api.store.rv)}
            if info.is_custom
            else {"resourceVersion": str(api.store.rv)},
            # built-in kinds' list items carry no kind or apiVersion, as upstream's
            "items": deleted
            if info.is_custom
            else [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in deleted],
        }
    )
