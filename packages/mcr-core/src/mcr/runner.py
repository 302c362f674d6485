"""``mcr.run(main, loop=...)``: run a program's top-level coroutine on the chosen event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from mcr.errors import MCRError

__all__ = ["run"]

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T], *, loop: str = "asyncio", debug: bool | None = None) -> T:
    """Run ``main`` to completion in a new event loop and close it, as :func:`asyncio.run` does.

    ``loop="uvloop"`` runs it on uvloop (``pip install "mcr-core[uvloop]"``), which takes less
    memory per idle TLS cluster and more reconciles per CPU second with many clusters (the
    mcr-core README has the figures). Without uvloop installed that is an
    :class:`~mcr.MCRError` saying how to install it; an unknown ``loop`` is a ``ValueError``.
    ``main`` is closed, never left un-awaited, when it cannot be run.
    """
    if loop == "asyncio":
        return asyncio.run(main, debug=debug)
    if loop != "uvloop":
        main.close()
        raise ValueError(f"loop must be 'asyncio' or 'uvloop', not {loop!r}")
    try:
        import uvloop
    except ImportError:
        main.close()
        raise MCRError("loop='uvloop' needs uvloop: pip install 'mcr-core[uvloop]'") from None
    with asyncio.Runner(loop_factory=uvloop.new_event_loop, debug=debug) as runner:
        return runner.run(main)
