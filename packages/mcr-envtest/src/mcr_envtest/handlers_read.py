"""Read verbs: get, list (pagination, resourceVersion semantics) and watch (history, bookmarks,
initial events, selector transitions, faults)."""

from __future__ import annotations

import asyncio
import bisect
import random
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson
import yaml
from aiohttp import web

from . import errors, table
from .handlers import JSON, Ctx, json_response
from .selectors import Selector, parse_field_selector, parse_label_selector
from .store import Event, ListSnapshot, decode_continue, encode_continue

if TYPE_CHECKING:
    from .handlers import Api

__all__ = ["handle", "render_object"]


def _convert(ctx: Ctx, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as served at the request's version (None conversion for CRDs)."""
    if obj.get("apiVersion") != ctx.info.api_version:
        obj = dict(obj)
        obj["apiVersion"] = ctx.info.api_version
    return obj


def _needs_convert(ctx: Ctx) -> bool:
    return not ctx.info.storage_version


def _pom(obj: dict[str, Any]) -> dict[str, Any]:
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
                [_convert(ctx, obj)],
                include_object=_include(ctx),
                resource_version=rv,
                continue_token=None,
            ),
            status,
        )
    if ctx.output == "pom":
        return json_response(_pom(obj), status)
    if ctx.output == "yaml":
        return web.Response(
            text=yaml.safe_dump(_convert(ctx, obj)), status=status, content_type="application/yaml"
        )
    if raw is not None and not _needs_convert(ctx):
        return json_response(raw, status)
    return json_response(_convert(ctx, obj), status)


def _include(ctx: Ctx) -> str:
    v = ctx.query.get("includeObject", "Metadata") or "Metadata"
    if v not in ("None", "Metadata", "Object"):
        raise errors.bad_request(f'includeObject: Unsupported value: "{v}"')
    return v


async def handle(api: Api, ctx: Ctx) -> web.StreamResponse:
    if ctx.verb == "get":
        return await _get(api, ctx)
    if ctx.verb == "list":
        return await _list(api, ctx)
    return await _watch(api, ctx)


def _parse_rv(value: str, what: str = "resourceVersion") -> int:
    try:
        n = int(value)
        if n < 0:
            raise ValueError
        return n
    except ValueError:
        raise errors.bad_request(
            f'{what}: Invalid value: "{value}": must be a non-negative integer'
        ) from None


async def _wait_for_rv(api: Api, rv: int) -> None:
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


async def _get(api: Api, ctx: Ctx) -> web.StreamResponse:
    rv = ctx.query.get("resourceVersion", "")
    if rv and rv != "0":
        await _wait_for_rv(api, _parse_rv(rv))
    info = ctx.info
    raw = api.store.get_raw(info.group, info.plural, ctx.namespace, ctx.name)
    obj = api.store.get(info.group, info.plural, ctx.namespace, ctx.name)
    if obj is None:
        raise errors.not_found(info, ctx.name)
    return render_object(ctx, obj, raw=raw)


def _selector(ctx: Ctx) -> Selector:
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
    for entry in entries:
        obj = entry[0]
        if filtering and not sel.matches(obj):
            continue
        meta = obj["metadata"]
        keys.append((meta.get("namespace", ""), meta["name"]))
        out.append(entry)
    return ListSnapshot(keys, out)


