"""TLS contexts shared across clusters: one per (CA, client certificate, verify) combination.

Building a context is costly (milliseconds and hundreds of KiB for the system bundle; see the
mcr-core README), so contexts are built once, in a worker thread, and shared by every cluster with
the same trust settings. Clusters that engage at the same time wait for one build instead of each starting
their own. The cache holds contexts weakly, and only the few most recently used strongly: a context
lives while a connection pool uses it, a cluster rebuilt or engaged again soon after finds its
context still there, and clusters that left and client certificates that rotated do not accumulate.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import hashlib
import os
import ssl
import tempfile
import threading
import weakref
from collections.abc import Callable
from typing import Any

from mcr.errors import ConfigError

__all__ = ["DEFAULT_TLS_READ_BUFFER", "SSL_CONTEXTS", "limit_tls_read_buffer"]

#: How many of the most recently used contexts stay alive after their last user is gone.
RECENT = 8

DEFAULT_TLS_READ_BUFFER = 64 * 1024
"""Bytes asyncio's TLS transport reads per call once mcr limits it (four full TLS records)."""

_limited = False


def limit_tls_read_buffer() -> int | None:
    """Limit the read buffer of asyncio's TLS connections, process-wide, and return its size.

    CPython's ``asyncio.sslproto.SSLProtocol`` gives every connection a zero-filled buffer of
    ``max_size`` bytes (256 KiB): most of an idle TLS cluster's memory in a large fleet, each
    cluster holding its own connection. mcr lowers ``max_size`` to ``$MCR_TLS_READ_BUFFER`` bytes
    (default :data:`DEFAULT_TLS_READ_BUFFER`) the first time it sets up TLS for a cluster; a read
    then takes at most that many bytes and a large answer arrives in more reads. It never raises
    the size, leaves uvloop (which has buffers of its own) alone, and affects connections made
    afterwards, mcr's and the program's. ``MCR_TLS_READ_BUFFER=off`` keeps asyncio's size.
    Returns the size in force, ``None`` when left alone. ``ConfigError`` for a value that is
    neither ``off`` nor a whole number of at least 16384 (one TLS record).
    """
    global _limited
    raw = os.environ.get("MCR_TLS_READ_BUFFER", "").strip().lower()
    if raw in ("off", "0", "false", "none"):
        return None
    try:
        wanted = int(raw) if raw else DEFAULT_TLS_READ_BUFFER
    except ValueError:
        wanted = -1
    if wanted < 16 * 1024:
        raise ConfigError(f"MCR_TLS_READ_BUFFER={raw!r}: expected off or a byte count of at least 16384")
    from asyncio import sslproto

    protocol: Any = getattr(sslproto, "SSLProtocol", None)  # a private class of CPython's asyncio
    current = getattr(protocol, "max_size", None)
    if not isinstance(current, int):  # an asyncio without the attribute: nothing to limit
        return None
    if current > wanted:
        protocol.max_size = wanted
    _limited = True
    return min(current, wanted)


class _SSLContextCache:
    """One ``SSLContext`` per (CA, client certificate, verify) across all clusters of the process.

    Keys are digests, so the cache does not keep key material alive beyond the contexts. Contexts
    are held weakly (each connection pool holds its own) and the ``recent`` most recently used
    strongly. At most one build per key runs at a time: callers that ask while it runs, from any
    event loop, share its result or its error; a caller cancelled while waiting leaves the build
    running for the others.
    """

    def __init__(self, recent: int = RECENT) -> None:
        self._contexts: weakref.WeakValueDictionary[str, ssl.SSLContext] = weakref.WeakValueDictionary()
        self._recent: collections.OrderedDict[str, ssl.SSLContext] = collections.OrderedDict()
        self._keep = recent
        self._building: dict[str, concurrent.futures.Future[ssl.SSLContext]] = {}
        self._lock = threading.Lock()
        #: Contexts built so far (a diagnostic: with sharing, one per distinct trust setting in use).
        self.builds = 0

    async def get(
        self,
        ca: bytes | None,
        cert: bytes | None,
        key: bytes | None,
        verify: bool,
        *,
        source: str,
        context: str | None,
    ) -> ssl.SSLContext:
        if not _limited:
            limit_tls_read_buffer()
        h = hashlib.sha256()
        for part in (ca, cert, key):
            h.update(b"\0" if part is None else hashlib.sha256(part).digest())
        h.update(b"1" if verify else b"0")
        digest = h.hexdigest()
        with self._lock:
            found = self._contexts.get(digest)
            if found is not None:
                self._remember(digest, found)
                return found
            shared = self._building.get(digest)
            start = shared is None
            if shared is None:
                shared = self._building[digest] = concurrent.futures.Future()
                shared.set_running_or_notify_cancel()  # a running future cannot be cancelled
                self.builds += 1
        if start:
            try:
                build = functools.partial(_build_ssl_context, ca, cert, key, verify, source, context)
                asyncio.get_running_loop().run_in_executor(None, self._build_into, shared, digest, build)
            except BaseException as exc:  # no executor to run it (the loop is shutting down)
                self._finish(shared, digest, None, exc)
                raise
        # shield: one waiter's cancellation must not cancel the shared build for the others.
        return await asyncio.shield(asyncio.wrap_future(shared))

    def _build_into(
        self,
        shared: concurrent.futures.Future[ssl.SSLContext],
        digest: str,
        build: Callable[[], ssl.SSLContext],
    ) -> None:
        """Run ``build`` in a worker thread; hand the context, or the error, to every waiter."""
        try:
            ctx = build()
        except Exception as exc:  # noqa: BLE001 -- not swallowed: re-raised in every waiter via ``shared``
            self._finish(shared, digest, None, exc)
        else:
            self._finish(shared, digest, ctx, None)

    def _finish(
        self,
        shared: concurrent.futures.Future[ssl.SSLContext],
        digest: str,
        ctx: ssl.SSLContext | None,
        exc: BaseException | None,
    ) -> None:
        with self._lock:
            if ctx is not None:
                self._contexts[digest] = ctx
                self._remember(digest, ctx)
            self._building.pop(digest, None)
        if ctx is not None:
            shared.set_result(ctx)
        else:
            shared.set_exception(exc)

    def _remember(self, digest: str, ctx: ssl.SSLContext) -> None:
        """Mark ``ctx`` most recently used (under the lock); forget the oldest beyond ``recent``."""
        recent = self._recent
        recent[digest] = ctx
        recent.move_to_end(digest)
        while len(recent) > self._keep:
            recent.popitem(last=False)

    def __len__(self) -> int:
        """Contexts alive now (held by a connection pool or a caller, or among the recent)."""
        return len(self._contexts)


def _build_ssl_context(
    ca: bytes | None, cert: bytes | None, key: bytes | None, verify: bool, source: str, context: str | None
) -> ssl.SSLContext:
    if ca is not None:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=ca.decode("ascii", errors="replace"))
    else:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert is not None and key is not None:
        # load_cert_chain only reads files: write them to a private directory and remove at once.
        with tempfile.TemporaryDirectory(prefix="mcr-tls-") as tmp:
            cert_path = os.path.join(tmp, "tls.crt")
            key_path = os.path.join(tmp, "tls.key")
            for path, data in ((cert_path, cert), (key_path, key)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
            try:
                ctx.load_cert_chain(cert_path, key_path)
            except ssl.SSLError:
                raise ConfigError(
                    "client certificate and key do not match or cannot be loaded",
                    source=source,
                    context=context,
                    field="client-certificate",
                ) from None
    return ctx


#: The process-wide cache every RestConfig builds its TLS context through.
SSL_CONTEXTS = _SSLContextCache()
