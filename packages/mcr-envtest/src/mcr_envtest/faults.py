"""Fault injection controls for one server (``srv.faults``).

All controls are safe to call from any thread: they set plain attributes or hand work to the
server's loop with ``call_soon_threadsafe``. They take effect for requests that arrive afterwards
(``close_watches``/``compact`` act at once).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Faults", "LoggedRequest", "WatchFault"]


@dataclass(frozen=True)
class LoggedRequest:
    """One request the server answered (``status`` 200 for watches that started streaming)."""

    method: str
    path: str
    query: str
    status: int
    user: str
    time: float


@dataclass(frozen=True)
class WatchFault:
    """What one watch stream does once it has sent ``after`` events: ``"cut"`` (a clean end of
    stream), ``"error"`` (an in-stream ERROR event carrying a Status with ``status``, then the
    end), ``"malformed"`` (a line that is not JSON, then the end) or ``"reset"`` (the TCP
    connection is dropped without a clean end)."""

    kind: str
    after: int
    status: int = 500


@dataclass
class _WatchFaultSpec:
    fault: WatchFault
    remaining: int | None  # None: every new watch


@dataclass
class _FailSpec:
    remaining: int
    status: int
    retry_after: float | None
    text: bool
    methods: frozenset[str] | None
    path_contains: str | None


class Faults:
    """Per-server fault controls; see :doc:`architecture` ("mcr-envtest")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fail: list[_FailSpec] = []
        self.stall: float | None = None
        self._stall_until: float | None = None
        self.latency_seconds = 0.0
        self.max_watch_seconds: float | None = None
        self.close_watches_after_events: int | None = None
        self.request_log: deque[LoggedRequest] = deque(maxlen=100_000)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._close_watches: Callable[[], int] | None = None
        self._compact: Callable[[], None] | None = None
        self.stall_event_count = 0
        self._watch_faults: list[_WatchFaultSpec] = []

    # wiring (server side)
    def _bind(
        self, loop: asyncio.AbstractEventLoop, close_watches: Callable[[], int], compact: Callable[[], None]
    ) -> None:
        self._loop = loop
        self._close_watches = close_watches
        self._compact = compact

    def _run_in_loop(self, fn: Callable[[], Any]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn()
            return
        done = threading.Event()

        def call() -> None:
            try:
                fn()
            finally:
                done.set()

        loop.call_soon_threadsafe(call)
        done.wait(10)

    # controls
    def close_watches(self) -> None:
        """End every open watch stream now (clients see a clean end of stream)."""
        if self._close_watches is not None:
            cw = self._close_watches
            self._run_in_loop(lambda: cw())

    def fail_next(
        self,
        n: int,
        status: int = 429,
        retry_after: float | None = None,
        text: bool = False,
        *,
        methods: tuple[str, ...] | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Answer the next ``n`` matching requests with ``status`` (JSON Status, or the upstream APF
        text/plain body when ``text``), with ``Retry-After`` when ``retry_after`` is given."""
        with self._lock:
            self._fail.append(
                _FailSpec(
                    n,
                    status,
                    retry_after,
                    text,
                    frozenset(m.upper() for m in methods) if methods else None,
                    path_contains,
                )
            )

    def take_failure(self, method: str, path: str) -> tuple[int, float | None, bool] | None:
        """Server side: the failure to inject for this request, if any (consumes one)."""
        if not self._fail:
            return None
        with self._lock:
            for spec in self._fail:
                if spec.methods is not None and method not in spec.methods:
                    continue
                if spec.path_contains is not None and spec.path_contains not in path:
                    continue
                spec.remaining -= 1
                if spec.remaining <= 0:
                    self._fail.remove(spec)
                return spec.status, spec.retry_after, spec.text
        return None

    def clear(self) -> None:
        """Remove every pending failure, stall, latency and watch cap."""
        with self._lock:
            self._fail.clear()
        self.stall = None
        self._stall_until = None
        self.latency_seconds = 0.0
        self.max_watch_seconds = None
        self.close_watches_after_events = None
        with self._lock:
            self._watch_faults.clear()

    def stall_watches(self, seconds: float | None = None) -> None:
        """Stop writing to watch streams without closing them (half-open TCP as seen by clients):
        for ``seconds``, or until ``stall_watches(0)`` when None."""
        if seconds == 0:
            self._stall_until = None
        elif seconds is None:
            self._stall_until = float("inf")
        else:
            self._stall_until = time.monotonic() + seconds

    def stalled(self) -> bool:
        """Server side: True while watch output is stalled."""
        until = self._stall_until
        return until is not None and time.monotonic() < until

    def latency(self, seconds: float) -> None:
        """Delay every request by ``seconds`` before it is handled (0 turns it off)."""
        self.latency_seconds = max(0.0, seconds)

    def compact(self) -> None:
        """Drop the watch history: any older resourceVersion now gets 410 Expired."""
        if self._compact is not None:
            c = self._compact
            self._run_in_loop(lambda: c())

    def watch_timeout(self, seconds: float | None) -> None:
        """Cap every watch (new ones) at ``seconds``; None removes the cap."""
        self.max_watch_seconds = seconds

    def cut_watches_after(self, events: int | None) -> None:
        """Close each new watch stream cleanly after it sent ``events`` events (None: never).

        A cut stream ends without a closing bookmark, so a client resuming from the last
        resourceVersion it saw loses nothing."""
        self.close_watches_after_events = events

    def _add_watch_fault(self, fault: WatchFault, count: int | None) -> None:
        with self._lock:
            self._watch_faults.append(_WatchFaultSpec(fault, count))

    def error_watches(self, after: int = 0, *, status: int = 500, count: int | None = 1) -> None:
        """The next ``count`` new watches (None: every one) send an in-stream ERROR event, a Status
        with code ``status`` (410 gives upstream's Expired), after ``after`` events, then end."""
        self._add_watch_fault(WatchFault("error", after, status), count)

    def malform_watches(self, after: int = 0, *, count: int | None = 1) -> None:
        """The next ``count`` new watches (None: every one) write a line that is not valid JSON
        after ``after`` events, then end."""
        self._add_watch_fault(WatchFault("malformed", after), count)

    def reset_watches_after(self, after: int = 0, *, count: int | None = 1) -> None:
        """The next ``count`` new watches (None: every one) lose their connection (dropped without
        a clean end of stream) after ``after`` events."""
        self._add_watch_fault(WatchFault("reset", after), count)

    def take_watch_fault(self) -> WatchFault | None:
        """Server side: the fault a new watch stream carries (consumes one), else the
        ``cut_watches_after`` setting as a ``"cut"`` fault, else None."""
        if self._watch_faults:
            with self._lock:
                if self._watch_faults:
                    spec = self._watch_faults[0]
                    if spec.remaining is not None:
                        spec.remaining -= 1
                        if spec.remaining <= 0:
                            self._watch_faults.pop(0)
                    return spec.fault
        cut = self.close_watches_after_events
        return WatchFault("cut", cut) if cut is not None else None

    def requests(self, method: str | None = None, path_contains: str | None = None) -> list[LoggedRequest]:
        """Logged requests, optionally filtered."""
        return [
            r
            for r in list(self.request_log)
            if (method is None or r.method == method) and (path_contains is None or path_contains in r.path)
        ]
