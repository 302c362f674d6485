"""Clusters built from sources (a Secret, a Cluster API object, a ClusterProfile), each rebuilt only
when what it was built from really changed.

Providers that turn objects into clusters share the same bookkeeping: remember a fingerprint of
the connection settings each cluster was built from, so a re-read of an unchanged source (a resync,
an annotation edit, a status heartbeat) keeps the engaged cluster; rebuild and re-engage when the
fingerprint differs; and when a source cannot yield a cluster (its kubeconfig is missing or broken),
disengage that one cluster, report why — naming the source — and leave every other cluster alone.
:class:`SourcedClusters` does that on top of :class:`~mcr.providers.Clusters`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from mcr.errors import ConfigError
from mcr.providers.clusters import Clusters, Extract
from mcr.rest.auth import ExecCredentials, ProviderCredentials, TokenFile

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.multicluster import Aware, ClusterName
    from mcr.rest.config import RestConfig

__all__ = [
    "ClusterFactory",
    "Problem",
    "SourcedClusters",
    "fingerprint",
    "refuse_local_credentials",
]


@dataclass(frozen=True)
class Problem:
    """Why ``source`` (e.g. ``"Secret fleet/prod"``) yields no cluster ``cluster`` right now.

    ``reason`` never contains credential values.
    """

    cluster: str
    source: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source} (cluster {self.cluster!r}): {self.reason}"


def _canonical(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$bytes": base64.b64encode(bytes(value)).decode()}
    raise TypeError(f"cannot fingerprint a {type(value).__name__}")


def fingerprint(*parts: Any) -> str:
    """A SHA-256 hex digest of ``parts`` (JSON-like values, bytes allowed), independent of dict order.

    Two sources with the same fingerprint connect the same way; compare fingerprints, not objects
    (settings holding functions or credential objects never compare equal).
    """
    data = orjson.dumps(list(parts), default=_canonical, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest()


Build = Callable[[], Awaitable["Cluster"]]


class SourcedClusters:
    """Named clusters, each built from a source and rebuilt only when the source's fingerprint changes.

    ``provider`` names the provider in log lines; ``start_clusters`` is passed to
    :class:`~mcr.providers.Clusters` (by default each cluster is started before it is engaged and
    stopped after its disengagement).

    Calls for one name are serialised; calls for different names run concurrently. Nothing here
    raises for a bad source: problems are logged once (when they appear and when they clear) and
    listed by :meth:`problems`.
    """

    def __init__(self, *, provider: str, logger: logging.Logger, start_clusters: bool = True) -> None:
        self.clusters = Clusters(start_clusters=start_clusters)
        self._provider = provider
        self._log = logger
        self._fingerprints: dict[str, str] = {}
        self._sources: dict[str, str] = {}
        self._problems: dict[str, tuple[str | None, Problem]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    # -- queries ---------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The registered cluster names, sorted."""
        return self.clusters.names()

    def source_of(self, name: ClusterName) -> str | None:
        """The source the cluster ``name`` was built from (``None`` if there is no such cluster)."""
        return self._sources.get(name) if name in self.clusters else None

    def fingerprint_of(self, name: ClusterName) -> str | None:
        """The fingerprint of the settings cluster ``name`` was built from, if it is registered."""
        return self._fingerprints.get(name) if name in self.clusters else None

    def problems(self) -> list[Problem]:
        """Sources that yield no cluster right now, sorted by cluster name."""
        return [p for _, (_, p) in sorted(self._problems.items())]

    async def get(self, name: ClusterName) -> Cluster:
        """The cluster ``name``; :class:`~mcr.ClusterNotFoundError` otherwise."""
        return await self.clusters.get(name)

    async def index_field(self, kind: Any, field: str, extract: Extract) -> None:
        """Index ``field`` on every current and future cluster (see :meth:`Clusters.index_field`)."""
        await self.clusters.index_field(kind, field, extract)

    async def run(self, aware: Aware) -> None:
        """Engage the clusters with ``aware`` until cancelled (see :meth:`Clusters.run`)."""
        await self.clusters.run(aware)

    # -- changes ---------------------------------------------------------------------------------

    async def apply(self, name: ClusterName, *, source: str, fingerprint: str, build: Build) -> bool:
        """Make ``name`` the cluster ``build()`` returns, unless it was built from ``fingerprint``.

        Returns ``True`` when a cluster was (re-)engaged. Nothing is built when the registered
        cluster has this fingerprint, nor when the last build from exactly this fingerprint failed.
        If ``build()`` raises (an unusable kubeconfig, say), the problem is recorded naming
        ``source``, a cluster still registered under ``name`` is disengaged (its settings are no
        longer what the source says), and ``False`` is returned. ``CancelledError`` propagates.
        """
        async with self._lock(name):
            if self._fingerprints.get(name) == fingerprint and name in self.clusters:
                self._clear_problem(name)
                self._sources[name] = source
                return False
            failed = self._problems.get(name)
            if failed is not None and failed[0] == fingerprint:
                return False
            try:
                cluster = await build()
            except Exception as exc:  # noqa: BLE001 -- a bad source is reported, never raised
                await self._fail(name, fingerprint, Problem(name, source, _reason(exc)))
                return False
            replaced = name in self.clusters
            self._clear_problem(name)
            await self.clusters.add_or_replace(name, cluster)
            self._fingerprints[name] = fingerprint
            self._sources[name] = source
            self._log.info(
                "%s provider: %s cluster %r from %s",
                self._provider,
                "re-engaging" if replaced else "engaging",
                name,
                source,
                extra={"cluster": name},
            )
            return True

    async def reject(self, name: ClusterName, *, source: str, reason: str) -> bool:
        """``source`` yields no cluster (e.g. its kubeconfig key is missing): disengage ``name``.

        The problem is recorded and logged once. Returns whether a cluster was disengaged.
        """
        async with self._lock(name):
            return await self._fail(name, None, Problem(name, source, reason))

    async def discard(self, name: ClusterName, *, why: str = "its source is gone") -> bool:
        """The source of ``name`` is gone (deleted, no longer selected): disengage it, forget its problems.

        Returns whether a cluster was disengaged. Idempotent.
        """
        async with self._lock(name):
            if self._problems.pop(name, None) is not None:
                self._log.info("%s provider: %s no longer applies", self._provider, name)
            self._fingerprints.pop(name, None)
            self._sources.pop(name, None)
            # Said before it happens: the disengagement runs the cluster's teardown, which a
            # reader of the log should see as the consequence of this line, not before it.
            if name in self.clusters:
                self._log.info(
                    "%s provider: disengaging cluster %r: %s",
                    self._provider,
                    name,
                    why,
                    extra={"cluster": name},
                )
            return await self.clusters.remove(name)

    # -- internals -------------------------------------------------------------------------------

    def _lock(self, name: str) -> asyncio.Lock:
        # One lock per name ever seen, kept (a lock is small): dropping it while a caller waits on
        # it would let a later caller take a fresh lock and run concurrently with that one.
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        return lock

    async def _fail(self, name: str, fingerprint: str | None, problem: Problem) -> bool:
        old = self._problems.get(name)
        self._problems[name] = (fingerprint, problem)
        if old is None or old[1] != problem:
            self._log.warning("%s provider: %s", self._provider, problem, extra={"cluster": name})
        self._fingerprints.pop(name, None)
        removed = await self.clusters.remove(name)
        if removed:
            self._log.warning(
                "%s provider: disengaged cluster %r until %s is usable again",
                self._provider,
                name,
                problem.source,
                extra={"cluster": name},
            )
        return removed

    def _clear_problem(self, name: str) -> None:
        old = self._problems.pop(name, None)
        if old is not None:
            self._log.info("%s provider: resolved: %s", self._provider, old[1])


def _reason(exc: Exception) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


ClusterFactory = Callable[["RestConfig", str], "Cluster"]
"""``factory(config, cluster_name)`` → a new (not started) cluster."""


def refuse_local_credentials(config: RestConfig, source: str) -> None:
    """Refuse credentials that act on the controller's own machine: an exec plugin (a command it
    would run), an auth provider (its own login) or a token file (its own file system, e.g. its
    ServiceAccount token). A kubeconfig read from a cluster (a Secret) must not be able to use
    them: whoever can write that Secret could run commands in the controller or send its token to
    a server of their choosing. :class:`~mcr.ConfigError` names ``source``."""
    for kind, what in (
        (ExecCredentials, "an exec plugin (users[].exec), a command the controller would run"),
        (ProviderCredentials, "an auth provider (users[].auth-provider), the controller's own login"),
        (TokenFile, "a token file (users[].tokenFile) of the controller's own file system"),
    ):
        if isinstance(config.credentials, kind):
            raise ConfigError(
                f"uses {what}; refused for kubeconfigs read from a cluster "
                "(allow_local_credentials=True trusts them)",
                source=source,
            )
