"""The webhook server: HTTPS endpoints for admission and conversion reviews from a whole fleet.

A :class:`WebhookServer` is a manager runnable (``async start()``) and aware of clusters
(``async engage(name, cluster)``): add it with ``mgr.add(server)``, and its :meth:`check_ready`
with ``mgr.add_readyz_check``.
It runs on every replica (no leader election). While a cluster is engaged, its paths
(:mod:`mcr.webhook.routing`) are served and its webhook configurations are kept current
(:mod:`mcr.webhook.registration`); a call for a cluster that is not engaged is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from mcr.webhook.admission import (
    BadReviewError,
    admission_review,
    build_request,
    parse_review,
    refusal,
    run_handler,
)
from mcr.webhook.conversion import conversion_failure, convert_review
from mcr.webhook.registration import AdmissionSpec, ConversionSpec, Endpoint, register, unregister
from mcr.webhook.routing import handler_key, parse

if TYPE_CHECKING:
    from mcr.cluster import Cluster

__all__ = ["WebhookServer"]

log = logging.getLogger("mcr.webhook")

_MAX_BODY = 32 * 1024 * 1024


class WebhookServer:
    """Serves admission and conversion webhooks over HTTPS for every engaged cluster.

    ``cert_file``/``key_file``: the serving certificate (PEM, with its chain) and key; they are
    read again when their content changes (checked every ``cert_poll_interval`` seconds), and a
    pair that does not load is logged and skipped (the server keeps the previous one).
    ``ca_file``: the CA that API servers trust as ``caBundle`` (default: the certificate file).
    When the CA changes, every engaged cluster's configurations get a bundle holding the new and
    the previous CA, and only after those writes (plus ``rotation_delay`` seconds for API servers
    to see them) does the server present the new certificate, so admissions keep succeeding. A
    cluster whose write has not succeeded within 30 s does not hold the rotation back.

    ``host``/``port`` (``0``: an ephemeral port) is where it listens. API servers reach it at
    ``url`` (default ``https://<host>:<bound port>``) or through ``service``
    (``(namespace, name, port)``). ``name`` names the webhook configurations in each cluster.
    With ``remove_on_disengage``, a disengaged cluster's configurations are deleted (and its CRD
    conversions set back to ``None``); otherwise they stay and calls from it are refused.
    """

    need_leader_election = False

    def __init__(
        self,
        cert_file: str | Path,
        key_file: str | Path,
        *,
        ca_file: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 9443,
        url: str | None = None,
        service: tuple[str, str, int] | None = None,
        name: str = "mcr-webhooks",
        remove_on_disengage: bool = False,
        cert_poll_interval: float = 5.0,
        rotation_delay: float = 2.0,
        retry_interval: float = 5.0,
    ) -> None:
        self.cert_file, self.key_file = Path(cert_file), Path(key_file)
        self.ca_file = Path(ca_file) if ca_file is not None else None
        self.host, self.port = host, port
        self.name = name
        self.remove_on_disengage = remove_on_disengage
        self.cert_poll_interval = cert_poll_interval
        self.rotation_delay = rotation_delay
        self.retry_interval = retry_interval
        self._url = url
        self._service = service
        self._admissions: dict[tuple[str, tuple[str, ...]], AdmissionSpec] = {}
        self._conversions: dict[tuple[str, ...], ConversionSpec] = {}
        self._clusters: dict[str, Cluster] = {}
        self._applied: dict[str, int] = {}  # cluster → generation its configurations have
        self._generation = 0
        self._changed = asyncio.Event()  # set (and replaced) when the generation changes
        self._progress = asyncio.Event()  # set (and replaced) when a cluster applied or left
        self._serving = asyncio.Event()
        self._ssl: ssl.SSLContext | None = None  # the listening context
        self._current: ssl.SSLContext | None = None  # the context new connections are handed to
        self._fingerprint = b""
        self._bad_fingerprint = b""
        self._ca_bundle = b""
        self._bound_port: int | None = None

    def __repr__(self) -> str:
        return f"WebhookServer({self.name!r}, {self.host}:{self.port})"

    # -- handlers ----------------------------------------------------------------------------------

    def add_admission(self, spec: AdmissionSpec) -> None:
        """Serve ``spec``'s handler; ``ValueError`` if its kind already has one of that operation."""
        key = (spec.operation, handler_key(spec.operation, spec.gvk.group, spec.gvk.version, spec.gvk.kind))
        if key in self._admissions:
            raise ValueError(
                f"webhook server {self.name!r}: {spec.gvk} already has a {spec.operation} handler"
            )
        self._admissions[key] = spec
        self._bump()

    def add_conversion(self, spec: ConversionSpec) -> None:
        """Serve ``spec``'s converter; ``ValueError`` if its group and kind already have one."""
        key = handler_key("convert", spec.gvk.group, "", spec.gvk.kind)
        if key in self._conversions:
            raise ValueError(
                f"webhook server {self.name!r}: {spec.gvk.group}/{spec.gvk.kind} already has a converter"
            )
        self._conversions[key] = spec
        self._bump()

    # -- state -------------------------------------------------------------------------------------

    @property
    def url(self) -> str | None:
        """The base URL API servers call (``None`` with a service, or before the port is bound)."""
        if self._service is not None:
            return None
        if self._url is not None:
            return self._url
        if self._bound_port is None:
            return None
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self._bound_port}"

    @property
    def ca_bundle(self) -> bytes:
        """The PEM bundle written as ``caBundle`` (empty before the server starts)."""
        return self._ca_bundle

    def engaged(self) -> list[str]:
        """The names of the clusters served now."""
        return sorted(self._clusters)

    def check_ready(self) -> bool:
        """A ``/readyz`` check: passes once the server accepts connections."""
        if not self._serving.is_set():
            raise RuntimeError(f"webhook server {self.name!r} is not serving yet")
        return True

    def _bump(self) -> None:
        self._generation += 1
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    def _progressed(self) -> None:
        event, self._progress = self._progress, asyncio.Event()
        event.set()

    # -- TLS ---------------------------------------------------------------------------------------

    def _read_files(self) -> tuple[bytes, bytes, bytes]:
        cert = self.cert_file.read_bytes()
        key = self.key_file.read_bytes()
        ca = self.ca_file.read_bytes() if self.ca_file is not None else cert
        return cert, key, ca

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    async def _watch_certificates(self) -> None:
        while True:
            await asyncio.sleep(self.cert_poll_interval)
            try:
                await self._reload()
            except (OSError, ssl.SSLError, ValueError) as exc:
                log.error(
                    "webhook server %r: certificate %s not reloaded: %s", self.name, self.cert_file, exc
                )

    async def _reload(self) -> None:
        cert, key, ca = await asyncio.to_thread(self._read_files)
        fingerprint = hashlib.sha256(cert + b"\0" + key + b"\0" + ca).digest()
        if fingerprint in (self._fingerprint, self._bad_fingerprint):
            return
        try:
            # A whole new context (a half-written pair does not load); the live one is never changed.
            context = await asyncio.to_thread(self._context)
        except (OSError, ssl.SSLError) as exc:
            self._bad_fingerprint = fingerprint
            raise ValueError(f"{self.cert_file} / {self.key_file}: {exc}") from exc
        if ca.strip() not in self._ca_bundle:
            self._ca_bundle = ca.strip() + b"\n" + self._current_ca() + b"\n"
            generation = self._generation + 1
            self._bump()
            await self._wait_applied(generation)
            await asyncio.sleep(self.rotation_delay)
        self._current = context
        self._fingerprint = fingerprint
        log.info("webhook server %r: serving the certificate from %s", self.name, self.cert_file)

    def _select(self, conn: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
        # Called for every TLS client hello (with or without SNI): hand the connection the newest pair.
        if self._current is not None and context is not self._current:
            conn.context = self._current

    def _current_ca(self) -> bytes:
        # The CA the server's certificate is trusted by now: the first PEM block of the bundle.
        marker = b"-----END CERTIFICATE-----"
        end = self._ca_bundle.find(marker)
        return self._ca_bundle[: end + len(marker)].strip() if end >= 0 else b""

    async def _wait_applied(self, generation: int, timeout: float = 30.0) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while not all(self._applied.get(name, 0) >= generation for name in self._clusters):
                    await self._progress.wait()

    # -- running -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Serve until cancelled; on cancellation stop accepting, finish open requests, re-raise.

        Raises ``OSError`` when the port cannot be bound and ``ssl.SSLError``/``OSError`` when the
        certificate files do not load.
        """
        cert, key, ca = await asyncio.to_thread(self._read_files)
        self._ssl = self._current = await asyncio.to_thread(self._context)
        self._ssl.sni_callback = self._select
        self._fingerprint = hashlib.sha256(cert + b"\0" + key + b"\0" + ca).digest()
        self._ca_bundle = ca.strip() + b"\n"
        app = web.Application(client_max_size=_MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=10.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port, ssl_context=self._ssl)
            await site.start()
            server = getattr(site, "_server", None)
            sockets = getattr(server, "sockets", None) or []
            self._bound_port = sockets[0].getsockname()[1] if sockets else self.port
            self._serving.set()
            log.info("webhook server %r serving on %s:%s", self.name, self.host, self._bound_port)
            await self._watch_certificates()
        finally:
            self._serving.clear()
            await runner.cleanup()

    def _endpoint(self) -> Endpoint:
        return Endpoint(url=self.url, service=self._service)

    async def engage(self, name: str, cluster: Cluster) -> None:
        """Serve ``name`` and keep its configurations current until cancelled (the disengagement).

        Failed registrations are logged and retried every ``retry_interval`` seconds; they never
        end the engagement. Handlers of kinds the cluster does not serve are left out of its
        configurations and added once it serves them (checked every ``retry_interval`` seconds).
        On cancellation the cluster stops being served; with
        ``remove_on_disengage`` its configurations are deleted (bounded by 10 s), then
        ``CancelledError`` is re-raised.
        """
        self._clusters[name] = cluster
        reported: list[str] = []
        try:
            await self._serving.wait()
            while True:
                generation, changed = self._generation, self._changed
                try:
                    missing = await register(
                        cluster,
                        name,
                        config_name=self.name,
                        admissions=list(self._admissions.values()),
                        conversions=list(self._conversions.values()),
                        endpoint=self._endpoint(),
                        ca_bundle=self._ca_bundle,
                    )
                except Exception as exc:  # noqa: BLE001  # retried: a cluster's failure never ends its engagement
                    log.warning(
                        "webhook server %r: registering in cluster %r failed: %s", self.name, name, exc
                    )
                    await asyncio.sleep(self.retry_interval)
                    continue
                self._applied[name] = generation
                self._progressed()
                if not missing:
                    await changed.wait()
                    continue
                if missing != reported:
                    log.warning(
                        "webhook server %r: cluster %r does not serve %s; left out until it does",
                        self.name,
                        name,
                        ", ".join(missing),
                    )
                    reported = missing
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.retry_interval):
                        await changed.wait()
        finally:
            if self._clusters.get(name) is cluster:
                del self._clusters[name]
                self._applied.pop(name, None)
                self._progressed()
                if self.remove_on_disengage:
                    await self._unregister(name, cluster)

    async def _unregister(self, name: str, cluster: Cluster) -> None:
        try:
            async with asyncio.timeout(10.0):
                await unregister(cluster, config_name=self.name, conversions=list(self._conversions.values()))
        except TimeoutError:
            log.warning(
                "webhook server %r: removing the configurations of cluster %r timed out", self.name, name
            )
        except Exception as exc:  # noqa: BLE001  # the cluster may be gone already: report, do not fail
            log.warning(
                "webhook server %r: removing the configurations of cluster %r failed: %s",
                self.name,
                name,
                exc,
            )

    # -- requests ----------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405, text=f"{request.method} not allowed: webhooks take POST\n")
        try:
            route = parse(request.path)
        except ValueError as exc:
            return web.Response(status=404, text=f"{exc}\n")
        body = await request.read()
        review_kind = "ConversionReview" if route.operation == "convert" else "AdmissionReview"
        try:
            api_version, review = parse_review(body, review_kind)
        except BadReviewError as exc:
            return web.Response(status=400, text=f"{request.path}: {exc}\n")
        cluster = self._clusters.get(route.cluster)
        unknown = f"cluster {route.cluster!r} is not engaged with webhook server {self.name!r}"
        if route.operation == "convert":
            conv = self._conversions.get(route.key)
            if cluster is None:
                out = conversion_failure(api_version, review["uid"], unknown)
            elif conv is None:
                out = conversion_failure(
                    api_version, review["uid"], f"no converter for {'/'.join(route.key)}"
                )
            else:
                out = await convert_review(conv.converter, api_version, review, route.cluster)
            return web.Response(body=out, content_type="application/json")
        spec = self._admissions.get((route.operation, route.key))
        if cluster is None:
            response, patch = refusal(unknown, 404, "NotFound"), None
        elif spec is None:
            response, patch = (
                refusal(f"no {route.operation} handler for {'/'.join(route.key)}", 404, "NotFound"),
                None,
            )
        else:
            try:
                admission = build_request(review, route.cluster, cluster, spec.model)
            except (BadReviewError, ValueError, TypeError) as exc:
                return web.Response(status=400, text=f"{request.path}: {exc}\n")
            where = f"{route.operation} {spec.gvk} in cluster {route.cluster!r}"
            response, patch = await run_handler(
                spec.handler, admission, mutating=route.operation == "mutate", model=spec.model, where=where
            )
        return web.Response(
            body=admission_review(api_version, review["uid"], response, patch),
            content_type="application/json",
        )
