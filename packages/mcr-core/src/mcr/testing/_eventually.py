"""Bounded polling: wait for a condition without bare sleeps."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

__all__ = ["eventually"]


@overload
async def eventually(
    check: Callable[[], Awaitable[T]],
    *,
    timeout: float = ...,
    interval: float = ...,
    message: str = ...,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T],
    *,
    timeout: float = ...,
    interval: float = ...,
    message: str = ...,
) -> T: ...


async def eventually(
    check: Callable[[], Any],
    *,
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "",
) -> Any:
    """Call ``check`` until it returns a truthy value without raising ``AssertionError``.

    ``check`` may be a plain function or a coroutine function. Returns the first truthy value.
    When ``timeout`` seconds pass, raises ``AssertionError`` carrying ``message`` and the last
    failure (or the last falsy value). Any exception other than ``AssertionError`` propagates at
    once; cancellation propagates unchanged.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            last = value
        except AssertionError as exc:
            last = exc
        if time.monotonic() >= deadline:
            detail = f"last result: {last!r}"
            raise AssertionError(f"{message or 'condition not met'} within {timeout}s ({detail})")
        await asyncio.sleep(interval)
