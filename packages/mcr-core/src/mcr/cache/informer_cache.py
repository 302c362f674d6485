"""InformerCache: one shared informer per kind, started lazily, and the reader a Client reads through."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcr.cache.errors import CacheNotStartedError, CacheSyncTimeoutError, InformerNotFoundError
from mcr.cache.informer import Informer
from mcr.cache.options import CacheOptions
from mcr.cache.reader import CacheReader, field_index_name
from mcr.rest.kinds import GVK, gvk_of

if TYPE_CHECKING:
    from mcr.rest.mapper import RESTMapper
    from mcr.rest.transport import Transport

__all__ = ["InformerCache"]

log = logging.getLogger("mcr.cache")

Obj = dict[str, Any]
AnyList = list[Any]


class InformerCache:
    """Shared informers of one cluster, keyed by GVK, and a reader over them.

    * :meth:`get_informer` returns the kind's informer, creating it on first use; it runs once
      the cache is started (immediately if it already is).
    * :meth:`get` / :meth:`list` serve reads from memory (this is the ``reader`` a
      :class:`mcr.client.Client` takes): the first read of a kind starts its informer and waits
      for it to sync (at most ``options.sync_timeout``).
    * :meth:`stop` cancels and awaits every informer task: no watch stays open. ``start`` after
      ``stop`` starts the informers again (they relist).
    """

    def __init__(
        self,
        transport: Transport,
        rest_mapper: RESTMapper,
        options: CacheOptions | None = None,
    ) -> None:
        self._transport = transport
        self._mapper = rest_mapper
        self.options = options if options is not None else CacheOptions()
        self._by_gvk = self.options.by_gvk()
        self._informers: dict[GVK, Informer] = {}
        self._pending_indexers: dict[GVK, dict[str, Callable[[Obj], list[str]]]] = {}
        self._lock = asyncio.Lock()
        self._started = False
        self._gc_acquired = False

    @property
    def cluster_name(self) -> str:
        return str(self._transport.cluster_name)

    @property
    def started(self) -> bool:
        return self._started

    def informers(self) -> Mapping[GVK, Informer]:
        """The informers created so far (a snapshot)."""
        return dict(self._informers)

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Start every informer created so far and every later one; returns at once. Idempotent."""
        if self._started:
            return
        self._started = True
        policy = self.options.gc_policy
        if policy is not None and not self._gc_acquired:
            policy.acquire()
            self._gc_acquired = True
        for inf in self._informers.values():
            inf.start()

    async def stop(self) -> None:
        """Stop every informer and wait for its tasks and watch connections to end. Idempotent."""
        self._started = False
        if self._gc_acquired and self.options.gc_policy is not None:
            self.options.gc_policy.release(sum(len(inf) for inf in self._informers.values()))
            self._gc_acquired = False
        # Cancel everything before the first suspension: a cancelled stop() still stops them all.
        tasks = [task for inf in self._informers.values() for task in inf.cancel()]
        if tasks:
            await asyncio.wait(tasks)

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """Wait until every started informer has synced; ``False`` if ``timeout`` passes first."""
        informers = [inf for inf in self._informers.values() if inf.started]
        try:
            async with asyncio.timeout(timeout):
                for inf in informers:
                    await inf.wait_for_sync(None)
        except TimeoutError:
            return False
        return True

    # -- informers ---------------------------------------------------------------------------
    async def get_informer(self, kind: Any, *, start: bool = True) -> Informer:
        """The shared informer of ``kind`` (anything :func:`mcr.rest.kinds.gvk_of` accepts).

        Created on first use (resolving the kind through the REST mapper, which raises
        :class:`mcr.errors.NoKindMatchError` for a kind the cluster does not serve). With
        ``start`` and a started cache the informer is started; this call does not wait for sync.
        """
        gvk = gvk_of(kind)
        inf = self._informers.get(gvk)
        if inf is None:
            async with self._lock:
                inf = self._informers.get(gvk)
                if inf is None:
                    inf = await self._create(gvk)
        if start and self._started:
            inf.start()
        return inf

    async def _create(self, gvk: GVK) -> Informer:
        mapping = await self._mapper.mapping(gvk)
        inf = Informer(
            self._transport,
            gvk,
            mapping.gvr,
            namespaced=mapping.namespaced,
            scopes=self.options.scopes_for(gvk),
            config=self.options.reflector_config(),
            # Weakly: the cache holds its informers, an informer must not hold the cache (a cycle
            # would keep a stopped cache's objects until the cyclic collector runs).
            on_synced=_weak_callback(self._informer_synced),
            resync_period=self.options.sync_period_for(gvk),
        )
        pending = self._pending_indexers.pop(gvk, None)
        if pending:
            inf.add_indexers(pending)
        self._informers[gvk] = inf
        return inf

    def _informer_synced(self, informer: Informer) -> None:
        log.debug("%r synced", informer)
        policy = self.options.gc_policy
        if policy is not None and self._gc_acquired:
            policy.after_sync(len(informer))

    async def index_field(self, kind: Any, field_name: str, extract: Callable[[Obj], list[str]]) -> None:
        """Index ``kind``'s objects by ``extract(obj)`` so lists can select ``field_name=value``.

        ``extract`` receives the cached dict (never a model) and returns the values. Registering
        the same field twice for a kind raises :class:`mcr.cache.IndexerConflictError`.
        """
        inf = await self.get_informer(kind, start=False)
        inf.add_indexers({field_index_name(field_name): extract})

    # -- reads -------------------------------------------------------------------------------
    async def _reader(self, kind: Any) -> CacheReader:
        if not self._started:
            raise CacheNotStartedError(
                f"the cache of cluster {self.cluster_name!r} is not started; start it before reading"
            )
        gvk = gvk_of(kind)
        if self.options.reader_fail_on_missing_informer and gvk not in self._informers:
            raise InformerNotFoundError(
                f"no informer for {gvk} in the cache of cluster {self.cluster_name!r}"
            )
        inf = await self.get_informer(gvk)
        if not inf.has_synced and not await inf.wait_for_sync(self.options.sync_timeout):
            raise CacheSyncTimeoutError(str(gvk), self.cluster_name, self.options.sync_timeout)
        no_copy = self.options.disables_deep_copy(self._by_gvk.get(gvk))
        return CacheReader(inf, unsafe_disable_deep_copy=no_copy, cluster=self.cluster_name)

    async def get(self, kind: Any, name: str, namespace: str | None = None) -> Any:
        """The cached object (a copy, or a model for a model class); ``NotFoundError`` if absent."""
        reader = await self._reader(kind)
        return reader.get(kind, name, namespace)

    async def list(
        self,
        kind: Any,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> AnyList:
        """Cached objects of ``kind``, filtered like a server list (see :class:`CacheReader`)."""
        reader = await self._reader(kind)
        return reader.list(
            kind,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
        )


def _weak_callback(method: Callable[[Informer], None]) -> Callable[[Informer], None]:
    """``method`` (a bound method) called through a weak reference to its object."""
    ref = weakref.WeakMethod(method)

    def call(informer: Informer) -> None:
        target = ref()
        if target is not None:
            target(informer)

    return call
