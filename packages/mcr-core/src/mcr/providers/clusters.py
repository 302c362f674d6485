"""Engagement bookkeeping shared by providers, and the ``clusters`` provider built on it.

:class:`Clusters` owns one engagement task per cluster name: it starts the cluster, applies the
stored field indexes, calls ``aware.engage(name, cluster)`` and, when the cluster goes away or is
replaced, cancels that task (the disengagement) and stops the cluster. Providers that discover
clusters (files, Secrets, cloud APIs) keep a :class:`Clusters` and call :meth:`Clusters.add`,
:meth:`Clusters.add_or_replace` and :meth:`Clusters.remove` as they see changes.

:class:`ClustersProvider` exposes that directly: clusters are added and removed by the program at
runtime. Tests and demos use it as a scriptable provider.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcr.errors import ClusterNotFoundError
from mcr.providers.tasks import cancel_and_wait
from mcr.rest.kinds import gvk_of

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.multicluster import Aware, ClusterName

__all__ = ["Clusters", "ClustersProvider"]

log = logging.getLogger("mcr.providers")

Extract = Callable[[Any], list[str]]


_INDEX_RETRY_INITIAL = 1.0
_INDEX_RETRY_MAX = 30.0


@dataclass(eq=False)
class _Entry:
    name: str
    cluster: Cluster
    task: asyncio.Task[None] | None = None
    applied: int = 0  # how many of the stored indexes this cluster has (they apply in order)
    index_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # a new index wants applying


class Clusters:
    """A named set of clusters, each engaged with an :class:`~mcr.multicluster.Aware` while present.

    ``start_clusters``: when true (the default), the engagement task awaits ``cluster.start()``
    before engaging and ``cluster.stop()`` after the disengagement, so the set owns each cluster's
    lifecycle. Pass false when the caller starts and stops the clusters itself.

    Contract:

    * :meth:`run` binds the aware and runs until cancelled; clusters added before it are engaged
      when it starts. Cancelling it disengages every cluster (their tasks are cancelled and awaited)
      and re-raises ``CancelledError``. Clusters stay registered, so a later :meth:`run` re-engages
      them; two concurrent :meth:`run` calls raise ``RuntimeError``.
    * Each engagement runs in its own task, so a slow or unreachable cluster delays no other. If
      starting the cluster or the engagement raises, the error is logged with the cluster's name
      and the cluster is dropped from the set (a provider may add it again later).
    * Field indexes given to :meth:`index_field` are applied to every current cluster and to every
      cluster added later, before the cluster is engaged. Applying one needs the cluster's
      discovery (a request), so it happens in the cluster's own task: if the cluster cannot be
      reached, it is engaged anyway (the aware reports and retries its own failures) and the
      indexes are retried with backoff until they are applied.
    """

    def __init__(self, *, start_clusters: bool = True) -> None:
        self._start_clusters = start_clusters
        self._entries: dict[str, _Entry] = {}
        self._indexes: list[tuple[Any, str, Extract]] = []
        self._aware: Aware | None = None
        # Serialises membership changes; never held across a request to a cluster.
        self._lock = asyncio.Lock()

    # -- queries ---------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The names of the registered clusters, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def peek(self, name: ClusterName) -> Cluster | None:
        """The cluster registered under ``name``, or ``None``."""
        entry = self._entries.get(name)
        return entry.cluster if entry is not None else None

    async def get(self, name: ClusterName) -> Cluster:
        """The cluster registered under ``name``; raises :class:`~mcr.ClusterNotFoundError` otherwise."""
        entry = self._entries.get(name)
        if entry is None:
            raise ClusterNotFoundError(name)
        return entry.cluster

    @property
    def running(self) -> bool:
        """Whether :meth:`run` is active (clusters added now are engaged at once)."""
        return self._aware is not None

    # -- membership ------------------------------------------------------------------------------

    async def add(self, name: ClusterName, cluster: Cluster) -> None:
        """Register ``cluster`` as ``name`` and engage it if :meth:`run` is active.

        Raises ``ValueError`` if ``name`` is already registered (use :meth:`add_or_replace`).
        Stored field indexes are applied first; if that raises, nothing is registered.
        """
        async with self._lock:
            if name in self._entries:
                raise ValueError(f"cluster {name!r} is already registered")
            await self._add_locked(name, cluster)

    async def add_or_replace(
        self,
        name: ClusterName,
        cluster: Cluster,
        *,
        equal: Callable[[Cluster, Cluster], bool] | None = None,
    ) -> bool:
        """Register ``cluster`` as ``name``, replacing a different cluster of that name.

        The registered cluster is kept (and this returns ``False``) when it is ``cluster`` itself or
        ``equal(old, new)`` is true. Otherwise the old cluster is disengaged and stopped first (this
        waits for its teardown), then the new one is registered and engaged; returns ``True``.
        """
        async with self._lock:
            old = self._entries.get(name)
            if old is not None:
                if old.cluster is cluster or (equal is not None and equal(old.cluster, cluster)):
                    return False
                await self._remove_locked(old)
            await self._add_locked(name, cluster)
            return True

    async def remove(self, name: ClusterName) -> bool:
        """Disengage and forget the cluster ``name``; waits until its teardown finished.

        Returns whether a cluster was registered under that name (removing twice is harmless).
        """
        async with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                return False
            await self._remove_locked(entry)
            return True

    async def remove_if(self, name: ClusterName, cluster: Cluster) -> bool:
        """Deprecated (removed in a later release): like :meth:`remove`, but only if ``name`` still
        refers to this very ``cluster``."""
        warnings.warn("Clusters.remove_if is deprecated", DeprecationWarning, stacklevel=2)
        async with self._lock:
            entry = self._entries.get(name)
            if entry is None or entry.cluster is not cluster:
                return False
            await self._remove_locked(entry)
            return True

    async def index_field(self, kind: Any, field: str, extract: Extract) -> None:
        """Register a field index on every current cluster and on every cluster added later.

        Returns once every current cluster has the index. Registering the same field of the same
        kind twice raises ``ValueError`` (nothing changes). If applying it to some current clusters
        fails, the index stays registered, the engaged ones among them keep retrying, and an
        ``ExceptionGroup`` naming each failed cluster is raised.
        """
        key = (_kind_key(kind), field)
        if any((_kind_key(k), f) == key for k, f, _ in self._indexes):
            raise ValueError(f"field {field!r} of {kind!r} is already indexed")
        self._indexes.append((kind, field, extract))
        entries = list(self._entries.values())
        for entry in entries:
            entry.wake.set()
        results = await asyncio.gather(*(self._apply_indexes(e) for e in entries), return_exceptions=True)
        errors: list[Exception] = []
        for entry, result in zip(entries, results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, Exception):
                result.add_note(f"while indexing field {field!r} on cluster {entry.name!r}")
                errors.append(result)
            elif isinstance(result, BaseException):
                raise result
        if errors:
            raise ExceptionGroup(f"indexing field {field!r} failed on some clusters", errors)

    # -- running ---------------------------------------------------------------------------------

    async def run(self, aware: Aware) -> None:
        """Engage every registered cluster with ``aware`` and keep engaging added ones until cancelled."""
        async with self._lock:
            if self._aware is not None:
                raise RuntimeError("this cluster set is already running")
            self._aware = aware
            for entry in self._entries.values():
                self._spawn(entry)
        try:
            await asyncio.Future()
        finally:
            async with self._lock:
                self._aware = None
                tasks = [e.task for e in self._entries.values() if e.task is not None]
                for entry in self._entries.values():
                    entry.task = None
                await cancel_and_wait(tasks)

    # -- internals -------------------------------------------------------------------------------

    async def _add_locked(self, name: str, cluster: Cluster) -> None:
        entry = _Entry(name, cluster)
        self._entries[name] = entry
        if self._aware is not None:
            self._spawn(entry)

    async def _remove_locked(self, entry: _Entry) -> None:
        del self._entries[entry.name]
        if entry.task is not None:
            await cancel_and_wait([entry.task])
            entry.task = None

    def _spawn(self, entry: _Entry) -> None:
        assert self._aware is not None
        entry.task = asyncio.create_task(
            self._engagement(entry, self._aware), name=f"mcr-engage[{entry.name}]"
        )

    async def _apply_indexes(self, entry: _Entry) -> None:
        """Apply the stored indexes ``entry`` lacks, in order; raises the first failure."""
        async with entry.index_lock:
            while entry.applied < len(self._indexes):
                kind, field_name, extract = self._indexes[entry.applied]
                await entry.cluster.index_field(kind, field_name, extract)
                entry.applied += 1

    async def _keep_indexed(self, entry: _Entry, first_pass: asyncio.Event) -> None:
        """Apply indexes as they are registered, retrying failures with backoff, until cancelled."""
        delay = _INDEX_RETRY_INITIAL
        while True:
            entry.wake.clear()
            try:
                await self._apply_indexes(entry)
            except Exception as exc:  # noqa: BLE001 -- logged and retried
                log.warning(
                    "indexing cluster %r failed (%s: %s); retrying in %.0fs",
                    entry.name,
                    type(exc).__name__,
                    exc,
                    delay,
                )
                first_pass.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, _INDEX_RETRY_MAX)
                continue
            delay = _INDEX_RETRY_INITIAL
            first_pass.set()
            await entry.wake.wait()

    async def _engagement(self, entry: _Entry, aware: Aware) -> None:
        """One cluster's engagement: start, index, engage until cancelled, then stop."""
        started = False
        keeper: asyncio.Task[None] | None = None
        try:
            if self._start_clusters:
                await entry.cluster.start()
                started = True
            first_pass = asyncio.Event()
            keeper = asyncio.create_task(
                self._keep_indexed(entry, first_pass), name=f"mcr-index[{entry.name}]"
            )
            await first_pass.wait()
            await aware.engage(entry.name, entry.cluster)
            # The aware finished with the cluster on its own; it stays registered until removed.
            await asyncio.Future()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("engaging cluster %r failed; dropping it", entry.name)
            if self._entries.get(entry.name) is entry:
                del self._entries[entry.name]
        finally:
            if keeper is not None:
                await cancel_and_wait([keeper])
            if started:
                await _stop_cluster(entry)


