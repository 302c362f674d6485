"""Cluster: everything mcr needs to work with one API server, with one lifecycle.

A :class:`Cluster` bundles the connection settings (:class:`~mcr.rest.config.RestConfig`), one
:class:`~mcr.rest.transport.Transport` (one aiohttp session and TLS context), the
:class:`~mcr.rest.mapper.RESTMapper`, the shared :class:`~mcr.cache.InformerCache`, a client whose
reads come from that cache (writes go to the server), an uncached ``api_reader`` client, the
cache's field indexer and event recorders. Providers hand clusters out; controllers engage them.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from mcr.cache import CacheOptions, InformerCache
from mcr.client import Client
from mcr.errors import MCRError
from mcr.recorder import EventRecorder
from mcr.rest.config import RestConfig
from mcr.rest.mapper import RESTMapper

__all__ = ["Cluster"]

log = logging.getLogger("mcr.cluster")


class Cluster:
    """One API server: config, transport, cache, clients, REST mapper and event recorders.

    * ``client`` reads from the cache (informers start lazily on the first read of a kind and
      the read waits for their sync) and writes to the server; ``api_reader`` reads from the
      server.
    * :meth:`start` starts the cache and returns at once (informers sync in the background; use
      :meth:`wait_for_cache_sync`). Calling it again does nothing.
    * :meth:`stop` flushes and closes the event recorders, stops every informer (closing its
      watch) and closes the transport, so no task or connection of this cluster remains. It is
      idempotent, and a cancelled ``stop()`` still completes the shutdown; a stopped cluster
      cannot be started again (build a new one).
    * ``async with Cluster(...) as cluster:`` starts and stops it.

    ``cache_options`` configures the cache (:class:`~mcr.cache.CacheOptions`), ``field_manager``
    is the default field manager of the clients' writes.
    """

    def __init__(
        self,
        config: RestConfig,
        *,
        name: str = "",
        cache_options: CacheOptions | None = None,
        field_manager: str | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.transport = config.transport(name)
        self.rest_mapper = RESTMapper(self.transport)
        self.cache = InformerCache(self.transport, self.rest_mapper, cache_options)
        self.api_reader = Client(self.transport, rest_mapper=self.rest_mapper, field_manager=field_manager)
        self.client = self.api_reader.with_reader(self.cache)
        self._recorders: dict[str, EventRecorder] = {}
        self._started = False
        self._stopped = False
        self._stop_task: asyncio.Task[None] | None = None

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | os.PathLike[str] | Mapping[str, Any],
        context: str | None = None,
        name: str = "",
        **options: Any,
    ) -> Cluster:
        """A cluster for ``context`` (default: current) of a kubeconfig file path or dict.

        ``options`` are :class:`Cluster`'s keyword arguments (``cache_options``, ``field_manager``).
        Raises :class:`~mcr.errors.ConfigError` naming the file, context and field at fault.
        """
        return cls(RestConfig.from_kubeconfig(kubeconfig, context=context), name=name, **options)

    @classmethod
    async def from_kubeconfig_async(
        cls,
        kubeconfig: str | os.PathLike[str] | Mapping[str, Any],
        context: str | None = None,
        name: str = "",
        **options: Any,
    ) -> Cluster:
        """:meth:`from_kubeconfig` with the kubeconfig parsed in a worker thread (use it on the loop)."""
        config = await RestConfig.from_kubeconfig_async(kubeconfig, context=context)
        return cls(config, name=name, **options)

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "started" if self._started else "new"
        return f"Cluster(name={self.name!r}, host={self.config.host!r}, {state})"

    # -- parts -------------------------------------------------------------------------------
    @property
    def field_indexer(self) -> InformerCache:
        """The object with ``index_field(kind, field, extract)``: the cache."""
        return self.cache

    async def index_field(self, kind: Any, field: str, extract: Callable[[Any], list[str]]) -> None:
        """Index ``kind`` by ``extract(obj)`` (a dict) for ``field_selector`` lists on the cache."""
        await self.cache.index_field(kind, field, extract)

    def event_recorder(self, component: str) -> EventRecorder:
        """The event recorder of ``component`` (one per name, closed by :meth:`stop`)."""
        recorder = self._recorders.get(component)
        if recorder is None:
            if self._stopped:
                raise MCRError(f"cluster {self.name!r} is stopped: cannot record events for {component!r}")
            recorder = EventRecorder(self.api_reader, component)
            self._recorders[component] = recorder
        return recorder

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._started and not self._stopped

    async def start(self) -> None:
        """Start the cache (informers requested so far and later ones). Idempotent.

        Raises :class:`~mcr.errors.MCRError` if the cluster was stopped.
        """
        if self._stopped:
            raise MCRError(f"cluster {self.name!r} was stopped and cannot be started again")
        if not self._started:
            self._started = True
            await self.cache.start()

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """Wait until every started informer has synced; ``False`` when ``timeout`` passes first."""
        return await self.cache.wait_for_cache_sync(timeout)

    async def stop(self) -> None:
        """Close recorders, informers and the transport; returns when nothing of it runs. Idempotent.

        The shutdown runs in a task of its own that cancelling the caller does not interrupt: a
        cancelled ``stop()`` first waits for the shutdown to finish (every watch and connection
        closed), then re-raises ``CancelledError``. Cancelled a second time, it stops waiting; the
        shutdown still completes, and the next ``stop()`` waits for it.
        """
        task = self._stop_task
        if task is None:
            self._stopped = True
            task = self._stop_task = asyncio.get_running_loop().create_task(
                self._shutdown(), name=f"stop cluster {self.name!r}"
            )
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                await asyncio.wait((task,))
            raise

    async def _shutdown(self) -> None:
        """Recorders, then informers, then the transport: every step runs even if one fails.

        A cancellation is held until the remaining steps ran, then re-raised; a failing step is
        logged and the first failure re-raised at the end. A coroutine being closed
        (``GeneratorExit``) stops at once, as it may not await.
        """
        cancelled: asyncio.CancelledError | None = None
        failures: list[Exception] = []
        for step in (self._close_recorders, self.cache.stop, self.transport.close):
            try:
                await step()
            except asyncio.CancelledError as exc:
                cancelled = exc
            except Exception as exc:  # noqa: BLE001 - logged and re-raised after the other steps
                log.warning("cluster %r: %s failed while stopping: %r", self.name, step.__name__, exc)
                failures.append(exc)
        if cancelled is not None:
            raise cancelled
        if failures:
            raise failures[0]

    async def _close_recorders(self) -> None:
        recorders = list(self._recorders.values())
        if recorders:
            await asyncio.gather(*(r.close() for r in recorders))

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
