"""Callers waiting for a work queue's next item: woken one per added item, or all at shutdown."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

__all__ = ["Waiters"]


class Waiters:
    """The wake-ups of one queue's waiting callers, in arrival order; belongs to one event loop.

    :attr:`futures` is empty when nobody waits: a queue checks it before calling
    :meth:`wake_one` on its hot path.
    """

    __slots__ = ("futures",)

    def __init__(self) -> None:
        self.futures: deque[asyncio.Future[None]] = deque()

    async def wait(self) -> None:
        """Wait for one wake-up (:meth:`wake_one` or :meth:`wake_all`).

        On cancellation a wake-up already meant for this call goes to the next waiting caller;
        then ``CancelledError`` propagates.
        """
        waiter = asyncio.get_running_loop().create_future()
        self.futures.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.wake_one()
            else:
                with contextlib.suppress(ValueError):  # already woken and popped
                    self.futures.remove(waiter)
            raise

    def wake_one(self) -> None:
        """Wake the longest-waiting caller whose wait is still pending (if any)."""
        futures = self.futures
        while futures:
            waiter = futures.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def wake_all(self) -> None:
        """Wake every waiting caller."""
        futures = self.futures
        while futures:
            waiter = futures.popleft()
            if not waiter.done():
                waiter.set_result(None)
