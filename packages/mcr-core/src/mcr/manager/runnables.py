"""Runnables and the groups the manager starts and stops them in.

A runnable is any object with ``async def start(self) -> None``. It runs until it returns or until
its task is cancelled; cancelling is how the manager stops it. A runnable that wants to drain (a
controller finishing in-flight reconciles) does so when first cancelled and then re-raises; if the
manager's grace period runs out it cancels again, which must abort the drain.

``need_leader_election`` (attribute or zero-argument method) decides the group: ``True`` (also when
absent, as in controller-runtime) means the runnable starts only once this replica leads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from mcr.controller.fence import Tenure, fenced

__all__ = ["Runnable", "RunnableFunc", "RunnableGroup", "needs_leader_election", "runnable_name"]

log = logging.getLogger("mcr.manager")


@runtime_checkable
class Runnable(Protocol):
    """Something the manager runs: ``start`` runs until done or cancelled."""

    async def start(self) -> None: ...


class RunnableFunc:
    """Wrap an ``async def fn() -> None`` as a runnable (``need_leader_election`` as given)."""

    def __init__(
        self, fn: Callable[[], Awaitable[None]], *, need_leader_election: bool = True, name: str = ""
    ) -> None:
        self._fn = fn
        self.need_leader_election = need_leader_election
        self.name = name or getattr(fn, "__qualname__", repr(fn))

    async def start(self) -> None:
        await self._fn()

    def __repr__(self) -> str:
        return f"RunnableFunc({self.name})"


def needs_leader_election(runnable: object) -> bool:
    """Whether ``runnable`` may only run on the leader (default ``True``)."""
    value = getattr(runnable, "need_leader_election", True)
    if callable(value):
        value = value()
    return bool(value)


def runnable_name(runnable: object) -> str:
    """A name for logs and errors: its ``name`` attribute, else its class name."""
    name = getattr(runnable, "name", None)
    if isinstance(name, str) and name:
        return f"{type(runnable).__name__}({name})"
    return type(runnable).__name__


class RunnableGroup:
    """Runnables started and stopped together, each in its own task.

    ``add`` before :meth:`start` queues the runnable; ``add`` after starts it at once. ``on_error``
    is called with the runnable and the exception when a ``start`` raises (not on cancellation).
    :meth:`stop` cancels every task and waits until ``deadline`` (monotonic time, ``None`` = wait
    forever); it returns the names of runnables still running then, after cancelling them again.
    With a ``fence`` (the leadership), each task runs only while it holds: every step is checked
    against it (:class:`mcr.controller.fence.FencedSteps`).
    """

    def __init__(
        self, name: str, on_error: Callable[[object, BaseException], None], *, fence: Tenure | None = None
    ) -> None:
        self.name = name
        self._on_error = on_error
        self._runnables: list[Any] = []
        self._tasks: dict[asyncio.Task[None], Any] = {}
        self.started = False
        self.stopping = False
        self._fence = fence
        self._on_start: list[Callable[[Any], None]] = []

    def __len__(self) -> int:
        return len(self._runnables)

    @property
    def runnables(self) -> list[Any]:
        return list(self._runnables)

    def add(self, runnable: Any) -> None:
        self._runnables.append(runnable)
        if self.started and not self.stopping:
            self._spawn(runnable)

    def on_start(self, callback: Callable[[Any], None]) -> None:
        """Call ``callback(runnable)`` right after each runnable's task is created."""
        self._on_start.append(callback)

    def start(self) -> None:
        """Start every queued runnable; repeat calls do nothing."""
        if self.started:
            return
        self.started = True
        for runnable in self._runnables:
            self._spawn(runnable)

    def _spawn(self, runnable: Any) -> None:
        work = runnable.start() if self._fence is None else fenced(runnable.start(), self._fence)
        task = asyncio.create_task(work, name=f"mcr-{self.name}-{runnable_name(runnable)}")
        self._tasks[task] = runnable
        task.add_done_callback(self._done)
        for callback in self._on_start:
            callback(runnable)

    def _done(self, task: asyncio.Task[None]) -> None:
        runnable = self._tasks.pop(task, None)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._on_error(runnable, exc)
        elif not self.stopping:
            log.debug("runnable returned", extra={"runnable": runnable_name(runnable), "group": self.name})

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._tasks)

    async def stop(self, deadline: float | None) -> list[str]:
        """Cancel and wait (see the class docstring); returns runnables that overran the deadline."""
        self.stopping = True
        return await stop_tasks(self._tasks, deadline)


ABORT_WAIT = 10.0
"""Seconds to wait for tasks to end after the abort (second) cancellation."""


async def _wait(tasks: set[asyncio.Task[Any]], timeout: float | None) -> tuple[set[asyncio.Task[Any]], bool]:
    """``asyncio.wait`` that keeps waiting if the caller is cancelled; returns (pending, cancelled)."""
    end = None if timeout is None else time.monotonic() + timeout
    cancelled = False
    while True:
        try:
            remaining = None if end is None else max(end - time.monotonic(), 0.0)
            _, pending = await asyncio.wait(tasks, timeout=remaining)
            return pending, cancelled
        except asyncio.CancelledError:
            # asyncio.wait never cancels what it waits for: keep waiting, re-raise afterwards.
            cancelled = True


async def stop_tasks(
    tasks: Iterable[asyncio.Task[Any]] | dict[asyncio.Task[Any], Any], deadline: float | None
) -> list[str]:
    """Cancel ``tasks`` (a drain request) and wait until they end or ``deadline`` passes.

    Tasks still running at the deadline are cancelled once more (the abort) and awaited for up to
    :data:`ABORT_WAIT` seconds; one that survives even that is logged and left to the event loop.
    Returns the names of the tasks that overran the deadline. A cancellation of the caller does
    not cut the wait short; it is re-raised afterwards.
    """
    pending = {t for t in list(tasks) if not t.done()}
    for task in pending:
        task.cancel()
    if not pending:
        return []
    pending, cancelled = await _wait(
        pending, None if deadline is None else max(deadline - time.monotonic(), 0.0)
    )
    overran = sorted(t.get_name() for t in pending)
    if pending:
        for task in pending:
            task.cancel()
        pending, cancelled_again = await _wait(pending, ABORT_WAIT)
        cancelled = cancelled or cancelled_again
        if pending:
            log.error(
                "tasks did not end %.0fs after being aborted: %s",
                ABORT_WAIT,
                ", ".join(sorted(t.get_name() for t in pending)),
            )
    if cancelled:
        raise asyncio.CancelledError
    return overran
