"""The manager's HTTP endpoints: ``/metrics`` and the ``/healthz`` ``/readyz`` probes.

Each is served on its own address (controller-runtime's form, see :mod:`mcr.manager.probes`), or
not at all when its address is disabled. ``/metrics`` may be served over HTTPS with a certificate
reloaded when its files change (:mod:`mcr.manager.certwatcher`) and behind a request filter
(:mod:`mcr.manager.authfilter`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass

from mcr.manager.authfilter import FilterProvider, RequestFilter
from mcr.manager.certwatcher import CertWatcher
from mcr.manager.probes import HTTPServer, ProbeSet, health_app, metrics_app, parse_bind_address
from mcr.metrics import SERVED
from mcr.rest.config import RestConfig

__all__ = ["Endpoints", "MetricsServing"]


@dataclass(frozen=True)
class MetricsServing:
    """How ``/metrics`` is served: over HTTPS when ``secure_serving`` with ``cert_dir/cert_name``
    and ``cert_dir/key_name``, behind the filter ``filter_provider`` builds when given."""

    secure_serving: bool = False
    cert_dir: str | None = None
    cert_name: str = "tls.crt"
    key_name: str = "tls.key"
    filter_provider: FilterProvider | None = None

    def check(self, config: RestConfig | None) -> None:
        """Raise ``ValueError`` naming the option at fault for settings that cannot work."""
        if self.secure_serving and not self.cert_dir:
            raise ValueError(
                "metrics_secure_serving needs metrics_cert_dir (holding the certificate and key)"
            )
        if not self.secure_serving and self.cert_dir:
            raise ValueError("metrics_cert_dir is set but metrics_secure_serving is off")
        if self.filter_provider is not None and config is None:
            raise ValueError("metrics_filter_provider needs a local cluster: pass a config to Manager")


class Endpoints:
    """The metrics server (serving :data:`mcr.metrics.SERVED`) and the health probe server.

    ``metrics_bind_address`` / ``health_probe_bind_address`` are parsed at once (``ValueError``
    for a malformed one); ``before_scrape`` runs in the event loop ahead of every ``/metrics``
    scrape. :meth:`start` binds both (``OSError`` naming an address in use or a missing
    certificate file, ``ValueError`` for a certificate that does not load), :meth:`stop` closes
    whatever started, in reverse order; both are called once.
    """

    def __init__(
        self,
        metrics_bind_address: str | None,
        health_probe_bind_address: str | None,
        *,
        before_scrape: Callable[[], None],
        serving: MetricsServing | None = None,
        config: RestConfig | None = None,
    ) -> None:
        self._metrics_addr = parse_bind_address(metrics_bind_address)
        self._health_addr = parse_bind_address(health_probe_bind_address)
        self._before_scrape = before_scrape
        self._serving = serving or MetricsServing()
        self._serving.check(config)
        self._config = config
        self.healthz = ProbeSet("healthz")
        self.readyz = ProbeSet("readyz")
        self._servers: list[HTTPServer] = []
        self._metrics: HTTPServer | None = None
        self._health: HTTPServer | None = None
        self._filter: RequestFilter | None = None
        self.cert_watcher: CertWatcher | None = None
        """The metrics server's certificate (``None`` unless served over HTTPS)."""
        self._watch_task: asyncio.Task[None] | None = None

    @property
    def metrics_url(self) -> str | None:
        """``http(s)://host:port`` of the metrics server once listening (``None`` before / disabled)."""
        return self._metrics.url if self._metrics is not None else None

    @property
    def health_probe_url(self) -> str | None:
        """``http://host:port`` of the health probe server once listening."""
        return self._health.url if self._health is not None else None

    async def start(self) -> None:
        """Start the enabled servers: metrics first, then the probes."""
        if self._metrics_addr is not None:
            await self._start_metrics(*self._metrics_addr)
        if self._health_addr is not None:
            self._health = HTTPServer(
                "health probe", health_app(self.healthz, self.readyz), *self._health_addr
            )
            self._servers.append(self._health)
            await self._health.start()

    async def _start_metrics(self, host: str, port: int) -> None:
        serving = self._serving
        ssl_context = None
        if serving.secure_serving:
            assert serving.cert_dir is not None
            watcher = CertWatcher(
                os.path.join(serving.cert_dir, serving.cert_name),
                os.path.join(serving.cert_dir, serving.key_name),
            )
            await asyncio.to_thread(watcher.load)
            ssl_context = watcher.context
            self.cert_watcher = watcher
            self._watch_task = asyncio.create_task(watcher.run(), name="mcr-metrics-cert-watcher")
        if serving.filter_provider is not None:
            assert self._config is not None
            self._filter = serving.filter_provider(self._config)
        app = metrics_app(SERVED, before=self._before_scrape, guard=self._filter)
        self._metrics = HTTPServer("metrics", app, host, port, ssl_context=ssl_context)
        self._servers.append(self._metrics)
        await self._metrics.start()

    async def stop(self) -> None:
        """Stop the servers that started, the last started first, then the certificate watcher and
        the filter."""
        for server in reversed(self._servers):
            await server.stop()
        if self._watch_task is not None:
            task, self._watch_task = self._watch_task, None
            task.cancel()
            await asyncio.wait([task])
        if self._filter is not None:
            await self._filter.close()
            self._filter = None
