"""The sharded coordinator: each engaged cluster runs on exactly one replica, fenced by a Lease.

Replicas of one controller announce themselves with peer Leases (``<prefix>-peer-<identity>``,
renewed every third of ``peer_ttl``) in ``namespace`` of the local cluster, and learn the live
peers from a watch on those Leases: a peer whose Lease has not changed for ``peer_ttl`` (by this
process's clock) or was deleted is gone. Every replica computes, with weighted rendezvous hashing
(:mod:`mcr.sharding.hashing`), the same owner for each cluster from the same membership.

The owner of a cluster takes its fence Lease (``<prefix>-shard-<cluster>-<hash>``) and runs the
cluster's controllers only while it holds it, renewing it every ``renew_period``. When the
membership moves the cluster elsewhere, the owner hands it over gracefully: its controllers stop
taking work for the cluster and finish the reconciles in flight (bounded by ``drain_timeout``),
then the cluster is disengaged and the fence released, so the next owner starts at once. A fence
that cannot be renewed for ``0.7 * lease_duration`` is given up at once (no drain: another replica
may own the cluster by then); a replica that dies stops renewing, and its fences expire after
``lease_duration``. Nothing is claimed before the first membership snapshot has been stable for
``retry_period`` (no cold-start stampede), and a replica waits ``retry_period`` between attempts
on a fence someone else holds (woken early when that fence changes).

With leader election, only the leader announces itself (controllers that need leadership run
there only), so the leader owns every cluster; without it, every replica shares the work. A clean
stop releases every fence after the controllers stopped and deletes the peer Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcr import metrics
from mcr.cache import ByObject, CacheOptions, NamespaceConfig
from mcr.errors import APIError, MCRError, TransportError
from mcr.sharding.hashing import fence_name, owner
from mcr.sharding.leases import (
    LEASE,
    PREFIX_LABEL,
    ROLE_LABEL,
    WEIGHT_ANNOTATION,
    Fence,
    Observations,
    PeerLease,
)

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.config import RestConfig

__all__ = ["ShardedCoordinator"]

log = logging.getLogger("mcr.sharding")


def _default_identity() -> str:
    host = socket.gethostname().split(".")[0].lower() or "replica"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


class ShardedCoordinator:
    """Spreads engaged clusters over the replicas of a controller (see the module docs).

    ``namespace``: where the Leases live (in the local cluster; default ``default``). ``identity``:
    this replica's unique id (default ``<hostname>-<pid>-<random>``). ``weight``: its share of the
    clusters relative to the other replicas' weights. Timings in seconds: ``lease_duration`` of
    a fence (15), ``renew_period`` of fences (5), ``retry_period`` between attempts and the
    settling time before the first claim (2), ``peer_ttl`` after which a silent replica drops out
    (default ``lease_duration``), ``drain_timeout`` for in-flight reconciles at a hand-over
    (default half the lease duration). ``prefix`` names the Leases (``mcr``). ``config``: the
    cluster holding the Leases (default: the manager's). Pass it to ``Manager(coordinator=...)``.
    """

    def __init__(
        self,
        *,
        namespace: str = "default",
        identity: str | None = None,
        weight: float = 1.0,
        lease_duration: float = 15.0,
        renew_period: float = 5.0,
        retry_period: float = 2.0,
        peer_ttl: float | None = None,
        drain_timeout: float | None = None,
        prefix: str = "mcr",
        config: RestConfig | None = None,
    ) -> None:
        if not renew_period < lease_duration:
            raise ValueError(
                f"renew_period ({renew_period}) must be shorter than lease_duration ({lease_duration})"
            )
        if weight <= 0:
            raise ValueError(f"weight must be positive, got {weight!r}")
        self.namespace = namespace
        self.identity = identity or _default_identity()
        self.weight = weight
        self.lease_duration = lease_duration
        self.renew_period = renew_period
        self.retry_period = retry_period
        self.peer_ttl = peer_ttl if peer_ttl is not None else lease_duration
        self.drain_timeout = drain_timeout if drain_timeout is not None else lease_duration / 2
        self.prefix = prefix
        self.peer_lease_name = fence_name(f"{prefix}-peer", self.identity)
        self._config = config
        self._manager: Any = None
        self._client: Any = None
        self._observations = Observations()
        self._peers: dict[str, float] = {}
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
        return owner(name, self._peers) if self._ready.is_set() else None

    def owned(self) -> list[str]:
        """The clusters this replica runs (holds the fence of), sorted."""
        return sorted(self._owned)

    # -- the runnable: membership ----------------------------------------------------------------

    async def start(self) -> None:
        """Announce this replica and follow the membership until cancelled (a manager runnable)."""
        from mcr.cluster import Cluster

        config = self._config or getattr(getattr(self._manager, "local_cluster", None), "config", None)
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
        peer = PeerLease(
            view.api_reader, namespace=self.namespace, name=self.peer_lease_name, identity=self.identity,
            weight=self.weight, ttl=self.peer_ttl, prefix=self.prefix,
        )  # fmt: skip
        try:
            await view.start()
            informer = await view.cache.get_informer(LEASE)
            registration = informer.add_event_handler(_Watch(self))
            await informer.wait_for_sync(None)
            self._client = view.api_reader
            elected = getattr(self._manager, "elected", None)
            if elected is not None:
                await elected.wait()  # with leader election only the leader runs controllers
            await self._announce_and_follow(peer, informer)
            registration.remove()
        finally:
            self._ready.clear()
            self._peers = {}
            metrics.SHARDING_PEERS.set(0)
            with contextlib.suppress(Exception):
                await peer.delete()
            await view.stop()

    async def _announce_and_follow(self, peer: PeerLease, informer: Any) -> None:
        renew_every = self.peer_ttl / 3
        next_renew = 0.0
        stable_since = time.monotonic()
        tick = min(self.retry_period, renew_every) / 2
        while True:
            now = time.monotonic()
            if now >= next_renew:
                try:
                    await peer.renew()
                    next_renew = now + renew_every
                except (APIError, TransportError) as exc:
                    log.warning("renewing peer lease %s failed: %s", self.peer_lease_name, exc)
                    next_renew = now + min(self.retry_period, renew_every)
            peers = self._live(informer)
            if peers != self._peers:
                log.info("sharding peers: %s", ", ".join(sorted(peers)), extra={"identity": self.identity})
                self._peers = peers
                metrics.SHARDING_PEERS.set(len(peers))
                stable_since = time.monotonic()
                self._notify()
            if (
                not self._ready.is_set()
                and self.identity in peers
                and now - stable_since >= self.retry_period
            ):
                self._ready.set()
                self._notify()
            await asyncio.sleep(tick)

    def _live(self, informer: Any) -> dict[str, float]:
        live: dict[str, float] = {}
        for lease in informer.list(self.namespace):
            meta = lease.get("metadata") or {}
            if (meta.get("labels") or {}).get(ROLE_LABEL) != "peer" or self._observations.expired(lease):
                continue
            try:
                weight = float((meta.get("annotations") or {}).get(WEIGHT_ANNOTATION, "1"))
            except ValueError:
                weight = 1.0
            live[str(lease["spec"]["holderIdentity"])] = weight if weight > 0 else 1.0
        return live

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
        fence: Fence | None = None
        lease_name = fence_name(f"{self.prefix}-shard", name)
        wake = self._fence_events.setdefault(lease_name, asyncio.Event())
        try:
            while True:
                await self._ready.wait()
                changed = self._changed
                if self.owner_of(name) != self.identity:
                    await changed.wait()
                    continue
                if fence is None:
                    fence = self._fence(name, lease_name)
                wake.clear()
                if await fence.try_acquire():
                    await self._own(name, fence, run)
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.retry_period):
                        await _first(changed.wait(), wake.wait())
        finally:
            self._fence_events.pop(lease_name, None)
            if fence is not None:
                await fence.release()

    async def _own(self, name: str, fence: Fence, run: Callable[[], Awaitable[None]]) -> None:
        """Run the cluster while the fence holds and the cluster stays ours; hand it over after."""
        metrics.SHARDING_ACQUISITIONS_TOTAL.inc()
        self._owned.add(name)
        metrics.SHARDING_OWNED_CLUSTERS.set(len(self._owned))
        log.info("owning cluster", extra={"cluster": name, "identity": self.identity})
        task: asyncio.Future[None] = asyncio.ensure_future(run())
        reason = "released"
        try:
            while True:
                changed = self._changed
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.renew_period):
                        await _first(changed.wait(), asyncio.shield(task))
                if task.done():
                    task.result()  # an error of the engagement propagates
                if self.owner_of(name) != self.identity:
                    reason = "rebalanced"
                    return
                due = time.monotonic() - fence.last_renewed >= self.renew_period
                if due and not await fence.renew() and self._lost(fence):
                    reason = "lost"
                    return
        finally:
            await self._hand_over(name, fence, task, run, drain=reason != "lost")
            metrics.SHARDING_HANDOVERS_TOTAL.labels(reason).inc()
            log.info(
                "no longer owning cluster (%s)", reason, extra={"cluster": name, "identity": self.identity}
            )

    def _fence(self, cluster: str, lease_name: str) -> Fence:
        return Fence(
            self._client,
            self._observations,
            namespace=self.namespace,
            name=lease_name,
            cluster=cluster,
            identity=self.identity,
            duration=self.lease_duration,
            prefix=self.prefix,
        )

    def _lost(self, fence: Fence) -> bool:
        """Another replica holds the fence, or renewals have failed for too long to trust it."""
        return not fence.held or time.monotonic() - fence.last_renewed > 0.7 * self.lease_duration

    async def _hand_over(
        self, name: str, fence: Fence, task: asyncio.Future[None], run: Any, *, drain: bool
    ) -> None:
        """Drain (when asked), stop the cluster's run, then release the fence: in that order, also
        when cancelled, so the next owner never overlaps this one."""
        try:
            drainer = getattr(run, "drain", None)
            if drain and drainer is not None and not task.done():
                with contextlib.suppress(Exception):
                    await drainer(self.drain_timeout)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            self._owned.discard(name)
            metrics.SHARDING_OWNED_CLUSTERS.set(len(self._owned))
            await fence.release()


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
