"""The manager's HTTP endpoints: ``/metrics`` and the ``/healthz`` ``/readyz`` probes.

Each is served on its own address (controller-runtime's form, see :mod:`mcr.manager.probes`), or
not at all when its address is disabled.
"""

from __future__ import annotations

from collections.abc import Callable

from mcr.manager.probes import HTTPServer, ProbeSet, health_app, metrics_app, parse_bind_address
from mcr.metrics import SERVED

__all__ = ["Endpoints"]


class Endpoints:
    """The metrics server (serving :data:`mcr.metrics.SERVED`) and the health probe server.

    ``metrics_bind_address`` / ``health_probe_bind_address`` are parsed at once (``ValueError``
    for a malformed one); ``before_scrape`` runs in the event loop ahead of every ``/metrics``
    scrape. :meth:`start` binds both (``OSError`` naming an address in use), :meth:`stop` closes
    whatever started, in reverse order; both are called once.
    """

    def __init__(
        self,
        metrics_bind_address: str | None,
        health_probe_bind_address: str | None,
        *,
        before_scrape: Callable[[], None],
    ) -> None:
        self._metrics_addr = parse_bind_address(metrics_bind_address)
        self._health_addr = parse_bind_address(health_probe_bind_address)
        self._before_scrape = before_scrape
        self.healthz = ProbeSet("healthz")
        self.readyz = ProbeSet("readyz")
        self._servers: list[HTTPServer] = []
        self._metrics: HTTPServer | None = None
        self._health: HTTPServer | None = None

    @property
    def metrics_url(self) -> str | None:
        """``http://host:port`` of the metrics server once listening (``None`` before / disabled)."""
        return self._metrics.url if self._metrics is not None else None

    @property
    def health_probe_url(self) -> str | None:
        """``http://host:port`` of the health probe server once listening."""
        return self._health.url if self._health is not None else None

    async def start(self) -> None:
        """Start the enabled servers: metrics first, then the probes."""
        if self._metrics_addr is not None:
            self._metrics = HTTPServer(
                "metrics", metrics_app(SERVED, before=self._before_scrape), *self._metrics_addr
            )
            self._servers.append(self._metrics)
            await self._metrics.start()
        if self._health_addr is not None:
            self._health = HTTPServer(
                "health probe", health_app(self.healthz, self.readyz), *self._health_addr
            )
            self._servers.append(self._health)
            await self._health.start()

    async def stop(self) -> None:
        """Stop the servers that started, the last started first."""
        for server in reversed(self._servers):
            await server.stop()
