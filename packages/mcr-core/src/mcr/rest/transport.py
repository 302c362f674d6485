"""HTTP transport to one API server: one aiohttp session and one TLS context per cluster.

:class:`Transport` sends raw bytes and returns raw bytes; the client and the informers above it
decide how to decode. It authenticates with the cluster's own credentials (refreshed on expiry
and once after a 401), retries like client-go (429/5xx carrying ``Retry-After`` for any verb;
connection errors for GET until ``connect_timeout`` has passed), optionally limits its request
rate (``RestConfig.qps``/``burst``), and reports ``rest_client_*`` metrics.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from mcr.errors import APIError, TransportError
from mcr.metrics import (
    REST_CLIENT_RATE_LIMITER_DURATION_SECONDS,
    REST_CLIENT_REQUEST_DURATION_SECONDS,
    REST_CLIENT_REQUEST_RETRIES_TOTAL,
    REST_CLIENT_REQUEST_SIZE_BYTES,
    REST_CLIENT_REQUESTS_TOTAL,
    REST_CLIENT_RESPONSE_SIZE_BYTES,
)
from mcr.rest.session import (
    MAX_RETRY_AFTER,
    Endpoint,
    Response,
    TokenBucket,
    TrackingConnector,
    api_error,
    retry_after,
    settle_close,
    transport_error,
)

__all__ = ["Endpoint", "Response", "Transport"]


class Transport:
    """Sends requests to one cluster's API server.

    The session is created on first use (inside the running loop) and shared by every request
    and stream of this transport. :meth:`close` closes the session and every connection,
    including open streams; a closed transport raises :class:`TransportError` on use.
    """

    def __init__(self, config: Endpoint, *, cluster_name: str = "") -> None:
        self.config = config
        self.cluster_name = cluster_name
        self.host = config.host
        self._host_label = urlsplit(config.host).netloc or config.host
        self._session: aiohttp.ClientSession | None = None
        self._session_generation = 0
        self._retired: list[aiohttp.ClientSession] = []
        self._session_lock = asyncio.Lock()
        self._closed = False
        self._limiter = TokenBucket(config.qps, config.burst) if config.qps and config.qps > 0 else None
        self._streams: set[aiohttp.ClientResponse] = set()
        self._closing: set[asyncio.Future[None]] = set()

    def __repr__(self) -> str:
        return f"Transport(cluster={self.cluster_name!r}, host={self.host!r}, closed={self._closed})"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def connector(self) -> aiohttp.BaseConnector | None:
        """The connection pool (``None`` before the first request); for diagnostics and tests."""
        return self._session.connector if self._session is not None else None

    async def _get_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise TransportError("transport is closed", cluster=self.cluster_name, url=self.host)
        creds = self.config.credentials
        if self._session is not None and self._session_generation == creds.cert_generation:
            return self._session
        async with self._session_lock:
            if self._session is None or self._session_generation != creds.cert_generation:
                generation = creds.cert_generation
                ssl_ctx = await self.config.ssl_context()
                if self._closed:
                    raise TransportError("transport is closed", cluster=self.cluster_name, url=self.host)
                if self._session is not None:
                    # A new client certificate: new connections use it; streams on the old pool
                    # keep running until they end or close() closes them.
                    self._retired.append(self._session)
                connector = TrackingConnector(ssl=ssl_ctx if ssl_ctx is not None else True, limit=100)
                self._session = aiohttp.ClientSession(
                    connector=connector,
                    json_serialize=lambda o: orjson.dumps(o).decode(),
                    read_bufsize=2**18,
                    trust_env=False,
                )
                self._session_generation = generation
            return self._session

    async def close(self) -> None:
        """Close every connection and the session. Idempotent; safe to call from any task.

        Returns once every socket of this transport is released: TLS shutdowns still under way
        (of streams closed early or requests cancelled mid-flight) get two seconds, then their
        sockets are aborted; connects still under way get two seconds, and a connection made after
        the close is aborted as soon as it is made.
        """
        self._closed = True
        self._streams.clear()
        sessions = [*self._retired, *([self._session] if self._session is not None else [])]
        self._session = None
        self._retired.clear()
        connectors = [s.connector for s in sessions if isinstance(s.connector, TrackingConnector)]
        protocols = [p for c in connectors for p in c.protocols]
        for session in sessions:
            await session.close()  # closes pooled and in-use connections
        connecting = {f for c in connectors for f in c.connecting}
        if connecting:
            # Connects under way finish (and abort, the pool being closed) or time out on their own.
            await asyncio.wait(connecting, timeout=2.0)
        open_ = [(p, p.closed) for p in protocols]
        pending = {f for _, f in open_ if f is not None and not f.done()} | self._closing
        self._closing.clear()
        for fut in pending:
            fut.add_done_callback(settle_close)
        if pending:
            _, late = await asyncio.wait(pending, timeout=2.0)
            if late:
                for proto, closed in open_:
                    if closed is not None and not closed.done() and proto.transport is not None:
                        proto.transport.abort()

    async def __aenter__(self) -> Transport:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # --- requests ------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | list[tuple[str, str]] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        """Send one request and read the whole response.

        Raises the :class:`~mcr.errors.APIError` subclass matching the server's Status for
        non-2xx answers (after retries), :class:`TransportError` when no answer arrives.
        """
        t = self.config.timeout if timeout is None else timeout
        client_timeout = aiohttp.ClientTimeout(total=t, sock_connect=min(t, self.config.connect_timeout))
        resp = await self._open(
            method,
            path,
            query,
            body,
            content_type,
            headers,
            client_timeout,
            min(t, self.config.connect_timeout),
        )
        try:
            data = await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._transport_error(method, resp.url, exc) from exc
        finally:
            resp.release()
        REST_CLIENT_RESPONSE_SIZE_BYTES.labels(method, self._host_label, self.cluster_name).observe(len(data))
        return Response(resp.status, resp.headers, data)

    def stream(
        self,
        path: str,
        *,
        query: Mapping[str, str] | list[tuple[str, str]] | None = None,
        timeout: float | None = None,
    ) -> _Stream:
        """A GET whose body is read line by line (watches), as an async context manager.

        ``async with transport.stream(path, query=q) as lines: async for line in lines: ...``.
        Each line is ``bytes`` without the newline; empty lines are skipped. ``await
        lines.read_block()`` instead hands out every complete line of the next read of the
        connection at once (use one way of reading per stream). Non-2xx answers raise
        as :meth:`request` does on entry; a broken connection raises :class:`TransportError` from
        the iterator. ``timeout`` bounds the whole stream (``None``: only the server's own).
        Leaving the block closes the connection if the body was not read to the end.
        """
        return _Stream(self, path, query, timeout)

    async def _open(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | list[tuple[str, str]] | None,
        body: bytes | None,
        content_type: str | None,
        headers: Mapping[str, str] | None,
        client_timeout: aiohttp.ClientTimeout,
        retry_window: float,
    ) -> aiohttp.ClientResponse:
        """Send with retries; returns a response with status < 400 whose body is not read yet.

        GET is retried on connection errors while less than ``retry_window`` seconds have passed.
        """
        await self._get_session()  # fails fast when closed
        if body is not None:
            REST_CLIENT_REQUEST_SIZE_BYTES.labels(method, self._host_label, self.cluster_name).observe(
                len(body)
            )
        url = self.host + path
        creds = self.config.credentials
        started = time.monotonic()
        retries = 0
        refreshed = False
        backoff = 0.05
        extra: dict[str, Any] = {}
        if self.config.tls_server_name:
            extra["server_hostname"] = self.config.tls_server_name
        if self.config.proxy:
            extra["proxy"] = self.config.proxy
        while True:
            if self._limiter is not None:
                t_wait = time.monotonic()
                await self._limiter.acquire()
                REST_CLIENT_RATE_LIMITER_DURATION_SECONDS.labels(
                    method, self._host_label, self.cluster_name
                ).observe(time.monotonic() - t_wait)
            hdrs = {"Accept": "application/json", "User-Agent": self.config.user_agent}
            if content_type:
                hdrs["Content-Type"] = content_type
            if headers:
                hdrs.update(headers)
            authorization = await creds.authorization()
            if authorization:
                hdrs["Authorization"] = authorization
            session = await self._get_session()  # after authorization(): it may rotate the client cert
            t0 = time.monotonic()
            try:
                resp = await session.request(
                    method, url, params=query, data=body, headers=hdrs, timeout=client_timeout, **extra
                )
            except (aiohttp.ClientConnectionError, TimeoutError) as exc:
                REST_CLIENT_REQUESTS_TOTAL.labels(
                    "<error>", method, self._host_label, self.cluster_name
                ).inc()
                if self._closed:
                    raise TransportError(
                        "transport is closed", cluster=self.cluster_name, url=url, method=method
                    ) from exc
                elapsed = time.monotonic() - started
                if (
                    method == "GET"
                    and retries < self.config.max_retries
                    and elapsed + backoff < retry_window
                    and not isinstance(exc, aiohttp.ClientSSLError)
                ):
                    retries += 1
                    REST_CLIENT_REQUEST_RETRIES_TOTAL.labels(
                        "<error>", method, self._host_label, self.cluster_name
                    ).inc()
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
                    continue
                raise self._transport_error(method, url, exc, elapsed=elapsed) from exc
            REST_CLIENT_REQUEST_DURATION_SECONDS.labels(method, self._host_label, self.cluster_name).observe(
                time.monotonic() - t0
            )
            REST_CLIENT_REQUESTS_TOTAL.labels(
                str(resp.status), method, self._host_label, self.cluster_name
            ).inc()
            if resp.status < 400:
                return resp
            try:
                data = await resp.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise self._transport_error(method, url, exc) from exc
            finally:
                resp.release()
            if resp.status == 401 and creds.refreshable and not refreshed:
                refreshed = True
                await creds.refresh(authorization)
                continue
            delay = retry_after(resp.headers)
            if (
                delay is not None
                and (resp.status == 429 or resp.status >= 500)
                and retries < self.config.max_retries
            ):
                retries += 1
                REST_CLIENT_REQUEST_RETRIES_TOTAL.labels(
                    str(resp.status), method, self._host_label, self.cluster_name
                ).inc()
                await asyncio.sleep(min(delay, MAX_RETRY_AFTER))
                continue
            raise self._api_error(method, url, resp.status, resp.headers, data)

    def _api_error(
        self, method: str, url: str, status: int, headers: Mapping[str, str], data: bytes
    ) -> APIError:
        return api_error(method, url, status, headers, data, cluster=self.cluster_name)

    def _transport_error(
        self, method: str, url: object, exc: BaseException, *, elapsed: float | None = None
    ) -> TransportError:
        return transport_error(method, url, exc, cluster=self.cluster_name, elapsed=elapsed)


class _Stream:
    """The async context manager returned by :meth:`Transport.stream`."""

    def __init__(
        self,
        transport: Transport,
        path: str,
        query: Mapping[str, str] | list[tuple[str, str]] | None,
        timeout: float | None,
    ) -> None:
        self._transport = transport
        self._path = path
        self._query = query
        self._timeout = timeout
        self._resp: aiohttp.ClientResponse | None = None

    async def __aenter__(self) -> _Lines:
        t = self._transport
        client_timeout = aiohttp.ClientTimeout(
            total=self._timeout, sock_connect=t.config.connect_timeout, sock_read=None
        )
        resp = await t._open(
            "GET", self._path, self._query, None, None, None, client_timeout, t.config.connect_timeout
        )
        self._resp = resp
        t._streams.add(resp)
        return _Lines(t, resp)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        resp, self._resp = self._resp, None
        if resp is None:
            return
        self._transport._streams.discard(resp)
        if resp.content.at_eof():
            resp.release()
            return
        conn = resp.connection
        closed = conn.protocol.closed if conn is not None and conn.protocol is not None else None
        resp.close()
        if closed is not None and not closed.done():
            pending = self._transport._closing
            pending.add(closed)
            closed.add_done_callback(pending.discard)
            closed.add_done_callback(settle_close)


class _Lines:
    """The newline-separated lines of a streaming response body: one by one (``async for``) or
    one read at a time (:meth:`read_block`)."""

    def __init__(self, transport: Transport, resp: aiohttp.ClientResponse) -> None:
        self._transport = transport
        self._resp = resp
        self._buf = b""  # the unfinished line (line by line)
        self._tail = bytearray(b"\n")  # the same for read_block, after the newline before it
        # Lines already read from the connection and not yet handed out, last first (empty: the
        # next line waits for a read).
        self.pending: list[bytes] = []
        self._eof = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def _read(self) -> bytes:
        """The next chunk of the body (``b""`` at its end); connection failures as TransportError."""
        try:
            return await self._resp.content.readany()
        except (aiohttp.ClientError, TimeoutError) as exc:
            if self._transport.closed:
                return b""
            raise self._transport._transport_error("GET", self._resp.url, exc) from exc

    async def __anext__(self) -> bytes:
        while not self.pending:
            if self._eof:
                raise StopAsyncIteration
            chunk = await self._read()
            if not chunk:
                self._eof = True
                if self._buf.strip():
                    self.pending.append(self._buf)
                self._buf = b""
                continue
            data = self._buf + chunk
            parts = data.split(b"\n")
            self._buf = parts.pop()
            self.pending.extend(p for p in parts if p.strip())
            self.pending.reverse()
        return self.pending.pop()

    async def read_block(self) -> bytearray:
        """Every complete line the next read of the connection finishes, in one buffer.

        The block starts with a newline and every line in it ends with one (``b"\\nA\\nB\\n"``),
        so each line lies between two newlines and a caller can turn the block into a JSON array
        in place (as :class:`mcr.cache.reflector.Reflector` does). The caller owns the block and may
        change it. Lines may be empty; a line split across reads waits for its end. Returns an
        empty bytearray at the end of the body (an unterminated rest, if any, comes as the last
        block, with a newline added). Costs one call per read, not per line, and one copy of the
        data read (joining it to the line the previous read left unfinished).
        """
        if self.pending:
            block = bytearray(b"\n")
            block += b"\n".join(reversed(self.pending))
            block += b"\n"
            self.pending.clear()
            return block
        while not self._eof:
            chunk = await self._read()
            if not chunk:
                self._eof = True
                rest, self._tail = self._tail, bytearray(b"\n")
                if rest.strip():
                    rest += b"\n"
                    return rest
                break
            # The unfinished line, after the newline that ended the line before it.
            data = self._tail + chunk
            cut = data.rfind(b"\n")
            if cut == 0:
                self._tail = data
                continue
            self._tail = data[cut:]
            del data[cut + 1 :]  # drops the unfinished line: shortens the buffer in place
            return data
        return bytearray()
