"""The manager's HTTP endpoints: health probes (``/healthz``, ``/readyz``) and ``/metrics``.

Bind addresses use controller-runtime's form: ``":8080"`` (all interfaces), ``"127.0.0.1:0"`` (an
ephemeral port; read the bound URL from the server), ``"0"`` or ``""`` (disabled).

A check is a callable taking no arguments, sync or async. It passes when it returns ``None`` or a
true value; it fails when it returns ``False`` or raises (the exception's message is reported).
``/healthz`` and ``/readyz`` answer 200 ``ok`` when every check passes, else 500 listing the failed
checks (``?verbose`` lists every check). ``/healthz/<name>`` runs one check; 404 for unknown names.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from mcr.metrics.exposition import WithoutCreated

__all__ = ["Check", "HTTPServer", "ProbeSet", "health_app", "metrics_app", "parse_bind_address"]

log = logging.getLogger("mcr.manager")

Check = Callable[[], "bool | Awaitable[bool | None] | None"]


def parse_bind_address(address: str | None) -> tuple[str, int] | None:
    """``(host, port)`` for a bind address, or ``None`` when serving is disabled."""
    if address is None or address in ("", "0"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"bind address {address!r} is not of the form [host]:port")
    try:
        port_number = int(port)
    except ValueError:
        raise ValueError(f"bind address {address!r}: port {port!r} is not a number") from None
    host = host.strip("[]") or "0.0.0.0"
    return host, port_number


class ProbeSet:
    """Named checks behind one endpoint (``healthz`` or ``readyz``)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._checks: dict[str, Check] = {}

    def add(self, name: str, check: Check) -> None:
        """Register ``check`` as ``name``; raises ``ValueError`` if the name is taken."""
        if not name or "/" in name:
            raise ValueError(f"{self.endpoint} check name {name!r} must be non-empty and contain no '/'")
        if name in self._checks:
            raise ValueError(f"{self.endpoint} check {name!r} is already registered")
        self._checks[name] = check

    def names(self) -> list[str]:
        return sorted(self._checks)

    async def run(self, name: str) -> str | None:
        """Run one check: ``None`` when it passes, else the reason it failed."""
        try:
            result = self._checks[name]()
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001  # any failure of a check is reported, not raised
            return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return "check returned False" if result is False else None

    async def handle(self, request: web.Request) -> web.Response:
        only = request.match_info.get("name")
        if only is not None and only not in self._checks:
            return web.Response(status=404, text=f"{self.endpoint} check {only!r} not found\n")
        names = [only] if only is not None else self.names()
        results = await asyncio.gather(*(self.run(n) for n in names))
        failed = {n: r for n, r in zip(names, results, strict=True) if r is not None}
        verbose = "verbose" in request.query
        if not failed and not verbose:
            return web.Response(text="ok")
        lines = []
        for n, r in zip(names, results, strict=True):
            if r is None:
                if verbose:
                    lines.append(f"[+]{n} ok")
            else:
                lines.append(f"[-]{n} failed: {r}")
        status = 500 if failed else 200
        lines.append(f"{self.endpoint} check failed" if failed else f"{self.endpoint} check passed")
        if failed:
            log.info("%s probe failed", self.endpoint, extra={"failed": ",".join(sorted(failed))})
        return web.Response(status=status, text="\n".join(lines) + "\n")


def health_app(healthz: ProbeSet, readyz: ProbeSet) -> web.Application:
    app = web.Application()
    for probes in (healthz, readyz):
        app.router.add_get(f"/{probes.endpoint}", probes.handle)
        app.router.add_get(f"/{probes.endpoint}/{{name}}", probes.handle)
    return app


def metrics_app(
    registry: Collector,
    *,
    before: Callable[[], None] | None = None,
    guard: Callable[[web.Request], Awaitable[web.StreamResponse | None]] | None = None,
) -> web.Application:
    """``/metrics`` serving ``registry``; ``before`` runs in the event loop ahead of each scrape.

    ``guard`` sees each request first: a response it returns is sent instead of the metrics.
    """

    async def metrics(request: web.Request) -> web.StreamResponse:
        if guard is not None:
            denied = await guard(request)
            if denied is not None:
                return denied
        if before is not None:
            before()
        # Collection takes locks and formats every series: keep it off the event loop.
        if isinstance(registry, WithoutCreated):
            body = await asyncio.to_thread(registry.exposition)
        else:
            body = await asyncio.to_thread(generate_latest, registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


class HTTPServer:
    """An aiohttp application bound to one address (over TLS with ``ssl_context``); ``url`` is set
    once listening."""

    def __init__(
        self,
        name: str,
        app: web.Application,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.name = name
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self.url: str | None = None

    async def start(self) -> None:
        """Bind and listen; raises ``OSError`` naming the address if it is in use."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, ssl_context=self._ssl)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise OSError(
                exc.errno, f"{self.name} server cannot listen on {self._host}:{self._port}: {exc}"
            ) from exc
        sockets = self._runner.addresses
        host, port = sockets[0][0], sockets[0][1]
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        self.url = f"{'https' if self._ssl is not None else 'http'}://{shown}:{port}"
        log.info("%s server listening", self.name, extra={"url": self.url})

    async def stop(self) -> None:
        """Stop listening and close open connections; safe to call twice."""
        await self._runner.cleanup()
        self.url = None
