"""Run a manager for the duration of an ``async with`` block."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcr.manager import Manager

__all__ = ["running"]


@contextlib.asynccontextmanager
async def running(mgr: Manager, *, stop_timeout: float = 30.0) -> AsyncIterator[Manager]:
    """Start ``mgr`` in a task (signals not handled) and stop it when the block exits.

    On exit the manager is stopped gracefully; if it has not finished after ``stop_timeout``
    seconds its task is cancelled. Either way the task has ended when the block is left. If the
    manager failed (its ``start`` raised), that error is raised from the ``async with`` unless the
    block itself raised.
    """
    task = asyncio.create_task(mgr.start(handle_signals=False), name="mcr-testing-manager")
    body_failed = False
    try:
        yield mgr
    except BaseException:
        body_failed = True
        raise
    finally:
        mgr.stop()
        await asyncio.wait([task], timeout=stop_timeout)
        if not task.done():
            task.cancel()
            await asyncio.wait([task])
        error = None if task.cancelled() else task.exception()
        if error is not None and not body_failed:
            raise error
