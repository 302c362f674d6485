"""The fences a controller checks before each reconcile.

:class:`Tenure` is how long this process may still act as the holder of a lease (a cluster's
fence, the leader's lease): the lease's holder confirms it after each renewal the server accepted,
and it lapses by itself when not confirmed in time. Coordinators publish a cluster's tenure with
:func:`fence_cluster` while they run it; a controller engaged with that cluster reads it with
:func:`cluster_fence`, starts a reconcile only while it holds (a float comparison) and cancels its
reconciles in flight when it lapses. The controller, the leader elector and
:mod:`mcr.manager.coordinator` (which re-exports what coordinators need) use it.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator
from types import CoroutineType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcr.cluster import Cluster

__all__ = [
    "UNFENCED",
    "FenceLapsed",
    "FencedSteps",
    "Tenure",
    "cluster_fence",
    "fence_cluster",
    "fenced",
]


class Tenure:
    """How long this process may still act as the holder of a lease: until :attr:`valid_until`.

    ``valid_until`` is a ``time.monotonic()`` reading: the send time of the last renewal the server
    confirmed plus the renew deadline, which the lease's holder sets with :meth:`confirm`. Anyone
    about to act for the holder compares the clock with it (no I/O, no allocation): a process that
    was paused, or cut off from the server, finds it passed and acts no more, whatever its event
    loop had queued. When ``valid_until`` passes, a timer *lapses* the tenure: the callbacks given
    to :meth:`on_lapse` run at once, in the loop's timer callback, so work they cancel takes no
    further step. A tenure that lapsed, or was released (:meth:`release`: the holder stopped its
    work, then gives the lease up), is over for good; a new holding gets a new tenure. Confirm,
    lapse and release run in the event loop's thread.
    """

    __slots__ = ("_callbacks", "_ended", "_timer", "name", "valid_until")

    def __init__(self, name: str) -> None:
        self.name = name
        self.valid_until = -math.inf
        self._callbacks: list[Callable[[], None]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._ended: str | None = None  # "lapsed" or "released" once over

    def __repr__(self) -> str:
        left = self.valid_until - time.monotonic()
        state = self._ended or (f"{left:.3f}s left" if left > 0 else "not held")
        return f"Tenure({self.name!r}, {state})"

    @property
    def held(self) -> bool:
        """Whether the tenure is valid now."""
        return time.monotonic() < self.valid_until

    @property
    def ended(self) -> bool:
        """Whether it lapsed or was released (it can never be confirmed again)."""
        return self._ended is not None

    def confirm(self, until: float) -> bool:
        """Extend validity to ``until`` (monotonic) after a renewal the server accepted.

        Returns ``False`` when the confirmation comes too late: once a held tenure's validity has
        passed it lapses (here, if its timer has not fired yet), whether or not the renewal got
        through after all; an ``until`` already past does not make a tenure held either. A tenure
        that ended stays ended.
        """
        now = time.monotonic()
        if self._ended is not None:
            return False
        was_held = self.valid_until != -math.inf
        if (was_held and now >= self.valid_until) or until <= now:
            if was_held:
                self.lapse()
            return False
        if until > self.valid_until:
            self.valid_until = until
            self._arm(until - now)
        return True

    def lapse(self) -> None:
        """End the tenure because the holder can no longer be sure it holds the lease (validity
        passed, or another holder took it); runs the lapse callbacks once. Idempotent."""
        if self._ended is not None:
            return
        self._end("lapsed")
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def release(self) -> None:
        """End the tenure without running the lapse callbacks: the holder stopped acting for it
        (call this before giving the lease up). Idempotent."""
        if self._ended is None:
            self._end("released")
            self._callbacks.clear()

    def on_lapse(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` when the tenure lapses (at once if it already has); returns a function
        that withdraws it. Callbacks must not raise."""
        if self._ended is not None:
            if self._ended == "lapsed":
                callback()
            return _nothing
        self._callbacks.append(callback)

        def withdraw() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return withdraw

    def _end(self, how: str) -> None:
        self._ended = how
        self.valid_until = -math.inf
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(delay, self._expire)

    def _expire(self) -> None:
        self._timer = None
        left = self.valid_until - time.monotonic()
        if left > 0:  # the loop's clock runs a hair ahead of time.monotonic()
            self._arm(left)
        else:
            self.lapse()


