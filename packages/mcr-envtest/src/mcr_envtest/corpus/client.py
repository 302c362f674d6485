"""The HTTP side of the corpus: one :class:`Target` per API server, built from a kubeconfig.

Only what a kubeconfig's current context names is used: the server URL (or one given
explicitly), its CA (``certificate-authority`` or ``-data``; else the system's trust store) and a
bearer token or client certificate. TLS verification is always on; a kubeconfig that asks to skip
it is refused.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

__all__ = ["USER_AGENT", "Raw", "Target", "TargetError"]

# kube-apiserver names a writer's field manager after its User-Agent: both servers must see the same.
USER_AGENT = "mcr-corpus/0.1"


class TargetError(ValueError):
    """A kubeconfig cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Raw:
    """One answer as received: status, media type and body (JSON decoded when it is JSON)."""

    status: int
    content_type: str
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


def _decode(data: bytes, content_type: str = "application/json") -> Any:
    if not data:
        return None
    if content_type == "application/yaml":
        try:
            return yaml.safe_load(data)
        except yaml.YAMLError:
            return data.decode(errors="replace")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode(errors="replace")


def _headers(resp: aiohttp.ClientResponse) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in resp.headers.items():
        k = key.lower()
        out[k] = f"{out[k]}\n{value}" if k in out else value
    return out


def _material(user: dict[str, Any], key: str, base: Path) -> bytes | None:
    if user.get(f"{key}-data"):
        return base64.b64decode(user[f"{key}-data"])
    if user.get(key):
        return (base / str(user[key])).read_bytes()
    return None


class Target:
    """An API server the corpus talks to, with the credentials of a kubeconfig's current context.

    Open with ``async with`` (one connection pool); :meth:`request` and :meth:`watch` then send
    requests. ``name`` labels it in reports.
    """

    def __init__(
        self, name: str, kubeconfig: dict[str, Any] | str | os.PathLike[str], url: str | None = None
    ):
        where = "kubeconfig" if isinstance(kubeconfig, dict) else str(kubeconfig)
        base = Path.cwd() if isinstance(kubeconfig, dict) else Path(kubeconfig).parent
        try:
            cfg = kubeconfig if isinstance(kubeconfig, dict) else yaml.safe_load(Path(kubeconfig).read_text())
            ctx_name = cfg["current-context"]
            ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
            cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
            user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        except (OSError, yaml.YAMLError, KeyError, StopIteration, TypeError) as err:
            raise TargetError(f"{where}: cannot read its current context ({err!r})") from None
        if cluster.get("insecure-skip-tls-verify"):
            raise TargetError(f"{where}: insecure-skip-tls-verify is not supported (TLS is always verified)")
        self.name = name
        self.url = (url or cluster["server"]).rstrip("/")
        ca = _material(cluster, "certificate-authority", base)
        self._ssl = ssl.create_default_context(cadata=ca.decode() if ca else None)
        self._headers = {"User-Agent": USER_AGENT, "Accept": "application/json, */*"}
        if user.get("token"):
            self._headers["Authorization"] = f"Bearer {user['token']}"
        cert, key = _material(user, "client-certificate", base), _material(user, "client-key", base)
        if cert and key:
            with tempfile.TemporaryDirectory(prefix="mcr-corpus-") as tmp:
                (Path(tmp) / "c.crt").write_bytes(cert)
                fd = os.open(Path(tmp) / "c.key", os.O_WRONLY | os.O_CREAT, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(key)
                self._ssl.load_cert_chain(Path(tmp) / "c.crt", Path(tmp) / "c.key")
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Target:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=16), headers=self._headers
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _kwargs(
        self, query: dict[str, str], body: Any, content_type: str | None, headers: dict[str, str]
    ) -> Any:
        hdrs = dict(headers)
        data: bytes | None = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else orjson.dumps(body)
            hdrs.setdefault("Content-Type", content_type or "application/json")
        return {"params": query or None, "data": data, "headers": hdrs}

    async def request(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Raw:
        """Send one request and read its whole answer (bounded by ``timeout`` seconds)."""
        assert self._session is not None, "use the Target in 'async with'"
        kwargs = self._kwargs(query or {}, body, content_type, headers or {})
        async with self._session.request(
            method, self.url + path, timeout=aiohttp.ClientTimeout(total=timeout), **kwargs
        ) as resp:
            data = await resp.read()
            return Raw(resp.status, resp.content_type, _decode(data, resp.content_type), _headers(resp))

    async def watch(
        self,
        path: str,
        query: dict[str, str],
        events: int,
        timeout: float,
        headers: dict[str, str] | None = None,
    ) -> Raw:
        """Open a watch and read at most ``events`` events, until the stream ends or ``timeout``
        seconds pass; then drop the connection. A non-200 answer is read whole instead."""
        assert self._session is not None, "use the Target in 'async with'"
        got: list[Any] = []
        kwargs = self._kwargs(query, None, None, headers or {})
        resp = await self._session.get(
            self.url + path, timeout=aiohttp.ClientTimeout(total=timeout + 10), **kwargs
        )
        try:
            if resp.status != 200:
                return Raw(resp.status, resp.content_type, _decode(await resp.read()))

            async def read() -> None:
                while len(got) < events:
                    line = await resp.content.readline()
                    if not line:
                        return
                    if line.strip():
                        got.append(_decode(line))

            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(read(), timeout)
            return Raw(resp.status, resp.content_type, got)
        finally:
            # A graceful TLS close waits for the peer; the stream is abandoned, so abort it.
            conn = resp.connection
            if conn is not None and conn.transport is not None:
                conn.transport.abort()
            resp.release()
