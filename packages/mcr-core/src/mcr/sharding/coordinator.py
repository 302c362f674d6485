"""The sharded coordinator: each engaged cluster runs on exactly one replica, fenced by a Lease.

Replicas of one controller learn the live replicas from a peer registry (by default peer Leases
``<prefix>-peer-<identity>`` in ``namespace`` of the local cluster, renewed every third of
``peer_ttl`` and read from a watch: a peer whose Lease has not changed for ``peer_ttl`` by this
process's clock, or was deleted, is gone). Every replica computes, with the sharder (weighted
rendezvous hashing, :mod:`mcr.sharding.hashing`), the same owner for each cluster from the same
membership.

The owner of a cluster takes its fence Lease (``<prefix>-shard-<cluster>-<hash>``) and runs the
cluster's controllers only while it may be sure it holds it: until ``renew_deadline`` after the
send time of the last write of the fence the server confirmed, on this process's monotonic clock
(the fence's :class:`~mcr.manager.coordinator.Tenure`). It renews the fence ``renew_period`` after
that send, retries every ``retry_period``, and cuts each attempt off at the deadline. Another
replica takes the fence only once it has seen it unchanged for ``lease_duration``, so the owner
stops ``lease_duration - renew_deadline`` before anyone else may start. When the deadline passes —
the server unreachable, requests hanging, the process paused — the cluster's controllers stop at
once (no new reconcile starts, those in flight are cancelled: see :mod:`mcr.manager.coordinator`),
then the cluster is disengaged and the fence released if the server can be reached.

When the membership moves a cluster elsewhere, its owner hands it over gracefully: its controllers
stop taking work for the cluster and finish the reconciles in flight (bounded by
``drain_timeout``, the fence still renewed meanwhile), then the cluster is disengaged and the fence
released, so the next owner starts at once. A replica that dies stops renewing, and its fences can
be taken ``lease_duration`` after their last renewal. Nothing is claimed before the first
membership snapshot has been stable for ``retry_period`` (no cold-start stampede), and a replica
waits ``retry_period`` between attempts on a fence someone else holds (woken early when that fence
changes). With ``per_cluster_lease=False`` there are no fences: a cluster runs wherever the sharder
puts it in this replica's view of the membership, and two replicas can run it at once while their
views differ (docs/sharding.md).

With leader election, only the leader announces itself (controllers that need leadership run
there only), so the leader owns every cluster; without it, every replica shares the work. A clean
stop releases every fence after the controllers stopped and withdraws the announcement.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcr import metrics
from mcr.cache import ByObject, CacheOptions, NamespaceConfig
from mcr.errors import MCRError
from mcr.manager.coordinator import Tenure, fence_cluster
from mcr.sharding.hashing import fence_name, owner
from mcr.sharding.leases import (
    LEASE,
    PREFIX_LABEL,
    RENEW_DEADLINE_SHARE,
    FenceLease,
    Observations,
    validate_timings,
)
from mcr.sharding.peers import LeasePeers, PeerRegistry, Sharder

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.rest.config import RestConfig

__all__ = ["ShardedCoordinator"]

log = logging.getLogger("mcr.sharding")


def _default_identity() -> str:
    host = socket.gethostname().split(".")[0].lower() or "replica"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


class ShardedCoordinator:
    """Spreads engaged clusters over the replicas of a controller (see the module docs).

    ``namespace``: where the Leases live (in the local cluster; default ``default``). ``identity``:
    this replica's unique id (default ``<hostname>-<pid>-<random>``, or the registry's). ``weight``:
    its share of the clusters relative to the other replicas' weights. Timings in seconds:
    ``lease_duration`` of a fence (15), ``renew_deadline`` after a fence's last confirmed renewal
    by which its owner stops (default 2/3 of the lease duration), ``renew_period`` of fences (5),
    ``retry_period`` between attempts and the settling time before the first claim (2),
    ``peer_ttl`` after which a silent replica drops out (default ``lease_duration``),
    ``drain_timeout`` for in-flight reconciles at a hand-over (default half the lease duration);
    see :func:`validate_timings`. ``prefix`` names the Leases (``mcr``). ``config``: the cluster
    holding the Leases (default: the manager's). ``sharder``: who owns a cluster (default
    :func:`~mcr.sharding.owner`); ``peer_registry``: who the replicas are (default: peer Leases);
    ``per_cluster_lease=False`` runs clusters without fences (weaker: see the module docs). Pass it
    to ``Manager(coordinator=...)``.
    """

    def __init__(
        self,
        *,
        namespace: str = "default",
        identity: str | None = None,
        weight: float = 1.0,
        lease_duration: float = 15.0,
        renew_deadline: float | None = None,
        renew_period: float = 5.0,
        retry_period: float = 2.0,
        peer_ttl: float | None = None,
        drain_timeout: float | None = None,
        prefix: str = "mcr",
        config: RestConfig | None = None,
        sharder: Sharder | None = None,
        peer_registry: PeerRegistry | None = None,
        per_cluster_lease: bool = True,
    ) -> None:
        self.renew_deadline = (
            renew_deadline if renew_deadline is not None else RENEW_DEADLINE_SHARE * lease_duration
        )
        self.peer_ttl = peer_ttl if peer_ttl is not None else lease_duration
        self.drain_timeout = drain_timeout if drain_timeout is not None else lease_duration / 2
        validate_timings(
            lease_duration, self.renew_deadline, renew_period, retry_period, self.peer_ttl, self.drain_timeout
        )
        if not (0 < weight < math.inf):
            raise ValueError(f"weight must be positive, got {weight!r}")
        if sharder is not None and not callable(sharder):
            raise TypeError(f"sharder must be a function (cluster, peers) -> owner, got {sharder!r}")
        if peer_registry is not None:
            if identity is not None and identity != peer_registry.identity:
                raise ValueError(
                    f"identity {identity!r} differs from the peer registry's ({peer_registry.identity!r}); "
                    "omit identity to use the registry's"
                )
            identity = peer_registry.identity
        self.namespace = namespace
        self.identity = identity or _default_identity()
        self.weight = weight
        self.lease_duration = lease_duration
        self.renew_period = renew_period
        self.retry_period = retry_period
        self.prefix = prefix
        self.per_cluster_lease = per_cluster_lease
        self.peer_lease_name = fence_name(f"{prefix}-peer", self.identity)
        self._sharder: Sharder = sharder if sharder is not None else owner
        self._registry = peer_registry
        self._config = config
        self._manager: Any = None
        self._client: Any = None
        self._observations = Observations()
        self._peers: dict[str, float] = {}
        self._stable_since = 0.0
        self._ready = asyncio.Event()
        self._changed = asyncio.Event()
        self._fence_events: dict[str, asyncio.Event] = {}
        self._owned: set[str] = set()

    def __repr__(self) -> str:
        return f"ShardedCoordinator(identity={self.identity!r}, namespace={self.namespace!r})"

    # -- queries ---------------------------------------------------------------------------------

    def bind(self, manager: Any) -> None:
        """Called by the manager that uses this coordinator (its config and leadership)."""
        self._manager = manager

    def peers(self) -> dict[str, float]:
        """The live replicas (identity → weight) as this replica sees them."""
        return dict(self._peers)

    def owner_of(self, name: str) -> str | None:
        """The replica that should own cluster ``name`` (``None`` before the first snapshot)."""
        return self._sharder(name, self._peers) if self._ready.is_set() else None

    def owned(self) -> list[str]:
        """The clusters this replica runs, sorted."""
        return sorted(self._owned)

    # -- the runnable: membership ----------------------------------------------------------------

    async def start(self) -> None:
        """Announce this replica and follow the membership until cancelled (a manager runnable)."""
        from mcr.cluster import Cluster

        view: Cluster | None = None
        try:
            informer: Any = None
            if self.per_cluster_lease or self._registry is None:
                config = self._config or getattr(
                    getattr(self._manager, "local_cluster", None), "config", None
                )
                if config is None:
                    raise MCRError(
                        "the sharded coordinator needs a cluster for its Leases: "
                        "pass config= or use it with a manager that has a config"
                    )
                options = CacheOptions(
                    default_namespaces={self.namespace: NamespaceConfig()},
                    by_object={LEASE: ByObject(label_selector=f"{PREFIX_LABEL}={self.prefix}")},
                )
                view = Cluster(config, name="mcr-sharding", cache_options=options)
                await view.start()
                informer = await view.cache.get_informer(LEASE)
                informer.add_event_handler(_Watch(self))
                await informer.wait_for_sync(None)
                self._client = view.api_reader
            registry = self._registry or LeasePeers(
                self._client, informer, self._observations, namespace=self.namespace,
                lease_name=self.peer_lease_name, identity=self.identity, weight=self.weight,
                ttl=self.peer_ttl, retry_period=self.retry_period, prefix=self.prefix,
            )  # fmt: skip
            elected = getattr(self._manager, "elected", None)
            if elected is not None:
                await elected.wait()  # with leader election only the leader runs controllers
            await self._follow(registry)
        finally:
            self._ready.clear()
            self._peers = {}
            metrics.SHARDING_PEERS.set(0)
            if view is not None:
                await view.stop()

    async def _follow(self, registry: PeerRegistry) -> None:
        self._stable_since = time.monotonic()
        settle = asyncio.create_task(self._settle(), name="mcr-sharding-settle")
        try:
            await registry.run(lambda: self._membership(registry.peers()))
        finally:
            settle.cancel()
            await asyncio.gather(settle, return_exceptions=True)
        raise MCRError(f"peer registry {registry!r} stopped following the membership")

    def _membership(self, peers: Mapping[str, float]) -> None:
        live = dict(peers)
        if live == self._peers:
            return
        log.info("sharding peers: %s", ", ".join(sorted(live)), extra={"identity": self.identity})
        self._peers = live
        metrics.SHARDING_PEERS.set(len(live))
        self._stable_since = time.monotonic()
        self._notify()

    async def _settle(self) -> None:
        """Set ready once this replica is a member and the membership was stable for a retry period."""
        while True:
            if self.identity in self._peers and time.monotonic() - self._stable_since >= self.retry_period:
                self._ready.set()
                self._notify()
                return
            await asyncio.sleep(self.retry_period / 4)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _fence_changed(self, name: str) -> None:
        event = self._fence_events.get(name)
        if event is not None:
            event.set()

    # -- per cluster -----------------------------------------------------------------------------

    async def coordinate(self, name: str, cluster: Cluster, run: Callable[[], Awaitable[None]]) -> None:
        """Run ``run()`` while this replica owns ``name`` and holds its fence (see the module docs)."""
        if not self.per_cluster_lease:
            while True:
                await self._owner_wait(name)
                await self._own(name, cluster, run, None, None)
        fence: FenceLease | None = None
        lease_name = fence_name(f"{self.prefix}-shard", name)
        wake = self._fence_events.setdefault(lease_name, asyncio.Event())
        try:
            while True:
                changed = await self._owner_wait(name)
                if fence is None:
                    fence = self._fence(name, lease_name)
                wake.clear()
                acquired = await self._acquire(name, fence)
                if acquired is not None:
                    await self._own(name, cluster, run, fence, acquired)
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.retry_period):
                        await _first(changed.wait(), wake.wait())
        finally:
            if self._fence_events.get(lease_name) is wake:
                del self._fence_events[lease_name]
            if fence is not None:
                await self._release(fence)

    async def _owner_wait(self, name: str) -> asyncio.Event:
        """Wait until this replica should own ``name``; returns the change event current then."""
        while True:
            await self._ready.wait()
            changed = self._changed
            if self.owner_of(name) == self.identity:
                return changed
            await changed.wait()

    async def _acquire(self, name: str, fence: FenceLease) -> tuple[Tenure, float] | None:
        """Take the fence: its tenure and the confirmed write's send time, or ``None``."""
        sent: float | None = None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.renew_deadline):
                sent = await fence.try_acquire()
        if sent is None:
            return None
        tenure = Tenure(f"fence of cluster {name!r}")
        if not tenure.confirm(sent + self.renew_deadline):
            return None  # confirmed too late to be sure of it: the next attempt renews it
        return tenure, sent

    async def _own(
        self,
        name: str,
        cluster: Cluster,
        run: Callable[[], Awaitable[None]],
        fence: FenceLease | None,
        acquired: tuple[Tenure, float] | None,
    ) -> None:
        """Run the cluster while it stays ours (and its fence holds); hand it over after."""
        metrics.SHARDING_ACQUISITIONS_TOTAL.inc()
        self._owned.add(name)
        metrics.SHARDING_OWNED_CLUSTERS.set(len(self._owned))
        log.info("owning cluster", extra={"cluster": name, "identity": self.identity})
        tenure = acquired[0] if acquired is not None else None
        lapsed = asyncio.Event()
        keeper: asyncio.Task[None] | None = None
        withdraw: Callable[[], None] = _nothing
        if fence is not None and acquired is not None:
            tenure, sent = acquired
            tenure.on_lapse(lapsed.set)
            withdraw = fence_cluster(name, cluster, tenure)
            keeper = asyncio.create_task(self._keep(fence, tenure, sent), name=f"mcr-fence-{fence.name}")
        task: asyncio.Future[None] = asyncio.ensure_future(run())
        reason = "released"
        try:
            while True:
                # Checked before waiting: the membership may have moved the cluster while this
                # replica was taking its fence (the change event it held then has fired since).
                changed = self._changed
                if self.owner_of(name) != self.identity:
                    reason = "rebalanced"
                    return
                await _first(changed.wait(), asyncio.shield(task), lapsed.wait())
                if task.done():
                    task.result()  # an error of the engagement propagates
                if lapsed.is_set():
                    reason = "lost"
                    return
        finally:
            await self._hand_over(name, task, keeper, tenure, fence, withdraw, run, drain=reason != "lost")
            metrics.SHARDING_HANDOVERS_TOTAL.labels(reason).inc()
            log.info(
                "no longer owning cluster (%s)", reason, extra={"cluster": name, "identity": self.identity}
            )

    async def _keep(self, fence: FenceLease, tenure: Tenure, sent: float) -> None:
        """Renew ``fence`` ``renew_period`` after the last confirmed write's sending, retrying every
        ``retry_period`` with each attempt cut off at the tenure's deadline; lapse the tenure when
        the fence is lost (the tenure's own timer lapses it when the deadline passes)."""
        while True:
            await asyncio.sleep(max(sent + self.renew_period - time.monotonic(), 0.0))
            while True:
                now = time.monotonic()
                left = tenure.valid_until - now
                if left <= 0:
                    tenure.lapse()
                    return
                renewed = False
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        renewed = await fence.renew()
                if not fence.held:
                    log.warning("fence taken by another replica", extra={"cluster": fence.cluster})
                    tenure.lapse()
                    return
                if renewed:
                    if not tenure.confirm(now + self.renew_deadline):
                        return  # lapsed meanwhile
                    sent = now
                    break
                await asyncio.sleep(min(self.retry_period, max(tenure.valid_until - time.monotonic(), 0.0)))

    async def _hand_over(
        self,
        name: str,
        task: asyncio.Future[None],
        keeper: asyncio.Task[None] | None,
        tenure: Tenure | None,
        fence: FenceLease | None,
        withdraw: Callable[[], None],
        run: Any,
        *,
        drain: bool,
    ) -> None:
        """Drain (when asked), stop the cluster's run, then end the tenure and release the fence: in
        that order, also when cancelled, so the next owner never overlaps this one. Until the run
        has ended the fence is renewed; should that fail, the tenure's lapse stops the work."""
        try:
            drainer = getattr(run, "drain", None)
            if drain and drainer is not None and not task.done():
                with contextlib.suppress(Exception):
                    await drainer(self.drain_timeout)
        finally:
            task.cancel()
            try:
                await asyncio.gather(task, return_exceptions=True)
            finally:
                withdraw()
                if keeper is not None:
                    keeper.cancel()
                    await asyncio.gather(keeper, return_exceptions=True)
                self._owned.discard(name)
                metrics.SHARDING_OWNED_CLUSTERS.set(len(self._owned))
                if task.done():  # else a second cancellation cut the wait short: let the fence lapse
                    if tenure is not None:
                        tenure.release()
                    if fence is not None:
                        await self._release(fence)

    async def _release(self, fence: FenceLease) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.renew_deadline):
                await fence.release()

    def _fence(self, cluster: str, lease_name: str) -> FenceLease:
        return FenceLease(
            self._client,
            self._observations,
            namespace=self.namespace,
            name=lease_name,
            cluster=cluster,
            identity=self.identity,
            duration=self.lease_duration,
            prefix=self.prefix,
        )


def _nothing() -> None:
    return None


async def _first(*aws: Awaitable[Any]) -> None:
    """Wait until the first of ``aws`` completes; cancel the rest."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Watch:
    """The Lease informer's handler: notes record changes, and wakes who waits on them."""

    def __init__(self, coordinator: ShardedCoordinator) -> None:
        self._c = coordinator

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self._c._observations.observe(obj)
        self._c._fence_changed(obj["metadata"]["name"])

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._c._observations.observe(new)
        self._c._fence_changed(new["metadata"]["name"])

    def on_delete(self, obj: Any) -> None:
        lease = getattr(obj, "obj", obj)
        name = lease["metadata"]["name"]
        self._c._observations.forget(name)
        self._c._fence_changed(name)
