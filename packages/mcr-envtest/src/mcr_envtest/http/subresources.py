"""Subresources and review endpoints: ``/scale``, namespace ``/finalize``, ServiceAccount
``/token`` and the self reviews."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
from aiohttp import web

from mcr_envtest import _fieldpath as fp
from mcr_envtest import errors, reviews
from mcr_envtest.apply import record_update
from mcr_envtest.resources import ResourceInfo
from mcr_envtest.write_rules import deep_copy, now_rfc3339

from .body import (
    JSON_PATCH,
    content_type,
    decode,
    dry_run,
    field_manager,
    merge_patch,
    object_body,
    read_body,
    storage_info,
)
from .context import Backend, Ctx, json_response
from .render import render_object

__all__ = ["finalize", "review", "scale", "token"]


def _get_or_404(api: Backend, ctx: Ctx) -> dict[str, Any]:
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


def _selector_string(selector: Any) -> str:
    """A label selector as upstream prints it (``a=b,e,k in (v1,v2)``: requirements sorted by
    key, values sorted); a ReplicationController's plain map is a set of ``k=v`` requirements."""
    if not isinstance(selector, dict):
        return ""
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        reqs = [(str(k), f"{k}={v}") for k, v in selector.items()]
    else:
        reqs = [(str(k), f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
        for expr in selector.get("matchExpressions") or []:
            if not isinstance(expr, dict):
                continue
            key, op = str(expr.get("key", "")), expr.get("operator")
            values = ",".join(sorted(str(v) for v in expr.get("values") or []))
            text = {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": key,
                "DoesNotExist": f"!{key}",
            }.get(str(op))
            if text is not None:
                reqs.append((key, text))
    return ",".join(text for _, text in sorted(reqs, key=lambda r: r[0]))


def _scale_of(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    spec_p, status_p, sel_p = _replicas_paths(info)
    meta = obj["metadata"]
    status: dict[str, Any] = {"replicas": _get_path(obj, status_p) or 0}
    if info.crd is not None:
        selector = _get_path(obj, sel_p) if sel_p else None
        if isinstance(selector, str) and selector:
            status["selector"] = selector
    else:
        selector = _selector_string(_get_path(obj, ".spec.selector"))
        if selector:
            status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        # spec.replicas is omitted when zero, as upstream's encoder omits it
        "spec": {"replicas": replicas} if (replicas := _get_path(obj, spec_p)) else {},
        "status": status,
    }


async def scale(api: Backend, ctx: Ctx) -> web.StreamResponse:
    info = storage_info(api, ctx.info)
    obj = _get_or_404(api, ctx)
    if ctx.verb == "get":
        return json_response(_scale_of(info, obj))
    if ctx.verb not in ("update", "patch"):
        raise errors.method_not_allowed()
    current = _scale_of(info, obj)
    ctype = content_type(ctx)
    data = decode(await read_body(ctx), ctype)
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
        message = f"Invalid value: {json.dumps(replicas)}: must be greater than or equal to 0"
        # upstream validates the Scale object itself
        raise errors.StatusError(
            422,
            "Invalid",
            f'Scale.autoscaling "{ctx.name}" is invalid: spec.replicas: {message}',
            details={
                "name": ctx.name,
                "group": "autoscaling",
                "kind": "Scale",
                "causes": [{"reason": "FieldValueInvalid", "message": message, "field": "spec.replicas"}],
            },
        )
    new = deep_copy(obj)
    _set_path(new, _replicas_paths(info)[0], replicas)
    out = api.writer.update(
        info,
        new,
        ctx.namespace,
        ctx.name,
        subresource="scale",
        dry_run=dry_run(ctx),
        manager=field_manager(ctx),
        require_rv=False,
    )
    return json_response(_scale_of(info, out))


async def finalize(api: Backend, ctx: Ctx) -> web.StreamResponse:
    if ctx.verb != "update":
        raise errors.method_not_allowed()
    body = await object_body(ctx)
    obj = _get_or_404(api, ctx)
    new = deep_copy(obj)
    finalizers = (body.get("spec") or {}).get("finalizers") or []
    new["spec"] = {k: v for k, v in (new.get("spec") or {}).items() if k != "finalizers"}
    if finalizers:  # an empty list is omitted, as upstream's NamespaceSpec does
        new["spec"]["finalizers"] = finalizers
    api.store.commit("", "namespaces", new)
    if not finalizers and new["metadata"].get("deletionTimestamp"):
        api.writer.finish_namespace(ctx.name)
    return render_object(ctx, new)


async def token(api: Backend, ctx: Ctx) -> web.StreamResponse:
    if ctx.verb != "create":
        raise errors.method_not_allowed()
    body = await object_body(ctx)
    sa = _get_or_404(api, ctx)
    uid = sa["metadata"].get("uid", "")
    out = reviews.token_request(api.authenticator, ctx.namespace, ctx.name, uid, body)
    # kube-apiserver answers with the account's UID and records the writer of the spec it sent
    meta = out["metadata"]
    meta["uid"] = uid
    sent = fp.field_set({"spec": body.get("spec") or {}}, None)
    if sent:
        meta["managedFields"] = [
            {
                "manager": field_manager(ctx),
                "operation": "Update",
                "apiVersion": out["apiVersion"],
                "time": meta["creationTimestamp"],
                "fieldsType": "FieldsV1",
                "fieldsV1": fp.encode(sent),
                "subresource": "token",
            }
        ]
    return json_response(out, 201)


async def review(api: Backend, ctx: Ctx) -> web.StreamResponse:
    if ctx.verb != "create":
        raise errors.method_not_allowed()
    body = await object_body(ctx)
    if ctx.info.plural == "selfsubjectreviews":
        out = reviews.self_subject_review(ctx.user, body)
    elif ctx.info.plural == "selfsubjectrulesreviews":
        out = await reviews.self_subject_rules_review(api.authorizer, ctx.user, body)
    elif ctx.info.plural == "tokenreviews":
        out = reviews.token_review(api.authenticator, body)
    elif ctx.info.plural == "subjectaccessreviews":
        out = await reviews.subject_access_review(api.authorizer, body)
    else:
        out = await reviews.self_subject_access_review(api.authorizer, ctx.user, body)
        # kube-apiserver records the writer of the (never stored) review, as on any create
        status = out.pop("status")  # recorded before the answer is filled in
        out = record_update(
            ctx.info,
            None,
            out,
            manager=field_manager(ctx),
            operation="Update",
            subresource=None,
            now=now_rfc3339(),
        )
        out["status"] = status
    return json_response(out, 201)
