"""``ServerThread``: a :class:`~mcr_envtest.server.Server` in a thread and event loop of its own,
for sync tests and for async tests that must not share their loop with the server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar

from .server import Server

__all__ = ["ServerThread"]

T = TypeVar("T")


class ServerThread:
    """A :class:`Server` running in its own thread and event loop.

    Same attributes as :class:`Server`; ``start()``, ``stop()``, ``restart()`` and ``close()`` are
    blocking and thread-safe, and so are the ``faults`` controls. :meth:`call` runs a function in
    the server's loop (use it to read ``store`` safely). Usable from sync and async tests.
    """

    def __init__(self, **kwargs: Any) -> None:
        self.server = Server(**kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="mcr-envtest", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()

    def _sync(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn()`` in the server's loop and return its result."""

        async def run() -> T:
            return fn()

        return self._sync(run())

    def start(self) -> ServerThread:
        self._sync(self.server.start())
        return self

    def stop(self) -> None:
        if self._loop.is_running():
            self._sync(self.server.stop())

    def _close_server(self) -> None:
        if self._loop.is_running():
            self._sync(self.server.close())

    def restart(self, keep_state: bool = True) -> None:
        self._sync(self.server.restart(keep_state=keep_state))

    def close(self) -> None:
        """Stop the server and end the thread (idempotent)."""
        if not self._thread.is_alive():
            return
        self._close_server()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def add_user(
        self,
        name: str,
        groups: tuple[str, ...] | list[str] = (),
        token: str | None = None,
        *,
        client_cert: bool = False,
    ) -> dict[str, Any]:
        return self.server.add_user(name, groups, token, client_cert=client_cert)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # url, kubeconfig, kubeconfig_path, ca_file, admin_token, faults, store, registry, port, ...
        return getattr(self.server, name)
