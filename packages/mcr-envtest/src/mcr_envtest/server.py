"""``Server``: a Kubernetes-compatible API server in the current event loop (``ServerThread``
in :mod:`.server_thread` runs one in a thread of its own).

A server owns one store (objects, RV counter, history), a registry, the HTTP app and a TLS
identity. ``stop()`` then ``start()`` keeps the state and the port; ``restart(keep_state=False)``
loses the state and seeds a new RV counter above every RV handed out before, so clients' old RVs
get 410 Expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import ssl
import tempfile
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from . import bootstrap, certs, kubeconfig, persist
from .auth import Authenticator, Authorizer, UserInfo
from .faults import Faults
from .gc import Collector
from .http.routes import Api
from .port_hold import PortHold
from .real import ControlPlane, RealModeError, Spec, assets_dir, check_options, default_pool
from .resources import Registry
from .store import Store
from .writer import IMMORTAL_NAMESPACES, Writer

__all__ = ["Server"]

ADMIN = UserInfo("envtest-admin", ("system:masters", "system:authenticated"))


class Server:
    """A Kubernetes-compatible API server in the running event loop.

    Use ``async with Server() as srv`` (or ``await start()`` / ``await stop()`` / ``await
    close()``). Attributes valid after the first start: :attr:`url`, :attr:`kubeconfig`,
    :attr:`kubeconfig_path`, :attr:`ca_file`, :attr:`admin_token`, :attr:`faults`, :attr:`store`.
    Repeated ``start()`` on a running server and ``stop()`` on a stopped one are no-ops.

    Real mode (``real=True``, or ``real=None`` with ``KUBEBUILDER_ASSETS`` set; see
    :mod:`mcr_envtest.real`) serves a pooled real kube-apiserver with the same CA, kubeconfig and
    users; options it cannot honour raise :class:`~mcr_envtest.real.RealModeError` here, and so do
    :attr:`faults` and :attr:`store`. A binary that fails to start raises
    :class:`~mcr_envtest.real.ControlPlaneError` from :meth:`start`, quoting its log.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        https: bool = True,
        history_size: int = 10000,
        state_dir: str | os.PathLike[str] | None = None,
        owner_gc: bool = True,
        anonymous: bool = False,
        bookmark_interval: float = 60.0,
        watch_timeout: tuple[float, float] = (1800.0, 3600.0),
        snapshot_interval: float = 5.0,
        name: str = "envtest",
        real: bool | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.https = https
        self.history_size = history_size
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self.owner_gc = owner_gc
        self.anonymous = anonymous
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self.snapshot_interval = snapshot_interval
        self.name = name
        self.real = assets_dir() is not None if real is None else real
        if self.real:
            check_options(dict(locals()))
        self._cp: ControlPlane | None = None
        self._cp_finalizer: weakref.finalize[Any, Any] | None = None
        self._faults = Faults()
        self.admin_token = secrets.token_urlsafe(24)
        self.authenticator = Authenticator()
        self.authenticator.add_token(self.admin_token, ADMIN)
        self._store: Store | None = None
        self.registry: Registry | None = None
        self.writer: Writer | None = None
        self._collector: Collector | None = None
        self._runner: web.AppRunner | None = None
        # while stopped, the port stays bound (not listening) for the next start
        self._port_hold: PortHold | None = None
        self._api: Api | None = None
        self._snapshot_task: asyncio.Task[None] | None = None
        # The server's own files (CA, kubeconfig; the serving key only while the TLS context is
        # built) live in a private directory that exists while the server runs: stop() removes
        # it, start() makes it again at the same path. A finalizer removes it should the server
        # be dropped without stop().
        self._tmp = Path(tempfile.mkdtemp(prefix="mcr-envtest-"))
        self._tmp_cleanup = weakref.finalize(self, shutil.rmtree, self._tmp, ignore_errors=True)
        self._ca = certs.process_ca()
        self._serving = self._ca.serving(tuple(dict.fromkeys((host, "127.0.0.1", "::1", "localhost"))))
        self.ca_file = str(self._tmp / "ca.crt")
        self.kubeconfig_path = str(self._tmp / "kubeconfig")
        self._write_own_files()
        self.kubeconfig: dict[str, Any] = {}
        self.running = False
        self.loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ properties
    @property
    def url(self) -> str:
        """``https://127.0.0.1:<port>`` (``http://`` when https is off)."""
        scheme = "https" if self.https else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        """The CA certificate (PEM) clients should trust."""
        return self._ca.cert_pem

    @property
    def faults(self) -> Faults:
        """Fault injection and the request log (mcr-envtest only)."""
        if self.real:
            raise RealModeError("faults (fault injection, request log) are mcr-envtest only, not real-mode")
        return self._faults

    @property
    def store(self) -> Store | None:
        """The object store (None before the first start; mcr-envtest only)."""
        if self.real:
            raise RealModeError("store (direct object access) is mcr-envtest only, not real-mode")
        return self._store

    @property
    def control_plane(self) -> ControlPlane | None:
        """The real control plane this server holds (None in mcr-envtest mode or before start)."""
        return self._cp

    @property
    def logs(self) -> dict[str, Path]:
        """In real mode, the log file of each control-plane process by binary name (else empty)."""
        cp = self._cp
        if cp is None:
            return {}
        return {n: cp.directory / f"{n}.log" for n in ("kube-apiserver", "kube-controller-manager")}

    # ------------------------------------------------------------------ lifecycle
    def _fresh_state(self) -> None:
        self._store = Store(self.history_size)
        self.registry = Registry()
        self.writer = Writer(self._store, self.registry)
        self._collector = Collector(self.writer, owner_gc=self.owner_gc, root_ca=self._ca.cert_pem.decode())
        self.writer.on_crd_removed.append(self._on_crd_removed)
        loaded = persist.load_state(self.state_dir) if self.state_dir is not None else None
        if loaded is not None:
            self._store.load(loaded)
            for crd in self._store.list_objects("apiextensions.k8s.io", "customresourcedefinitions"):
                self.registry.add_crd(crd)
        self._bootstrap()

    def _bootstrap(self) -> None:
        assert self.writer is not None
        assert self.registry is not None
        assert self._store is not None
        ns_info = self.registry.lookup("", "v1", "namespaces")
        assert ns_info is not None
        for ns in IMMORTAL_NAMESPACES:
            if self._store.get("", "namespaces", "", ns) is None:
                self.writer.create(ns_info, {"metadata": {"name": ns}}, "")
        for info, obj in bootstrap.objects(self.registry):
            meta = obj["metadata"]
            if self._store.get(info.group, info.plural, meta.get("namespace", ""), meta["name"]) is None:
                self.writer.create(info, obj, meta.get("namespace", ""), manager="kube-apiserver")
        bootstrap.seed(self.writer)

    def _on_crd_removed(self, crd: dict[str, Any]) -> None:
        assert self._store is not None
        spec = crd.get("spec") or {}
        self._store.close_watchers((spec.get("group", ""), (spec.get("names") or {}).get("plural", "")))

    @property
    def work_dir(self) -> Path:
        """The private directory holding :attr:`ca_file` and :attr:`kubeconfig_path` while the
        server runs (removed by :meth:`stop`; ``state_dir`` is never inside it)."""
        return self._tmp

    def _write_own_files(self) -> None:
        self._tmp.mkdir(mode=0o700, parents=True, exist_ok=True)
        Path(self.ca_file).write_bytes(self._ca.cert_pem)

    def _remove_own_files(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        # load_cert_chain reads files only: the key exists on disk just for this call
        cert_file = self._tmp / "serving.crt"
        key_file = self._tmp / "serving.key"
        cert_file.write_bytes(self._serving.cert_pem)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(self._serving.key_pem)
            ctx.load_cert_chain(cert_file, key_file)
        finally:
            key_file.unlink(missing_ok=True)
            cert_file.unlink(missing_ok=True)
        ctx.load_verify_locations(cadata=self._ca.cert_pem.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    async def start(self) -> None:
        """Start serving (state is created on the first start, then kept)."""
        if self.running:
            return
        self.loop = asyncio.get_running_loop()
        self._write_own_files()
        if self.real:
            await self._start_real()
            return
        if self._store is None:
            self._fresh_state()
        assert self._store is not None
        assert self.registry is not None
        assert self.writer is not None
        assert self._collector is not None
        self._api = Api(
            self._store,
            self.registry,
            self.writer,
            self._faults,
            self.authenticator,
            Authorizer(self._store),
            host_port=f"{self.host}:{self.port}",
            anonymous=self.anonymous,
            watch_timeout=self.watch_timeout,
            bookmark_interval=self.bookmark_interval,
        )
        store = self._store
        self._faults._bind(self.loop, lambda: store.close_watchers(), store.compact)
        self._runner = web.AppRunner(
            self._api.make_app(), handle_signals=False, access_log=None, shutdown_timeout=1.0
        )
        await self._runner.setup()
        ssl_context = self._ssl_context() if self.https else None
        site: web.BaseSite
        if self._port_hold is not None:
            sock = self._port_hold.take()
            self._port_hold = None
            site = web.SockSite(self._runner, sock, ssl_context=ssl_context, backlog=1024)
        else:
            sock = None
            site = web.TCPSite(
                self._runner, self.host, self.port, ssl_context=ssl_context, reuse_address=True, backlog=1024
            )
        try:
            await site.start()
        except OSError:
            if sock is not None:
                sock.close()
            await self._runner.cleanup()
            self._runner = None
            raise
        server = site._server
        if self.port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            self.port = sockets[0].getsockname()[1]
        self._api.host_port = f"{self.host}:{self.port}"
        self._collector.start()
        self.kubeconfig = kubeconfig.build(
            server=self.url,
            ca_pem=self._ca.cert_pem if self.https else None,
            user="envtest-admin",
            token=self.admin_token,
            cluster_name=self.name,
        )
        kubeconfig.write(self.kubeconfig, self.kubeconfig_path)
        if self.state_dir is not None:
            self._snapshot_task = self.loop.create_task(self._snapshots(), name="mcr-envtest-snapshots")
        self.running = True

    async def _start_real(self) -> None:
        if self._cp is None:
            pool = default_pool()
            cp = await asyncio.to_thread(pool.acquire, Spec(self.anonymous, self.owner_gc, self.port))
            self._cp = cp
            self._cp_finalizer = weakref.finalize(self, pool.discard, cp)
            cp.bind(self.authenticator.static_user)
        else:
            await asyncio.to_thread(self._cp.start_processes)
        self.port = self._cp.port
        self.kubeconfig = kubeconfig.build(
            server=self.url,
            ca_pem=self._ca.cert_pem,
            user="envtest-admin",
            token=self.admin_token,
            cluster_name=self.name,
        )
        kubeconfig.write(self.kubeconfig, self.kubeconfig_path)
        self.running = True

    async def _snapshots(self) -> None:
        last = -1
        while True:
            await asyncio.sleep(self.snapshot_interval)
            if self._store is not None and self.state_dir is not None and self._store.rv != last:
                last = self._store.rv
                persist.save_state(self.state_dir, self._store.dump())

    async def stop(self) -> None:
        """Stop serving: open watches end cleanly, connections close; state is kept (and saved to
        ``state_dir`` when set). The files the server wrote for itself (:attr:`work_dir`: CA,
        kubeconfig) are removed; a later :meth:`start` writes them again at the same paths.
        Until then the port stays bound without listening (connections are refused, and no other
        socket can take the port), so the next start serves on it again. Idempotent."""
        await self._stop(keep_port=True)

    async def _stop(self, *, keep_port: bool) -> None:
        if not self.running:
            return
        self.running = False
        if self._cp is not None:
            await asyncio.to_thread(self._cp.stop_processes)
            self._remove_own_files()
            return
        assert self._api is not None
        assert self._store is not None
        self._api.shutting_down = True
        self._store.close_watchers()
        if self._snapshot_task is not None:
            self._snapshot_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._snapshot_task
            self._snapshot_task = None
        if self._collector is not None:
            await self._collector.stop()
        if self._runner is not None:
            await self._close_runner(self._runner)
            self._runner = None
            if keep_port:
                # without the hold the next start may find the port taken; it then says so
                with contextlib.suppress(OSError):
                    self._port_hold = await PortHold.acquire(self.host, self.port)
        if self.state_dir is not None:
            persist.save_state(self.state_dir, self._store.dump())
        self._remove_own_files()

    @staticmethod
    async def _close_runner(runner: web.AppRunner) -> None:
        # TLS close waits for the peer's close_notify, which idle pooled clients never send:
        # abort what is still open so no socket outlives the server.
        server = runner.server
        transports = [c.transport for c in (server.connections if server is not None else [])]
        await runner.cleanup()
        for t in transports:
            if t is not None:
                t.abort()
        await asyncio.sleep(0)

    async def close(self) -> None:
        """Stop for good (idempotent). Like :meth:`stop`; in real mode the control plane also goes
        back to the pool (reset to its fresh state for the next server), so a later :meth:`start`
        begins with a fresh control plane."""
        cp, self._cp = self._cp, None
        if cp is None:
            await self._stop(keep_port=False)
            if self._port_hold is not None:
                self._port_hold.release()
                self._port_hold = None
            return
        assert self._cp_finalizer is not None
        self._cp_finalizer.detach()
        self.running = False
        self._remove_own_files()
        pool = default_pool()
        if cp.running:
            await asyncio.to_thread(pool.release, cp)
        else:
            await asyncio.to_thread(pool.discard, cp)

    async def restart(self, keep_state: bool = True) -> None:
        """Stop and start again on the same port; ``keep_state=False`` starts from an empty store
        whose RVs are all newer than before (and deletes the ``state_dir`` snapshot; mcr-envtest
        only: :class:`~mcr_envtest.real.RealModeError` in real mode)."""
        if not keep_state and self.real:
            raise RealModeError("restart(keep_state=False) is not available against a real kube-apiserver")
        await self.stop()
        if not keep_state:
            if self.state_dir is not None:
                persist.state_file(self.state_dir).unlink(missing_ok=True)
            self._store = None
        await self.start()

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ------------------------------------------------------------------ users
    def add_user(
        self,
        name: str,
        groups: tuple[str, ...] | list[str] = (),
        token: str | None = None,
        *,
        client_cert: bool = False,
    ) -> dict[str, Any]:
        """Register a user and return a kubeconfig dict for it (bearer token, or a client
        certificate when ``client_cert``). Permissions come from RBAC objects in the store
        unless ``groups`` contains ``system:masters``."""
        all_groups = (*tuple(groups), "system:authenticated")
        if client_cert:
            pair = self._ca.client(name, tuple(groups))
            return kubeconfig.build(
                server=self.url,
                ca_pem=self._ca.cert_pem if self.https else None,
                user=name,
                client_cert_pem=pair.cert_pem,
                client_key_pem=pair.key_pem,
                cluster_name=self.name,
            )
        token = token or secrets.token_urlsafe(24)
        self.authenticator.add_token(token, UserInfo(name, all_groups))
        return kubeconfig.build(
            server=self.url,
            ca_pem=self._ca.cert_pem if self.https else None,
            user=name,
            token=token,
            cluster_name=self.name,
        )
