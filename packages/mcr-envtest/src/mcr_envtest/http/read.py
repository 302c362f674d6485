"""Read verbs: get and list (pagination, resourceVersion semantics), and the request parsing the
watch handler shares (selectors, resourceVersion)."""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Iterable
from typing import Any

import orjson
import yaml
from aiohttp import web

from mcr_envtest import errors, table
from mcr_envtest.continue_token import decode_continue, encode_continue
from mcr_envtest.resources import ResourceInfo
from mcr_envtest.schema.protobuf_encode import encode_object
from mcr_envtest.selectors import Selector, parse_field_selector, parse_label_selector
from mcr_envtest.store import ListSnapshot

from .context import Backend, Ctx, json_response, protobuf_response
from .conversion import to_version
from .render import convert, include_object, needs_convert, partial_metadata, render_object

__all__ = ["handle", "parse_rv", "request_selector"]


async def handle(api: Backend, ctx: Ctx) -> web.StreamResponse:
    """Answer a get or list (watches are :mod:`.watch`'s)."""
    if ctx.verb == "get":
        return await _get(api, ctx)
    return await _list(api, ctx)


def parse_rv(value: str, *, listing: bool = False) -> int:
    """A request's resourceVersion; kube-apiserver answers a malformed one with 400 for a list and
    with 500 (no reason) for a get or watch."""
    if value.isascii() and value.isdigit():
        return int(value)
    why = f'resourceVersion: Invalid value: "{value}": strconv.ParseUint: parsing "{value}": invalid syntax'
    if listing:
        raise errors.bad_request(f"invalid resource version: {why}")
    raise errors.StatusError(500, "", why)


async def _wait_for_rv(api: Backend, rv: int) -> None:
    """Wait (briefly) for the store to reach ``rv``; 504 ResourceVersionTooLarge otherwise."""
    deadline = time.monotonic() + 1.0
    while api.store.rv < rv:
        if time.monotonic() >= deadline:
            raise errors.StatusError(
                504,
                "Timeout",
                f"Too large resource version: {rv}, current: {api.store.rv}",
                details={
                    "causes": [
                        {
                            "reason": "ResourceVersionTooLarge",
                            "type": "ResourceVersionTooLarge",
                            "message": "Too large resource version",
                        }
                    ],
                    "retryAfterSeconds": 1,
                },
                headers={"Retry-After": "1"},
            )
        await asyncio.sleep(0.02)


async def _get(api: Backend, ctx: Ctx) -> web.StreamResponse:
    rv = ctx.query.get("resourceVersion", "")
    if rv and rv != "0":
        await _wait_for_rv(api, parse_rv(rv))
    info = ctx.info
    raw = api.store.get_raw(info.group, info.plural, ctx.namespace, ctx.name)
    obj = api.store.get(info.group, info.plural, ctx.namespace, ctx.name)
    if obj is None:
        raise errors.not_found(info, ctx.name)
    (served,) = await to_version(api, info, [obj], info.api_version)
    return render_object(ctx, served, raw=raw if served is obj else None)


def request_selector(ctx: Ctx) -> Selector:
    q = ctx.query
    fields = parse_field_selector(q.get("fieldSelector"), ctx.info)
    if ctx.name:  # a watch on one object (the legacy /watch/.../<name> path)
        name = ctx.name
        by_fields = fields

        def fields(obj: dict[str, Any]) -> bool:
            return obj["metadata"].get("name") == name and (by_fields is None or by_fields(obj))

    return Selector(ctx.namespace or None, parse_label_selector(q.get("labelSelector")), fields)


def _match(entries: Iterable[tuple[dict[str, Any], bytes | None]], sel: Selector) -> ListSnapshot:
    """The entries ``sel`` matches (kept in order) with their (namespace, name) keys."""
    filtering = sel.labels is not None or sel.fields is not None
    keys: list[tuple[str, str]] = []
    out: list[tuple[dict[str, Any], bytes | None]] = []
    last: tuple[str, str] | None = None
    for entry in entries:
        obj = entry[0]
        meta = obj["metadata"]
        last = (meta.get("namespace", ""), meta["name"])
        if filtering and not sel.matches(obj):
            continue
        keys.append(last)
        out.append(entry)
    return ListSnapshot(keys, out, last)


