"""Watch streams: resume from a resourceVersion (history), initial events, bookmarks, selector
transitions, server-side deadlines and the injected watch faults (stall, cut, in-stream ERROR,
malformed line, connection reset)."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from mcr_envtest import errors, table
from mcr_envtest.faults import WatchFault
from mcr_envtest.schema.protobuf_encode import encode_watch_event
from mcr_envtest.selectors import Selector
from mcr_envtest.store import Event

from .context import JSON, PROTOBUF, Backend, Ctx
from .conversion import to_version, webhook_converts
from .read import parse_rv, request_selector
from .render import convert, include_object, needs_convert, partial_metadata

__all__ = ["handle"]


def _bool(v: str | None) -> bool:
    return (v or "").lower() in ("1", "true")


def _event_line(etype: str, obj_bytes: bytes) -> bytes:
    return b'{"type":"' + etype.encode() + b'","object":' + obj_bytes + b"}\n"


class _Renderer:
    """Encodes watch events in the negotiated representation."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.first = True
        self.protobuf = ctx.output == "protobuf"
        self.plain = ctx.output == "json" and not needs_convert(ctx)
        self.include = include_object(ctx) if ctx.output == "table" else "Metadata"
        self.content_type = PROTOBUF + ";stream=watch" if self.protobuf else JSON

    def error(self, status: dict[str, Any]) -> bytes:
        """An ERROR event carrying ``status``."""
        if self.protobuf:
            return encode_watch_event("ERROR", status)
        return _event_line("ERROR", errors.encode_status(status, newline=False))

    def obj(self, etype: str, obj: dict[str, Any], raw: bytes | None = None) -> bytes:
        ctx = self.ctx
        if self.protobuf:
            return encode_watch_event(etype, convert(ctx, obj))
        if self.plain and raw is not None:
            return _event_line(etype, raw)
        if ctx.output == "table":
            out = table.table_event_object(
                ctx.info, convert(ctx, obj), include_object=self.include, first=self.first
            )
            self.first = False
        elif ctx.output == "pom":
            out = partial_metadata(obj)
        else:
            out = convert(ctx, obj)
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
        bookmark = {"kind": info.kind, "apiVersion": info.api_version, "metadata": meta}
        if self.protobuf:
            return encode_watch_event("BOOKMARK", bookmark)
        return _event_line("BOOKMARK", orjson.dumps(bookmark))


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


