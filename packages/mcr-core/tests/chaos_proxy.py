"""A loopback TCP proxy that can cut the network between its clients and one server.

:class:`ChaosProxy` listens on ``127.0.0.1`` (a free port) and forwards every connection to
``target`` in a thread of its own (its own event loop: the proxy keeps forwarding however busy
the test's loop is). TLS passes through untouched, so a kubeconfig pointing at the proxy verifies
the server's certificate as before (the certificate names 127.0.0.1).

Two kinds of cut, undone by :meth:`ChaosProxy.restore`:

- ``blackhole``: no byte passes in either direction, and connections stay open — a partition
  where packets are dropped: requests in flight hang, new connections are accepted but see no
  answer; when restored, what was held is delivered (as TCP does once a partition heals).
- ``reset``: every open connection is reset (RST), and new ones are reset as soon as they arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

__all__ = ["ChaosProxy"]

T = TypeVar("T")
Mode = Literal["blackhole", "reset"]
_CHUNK = 65536


class ChaosProxy:
    """Forwards ``127.0.0.1:<port>`` to ``(host, port)``; see the module docstring.

    ``start()`` returns the listening port; ``cut(mode)``, ``restore()`` and ``close()`` are
    blocking calls safe from any thread. Use as a context manager to close it.
    """

    def __init__(self, host: str, port: int) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the chaos proxy forwards to loopback only, not {host!r}")
        self.target = (host, port)
        self.port = 0
        self.mode: Mode | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._passing: asyncio.Event | None = None
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> int:
        self._thread.start()
        self.port = self._call(self._start())
        return self.port

    def cut(self, mode: Mode = "blackhole") -> None:
        """Stop passing bytes (``blackhole``) or reset every connection (``reset``) until restored."""
        self._call(self._cut(mode))

    def restore(self) -> None:
        """Pass bytes again; connections held by a blackhole carry on where they stopped."""
        self._call(self._restore())

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> ChaosProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- in the proxy's loop -----------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _start(self) -> int:
        self._passing = asyncio.Event()
        self._passing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _cut(self, mode: Mode) -> None:
        assert self._passing is not None
        self.mode = mode
        self._passing.clear()
        if mode == "reset":
            for client, upstream in list(self._links):
                _reset(client)
                _reset(upstream)
            self._links.clear()

    async def _restore(self) -> None:
        assert self._passing is not None
        self.mode = None
        self._passing.set()

    async def _close(self) -> None:
        assert self._passing is not None
        if self._server is not None:
            self._server.close()
        self._passing.set()  # pumps held by a blackhole see their connections go
        for client, upstream in list(self._links):
            _reset(client)
            _reset(upstream)
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=5)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        assert self._passing is not None
        self._tasks.add(task)
        try:
            if self.mode == "reset":
                _reset(writer)
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                _reset(writer)
                return
            link = (writer, up_writer)
            self._links.add(link)
            try:
                await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
            finally:
                self._links.discard(link)
                for w in link:
                    w.close()
        finally:
            self._tasks.discard(task)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        passing = self._passing
        assert passing is not None
        try:
            while True:
                await passing.wait()  # a blackhole stops reading: TCP holds what the peer sends
                data = await reader.read(_CHUNK)
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                await passing.wait()  # read before the cut: held until restored
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            return


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST instead of a FIN (SO_LINGER with a zero timeout)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