async def _list(api: Api, ctx: Ctx) -> web.StreamResponse:
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
            raise errors.invalid(
                info,
                "",
                [
                    {
                        "type": "FieldValueNotSupported",
                        "field": "resourceVersionMatch",
                        "message": f'Unsupported value: "{rvm}"',
                    }
                ],
            )
        if not rv:
            raise errors.invalid(
                info,
                "",
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
            raise errors.invalid(
                info,
                "",
                [
                    {
                        "type": "FieldValueForbidden",
                        "field": "resourceVersionMatch",
                        "message": "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                    }
                ],
            )
        if rvm == "Exact" and rv == "0":
            raise errors.invalid(
                info,
                "",
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
    sel = _selector(ctx)
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
        list_rv = _parse_rv(rv)
        await _wait_for_rv(api, list_rv)
        snap = store.list_snapshot_get(list_rv, cache_key)
        if snap is None:
            snap = _match(store.entries_at(info.group, info.plural, ns, list_rv), sel)
    else:
        if rv and rv != "0":
            await _wait_for_rv(api, _parse_rv(rv))
        list_rv = store.rv
        snap = store.list_snapshot_get(list_rv, cache_key)
        if snap is None:
            snap = _match(store.list_entries(info.group, info.plural, ns), sel)
    total = len(snap.entries)
    end = min(total, start_i + limit) if limit else total
    matched = snap.entries[start_i:end]
    next_token: str | None = None
    remaining = total - end
    if remaining > 0:
        ns_l, name_l = snap.keys[end - 1]
        next_token = encode_continue(list_rv, f"{ns_l}/{name_l}")
        store.list_snapshot_put(list_rv, cache_key, snap)
    rv_s = str(list_rv)
    if ctx.output == "table":
        return json_response(
            table.to_table(
                info,
                [_convert(ctx, o) for o, _ in matched],
                include_object=_include(ctx),
                resource_version=rv_s,
                continue_token=next_token,
            )
        )
    meta_out: dict[str, Any] = {"resourceVersion": rv_s}
    if next_token:
        meta_out["continue"] = next_token
        meta_out["remainingItemCount"] = remaining
    if ctx.output == "pom":
        return json_response(
            {
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta_out,
                "items": [_pom(o) for o, _ in matched],
            }
        )
    if ctx.output == "yaml":
        doc = {
            "kind": info.list_kind,
            "apiVersion": info.api_version,
            "metadata": meta_out,
            "items": [_convert(ctx, o) for o, _ in matched],
        }
        return web.Response(text=yaml.safe_dump(doc), content_type="application/yaml")
    conv = _needs_convert(ctx)
    parts = [orjson.dumps(_convert(ctx, o)) if (raw is None or conv) else raw for o, raw in matched]
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


# ---------------------------------------------------------------------- watch
def _bool(v: str | None) -> bool:
    return (v or "").lower() in ("1", "true")


def _event_line(etype: str, obj_bytes: bytes) -> bytes:
    return b'{"type":"' + etype.encode() + b'","object":' + obj_bytes + b"}\n"


class _Renderer:
    """Encodes watch events in the negotiated representation."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.first = True
        self.plain = ctx.output == "json" and not _needs_convert(ctx)
        self.include = _include(ctx) if ctx.output == "table" else "Metadata"

    def obj(self, etype: str, obj: dict[str, Any], raw: bytes | None = None) -> bytes:
        ctx = self.ctx
        if self.plain and raw is not None:
            return _event_line(etype, raw)
        if ctx.output == "table":
            out = table.table_event_object(
                ctx.info, _convert(ctx, obj), include_object=self.include, first=self.first
            )
            self.first = False
        elif ctx.output == "pom":
            out = _pom(obj)
        else:
            out = _convert(ctx, obj)
        return _event_line(etype, orjson.dumps(out))

    def event(self, ev: Event) -> bytes:
        if self.plain:
            return ev.line()
        return self.obj(ev.type, ev.obj)

    def bookmark(self, rv: int, *, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        info = self.ctx.info
        return _event_line(
            "BOOKMARK", orjson.dumps({"kind": info.kind, "apiVersion": info.api_version, "metadata": meta})
        )


def _transition(ev: Event, sel: Selector, r: _Renderer) -> bytes | None:
    """The line this event yields for a selecting watcher (ADDED/DELETED on selector transitions)."""
    if sel.trivial:
        return r.event(ev)
    if ev.type == "ADDED":
        return r.event(ev) if sel.matches(ev.obj) else None
    if ev.type == "DELETED":
        return r.event(ev) if ev.prev is not None and sel.matches(ev.prev) else None
    new_ok = sel.matches(ev.obj)
    old_ok = ev.prev is not None and sel.matches(ev.prev)
    if new_ok and old_ok:
        return r.event(ev)
    if new_ok:
        return r.obj("ADDED", ev.obj, ev.raw)
    if old_ok and ev.prev is not None:
        last = dict(ev.prev)
        last["metadata"] = dict(ev.prev["metadata"], resourceVersion=str(ev.rv))
        return r.obj("DELETED", last)
    return None


async def _watch(api: Api, ctx: Ctx) -> web.StreamResponse:
    q = ctx.query
    info = ctx.info
    store = api.store
    faults = api.faults
    rv = q.get("resourceVersion", "")
    rvm = q.get("resourceVersionMatch", "")
    send_initial = q.get("sendInitialEvents")
    bookmarks = _bool(q.get("allowWatchBookmarks"))
    if send_initial is not None and send_initial != "":
        si = _bool(send_initial)
        if rvm != "NotOlderThan":
            raise errors.invalid(
                info,
                "",
                [
                    {
                        "type": "FieldValueInvalid",
                        "field": "resourceVersionMatch",
                        "message": 'Invalid value: "' + rvm + '": sendInitialEvents requires '
                        "setting resourceVersionMatch to NotOlderThan",
                    }
                ],
            )
        if not bookmarks and si:
            raise errors.invalid(
                info,
                "",
                [
                    {
                        "type": "FieldValueForbidden",
                        "field": "allowWatchBookmarks",
                        "message": "Forbidden: allowWatchBookmarks required when sendInitialEvents is true",
                    }
                ],
            )
    else:
        si = False
        if rvm:
            raise errors.invalid(
                info,
                "",
                [
                    {
                        "type": "FieldValueForbidden",
                        "field": "resourceVersionMatch",
                        "message": "Forbidden: resourceVersionMatch is forbidden for watch "
                        "unless sendInitialEvents is provided",
                    }
                ],
            )
    timeout: float
    if q.get("timeoutSeconds"):
        try:
            timeout = float(int(q["timeoutSeconds"]))
        except ValueError:
            raise errors.bad_request(f'timeoutSeconds: Invalid value: "{q["timeoutSeconds"]}"') from None
    else:
        timeout = random.uniform(*api.watch_timeout)
    if faults.max_watch_seconds is not None:
        timeout = min(timeout, faults.max_watch_seconds)
    sel = _selector(ctx)
    renderer = _Renderer(ctx)
    ns = ctx.namespace
    # Subscribe and snapshot in one synchronous step: nothing can be committed in between.
    initial: list[bytes] = []
    expired: errors.StatusError | None = None
    watcher = None
    backlog: list[Event] = []
    if si or rv in ("", "0"):
        watcher, _ = store.watch(info.group, info.plural, None)
        for obj, raw in store.list_entries(info.group, info.plural, ns or None):
            if sel.trivial or sel.matches(obj):
                initial.append(renderer.obj("ADDED", obj, raw))
        snapshot_rv = store.rv
        if si:
            initial.append(renderer.bookmark(snapshot_rv, initial_end=True))
    else:
        since = _parse_rv(rv)
        try:
            watcher, backlog = store.watch(info.group, info.plural, since)
        except errors.StatusError as exc:
            expired = exc
        snapshot_rv = store.rv
    resp = web.StreamResponse(
        status=200, headers={"Content-Type": JSON, "Cache-Control": "no-cache, private"}
    )
    resp.enable_chunked_encoding()
    try:
        await resp.prepare(ctx.request)
        if expired is not None:
            await resp.write(_event_line("ERROR", errors.encode_status(expired.status, newline=False)))
            await resp.write_eof()
            return resp
        assert watcher is not None
        api.active_streams.add(resp)
        await _stream(
            api, ctx, resp, watcher, renderer, sel, ns, initial, backlog, timeout, bookmarks, snapshot_rv
        )
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        api.active_streams.discard(resp)
        if watcher is not None:
            watcher.close()
    return resp


async def _wait_unstalled(
    faults: Any, watcher: Any, loop: asyncio.AbstractEventLoop, deadline: float
) -> None:
    """While the stall fault is on, write nothing (the connection stays open)."""
    while faults.stalled() and not watcher.closed and loop.time() < deadline:  # noqa: ASYNC110 - polls a thread-set flag
        await asyncio.sleep(0.05)


async def _stream(
    api: Api,
    ctx: Ctx,
    resp: web.StreamResponse,
    watcher: Any,
    r: _Renderer,
    sel: Selector,
    ns: str,
    initial: list[bytes],
    backlog: list[Event],
    timeout: float,
    bookmarks: bool,
    last_rv: int,
) -> None:
    faults = api.faults
    store = api.store
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    next_bookmark = loop.time() + api.bookmark_interval
    cut_after = faults.close_watches_after_events
    sent = 0
    transport = ctx.request.transport
    pending: list[bytes] = list(initial)
    sent += len(initial)
    for ev in backlog:
        if ns and ev.namespace != ns:
            continue
        line = _transition(ev, sel, r)
        if line is not None:
            pending.append(line)
            sent += 1
        last_rv = ev.rv
    if cut_after is not None:
        pending = pending[:cut_after]
        sent = len(pending)
    if pending:
        await _wait_unstalled(faults, watcher, loop, deadline)
        await resp.write(b"".join(pending))
    while True:
        if cut_after is not None and sent >= cut_after:
            break
        now = loop.time()
        if now >= deadline:
            break
        wait = min(deadline - now, 1.0)
        if bookmarks:
            wait = max(0.0, min(wait, next_bookmark - now))
        batch = await watcher.next_batch(wait)
        await _wait_unstalled(faults, watcher, loop, deadline)
        if batch:
            lines = []
            for ev in batch:
                last_rv = ev.rv
                if ns and ev.namespace != ns:
                    continue
                line = _transition(ev, sel, r)
                if line is not None:
                    lines.append(line)
                    sent += 1
                    if cut_after is not None and sent >= cut_after:
                        break
            if lines:
                await resp.write(b"".join(lines))
        elif watcher.closed:
            break
        if transport is None or transport.is_closing():
            return
        if bookmarks and loop.time() >= next_bookmark:
            if not watcher.pending:
                last_rv = max(last_rv, store.rv)
            await resp.write(r.bookmark(last_rv))
            next_bookmark = loop.time() + api.bookmark_interval
    if watcher.closed and watcher.overflowed:
        return
    if bookmarks and not watcher.closed and not watcher.pending:
        await resp.write(r.bookmark(max(last_rv, store.rv)))
    await resp.write_eof()
