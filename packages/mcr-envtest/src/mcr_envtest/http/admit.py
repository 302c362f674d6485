"""Admission around a write: the mutating webhooks see the object as the client sent it, the
validating webhooks the object as it would be stored, and only then is it stored.

Without any webhook configuration the write happens at once, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcr_envtest import errors
from mcr_envtest.admission import dispatch
from mcr_envtest.admission.match import Attributes
from mcr_envtest.resources import ResourceInfo
from mcr_envtest.write_rules import deep_copy

from .context import Backend, Ctx
from .conversion import to_version

__all__ = ["admit_delete", "admit_write", "options"]

Write = Callable[[dict[str, Any], bool], dict[str, Any]]


def _user(ctx: Ctx) -> dict[str, Any]:
    user: dict[str, Any] = {"username": ctx.user.name}
    if ctx.user.uid:
        user["uid"] = ctx.user.uid
    if ctx.user.groups:
        user["groups"] = list(ctx.user.groups)
    if ctx.user.extra:
        user["extra"] = {k: list(v) for k, v in ctx.user.extra}
    return user


def options(ctx: Ctx, kind: str, dry: bool, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The request's options object (CreateOptions, UpdateOptions, DeleteOptions) as webhooks see it."""
    out: dict[str, Any] = {"kind": kind, "apiVersion": "meta.k8s.io/v1", **(extra or {})}
    if dry:
        out["dryRun"] = ["All"]
    if kind != "DeleteOptions":
        fm = ctx.query.get("fieldManager")
        if fm:
            out["fieldManager"] = fm
    return out


def _served(ctx: Ctx, obj: dict[str, Any] | None) -> dict[str, Any] | None:
    if obj is None:
        return None
    out = deep_copy(obj)
    out["apiVersion"] = ctx.info.api_version
    return out


def _attrs(
    ctx: Ctx, info: ResourceInfo, operation: str, name: str, obj: Any, old: Any, dry: bool, opts: Any
) -> Attributes:
    namespace = ctx.namespace if info.namespaced else ""
    if info.group_resource == ("", "namespaces"):
        namespace = name
    return Attributes(
        operation=operation,
        group=ctx.info.group,
        version=ctx.info.version,
        resource=ctx.info.plural,
        kind=ctx.info.kind,
        subresource=ctx.subresource,
        namespace=namespace,
        name=name,
        namespaced=info.namespaced,
        obj=_served(ctx, obj),
        old=_served(ctx, old),
        dry_run=dry,
        options=opts,
        user=_user(ctx),
    )


async def admit_write(
    api: Backend,
    ctx: Ctx,
    info: ResourceInfo,
    body: dict[str, Any],
    old: dict[str, Any] | None,
    dry: bool,
    write: Write,
) -> tuple[dict[str, Any], list[str]]:
    """Create (``old`` is None) or update through the webhooks; ``write(obj, dry_run)`` is the
    writer call (at the storage version ``info``). ``body`` is at the request's version or at
    the storage version. Returns (the stored, or dry-run, object at the request's version; the
    webhooks' warnings)."""

    async def version(obj: dict[str, Any], api_version: str) -> dict[str, Any]:
        (out,) = await to_version(api, info, [obj], api_version)
        return out

    if not isinstance(body.get("apiVersion"), str) or not body["apiVersion"]:
        body["apiVersion"] = ctx.info.api_version
    if not dispatch.configured(api.store):
        stored = write(await version(body, info.api_version), dry)
        return await version(stored, ctx.info.api_version), []
    created = old is None
    operation = "CREATE" if created else "UPDATE"
    kind = "CreateOptions" if created else "UpdateOptions"
    meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    name = ctx.name or str((meta or {}).get("name") or "")
    sent = await version(deep_copy(body), ctx.info.api_version)
    sent["kind"] = ctx.info.kind
    if info.namespaced and ctx.namespace:
        sent.setdefault("metadata", {})["namespace"] = ctx.namespace
    if old is not None:
        old = await version(old, ctx.info.api_version)
    attrs = _attrs(ctx, info, operation, name, sent, old, dry, options(ctx, kind, dry))
    mutated, warnings = await dispatch.mutate(api.store, attrs)
    if mutated is None or not isinstance(mutated.get("metadata"), dict):
        raise errors.bad_request("the mutated object has no metadata")
    prepared = write(await version(mutated, info.api_version), True)
    attrs.obj = _served(ctx, await version(prepared, ctx.info.api_version))
    warnings += await dispatch.validate(api.store, attrs)
    if not dry:
        prepared = api.writer.commit_prepared(info, prepared, created=created)
    return await version(prepared, ctx.info.api_version), warnings


async def admit_delete(
    api: Backend, ctx: Ctx, info: ResourceInfo, namespace: str, name: str, opts: dict[str, Any], dry: bool
) -> list[str]:
    """Run the webhooks for deleting an existing object (nothing when it does not exist: the
    delete answers 404 itself); their warnings."""
    if not dispatch.configured(api.store):
        return []
    current = api.store.get(info.group, info.plural, namespace, name)
    if current is None:
        return []
    extra = {k: v for k, v in opts.items() if k not in ("kind", "apiVersion", "dryRun")}
    attrs = _attrs(ctx, info, "DELETE", name, None, current, dry, options(ctx, "DeleteOptions", dry, extra))
    if namespace and info.namespaced:
        attrs.namespace = namespace
    _, warnings = await dispatch.mutate(api.store, attrs)
    return warnings + await dispatch.validate(api.store, attrs)
