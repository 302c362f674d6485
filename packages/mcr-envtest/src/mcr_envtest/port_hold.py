"""Keeping a stopped server's port for its next start.

A stopped server promises to come back on the same port. Once its listening socket is closed the
port is free for anyone: on a busy machine another process's outgoing connection can take it as
its ephemeral source port, and the restart then fails with ``EADDRINUSE``. A :class:`PortHold`
binds the port without listening while the server is down: connecting clients are refused, as
they are by a stopped kube-apiserver, the kernel hands the port to no one else, and the next start
listens on the very same socket.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import weakref

# How long to keep trying when the port is taken in the instant between closing the listener and
# binding the hold (another process's connection took it): such a connection may be short-lived.
BIND_ATTEMPTS = 50
BIND_PAUSE_S = 0.02


class PortHold:
    """A socket bound (not listening) to ``host:port``.

    Contract: made by :meth:`acquire`, it keeps the port bound by this process until
    :meth:`take` (which hands the socket over, to be listened on) or :meth:`release`; the socket
    is closed should the hold be dropped without either.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock: socket.socket | None = sock
        self._finalizer = weakref.finalize(self, sock.close)

    @classmethod
    async def acquire(cls, host: str, port: int) -> PortHold:
        """Bind ``host:port``, trying again for a while should it be in use; raises ``OSError``
        naming the address when it stays in use for all :data:`BIND_ATTEMPTS`."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        last: OSError | None = None
        for attempt in range(BIND_ATTEMPTS):
            try:
                return cls(_bind(family, host, port))
            except OSError as err:
                if err.errno != errno.EADDRINUSE:
                    raise
                last = err
            if attempt + 1 < BIND_ATTEMPTS:
                await asyncio.sleep(BIND_PAUSE_S)
        raise OSError(errno.EADDRINUSE, f"port {host}:{port} stayed in use while its server was down: {last}")

    def take(self) -> socket.socket:
        """Hand over the bound socket (the caller now owns it and listens on it)."""
        sock, self._sock = self._sock, None
        if sock is None:
            raise RuntimeError("port hold already taken or released")
        self._finalizer.detach()
        return sock

    def release(self) -> None:
        """Give the port up (idempotent)."""
        self._sock = None
        self._finalizer()


def _bind(family: socket.AddressFamily, host: str, port: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # the listener's TIME_WAIT connections must not keep the port from its own server
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
