"""Kubernetes Events about objects, recorded without blocking or failing the caller.

:class:`EventRecorder` writes ``events.k8s.io/v1`` Events (falling back to core ``v1`` Events
when the server does not serve the events API). Repeats of the same event (same object, type,
reason, action and message within :data:`SERIES_WINDOW`) update one Event with a strategic
merge PATCH (``series`` / ``count``) instead of creating new ones. Recording happens in a
background task the recorder owns; failures are logged as warnings naming the object.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcr.client import Client
from mcr.errors import NoKindMatchError, NotFoundError
from mcr.rest.kinds import GVK, to_dict

__all__ = ["EventRecorder"]

log = logging.getLogger("mcr.recorder")

#: Repeats within this many seconds of the last one are folded into the same Event.
SERIES_WINDOW = 6 * 60.0
#: Events waiting to be written beyond this are dropped (with a warning), like client-go does.
MAX_PENDING = 1000
_MAX_NOTE = 1024
_MAX_KEYS = 4096
_EVENTS_V1 = GVK("events.k8s.io", "v1", "Event")


def _micro_time(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _time(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    return {k: v for k, v in ref.items() if v}


@dataclass
class _Pending:
    regarding: dict[str, Any]
    related: dict[str, Any] | None
    type: str
    reason: str
    action: str
    note: str
    at: float


@dataclass
class _Seen:
    name: str
    namespace: str
    api: str
    count: int
    last: float


class EventRecorder:
    """Records Events for ``component`` (the reporting controller) through ``client``.

    :meth:`event` returns at once; a worker task started on first use writes the events in
    order. :meth:`close` waits for the queued events to be written, then stops the worker.
    """

    def __init__(self, client: Client, component: str, *, instance: str | None = None) -> None:
        self.client = client
        self.component = component
        self.instance = instance or f"{component}-{socket.gethostname()}-{os.getpid()}"
        self._queue: asyncio.Queue[_Pending | None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._seen: collections.OrderedDict[tuple[Any, ...], _Seen] = collections.OrderedDict()
        self._api: str | None = None  # "events.k8s.io/v1" or "v1", decided on first write
        self._closed = False
        self.dropped = 0

    def __repr__(self) -> str:
        return f"EventRecorder({self.component!r}, cluster={self.client.cluster_name!r})"

    def event(
        self,
        obj: object,
        type: str,
        reason: str,
        message: str,
        action: str | None = None,
        related: object | None = None,
    ) -> None:
        """Record that ``reason`` happened to ``obj`` (``type``: ``"Normal"`` or ``"Warning"``).

        Never raises and never waits: invalid input and write failures are logged as warnings.
        Must be called from within the running event loop.
        """
        try:
            regarding = _ref(to_dict(obj))
            rel = _ref(to_dict(related)) if related is not None else None
        except (TypeError, ValueError) as exc:
            log.warning("event %s not recorded: cannot reference the object: %s", reason, exc)
            return
        key = "/".join(str(regarding[k]) for k in ("namespace", "name") if regarding.get(k))
        if type not in ("Normal", "Warning"):
            log.warning(
                "event %s for %s not recorded: type must be Normal or Warning, not %r", reason, key, type
            )
            return
        if self._closed:
            log.warning("event %s for %s not recorded: the recorder is closed", reason, key)
            return
        try:
            queue = self._ensure_worker()
        except RuntimeError:
            log.warning("event %s for %s not recorded: no running event loop", reason, key)
            return
        if queue.qsize() >= MAX_PENDING:
            self.dropped += 1
            log.warning("event %s for %s dropped: %d events already waiting", reason, key, MAX_PENDING)
            return
        queue.put_nowait(
            _Pending(regarding, rel, type, reason, action or reason, message[:_MAX_NOTE], time.time())
        )

    def _ensure_worker(self) -> asyncio.Queue[_Pending | None]:
        if self._queue is None or self._worker is None or self._worker.done():
            asyncio.get_running_loop()
            self._queue = asyncio.Queue()
            self._worker = asyncio.get_running_loop().create_task(
                self._run(self._queue), name=f"mcr-event-recorder-{self.component}"
            )
        return self._queue

    async def close(self, timeout: float | None = 10.0) -> None:
        """Write what is queued (for at most ``timeout`` seconds, then cancel the rest) and stop.

        Idempotent. Cancelling ``close`` cancels the worker too.
        """
        self._closed = True
        worker, queue = self._worker, self._queue
        if worker is None or queue is None:
            return
        if not worker.done():
            queue.put_nowait(None)
            try:
                done, _ = await asyncio.wait({worker}, timeout=timeout)
                if not done:
                    worker.cancel()
                    await asyncio.wait({worker})
            except asyncio.CancelledError:
                worker.cancel()
                raise
        if not worker.cancelled() and worker.exception() is not None:
            log.warning("event recorder %s stopped with an error: %r", self.component, worker.exception())

    async def _run(self, queue: asyncio.Queue[_Pending | None]) -> None:
        while True:
            item = await queue.get()
            if item is None:
                return
            try:
                await self._record(item)
            except Exception as exc:  # noqa: BLE001 - recording must never fail the controller
                kind = item.regarding.get("kind", "object")
                ns, name = item.regarding.get("namespace", ""), item.regarding.get("name", "")
                key = f"{ns}/{name}" if ns else name
                log.warning(
                    "event %s for %s %s not recorded: %s",
                    item.reason,
                    kind,
                    key,
                    exc,
                    extra={"cluster": self.client.cluster_name, "object": key},
                )

    async def _events_api(self) -> str:
        if self._api is None:
            try:
                await self.client.rest_mapper.mapping(_EVENTS_V1)
                self._api = "events.k8s.io/v1"
            except NoKindMatchError:
                self._api = "v1"
        return self._api

    async def _record(self, e: _Pending) -> None:
        namespace = e.regarding.get("namespace") or "default"
        key = (
            e.regarding.get("uid"),
            e.regarding.get("kind"),
            namespace,
            e.regarding.get("name"),
            e.type,
            e.reason,
            e.action,
            e.note,
        )
        seen = self._seen.get(key)
        if seen is not None and e.at - seen.last <= SERIES_WINDOW:
            seen.count += 1
            seen.last = e.at
            self._seen.move_to_end(key)
            try:
                await self._patch_series(seen, e)
                return
            except NotFoundError:
                pass  # the Event was deleted (TTL): start a new one
        api = await self._events_api()
        name = f"{str(e.regarding.get('name') or 'object')[:200]}.{time.time_ns():x}"
        try:
            await self._create(api, name, namespace, e)
        except NotFoundError as exc:
            if api == "v1" or exc.details.get("kind") == "namespaces":
                raise
            # the events API is not served here (404 for the path): use core/v1 from now on
            self._api = api = "v1"
            await self._create(api, name, namespace, e)
        self._seen[key] = _Seen(name, namespace, api, 1, e.at)
        self._seen.move_to_end(key)
        while len(self._seen) > _MAX_KEYS:
            self._seen.popitem(last=False)

    async def _create(self, api: str, name: str, namespace: str, e: _Pending) -> None:
        body: dict[str, Any]
        if api == "events.k8s.io/v1":
            body = {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "eventTime": _micro_time(e.at),
                "reportingController": self.component,
                "reportingInstance": self.instance[:128],
                "action": e.action[:128],
                "reason": e.reason[:128],
                "regarding": e.regarding,
                "note": e.note,
                "type": e.type,
            }
            if e.related:
                body["related"] = e.related
        else:
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": e.regarding,
                "reason": e.reason,
                "message": e.note,
                "type": e.type,
                "source": {"component": self.component, "host": socket.gethostname()},
                "firstTimestamp": _time(e.at),
                "lastTimestamp": _time(e.at),
                "count": 1,
                "action": e.action,
                "reportingComponent": self.component,
                "reportingInstance": self.instance[:128],
            }
            if e.related:
                body["related"] = e.related
        await self.client.create(body)

    async def _patch_series(self, seen: _Seen, e: _Pending) -> None:
        if seen.api == "events.k8s.io/v1":
            kind = "events.k8s.io/v1/Event"
            patch: dict[str, Any] = {"series": {"count": seen.count, "lastObservedTime": _micro_time(e.at)}}
        else:
            kind = "v1/Event"
            patch = {"count": seen.count, "lastTimestamp": _time(e.at)}
        await self.client.patch(kind, seen.name, patch, patch_type="strategic", namespace=seen.namespace)
