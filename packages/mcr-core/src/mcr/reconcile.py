"""Reconcile requests and results: what a controller hands a reconciler and what it gets back."""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Reconciler", "Request", "Result", "current_cluster"]


@dataclass(frozen=True, slots=True)
class Request:
    """What to reconcile: one object key in one cluster.

    ``cluster_name`` is ``""`` for the local cluster (the one the manager was given a config for).
    Requests are hashable and compare by value, so the work queue de-duplicates them.
    """

    namespace: str
    name: str
    cluster_name: str = ""

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
