"""Task helpers for providers: cancelling the tasks a provider owns and waiting for them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has ended.

    The wait completes even if the caller is cancelled meanwhile (the caller's cancellation is
    re-raised afterwards), so no task is left running un-awaited. The tasks' own results and
    exceptions are not re-raised: their owners log them.
    """
    pending = [t for t in tasks if not t.done()]
    for task in pending:
        task.cancel()
    if not pending:
        return
    gathered = asyncio.gather(*pending, return_exceptions=True)
    try:
        await asyncio.shield(gathered)
    except asyncio.CancelledError:
        await gathered
        raise
