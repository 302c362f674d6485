"""What a :class:`~mcr.rest.transport.Transport` is built on: the settings it reads, its
connection pool, the client-side rate limit, and how failed answers become mcr's errors.

:class:`Endpoint` is the contract between :mod:`mcr.rest.config` (whose
:class:`~mcr.rest.config.RestConfig` satisfies it) and :mod:`mcr.rest.transport`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import weakref
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Protocol

import aiohttp
import orjson
from aiohttp.client_proto import ResponseHandler

from mcr.errors import APIError, TransportError, api_error_from_status
from mcr.rest.auth import Credentials

__all__ = [
    "MAX_RETRY_AFTER",
    "Endpoint",
    "Response",
    "TokenBucket",
    "TrackingConnector",
    "api_error",
    "retry_after",
    "settle_close",
    "transport_error",
]

#: Longest Retry-After mcr honours before retrying; a server asking for more is waited on this long.
MAX_RETRY_AFTER = 30.0


class Endpoint(Protocol):
    """The connection settings a transport reads (:class:`~mcr.rest.config.RestConfig` has them)."""

    host: str
    tls_server_name: str | None
    proxy: str | None
    credentials: Credentials
    qps: float | None
    burst: int
    timeout: float
    connect_timeout: float
    max_retries: int
    user_agent: str

    async def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for this server (``None`` for plain HTTP)."""
        ...


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class Response:
    """A complete HTTP response: ``status``, ``headers`` and the raw ``body``."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        """The body decoded as JSON (orjson)."""
        return orjson.loads(self.body)

    def __repr__(self) -> str:
        return f"Response(status={self.status}, {len(self.body)} bytes)"


class TokenBucket:
    """Client-side rate limit: ``qps`` tokens per second, at most ``burst`` saved up."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        """Wait for a token (callers queue in order); returns at once while the burst lasts."""
        async with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            if self._tokens < 1.0:
                await asyncio.sleep((1.0 - self._tokens) / self.qps)
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
                self._last = now
            self._tokens -= 1.0


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The seconds of a ``Retry-After`` header (``None``: absent or not a number of seconds)."""
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def settle_close(closed: asyncio.Future[None]) -> None:
    """Mark a connection's close outcome seen.

    A TLS shutdown that ends with an error (e.g. the server's data after close_notify) is
    expected when mcr closes a connection early; unseen, asyncio would report the future's
    exception as never retrieved.
    """
    if not closed.cancelled():
        closed.exception()


class TrackingConnector(aiohttp.TCPConnector):
    """A connection pool that remembers each connection's protocol and each connect under way.

    aiohttp forgets a connection once it closes it (for instance when a request is cancelled),
    while its TLS shutdown may still be under way; :meth:`Transport.close` waits for those too,
    so closing a transport really releases every socket. A connection that completes after the
    pool was closed is aborted at once (aiohttp would start a TLS shutdown nobody waits for), and
    :attr:`connecting` lets the closer wait until no connect is left under way.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.protocols: weakref.WeakSet[ResponseHandler] = weakref.WeakSet()
        self.connecting: set[asyncio.Future[None]] = set()

    async def _wrap_create_connection(
        self, *args: Any, **kwargs: Any
    ) -> tuple[asyncio.Transport, ResponseHandler]:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.connecting.add(done)
        try:
            transport, proto = await super()._wrap_create_connection(*args, **kwargs)
            self.protocols.add(proto)
            if self.closed:
                transport.abort()
                raise aiohttp.ClientConnectionError("Connector is closed.")
            return transport, proto
        finally:
            self.connecting.discard(done)
            done.set_result(None)


def api_error(
    method: str, url: str, status: int, headers: Mapping[str, str], data: bytes, *, cluster: str
) -> APIError:
    """The :class:`~mcr.errors.APIError` for a non-2xx answer: the server's Status if the body is
    one, else a Status made from the HTTP status and the body's text (its first 500 characters).
    """
    parsed: Any = None
    if data[:1] == b"{":
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            parsed = None
    if not (isinstance(parsed, dict) and parsed.get("kind") == "Status"):
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "error"
        text = data.decode("utf-8", errors="replace").strip()[:500]
        parsed = {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": status,
            "reason": _REASONS.get(status, ""),
            "message": text or phrase,
        }
    elif not parsed.get("code"):
        parsed = {**parsed, "code": status}
    return api_error_from_status(parsed, method=method, url=url, headers=headers, cluster=cluster)


def transport_error(
    method: str, url: object, exc: BaseException, *, cluster: str, elapsed: float | None = None
) -> TransportError:
    """The :class:`~mcr.errors.TransportError` for a request that got no answer: TLS failures say
    so (they need a certificate fixed, not the network), others say the server is unreachable.
    """
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        # Reachable, but not who the CA says it should be: saying "unreachable" would send the
        # user looking at the network instead of at certificate-authority / tls-server-name.
        cert_error = exc.certificate_error
        reason = getattr(cert_error, "verify_message", None) or getattr(cert_error, "reason", None)
        return TransportError(
            f"TLS certificate verification failed: {reason or cert_error}; check the cluster's "
            "certificate-authority(-data) and tls-server-name",
            cluster=cluster,
            url=str(url),
            method=method,
        )
    if isinstance(exc, aiohttp.ClientSSLError):
        return TransportError(f"TLS handshake failed: {exc}", cluster=cluster, url=str(url), method=method)
    what = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
    after = f" (gave up after {elapsed:.1f}s)" if elapsed is not None and elapsed >= 0.5 else ""
    return TransportError(
        f"API server unreachable: {what}{after}", cluster=cluster, url=str(url), method=method
    )
