"""Reconcile requests and results: what a controller hands a reconciler and what it gets back."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

__all__ = ["ReconcileFunc", "Reconciler", "Request", "Result", "as_reconcile_func", "current_cluster"]


@dataclass(frozen=True, slots=True)
class Request:
    """What to reconcile: one object key in one cluster.

    ``cluster_name`` is ``""`` for the local cluster (the one the manager was given a config for).
    Requests are hashable and compare by value, so the work queue de-duplicates them.
    """

    namespace: str
    name: str
    cluster_name: str = ""
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        # Requests are dictionary keys on the hot path (queue, dirty and processing sets):
        # hash once instead of building a tuple on every lookup.
        object.__setattr__(self, "_hash", hash((self.namespace, self.name, self.cluster_name)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request) or other.__class__ is not self.__class__:
            return NotImplemented
        return (
            self._hash == other._hash
            and self.name == other.name
            and self.namespace == other.namespace
            and self.cluster_name == other.cluster_name
        )

    def __str__(self) -> str:
        return f"cluster://{self.cluster_name}/{self.namespace}/{self.name}"

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


_current_cluster: contextvars.ContextVar[str] = contextvars.ContextVar("mcr_current_cluster", default="")


def current_cluster() -> str:
    """The cluster of the request being reconciled in this task (``""`` outside a reconcile).

    For code that only receives a plain request or object and needs to know which cluster it is in.
    """
    return _current_cluster.get()


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