async def handle(api: Backend, ctx: Ctx) -> web.StreamResponse:
    """Answer a watch request with a chunked stream of JSON lines."""
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
            raise errors.options_invalid(
                "ListOptions",
                [
                    {
                        "type": "FieldValueForbidden",
                        "field": "resourceVersionMatch",
                        "message": "Forbidden: sendInitialEvents requires setting resourceVersionMatch "
                        "to NotOlderThan",
                    }
                ],
            )
    else:
        si = False
        if rvm:
            raise errors.options_invalid(
                "ListOptions",
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
    sel = request_selector(ctx)
    renderer = _Renderer(ctx)
    ns = ctx.namespace
    converter = _converter(api, ctx) if needs_convert(ctx) and webhook_converts(api, info) else None
    picked: list[dict[str, Any]] = []  # initial objects to convert through the CRD's webhook
    # Subscribe and snapshot in one synchronous step: nothing can be committed in between.
    initial: list[bytes] = []
    expired: errors.StatusError | None = None
    watcher = None
    backlog: list[Event] = []
    if si or rv in ("", "0"):
        watcher, _ = store.watch(info.group, info.plural, None)
        for obj, raw in store.list_entries(info.group, info.plural, ns or None):
            if not (sel.trivial or sel.matches(obj)):
                continue
            if converter is not None:
                picked.append(obj)
            else:
                initial.append(renderer.obj("ADDED", obj, raw))
        snapshot_rv = store.rv
        if si and bookmarks:  # without bookmarks the initial events just end
            initial.append(renderer.bookmark(snapshot_rv, initial_end=True))
    else:
        since = parse_rv(rv)
        try:
            watcher, backlog = store.watch(info.group, info.plural, since)
        except errors.StatusError as exc:
            expired = exc
        snapshot_rv = store.rv
    if picked:
        converted = await to_version(api, info, picked, ctx.info.api_version)
        initial = [renderer.obj("ADDED", o) for o in converted] + initial
    resp = web.StreamResponse(
        status=200, headers={"Content-Type": renderer.content_type, "Cache-Control": "no-cache, private"}
    )
    resp.enable_chunked_encoding()
    try:
        await resp.prepare(ctx.request)
        if expired is not None:
            await resp.write(renderer.error(expired.status))
            await resp.write_eof()
            return resp
        assert watcher is not None
        api.active_streams.add(resp)
        await _stream(
            api,
            ctx,
            resp,
            watcher,
            renderer,
            sel,
            ns,
            initial,
            backlog,
            timeout,
            bookmarks,
            snapshot_rv,
            converter,
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


_MALFORMED = b'{"type":"MODIFIED","object":{"kind":"injected-malformed-line",\n'
_WATCH_ERROR_REASONS = {
    410: ("Expired", "too old resource version: injected watch fault"),
    500: ("InternalError", "Internal error occurred: injected watch error"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
}


Converter = Callable[[list[Event]], Awaitable[list[Event]]]


def _converter(api: Backend, ctx: Ctx) -> Converter:
    """Events with their objects converted to the request's version by the CRD's webhook."""

    async def convert_events(events: list[Event]) -> list[Event]:
        mine = [ev for ev in events if not ctx.namespace or ev.namespace == ctx.namespace]
        if not mine:
            return []
        objs = await to_version(api, ctx.info, [ev.obj for ev in mine], ctx.info.api_version)
        return [dataclasses.replace(ev, obj=o) for ev, o in zip(mine, objs, strict=True)]

    return convert_events


def _render(events: list[Event], ns: str, sel: Selector, r: _Renderer) -> list[bytes]:
    """The watch lines ``events`` yield for this stream (namespace and selectors applied)."""
    out: list[bytes] = []
    for ev in events:
        if ns and ev.namespace != ns:
            continue
        line = _transition(ev, sel, r)
        if line is not None:
            out.append(line)
    return out


async def _end_with(resp: web.StreamResponse, transport: Any, fault: WatchFault, r: _Renderer) -> None:
    """End a stream as ``fault`` says (see :class:`~mcr_envtest.faults.WatchFault`)."""
    if fault.kind == "reset":
        if transport is not None:
            transport.abort()
        raise ConnectionResetError("injected watch connection reset")
    if fault.kind == "error":
        reason, message = _WATCH_ERROR_REASONS.get(fault.status, ("InternalError", "injected watch error"))
        status = errors.status_object(fault.status, reason, message)
        await resp.write(r.error(status))
    elif fault.kind == "malformed":
        await resp.write(_MALFORMED)
    await resp.write_eof()


async def _stream(
    api: Backend,
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
    converter: Converter | None = None,
) -> None:
    faults = api.faults
    store = api.store
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    next_bookmark = loop.time() + api.bookmark_interval
    fault = faults.take_watch_fault()
    limit = fault.after if fault is not None else None
    transport = ctx.request.transport

    async def send(lines: list[bytes], sent: int) -> tuple[int, bool]:
        """Write ``lines``, but none past the fault's event count: (events sent, fault due).
        A faulted stream ends without anything that claims a later position (no bookmark), so
        a client resuming from the last event it got loses nothing."""
        if limit is not None:
            lines = lines[: max(0, limit - sent)]
        if lines:
            await _wait_unstalled(faults, watcher, loop, deadline)
            await resp.write(b"".join(lines))
        sent += len(lines)
        return sent, fault is not None and limit is not None and sent >= limit

    async def render(events: list[Event]) -> list[bytes] | None:
        """The lines of ``events``; None (after an ERROR event ends the stream) when the CRD's
        conversion webhook fails."""
        if converter is not None and events:
            try:
                events = await converter(events)
            except errors.StatusError as exc:
                await resp.write(r.error(exc.status))
                await resp.write_eof()
                return None
        return _render(events, ns, sel, r)

    first = await render(backlog)
    if first is None:
        return
    sent, struck = await send(initial + first, 0)
    if backlog:
        last_rv = backlog[-1].rv
    while not struck:
        now = loop.time()
        if now >= deadline:
            break
        wait = min(deadline - now, 1.0)
        if bookmarks:
            wait = max(0.0, min(wait, next_bookmark - now))
        batch = await watcher.next_batch(wait)
        await _wait_unstalled(faults, watcher, loop, deadline)
        if batch:
            lines = await render(batch)
            if lines is None:
                return
            sent, struck = await send(lines, sent)
            if struck:
                break
            last_rv = batch[-1].rv
        elif watcher.closed:
            break
        if transport is None or transport.is_closing():
            return
        if bookmarks and loop.time() >= next_bookmark:
            if not watcher.pending:
                last_rv = max(last_rv, store.rv)
            await resp.write(r.bookmark(last_rv))
            next_bookmark = loop.time() + api.bookmark_interval
    if struck and fault is not None:
        await _end_with(resp, transport, fault, r)
        return
    if watcher.closed and watcher.overflowed:
        return
    if bookmarks and not watcher.closed and not watcher.pending:
        await resp.write(r.bookmark(max(last_rv, store.rv)))
    await resp.write_eof()
