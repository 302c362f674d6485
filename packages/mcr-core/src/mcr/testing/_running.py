"""Run a manager, or providers, for the duration of an ``async with`` block; import a script."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from mcr.testing.conformance import RecordingAware

if TYPE_CHECKING:
    from mcr.manager import Manager

__all__ = ["import_script", "providers_started", "running"]


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


@contextlib.asynccontextmanager
async def providers_started() -> AsyncIterator[Callable[[Any], RecordingAware]]:
    """``start(provider)`` runs ``provider.start`` with a new :class:`RecordingAware` (returned) in
    a task; when the block exits every such task is cancelled and awaited, and one that ended
    other than by cancellation (it failed, or swallowed the cancellation) fails the block with
    ``AssertionError``."""
    tasks: list[asyncio.Task[None]] = []

    def start(provider: Any) -> RecordingAware:
        aware = RecordingAware()
        tasks.append(asyncio.create_task(provider.start(aware), name=f"mcr-testing-provider-{provider!r}"))
        return aware

    try:
        yield start
    finally:
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    wrong = [r for r in results if not isinstance(r, asyncio.CancelledError)]
    if wrong:
        raise AssertionError(f"a provider's start ended with {wrong!r} instead of its cancellation")


def import_script(path: str | os.PathLike[str]) -> ModuleType:
    """Import the Python file at ``path`` (an example program, say) as a module, without running
    its ``__main__`` block; it is registered in ``sys.modules`` under ``mcr_script_<stem>``."""
    file = Path(path)
    spec = importlib.util.spec_from_file_location(f"mcr_script_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {file} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
