"""The reconciles a controller's workers are running: one slot per worker."""

from __future__ import annotations

import asyncio

from mcr.reconcile import Request

__all__ = ["InFlight"]


class InFlight:
    """One slot per worker: its task and the request it is reconciling (``None`` between requests).

    A worker writes its own slot of :attr:`current` around each reconcile (two stores per
    reconcile, where a dict of requests in flight would cost three hashed operations). A reconcile
    cancelled on purpose (:meth:`cancel`) is in :attr:`aborted` until its worker takes the
    cancellation back.
    """

    __slots__ = ("aborted", "current", "tasks")

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[None]] = []
        self.current: list[Request | None] = []
        self.aborted: set[Request] = set()

    def active(self) -> int:
        """How many workers are reconciling now."""
        return sum(1 for req in self.current if req is not None)

    def running_for(self, cluster: str) -> bool:
        """Whether a reconcile of ``cluster`` is in flight."""
        return any(req is not None and req.cluster_name == cluster for req in self.current)

    def cancel(self, cluster: str | None) -> int:
        """Cancel the reconciles in flight of ``cluster`` (``None``: all); returns how many.

        Synchronous, so a reconcile whose next step is already due when a fence lapses is
        cancelled before it takes it. Each worker takes the cancellation back and goes on.
        """
        cancelled = 0
        for req, task in zip(self.current, self.tasks, strict=True):
            if req is None or req in self.aborted:
                continue
            if cluster is None or req.cluster_name == cluster:
                self.aborted.add(req)
                task.cancel()
                cancelled += 1
        return cancelled