async def _list(api: Backend, ctx: Ctx) -> web.StreamResponse:
    q = ctx.query
    info = ctx.info
    store = api.store
    rv = q.get("resourceVersion", "")
    rvm = q.get("resourceVersionMatch", "")
    cont = q.get("continue", "")
    if q.get("sendInitialEvents"):
        raise errors.invalid(
            info,
            "",
            [
                {
                    "type": "FieldValueForbidden",
                    "field": "sendInitialEvents",
                    "message": "Forbidden: sendInitialEvents is forbidden for list",
                }
            ],
        )
    if rvm:
        if rvm not in ("NotOlderThan", "Exact"):
            raise errors.options_invalid(
                "ListOptions",
                [
                    {
                        "type": "FieldValueNotSupported",
                        "field": "resourceVersionMatch",
                        "message": f'Unsupported value: "{rvm}"',
                    }
                ],
            )
        if not rv:
            raise errors.options_invalid(
                "ListOptions",
                [
                    {
                        "type": "FieldValueForbidden",
                        "field": "resourceVersionMatch",
                        "message": "Forbidden: resourceVersionMatch is forbidden unless "
                        "resourceVersion is provided",
                    }
                ],
            )
        if cont:
            raise errors.options_invalid(
                "ListOptions",
                [
                    {
                        "type": "FieldValueForbidden",
                        "field": "resourceVersionMatch",
                        "message": "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                    }
                ],
            )
        if rvm == "Exact" and rv == "0":
            raise errors.options_invalid(
                "ListOptions",
                [
                    {
                        "type": "FieldValueForbidden",
                        "field": "resourceVersionMatch",
                        "message": 'Forbidden: resourceVersionMatch "exact" is forbidden '
                        'for resourceVersion "0"',
                    }
                ],
            )
    limit = 0
    if q.get("limit"):
        try:
            limit = max(0, int(q["limit"]))
        except ValueError:
            raise errors.bad_request(f'limit: Invalid value: "{q["limit"]}"') from None
    if rv == "0" and rvm != "Exact":
        limit = 0  # kube-apiserver serves these from its watch cache, which ignores the limit
    sel = request_selector(ctx)
    ns = ctx.namespace or None
    # the list result is cached per (RV, resource, namespace, selector) so continue pages are cheap
    cache_key = (
        info.group,
        info.plural,
        ns,
        q.get("labelSelector", ""),
        q.get("fieldSelector", ""),
        ctx.name,
    )
    start_i = 0
    snap: ListSnapshot | None
    if cont:
        list_rv, start_s = decode_continue(cont)
        ns_s, _, name_s = start_s.partition("/")
        snap = store.list_snapshot_get(list_rv, cache_key)
        if snap is None:
            try:
                snap = _match(store.entries_at(info.group, info.plural, ns, list_rv), sel)
            except errors.StatusError:
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list result. You "
                    "can start a new list without the continue parameter, or use the continue value from "
                    "the response to get a consistent list result.",
                    metadata={"continue": encode_continue(-1, start_s)},
                ) from None
        start_i = bisect.bisect_right(snap.keys, (ns_s, name_s))
    elif rv and rvm == "Exact":
        list_rv = parse_rv(rv, listing=True)
        await _wait_for_rv(api, list_rv)
        snap = store.list_snapshot_get(list_rv, cache_key)
        if snap is None:
            snap = _match(store.entries_at(info.group, info.plural, ns, list_rv), sel)
    else:
        if rv and rv != "0":
            await _wait_for_rv(api, parse_rv(rv, listing=True))
        list_rv = store.rv
        snap = store.list_snapshot_get(list_rv, cache_key)
        if snap is None:
            snap = _match(store.list_entries(info.group, info.plural, ns), sel)
    total = len(snap.entries)
    end = min(total, start_i + limit) if limit else total
    matched = snap.entries[start_i:end]
    objs = [o for o, _ in matched]
    served = await to_version(api, info, objs, info.api_version)
    if served is not objs:  # converted by the CRD's conversion webhook
        matched = [(o, None) for o in served]
    next_token: str | None = None
    remaining = total - end
    # a full page ends the list only when no object, matched or not, comes after its last item
    full = bool(limit) and end - start_i == limit and snap.last is not None and snap.last > snap.keys[end - 1]
    if remaining > 0 or full:
        ns_l, name_l = snap.keys[end - 1]
        next_token = encode_continue(list_rv, f"{ns_l}/{name_l}")
        store.list_snapshot_put(list_rv, cache_key, snap)
    rv_s = str(list_rv)
    if ctx.output == "table":
        return json_response(
            table.to_table(
                info,
                [convert(ctx, o) for o, _ in matched],
                include_object=include_object(ctx),
                resource_version=rv_s,
                continue_token=next_token,
            )
        )
    meta_out: dict[str, Any] = {"resourceVersion": rv_s}
    if next_token:
        meta_out["continue"] = next_token
        if not q.get("labelSelector") and not q.get("fieldSelector"):
            meta_out["remainingItemCount"] = remaining  # upstream counts only unfiltered lists
    if ctx.output == "pom":
        return json_response(
            {
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta_out,
                "items": [partial_metadata(o) for o, _ in matched],
            }
        )
    if info.is_custom and not next_token:
        meta_out = {"continue": "", **meta_out}  # custom resource lists always carry the token
    if ctx.output == "protobuf":
        listed = {
            "kind": info.list_kind,
            "apiVersion": info.api_version,
            "metadata": meta_out,
            "items": [_item(ctx, o) for o, _ in matched],
        }
        return protobuf_response(encode_object(listed))
    if ctx.output == "yaml":
        doc = {
            "kind": info.list_kind,
            "apiVersion": info.api_version,
            "metadata": meta_out,
            "items": [_item(ctx, o) for o, _ in matched],
        }
        return web.Response(text=yaml.safe_dump(doc), content_type="application/yaml")
    conv = needs_convert(ctx)
    if info.is_custom:
        parts = [orjson.dumps(convert(ctx, o)) if (raw is None or conv) else raw for o, raw in matched]
    else:
        parts = _typeless(info, matched, conv)
    body = (
        b'{"kind":'
        + orjson.dumps(info.list_kind)
        + b',"apiVersion":'
        + orjson.dumps(info.api_version)
        + b',"metadata":'
        + orjson.dumps(meta_out)
        + b',"items":['
        + b",".join(parts)
        + b"]}\n"
    )
    return json_response(body)


def _item(ctx: Ctx, obj: dict[str, Any]) -> dict[str, Any]:
    """A list item as kube-apiserver lists it: built-in kinds' items carry no kind or apiVersion."""
    if ctx.info.is_custom:
        return convert(ctx, obj)
    return {k: v for k, v in obj.items() if k not in _TYPE_KEYS}


_TYPE_KEYS = frozenset({"kind", "apiVersion"})


def _typeless(
    info: ResourceInfo, matched: list[tuple[dict[str, Any], bytes | None]], conv: bool
) -> list[bytes]:
    """The JSON of built-in list items without kind and apiVersion, cut from the stored JSON when
    it starts with them (as stored objects do)."""
    prefix = b'{"kind":' + orjson.dumps(info.kind) + b',"apiVersion":' + orjson.dumps(info.api_version) + b","
    cut = len(prefix)
    out: list[bytes] = []
    for obj, raw in matched:
        if raw is not None and not conv and raw.startswith(prefix):
            out.append(b"{" + raw[cut:])
        else:
            out.append(orjson.dumps({k: v for k, v in obj.items() if k not in _TYPE_KEYS}))
    return out
