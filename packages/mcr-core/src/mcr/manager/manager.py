"""The Manager: runs controllers and other runnables across the local cluster and a provider's fleet.

Start order (controller-runtime's): HTTP servers (metrics, probes) → the local cluster (its cache)
→ the provider and coordinator → runnables that do not need leadership → leader election → once
elected, runnables that need it. Aware runnables are engaged with every engaged cluster as soon as
they run, including clusters engaged before they were added.

Unlike upstream, the provider runs on every replica (not only on the leader): clusters are known
and cached before a hand-over, while the controllers that need leadership are engaged with them
only once elected. The local cluster ``""`` is engaged directly, never through the coordinator.

Stop order, bounded by ``graceful_shutdown_timeout``: runnables without leadership → leader-election
runnables (controllers drain their in-flight reconciles) → every cluster engagement, the provider
and the coordinator → the local cluster → the leader lease (released if asked) → HTTP servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import time
import uuid
import weakref
from typing import TYPE_CHECKING, Any, ClassVar

from mcr.errors import ClusterNotFoundError
from mcr.manager.authfilter import FilterProvider
from mcr.manager.coordinator import BasicCoordinator, Coordinator, Tenure
from mcr.manager.engagements import ClusterInfo, ClusterState, Engagements
from mcr.manager.errors import ShutdownAbortedError, ShutdownTimeoutError
from mcr.manager.leaderelection import (
    LeaderElectionLostError,
    LeaderElector,
    lease_namespace,
    validate_options,
)
from mcr.manager.probes import Check
from mcr.manager.readiness import caches_synced, provider_started
from mcr.manager.runnables import (
    RunnableFunc,
    RunnableGroup,
    needs_leader_election,
    runnable_name,
    stop_tasks,
)
from mcr.manager.scoped import FieldIndexer, ScopedManager
from mcr.manager.series import DEFAULT_RETENTION, DepartedSeries
from mcr.manager.serving import Endpoints, MetricsServing
from mcr.manager.signals import handle_shutdown_signals, in_main_thread
from mcr.metrics import ENGAGED_CLUSTERS
from mcr.multicluster import LOCAL_CLUSTER

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.multicluster import Provider
    from mcr.rest.config import RestConfig
    from mcr.rest.transport import Transport

__all__ = ["Manager", "ShutdownAbortedError", "ShutdownTimeoutError"]

log = logging.getLogger("mcr.manager")


class Manager:
    """Runs runnables (controllers) and engages them with the local cluster and a provider's clusters.

    ``config``: the local cluster (engaged as ``""``); ``None`` runs without one (a provider only;
    leader election then cannot be used). ``provider``: discovers clusters; a
    :class:`~mcr.multicluster.ProviderRunnable` is started by the manager itself; a provider with a
    ``check_ready()`` (e.g. :class:`~mcr.providers.MultiProvider`) is the ``/readyz`` check ``provider``.
    ``coordinator``: decides which clusters this replica runs (default: all).
    ``cluster_options``: keyword arguments for the local :class:`~mcr.cluster.Cluster`.

    Leader election (off by default) uses the Lease ``leader_election_namespace/leader_election_id``
    in the local cluster with client-go's timings (15 s / 10 s / 2 s). Losing the lease stops the
    manager at once (no grace period) and :meth:`start` raises
    :class:`~mcr.manager.LeaderElectionLostError`; the process should exit non-zero.

    ``metrics_bind_address`` (default ``":8080"``, ``"0"`` disables) serves ``/metrics`` from
    :data:`mcr.metrics.REGISTRY`; ``health_probe_bind_address`` (default off) serves ``/healthz``
    and ``/readyz``. ``metrics_cluster_retention``: seconds (600) the metric series of a
    disengaged cluster stay before they are removed (a name engaged again meanwhile keeps them);
    ``None`` keeps every cluster's series for the life of the process.
    ``metrics_secure_serving`` serves ``/metrics`` over HTTPS with ``metrics_cert_dir`` /
    ``metrics_cert_name`` (``tls.crt``) and ``metrics_key_name`` (``tls.key``), reloaded when
    those files change; ``metrics_filter_provider`` guards it, e.g.
    :func:`~mcr.manager.with_authentication_and_authorization` (needs a config).
    ``/readyz`` always has the checks ``caches-synced`` (the local cluster's started informers have
    synced; fleet clusters are left out, so one unreachable cluster cannot take every replica out
    of service) and, with a provider, ``provider-started``.
    ``graceful_shutdown_timeout``: seconds (30); ``0`` stops without waiting for in-flight work, a
    negative value waits for ever.

    Metrics are process-wide: ``mcr_engaged_clusters`` counts the clusters of every live manager
    of the process, and a departed cluster's series stay while any of them has it engaged.
    """

    _live: ClassVar[weakref.WeakSet[Manager]] = weakref.WeakSet()

    def __init__(
        self,
        config: RestConfig | None = None,
        *,
        provider: Provider | None = None,
        leader_election: bool = False,
        leader_election_id: str | None = None,
        leader_election_namespace: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        leader_election_release_on_cancel: bool = False,
        graceful_shutdown_timeout: float = 30.0,
        health_probe_bind_address: str | None = None,
        metrics_bind_address: str | None = ":8080",
        coordinator: Coordinator | None = None,
        cluster_options: dict[str, Any] | None = None,
        identity: str | None = None,
        metrics_cluster_retention: float | None = DEFAULT_RETENTION,
        metrics_secure_serving: bool = False,
        metrics_cert_dir: str | None = None,
        metrics_cert_name: str = "tls.crt",
        metrics_key_name: str = "tls.key",
        metrics_filter_provider: FilterProvider | None = None,
    ) -> None:
        self._config = config
        self._provider = provider
        self._cluster_options = dict(cluster_options or {})
        self._local: Cluster | None = None
        self.coordinator: Coordinator = coordinator if coordinator is not None else BasicCoordinator()
        bind = getattr(self.coordinator, "bind", None)
        if callable(bind):
            bind(self)
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        serving = MetricsServing(
            metrics_secure_serving,
            metrics_cert_dir,
            metrics_cert_name,
            metrics_key_name,
            metrics_filter_provider,
        )
        self._endpoints = Endpoints(
            metrics_bind_address,
            health_probe_bind_address,
            before_scrape=self.refresh_engagement_metrics,
            serving=serving,
            config=config,
        )
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.leader_election = leader_election
        self._elector: LeaderElector | None = None
        self._elector_args: dict[str, Any] = {}
        self._leadership: Tenure | None = None  # fences the runnables that need leadership
        if leader_election:
            if config is None:
                raise ValueError("leader election needs a local cluster: pass a config to Manager")
            if not leader_election_id:
                raise ValueError("leader_election_id is required when leader_election is on")
            namespace = lease_namespace(leader_election_namespace)
            validate_options(leader_election_id, namespace, lease_duration, renew_deadline, retry_period)
            self._leadership = Tenure(f"leader lease {namespace}/{leader_election_id}")
            self._leadership.on_lapse(self._leadership_lapsed)
            self._elector_args = dict(
                name=leader_election_id,
                namespace=namespace,
                identity=self.identity,
                lease_duration=lease_duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
                release_on_cancel=leader_election_release_on_cancel,
                tenure=self._leadership,
            )
        self.elected = asyncio.Event()
        """Set once this replica may run leader-election runnables (at start without leader election)."""
        self.healthz = self._endpoints.healthz
        self.readyz = self._endpoints.readyz
        # A provider that can tell whether all of it runs (a multi provider's failed members).
        self.readyz.add("caches-synced", caches_synced(lambda: self._started, self._local_clusters))
        if provider is not None:
            self.readyz.add("provider-started", provider_started(lambda: self._providers.started))
        provider_check = getattr(provider, "check_ready", None)
        if callable(provider_check):
            self.readyz.add("provider", provider_check)
        self._departed = (
            None
            if metrics_cluster_retention is None
            else DepartedSeries(metrics_cluster_retention, self.engaged_anywhere)
        )
        self._engagements = Engagements(
            self.coordinator, standby=self._awaiting_leadership, departures=self._departed
        )
        self._series_task: asyncio.Task[None] | None = None
        self._others = RunnableGroup("others", self._runnable_failed)
        self._leaders = RunnableGroup("leader", self._runnable_failed, fence=self._leadership)
        self._providers = RunnableGroup("provider", self._runnable_failed)
        for group in (self._others, self._leaders, self._providers):
            group.on_start(self._runnable_started)
        self._pure_awares: list[tuple[bool, Any]] = []  # (needs leadership, aware without start())
        self._started = False
        self._stop_requested: asyncio.Event | None = None
        self._stop_early = False  # stop() came before start() created its event
        self._abort = False
        self._error: BaseException | None = None
        self._local_task: asyncio.Task[None] | None = None
        self._elector_task: asyncio.Task[None] | None = None
        self._lead_task: asyncio.Task[None] | None = None
        self._elector_transport: Transport | None = None
        Manager._live.add(self)
        self.refresh_engagement_metrics()

    def __repr__(self) -> str:
        return f"Manager(local={self._config!r}, provider={self._provider!r})"

    # -- registration ----------------------------------------------------------------------------

    def add(self, runnable: Any) -> None:
        """Run ``runnable`` with the manager (before or after :meth:`start`).

        Objects with ``async start()`` run in the group their ``need_leader_election`` selects
        (default: leader only). Objects with ``async engage(name, cluster)`` (aware) are engaged with
        every engaged cluster once they run — clusters engaged earlier included, and the local
        cluster ``""`` when the manager has a config. An aware object without ``start`` is engaged
        from the moment its group starts. Raises ``TypeError`` for
        objects with neither method.
        """
        has_start = callable(getattr(runnable, "start", None))
        is_aware = callable(getattr(runnable, "engage", None))
        if not has_start and not is_aware:
            raise TypeError(f"{runnable!r} is neither a runnable (async start()) nor aware (async engage())")
        leader = needs_leader_election(runnable)
        group = self._leaders if leader else self._others
        fence = getattr(runnable, "fence", None)
        if leader and self._leadership is not None and callable(fence):
            fence(self._leadership)  # e.g. a controller: no reconcile once leadership lapsed
        if has_start:
            group.add(runnable)
        else:
            self._pure_awares.append((leader, runnable))
            if group.started and not group.stopping:
                self._engagements.activate(runnable)

    def add_healthz_check(self, name: str, check: Check) -> None:
        """Add a liveness check served at ``/healthz`` (see :mod:`mcr.manager.probes`)."""
        self.healthz.add(name, check)

    def add_readyz_check(self, name: str, check: Check) -> None:
        """Add a readiness check served at ``/readyz``."""
        self.readyz.add(name, check)

    # -- clusters --------------------------------------------------------------------------------

    @property
    def local_cluster(self) -> Cluster | None:
        """The local cluster (built from ``config`` on first use), or ``None`` without a config."""
        if self._local is None and self._config is not None:
            from mcr.cluster import Cluster

            self._local = Cluster(self._config, name=LOCAL_CLUSTER, **self._cluster_options)
        return self._local

    async def get_cluster(self, name: str) -> Cluster:
        """The cluster named ``name``: the local one for ``""``, else an engaged or provider's cluster.

        Raises :class:`~mcr.ClusterNotFoundError` naming the cluster when there is none.
        """
        if name == LOCAL_CLUSTER:
            local = self.local_cluster
            if local is None:
                raise ClusterNotFoundError(name, "local cluster '' not found: the manager has no config")
            return local
        cluster = self._engagements.get(name)
        if cluster is not None:
            return cluster
        if self._provider is not None:
            return await self._provider.get(name)
        raise ClusterNotFoundError(name, f"cluster {name!r} not found: not engaged and no provider set")

    async def get_manager(self, name: str) -> ScopedManager:
        """A per-cluster view of this manager for single-cluster code (errors as :meth:`get_cluster`)."""
        return ScopedManager(self, name, await self.get_cluster(name))

    def get_local_manager(self) -> ScopedManager:
        """The view of the local cluster; raises :class:`~mcr.ClusterNotFoundError` without a config."""
        local = self.local_cluster
        if local is None:
            raise ClusterNotFoundError(LOCAL_CLUSTER, "local cluster '' not found: the manager has no config")
        return ScopedManager(self, LOCAL_CLUSTER, local)

    def get_provider(self) -> Provider | None:
        return self._provider

    def get_field_indexer(self) -> FieldIndexer:
        """An indexer registering a field index on the local cluster and every provider cluster."""
        return FieldIndexer(self.local_cluster, self._provider)

    async def engage(self, name: str, cluster: Cluster) -> None:
        """Engage ``cluster`` as ``name`` with every aware runnable (the manager is Aware).

        Runs until cancelled (the disengagement: every per-cluster task ends before this returns)
        or until the name is engaged again with a cluster, which replaces this engagement and
        makes this call return. Errors from the coordinator propagate.
        """
        await self._engagements.engage(name, cluster)

    def clusters(self) -> list[ClusterInfo]:
        """Engaged clusters (the local one is ``""``) with their state and last error."""
        return self._engagements.infos()

    # -- endpoints -------------------------------------------------------------------------------

    @property
    def metrics_url(self) -> str | None:
        """``http://host:port`` of the metrics server once listening (``None`` before / disabled)."""
        return self._endpoints.metrics_url

    @property
    def health_probe_url(self) -> str | None:
        """``http://host:port`` of the health probe server once listening."""
        return self._endpoints.health_probe_url

    # -- process-wide metrics --------------------------------------------------------------------

    @staticmethod
    def refresh_engagement_metrics() -> None:
        """Set ``mcr_engaged_clusters{state}`` from every live manager (called in the loop thread).

        The metrics endpoint calls it before each scrape: cluster states are derived on demand from
        the controllers, so there is nothing to keep in sync in between.
        """
        counts = dict.fromkeys(ClusterState, 0)
        for mgr in list(Manager._live):
            for info in mgr.clusters():
                counts[info.state] += 1
        for state, count in counts.items():
            ENGAGED_CLUSTERS.labels(state.value).set(count)

    @staticmethod
    def engaged_anywhere(name: str) -> bool:
        """Whether a live manager of this process has ``name`` engaged (metrics are process-wide)."""
        return any(mgr._engagements.get(name) is not None for mgr in list(Manager._live))

    # -- running ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`start` to shut down gracefully; returns at once. Repeat calls do nothing.

        Called before :meth:`start` runs (e.g. right after creating its task), it is remembered:
        ``start`` then shuts down as soon as it has started everything.
        """
        if self._stop_requested is not None:
            self._stop_requested.set()
        else:
            self._stop_early = True

    def _second_signal(self) -> None:
        if self._error is None:
            self._error = ShutdownAbortedError("graceful shutdown aborted by a second signal")
        self._abort_shutdown()

    def _leadership_lapsed(self) -> None:
        """Leadership can no longer be trusted (not renewed in time): stop leader-only work now,
        from the tenure's timer, before anything else the event loop has queued runs."""
        if self._error is None:
            lease = f"{self._elector_args['namespace']}/{self._elector_args['name']}"
            self._error = LeaderElectionLostError(lease, self.identity, "leadership lapsed")
        self._abort_shutdown()

    def _abort_shutdown(self) -> None:
        self._abort = True
        self.stop()
        for group in (self._others, self._leaders, self._providers):
            for task in group.tasks:
                task.cancel()

    async def start(self, *, handle_signals: bool | None = None) -> None:
        """Run everything until :meth:`stop`, cancellation, SIGTERM/SIGINT or a fatal error.

        ``handle_signals`` (default: when in the main thread) installs SIGTERM/SIGINT handlers for
        the run: the first signal shuts down gracefully and ``start`` returns, a second one aborts
        the shutdown (in-flight work is cancelled) and ``start`` raises :class:`ShutdownAbortedError`.
        Raises :class:`LeaderElectionLostError` when the lease is lost, the error of a runnable
        that failed, or :class:`ShutdownTimeoutError` when the grace period is exceeded; re-raises
        ``CancelledError`` after the shutdown when cancelled. A manager starts once.
        """
        if self._started:
            raise RuntimeError("this manager was already started; a Manager runs once")
        self._started = True
        self._stop_requested = asyncio.Event()
        if self._stop_early:
            self._stop_requested.set()
        if handle_signals is None:
            handle_signals = in_main_thread()
        cancelled = False
        with contextlib.ExitStack() as stack:
            if handle_signals:
                stack.enter_context(handle_shutdown_signals(self.stop, self._second_signal))
            try:
                await self._start_all()
                await self._stop_requested.wait()
            except asyncio.CancelledError:
                cancelled = True
            except Exception as exc:  # noqa: BLE001  # start-up failed: shut down what started, then raise it
                self._error = self._error or exc
            grace: float | None = self.graceful_shutdown_timeout
            if isinstance(self._error, LeaderElectionLostError) or self._abort:
                grace = 0.0
            elif grace is not None and grace < 0:
                grace = None
            try:
                overran = await self._shutdown(grace)
            except asyncio.CancelledError:
                cancelled, overran = True, []
        if overran:
            timeout_error = ShutdownTimeoutError(self.graceful_shutdown_timeout, overran)
            log.error("%s", timeout_error)
            if self._error is None:
                self._error = timeout_error
        if cancelled:
            if self._error is not None:
                log.error("manager stopped with an error", exc_info=self._error)
            raise asyncio.CancelledError
        if self._error is not None:
            raise self._error

    def _local_clusters(self) -> list[tuple[str, Cluster]]:
        return [(LOCAL_CLUSTER, self._local)] if self._local is not None else []

    def _awaiting_leadership(self) -> bool:
        """Whether aware runnables wait for this replica to be elected."""
        if self.elected.is_set():
            return False
        return any(callable(getattr(r, "engage", None)) for r in self._leaders.runnables) or any(
            leader for leader, _ in self._pure_awares
        )

    def _runnable_started(self, runnable: Any) -> None:
        if callable(getattr(runnable, "engage", None)):
            self._engagements.activate(runnable)

    def _runnable_failed(self, runnable: object, exc: BaseException) -> None:
        log.error("runnable %s failed, stopping the manager", runnable_name(runnable), exc_info=exc)
        if self._error is None:
            self._error = exc
        self.stop()

    def _start_group(self, group: RunnableGroup, leader: bool) -> None:
        group.start()
        for needs_leader, aware in self._pure_awares:
            if needs_leader == leader:
                self._engagements.activate(aware)

    async def _start_all(self) -> None:
        if self._departed is not None:
            self._series_task = asyncio.create_task(self._departed.run(), name="mcr-departed-series")
        await self._endpoints.start()
        local = self.local_cluster
        if local is not None:
            await local.start()
            self._local_task = asyncio.create_task(
                self._engagements.engage(LOCAL_CLUSTER, local, coordinate=False), name="mcr-engagement-local"
            )
        provider_start = getattr(self._provider, "start", None)
        if callable(provider_start):
            self._providers.add(
                RunnableFunc(functools.partial(provider_start, self), name=f"provider {self._provider!r}")
            )
        if callable(getattr(self.coordinator, "start", None)):
            self._providers.add(self.coordinator)
        self._providers.start()
        self._start_group(self._others, leader=False)
        if self._elector_args:
            assert self._config is not None
            self._elector_transport = self._config.transport(cluster_name=LOCAL_CLUSTER)
            self._elector = LeaderElector(self._elector_transport, **self._elector_args)
            self._elector_task = asyncio.create_task(self._elector.run(), name="mcr-leader-election")
            self._elector_task.add_done_callback(self._elector_done)
            self._lead_task = asyncio.create_task(self._lead(self._elector), name="mcr-leader-runnables")
        else:
            self.elected.set()
            self._start_group(self._leaders, leader=True)

    async def _lead(self, elector: LeaderElector) -> None:
        await elector.elected.wait()
        self.elected.set()
        log.info("elected leader: starting leader-election runnables", extra={"identity": self.identity})
        self._start_group(self._leaders, leader=True)

    def _elector_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            exc = LeaderElectionLostError(
                self._elector_args["namespace"] + "/" + self._elector_args["name"],
                self.identity,
                "elector ended",
            )
        log.error("%s; stopping the manager", exc)
        self._error = exc if isinstance(exc, LeaderElectionLostError) else self._error or exc
        self._abort_shutdown()

    async def _shutdown(self, grace: float | None) -> list[str]:
        """Stop everything in order; returns what overran the grace period (never with grace 0)."""
        abort = grace == 0
        deadline = None if grace is None else time.monotonic() + grace
        overran: list[str] = []
        if self._lead_task is not None:
            await stop_tasks([self._lead_task], None)
        overran += await self._others.stop(deadline)
        overran += await self._leaders.stop(deadline)
        eng_overran = await self._engagements.close()
        if self._local_task is not None:
            await stop_tasks([self._local_task], None)
        overran += eng_overran
        overran += await self._providers.stop(deadline)
        local = self._local
        if local is not None:
            try:
                async with asyncio.timeout(
                    None if deadline is None else max(deadline - time.monotonic(), 1.0)
                ):
                    await local.stop()
            except TimeoutError:
                overran.append("local cluster")
        if self._elector_task is not None:
            await stop_tasks([self._elector_task], None)
        if self._elector_transport is not None:
            await self._elector_transport.close()
        await self._endpoints.stop()
        if self._series_task is not None:
            await stop_tasks([self._series_task], None)
        self.elected.clear()
        return [] if abort else overran