def _nothing() -> None:
    return None


UNFENCED = Tenure("unfenced")
"""The tenure of work no lease fences: valid for ever (nothing confirms, lapses or releases it)."""
UNFENCED.valid_until = math.inf

_fences: weakref.WeakKeyDictionary[Cluster, dict[str, Tenure]] = weakref.WeakKeyDictionary()


class FenceLapsed(asyncio.CancelledError):
    """Thrown into fenced work at its first step after its fence lapsed (a cancellation)."""


class FencedSteps(Generator[Any, Any, Any]):
    """Drives an awaitable one step at a time, each only while two tenures hold.

    Before each step — the start, and each resumption after an await — the clock is compared
    with both tenures; at the first step after either passed, :class:`FenceLapsed` is thrown into
    the awaitable instead (once: what it does to unwind then runs). This covers what a tenure's
    lapse callback cannot: a step the event loop had already queued when the process was paused
    runs before any timer once it resumes. ``await steps.run(coro)``; one instance serves one
    awaiting task, one awaitable after the other (none of its own allocations per awaitable).
    """

    __slots__ = ("_coro", "_thrown", "first", "second")

    def __init__(self, first: Tenure | None = None, second: Tenure | None = None) -> None:
        self.first = UNFENCED if first is None else first
        self.second = UNFENCED if second is None else second
        self._coro: Coroutine[Any, Any, Any] | Generator[Any, Any, Any] | None = None
        self._thrown = False

    def run(self, awaitable: Awaitable[Any]) -> FencedSteps:
        """Drive ``awaitable`` next (await the returned object)."""
        # A coroutine is driven as it is; anything else through its __await__ iterator.
        self._coro = awaitable if type(awaitable) is CoroutineType else awaitable.__await__()
        self._thrown = False
        return self

    def __await__(self) -> Generator[Any, Any, Any]:
        return self

    def send(self, value: Any) -> Any:
        coro = self._coro
        assert coro is not None, "FencedSteps.run(coro) first"
        if not self._thrown:
            now = time.monotonic()
            lapsed = self.first if now >= self.first.valid_until else self.second
            if now >= lapsed.valid_until:
                self._thrown = True
                return coro.throw(FenceLapsed(f"{lapsed.name} is not held"))
        return coro.send(value)

    def throw(
        self,
        typ: type[BaseException] | BaseException,
        val: object = None,
        tb: TracebackType | None = None,
    ) -> Any:
        coro = self._coro
        assert coro is not None, "FencedSteps.run(coro) first"
        if isinstance(typ, BaseException):
            exc = typ
        elif isinstance(val, BaseException):
            exc = val
        else:
            exc = typ() if val is None else typ(val)
        if tb is not None:
            exc = exc.with_traceback(tb)
        return coro.throw(exc)

    def close(self) -> None:
        if self._coro is not None:
            self._coro.close()


async def fenced(work: Awaitable[Any], first: Tenure, second: Tenure | None = None) -> Any:
    """Await ``work`` under :class:`FencedSteps` (a coroutine, for a task of its own)."""
    return await FencedSteps(first, second).run(work)


def fence_cluster(name: str, cluster: Cluster, tenure: Tenure) -> Callable[[], None]:
    """Publish ``tenure`` as the fence of ``cluster`` engaged as ``name``: controllers engaged with
    it from now on reconcile it only while the tenure holds. Returns the function that withdraws
    it (which leaves alone a tenure published for the same cluster since)."""
    _fences.setdefault(cluster, {})[name] = tenure

    def withdraw() -> None:
        published = _fences.get(cluster)
        if published is not None and published.get(name) is tenure:
            del published[name]
            if not published:
                del _fences[cluster]

    return withdraw


def cluster_fence(name: str, cluster: Cluster) -> Tenure | None:
    """The tenure published for ``cluster`` engaged as ``name``, if any."""
    published = _fences.get(cluster)
    return None if published is None else published.get(name)