def _kind_key(kind: Any) -> Any:
    """A comparable identity of a kind-like (GVK when resolvable, else the value itself)."""
    try:
        return gvk_of(kind)
    except Exception:  # noqa: BLE001 -- unresolvable kinds compare as given
        return kind


async def _stop_cluster(entry: _Entry) -> None:
    try:
        await entry.cluster.stop()
    except Exception:
        log.exception("stopping cluster %r failed", entry.name)


class ClustersProvider:
    """A provider whose clusters the program adds and removes at runtime.

    ``await provider.add(name, cluster)`` engages a cluster (at once if the provider runs, else when
    :meth:`start` is called), ``await provider.remove(name)`` disengages it, and
    :meth:`add_or_replace` re-engages ``name`` with a new cluster object. By default the provider
    starts each cluster before engaging it and stops it after the disengagement
    (``start_clusters=False`` leaves that to the caller). Works without plugin discovery; the
    ``clusters`` plugin name creates one.
    """

    def __init__(self, *, start_clusters: bool = True) -> None:
        self._clusters = Clusters(start_clusters=start_clusters)

    def names(self) -> list[str]:
        """The registered cluster names, sorted."""
        return self._clusters.names()

    async def add(self, name: ClusterName, cluster: Cluster) -> None:
        """Add ``cluster`` as ``name``; ``ValueError`` if the name is taken."""
        await self._clusters.add(name, cluster)

    async def add_or_replace(self, name: ClusterName, cluster: Cluster) -> bool:
        """Add ``cluster`` as ``name``, replacing (disengaging) another cluster object of that name.

        Returns ``False`` when ``cluster`` is already the one registered under ``name``.
        """
        return await self._clusters.add_or_replace(name, cluster)

    async def remove(self, name: ClusterName) -> bool:
        """Disengage and forget ``name``; returns whether it was registered. Idempotent."""
        return await self._clusters.remove(name)

    async def get(self, name: ClusterName) -> Cluster:
        """The cluster named ``name``; :class:`~mcr.ClusterNotFoundError` if there is none."""
        return await self._clusters.get(name)

    async def index_field(self, kind: Any, field: str, extract: Extract) -> None:
        """Index ``field`` on every current and future cluster."""
        await self._clusters.index_field(kind, field, extract)

    async def start(self, aware: Aware) -> None:
        """Engage the clusters with ``aware`` until cancelled (then every cluster is disengaged)."""
        await self._clusters.run(aware)
