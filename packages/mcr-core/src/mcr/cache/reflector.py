"""The list+watch loop that keeps one informer's store equal to the server's state.

One :class:`Reflector` serves one request scope (a resource path plus label/field selectors):
it lists in pages, then watches from the list's resourceVersion with bookmarks, and keeps
watching from the last resourceVersion it saw. It behaves like client-go's reflector:

* a watch that ends cleanly (server timeout, dropped connection) resumes from the last
  resourceVersion, without relisting;
* ``410 Expired/Gone`` (on the watch or the list) relists, after a backoff with jitter, and the
  store replace turns vanished objects into deletes;
* other failures (429, 5xx, connection refused) back off 800 ms → 30 s with jitter and retry;
* a watch that closes within a second without any event counts as a failure ("very short watch");
* a stream that delivers nothing, not even a bookmark, for ``stall_timeout`` seconds is
  abandoned and re-opened (half-open TCP connections never end otherwise).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from mcr.cache.backoff import Backoff, BackoffPolicy
from mcr.errors import APIError, GoneError, TransportError, api_error_from_status

if TYPE_CHECKING:
    from mcr.rest.kinds import GVR
    from mcr.rest.transport import Transport

__all__ = [
    "ReflectorConfig",
    "ReflectorSink",
    "ScopeSpec",
    "Transform",
    "WatchStalledError",
    "resource_path",
    "strip_managed_fields",
]

log = logging.getLogger("mcr.cache")

Obj = dict[str, Any]
Transform = Callable[[Obj], Obj]
"""A function a cache applies to each object before storing it (e.g. to drop fields)."""


def strip_managed_fields(obj: Obj) -> Obj:
    """The default transform: drop ``metadata.managedFields`` (often half an object's size).

    Reflectors apply it inline (it is every event's transform unless the user set another).
    """
    obj["metadata"].pop("managedFields", None)
    return obj


@dataclass(frozen=True, slots=True)
class ScopeSpec:
    """One list+watch request scope of an informer: a namespace (``None``: all) and selectors."""

    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    transform: Transform | None = None


def resource_path(gvr: GVR, namespace: str | None) -> str:
    """The collection URL path of ``gvr``, namespaced when ``namespace`` is given."""
    base = f"/api/{gvr.version}" if not gvr.group else f"/apis/{gvr.group}/{gvr.version}"
    if namespace:
        return f"{base}/namespaces/{namespace}/{gvr.resource}"
    return f"{base}/{gvr.resource}"


class WatchStalledError(Exception):
    """A watch stream delivered nothing for longer than the stall timeout (internal signal)."""


class _ShortWatchError(Exception):
    """A watch closed within a second without delivering any event (internal signal)."""


DECODE_SLICE = 16 * 1024
"""Bytes of a watch read decoded at once (whole lines; see ``Reflector._consume``)."""


class _MalformedWatchError(Exception):
    """A watch stream sent a line that is not a JSON watch event (internal signal)."""


class ReflectorSink(Protocol):
    """Where a reflector delivers what it learns (the informer)."""

    def replace(self, scope: str | None, objs: list[Obj], resource_version: str) -> None:
        """Make the store's objects in ``scope`` (a namespace, or ``None`` for all) equal ``objs``."""

    def watch_event(self, event_type: str, obj: Obj) -> None:
        """Apply one ADDED/MODIFIED/DELETED event."""

    def watch_changes(
        self, events: list[Any], start: int, strip: bool, *, dedupe: bool
    ) -> tuple[int, str | None, int]:
        """Apply the ADDED/MODIFIED events from ``events[start]`` on in one pass, as
        ``watch_event`` would one by one (``strip``: drop their ``managedFields`` first), but
        dropping an event at the resourceVersion already stored only with ``dedupe``.

        Stops at the first other or malformed event; returns its index (``len(events)``: none),
        the resourceVersion of the last event taken (applied or dropped; ``None``: none) and how
        many events it dropped as duplicates.
        """

    def watch_read_done(self) -> None:
        """Every event read from the stream so far has been applied (the next read may wait)."""


class _DetachedSink:
    """The sink of a reflector whose run has ended: nothing may reach it any more."""

    def replace(self, scope: str | None, objs: list[Obj], resource_version: str) -> None:
        raise RuntimeError("reflector has stopped")

    def watch_event(self, event_type: str, obj: Obj) -> None:
        raise RuntimeError("reflector has stopped")

    def watch_changes(
        self, events: list[Any], start: int, strip: bool, *, dedupe: bool
    ) -> tuple[int, str | None, int]:
        raise RuntimeError("reflector has stopped")

    def watch_read_done(self) -> None:
        return None


_DETACHED = _DetachedSink()


@dataclass(frozen=True, slots=True)
class ReflectorConfig:
    """Tuning shared by the reflectors of one cache (see :class:`mcr.cache.CacheOptions`)."""

    page_size: int = 500
    stall_timeout: float = 60.0
    watch_timeout: tuple[float, float] = (300.0, 600.0)
    allow_watch_bookmarks: bool = True
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)


class Reflector:
    """Lists and watches ``path`` into ``sink`` until cancelled.

    ``scope`` is the namespace this reflector owns in the sink's store (``None``: all of it).
    ``run()`` never returns by itself: it retries every failure, and ends only by cancellation,
    which closes the open stream before ``CancelledError`` propagates.
    """

    def __init__(
        self,
        transport: Transport,
        path: str,
        sink: ReflectorSink,
        *,
        scope: str | None,
        kind: str,
        api_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
        config: ReflectorConfig | None = None,
    ) -> None:
        self._transport = transport
        self._path = path
        self._sink = sink
        self._scope = scope
        self._kind = kind
        self._api_version = api_version
        self._transform = transform
        self._config = config = config if config is not None else ReflectorConfig()
        self._selectors: dict[str, str] = {}
        if label_selector:
            self._selectors["labelSelector"] = label_selector
        if field_selector:
            self._selectors["fieldSelector"] = field_selector
        self._backoff = Backoff(config.backoff)
        self.resource_version = ""
        self.progress = 0  # reads received on watches; the stall detector watches it move
        self.events = 0  # watch events received (counted as each read is applied)
        self.lists = 0  # completed lists (the first one plus relists)
        self.watches = 0  # watch requests opened
        self.last_error: BaseException | None = None
        # Whether the stream may be replaying changes already applied (see _apply).
        self._replaying = True

    @property
    def description(self) -> str:
        cluster = self._transport.cluster_name
        where = f"cluster {cluster!r} " if cluster else ""
        sel = "".join(f" {k}={v}" for k, v in self._selectors.items())
        return f"{where}{self._path}{sel}"

    async def run(self) -> None:
        """List and watch until cancelled; a reflector runs once.

        When it ends, the reflector lets go of its sink: the informer keeps its reflectors for
        diagnostics, and without this the two would only be freed by the cyclic collector (with
        a whole cache of objects hanging off them).
        """
        try:
            await self._run()
        finally:
            self._sink = _DETACHED

    async def _run(self) -> None:
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                await self.watch_once()
                continue
            except GoneError as exc:
                # The resourceVersion we hold is older than the server's history: start over.
                log.info("%s: %s; relisting", self.description, exc.message or "resource version expired")
                self.last_error = exc
                need_list = True
                self.resource_version = ""
            except WatchStalledError as exc:
                log.warning("%s: %s; re-watching from %s", self.description, exc, self.resource_version)
                self.last_error = exc
                continue
            except (_ShortWatchError, _MalformedWatchError) as exc:
                # A malformed line ends that watch: re-watch (after a backoff) from the last
                # resourceVersion applied, so nothing before it is lost and nothing is applied twice.
                log.warning("%s: %s", self.description, exc)
                self.last_error = exc
            except (APIError, TransportError) as exc:
                log.warning("%s: %s", self.description, exc)
                self.last_error = exc
            delay = self._backoff.next_delay()
            if isinstance(self.last_error, APIError) and self.last_error.retry_after:
                delay = max(delay, self.last_error.retry_after)
            await asyncio.sleep(delay)

    # -- list --------------------------------------------------------------------------------
    async def _list(self) -> None:
        """One complete paginated list, then an atomic replace into the sink.

        An expired continue token (410 on a later page) falls back to one unpaginated list.
        """
        items: list[Obj] = []
        query = dict(self._selectors)
        if self._config.page_size > 0:
            query["limit"] = str(self._config.page_size)
        page = 0
        while True:
            try:
                resp = await self._transport.request("GET", self._path, query=query)
            except GoneError:
                if page == 0:
                    raise
                log.info("%s: continue token expired; listing without pages", self.description)
                items.clear()
                query = dict(self._selectors)
                page = 0
                continue
            body = orjson.loads(resp.body)
            items.extend(body.get("items") or ())
            meta = body.get("metadata") or {}
            token = meta.get("continue")
            page += 1
            if not token:
                rv = meta.get("resourceVersion") or ""
                break
            query["continue"] = token
        kind, api_version, transform = self._kind, self._api_version, self._transform
        strip = transform is strip_managed_fields  # the default, applied inline
        for item in items:
            # List items carry no kind/apiVersion; watch objects do. Make them look alike.
            item["kind"] = kind
            item["apiVersion"] = api_version
            if strip:
                item["metadata"].pop("managedFields", None)
        objs = items if strip or transform is None else [transform(item) for item in items]
        self._sink.replace(self._scope, objs, rv)
        self.resource_version = rv
        self.lists += 1

    # -- watch -------------------------------------------------------------------------------
    async def watch_once(self) -> None:
        """One watch request from ``resource_version``, supervised for stalls.

        Returns when the server ends the stream cleanly; raises on errors, on a stall and on a
        short empty watch.
        """
        cfg = self._config
        query = dict(self._selectors)
        query["watch"] = "1"
        query["resourceVersion"] = self.resource_version
        if cfg.allow_watch_bookmarks:
            query["allowWatchBookmarks"] = "true"
        lo, hi = cfg.watch_timeout
        query["timeoutSeconds"] = str(int(random.uniform(lo, hi)))
        self.watches += 1
        started = time.monotonic()
        consumer = asyncio.create_task(self._consume(query), name=f"watch {self.description}")
        try:
            tick = max(cfg.stall_timeout / 4, 0.01)
            seen = self.progress
            last_move = time.monotonic()
            while True:
                done, _ = await asyncio.wait((consumer,), timeout=tick)
                if done:
                    break
                now = time.monotonic()
                if self.progress != seen:
                    seen, last_move = self.progress, now
                elif now - last_move >= cfg.stall_timeout:
                    raise WatchStalledError(f"watch stalled: nothing received for {cfg.stall_timeout:g}s")
        except BaseException as exc:
            if not consumer.done():
                consumer.cancel()
                # A coroutine being closed (GeneratorExit: its task was destroyed) may not await.
                if not isinstance(exc, GeneratorExit):
                    await asyncio.wait((consumer,))
            raise
        events = consumer.result()  # re-raises the stream's error
        if events == 0 and time.monotonic() - started < 1.0:
            raise _ShortWatchError("very short watch: the server closed it at once without events")
        if events:
            self._backoff.reset()

    async def _consume(self, query: dict[str, str]) -> int:
        """Read one watch stream to its end; returns the number of events received.

        Each read of the stream is decoded in slices of whole lines of about
        :data:`DECODE_SLICE` bytes, each in one pass (its lines joined into one JSON array), and
        applied before the next slice is decoded; ``watch_read_done`` follows each read, and ends
        the stream's processing whatever happens. Slices bound how many new objects exist before
        the ones they replace are freed: decoding a whole read of hundreds of events at once set
        off the cyclic collector's young generation several times per read. A slice that is not
        valid JSON as a whole is decoded line by line, so that the events before a malformed line
        are applied.
        """
        sink = self._sink
        n = 0
        self._replaying = True
        try:
            async with self._transport.stream(self._path, query=query) as lines:
                while block := await lines.read_block():
                    self.progress += 1
                    n += self._apply_read(block)
                    sink.watch_read_done()
        finally:
            sink.watch_read_done()
        return n

    def _apply_read(self, block: bytearray) -> int:
        """Decode and apply one read of the stream, slice by slice (see :meth:`_consume`).

        ``block`` is what ``read_block`` hands out (every line between two newlines). Its
        newlines become commas in one copy; each slice is then decoded in place as a JSON array,
        its first and last separators made ``[`` and ``]`` just before: no further copy.
        """
        loads = orjson.loads
        arr = block.replace(b"\n", b",")
        view = memoryview(arr)
        n = 0
        start, last = 0, len(block) - 1
        while start < last:
            end = block.find(b"\n", start + DECODE_SLICE) if last - start > DECODE_SLICE else last
            if end < 0:
                end = last
            arr[start] = 0x5B  # [
            arr[end] = 0x5D  # ]
            try:
                events = loads(view[start : end + 1])
            except orjson.JSONDecodeError:
                n += self._apply_lines(bytes(block[start + 1 : end]))
            else:
                n += self._apply(events)
            start = end
        return n

    def _apply(self, events: list[Any]) -> int:
        """Hand decoded watch events to the sink in order; returns how many there were.

        Runs of ADDED/MODIFIED events go to the sink in one call each (``watch_changes``) unless
        a transform other than the default one is set; every other event is checked and applied
        here, one at a time.

        Duplicates (an event at the resourceVersion the store holds) can only come at the start
        of a stream, from a server replaying changes the informer applied before the stream was
        re-opened: the sink looks for them (reading each replaced object's resourceVersion, a
        cache miss per event) from a stream's first slice until a slice whose changes held none (a
        slice: what one call of this method gets, a read or a part of one).
        """
        self.events += len(events)
        transform = self._transform
        strip = transform is strip_managed_fields  # applied inline: no call per event
        if strip or transform is None:
            sink = self._sink
            dedupe = self._replaying
            changes = dropped = 0
            i, n = 0, len(events)
            while i < n:
                start = i
                i, rv, dupes = sink.watch_changes(events, i, strip, dedupe=dedupe)
                changes += i - start
                dropped += dupes
                if rv is not None:
                    self.resource_version = rv
                if i < n:
                    self._apply_each(events[i : i + 1])
                    i += 1
            if dedupe and changes:
                self._replaying = dropped > 0
            return n
        return self._apply_each(events)

    def _apply_each(self, events: list[Any]) -> int:
        """:meth:`_apply`, one event at a time (any transform)."""
        sink_event = self._sink.watch_event
        transform = self._transform
        strip = transform is strip_managed_fields
        if strip:
            transform = None
        for event in events:
            try:
                etype = event["type"]
                obj = event["object"]
                if etype == "ERROR":
                    raise api_error_from_status(
                        obj, method="WATCH", url=self._path, cluster=self._transport.cluster_name
                    )
                meta = obj["metadata"]
                rv = meta["resourceVersion"]
            except (KeyError, TypeError, AttributeError):
                raise _MalformedWatchError(
                    "the watch sent a line that is not a watch event; re-watching from "
                    f"resourceVersion {self.resource_version}"
                ) from None
            if etype == "BOOKMARK":
                self.resource_version = rv
                continue
            if strip:
                meta.pop("managedFields", None)
            elif transform is not None:
                obj = transform(obj)
            sink_event(etype, obj)
            self.resource_version = rv
        return len(events)

    def _apply_lines(self, block: bytes) -> int:
        """:meth:`_apply` for a read that did not decode as a whole: line by line, up to a bad one."""
        n = 0
        for line in block.split(b"\n"):
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise _MalformedWatchError(
                    f"the watch sent a line that is not JSON ({len(line)} bytes); re-watching "
                    f"from resourceVersion {self.resource_version}"
                ) from None
            n += self._apply([event])
        return n
