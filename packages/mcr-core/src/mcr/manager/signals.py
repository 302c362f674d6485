"""SIGTERM / SIGINT handling for :meth:`mcr.manager.Manager.start`.

The first signal asks for a graceful shutdown; a second one asks to abort it (stop without waiting
for in-flight work), like controller-runtime's second-signal exit. Handlers are installed on the
running loop and removed again when the ``with`` block ends, restoring Python's defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator

__all__ = ["SHUTDOWN_SIGNALS", "handle_shutdown_signals", "in_main_thread"]

log = logging.getLogger("mcr.manager")

SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def handle_shutdown_signals(on_stop: Callable[[], None], on_abort: Callable[[], None]) -> Iterator[None]:
    """Call ``on_stop`` on the first SIGTERM/SIGINT and ``on_abort`` on any later one."""
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def handler(signum: int) -> None:
        received.append(signum)
        name = signal.Signals(signum).name
        if len(received) == 1:
            log.info("received %s: shutting down gracefully", name)
            on_stop()
        else:
            log.warning("received %s again: aborting the graceful shutdown", name)
            on_abort()

    installed = []
    try:
        for sig in SHUTDOWN_SIGNALS:
            loop.add_signal_handler(sig, handler, int(sig))
            installed.append(sig)
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
