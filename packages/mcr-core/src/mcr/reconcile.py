"""Reconcile requests and results: what a controller hands a reconciler and what it gets back."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeAlias, runtime_checkable

from mcr._context import CURRENT_REQUEST

__all__ = [
    "ReconcileFunc",
    "Reconciler",
    "Request",
    "Result",
    "as_reconcile_func",
    "current_cluster",
    "current_request",
    "reset_current_request",
    "set_current_request",
]


class _RequestFields(NamedTuple):
    namespace: str
    name: str
    cluster_name: str = ""


class Request(_RequestFields):
    """What to reconcile: one object key in one cluster: ``Request(namespace, name, cluster_name="")``.

    ``cluster_name`` is ``""`` for the local cluster (the one the manager was given a config for).
    Requests are immutable, hashable and compare by value (a Request never equals a plain tuple),
    so the work queue de-duplicates them. They are tuples underneath because requests are created
    and hashed several times per event on the hot path, where a tuple costs a third of a frozen
    dataclass; ``req._replace(cluster_name=...)`` makes a modified copy.
    """

    __slots__ = ()

    def __str__(self) -> str:
        """``cluster://<cluster>/<namespace>/<name>`` (``<namespace>`` empty for a cluster-scoped
        object). A ``/`` or ``%`` in the cluster name is written ``%2F`` or ``%25`` (names from the
        file provider are paths), so the string reads back one way only."""
        cluster = self.cluster_name
        if "/" in cluster or "%" in cluster:
            cluster = cluster.replace("%", "%25").replace("/", "%2F")
        return f"cluster://{cluster}/{self.namespace}/{self.name}"

    def __eq__(self, other: object) -> bool:
        # Only a Request equals a Request (not the plain tuple with the same fields).
        return other.__class__ is self.__class__ and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__  # defining __eq__ would otherwise drop the C-level tuple hash

    @property
    def key(self) -> str:
        """``namespace/name`` (or ``name`` for cluster-scoped objects)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconciler asks for next.

    ``requeue_after`` (seconds): forget the item's failure history and reconcile it again after that
    delay. ``None`` or ``0`` means done until the next event. ``priority`` is carried into the re-add.
    """

    requeue_after: float | None = None
    priority: int | None = None


@runtime_checkable
class Reconciler(Protocol):
    """An object whose ``reconcile`` drives one object towards its desired state.

    Raising an exception requeues the request with per-item backoff; raising
    :class:`mcr.TerminalError` records the error without requeueing.
    """

    def reconcile(self, req: Request) -> Awaitable[Result | None]: ...


_current_request: contextvars.ContextVar[Request | None] = CURRENT_REQUEST
# The request being reconciled in this task: one variable, set once per reconcile by the
# controller's workers (a worker clears it before it waits for work). mcr.log reads the request's
# cluster, namespace and name from it; tasks a reconciler creates inherit it.

set_current_request: Callable[[Request | None], contextvars.Token[Request | None]] = _current_request.set
"""Make ``req`` the request being reconciled in this task (``None``: none); returns the token
for :func:`reset_current_request`. The controller's workers call it before each reconcile, a
handler's map function runs under its event's cluster; nothing else should."""

reset_current_request: Callable[[contextvars.Token[Request | None]], None] = _current_request.reset
"""Restore the current request that :func:`set_current_request` replaced (given its token)."""


def current_request() -> Request | None:
    """The request being reconciled in this task (``None`` outside a reconcile)."""
    return _current_request.get()


def current_cluster() -> str:
    """The cluster of the request being reconciled in this task (``""`` outside a reconcile).

    For code that only receives a plain request or object and needs to know which cluster it is in.
    Inside a map function of :class:`mcr.handler.EnqueueRequestsFromMapFunc` it is the event's
    cluster.
    """
    req = _current_request.get()
    return "" if req is None else req.cluster_name


ReconcileFunc: TypeAlias = Callable[[Request], Awaitable[Result | None]]
"""The normalised form the controller calls: ``async def (req) -> Result | None``."""


def as_reconcile_func(reconciler: object) -> ReconcileFunc:
    """Normalise what a user hands the builder into an async function of a request.

    Accepts an ``async def reconcile(req)`` function, an object with such a ``reconcile`` method,
    or a plain (sync) function or method, which then runs in the default thread pool with the
    caller's context (so :func:`current_cluster` works inside it). A sync callable that returns an
    awaitable has that awaitable awaited. Raises ``TypeError`` for anything else (naming it).
    """
    if reconciler is None:
        raise TypeError("must provide a non-nil reconciler (got None)")
    fn: Any = reconciler
    if not callable(fn) or (hasattr(fn, "reconcile") and not inspect.isroutine(fn)):
        fn = getattr(reconciler, "reconcile", None)
        if fn is None or not callable(fn):
            raise TypeError(
                f"reconciler {reconciler!r} is neither a function of a Request nor an object with a "
                "reconcile(req) method"
            )
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
        return fn  # type: ignore[no-any-return]  # checked: an async callable of a request
    sync_fn = fn

    async def run_in_thread(req: Request) -> Result | None:
        result = await asyncio.to_thread(sync_fn, req)
        if inspect.isawaitable(result):
            result = await result
        return result  # type: ignore[no-any-return]  # the user's return value, checked by the caller

    run_in_thread.__qualname__ = getattr(sync_fn, "__qualname__", "reconcile")
    return run_in_thread
