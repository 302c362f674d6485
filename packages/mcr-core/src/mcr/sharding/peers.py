"""Who the replicas of a sharded controller are, and which of them owns a cluster.

:class:`PeerRegistry` is how a :class:`~mcr.sharding.ShardedCoordinator` learns the live replicas
(the membership); :class:`Sharder` maps a cluster and the membership to its owner. Both are
pluggable; every replica of one controller must use the same kind of each, or replicas disagree
about owners (with per-cluster fences nothing runs twice even then, but clusters can go unrun).
The defaults: the peer Leases in the local cluster (:class:`LeasePeers`) and weighted rendezvous
hashing (:func:`mcr.sharding.owner`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mcr.errors import APIError, TransportError
from mcr.sharding.leases import ROLE_LABEL, WEIGHT_ANNOTATION, Observations, PeerLease

if TYPE_CHECKING:
    from mcr.client import Client

__all__ = ["LeasePeers", "PeerRegistry", "Sharder"]

log = logging.getLogger("mcr.sharding")


@runtime_checkable
class Sharder(Protocol):
    """Maps a cluster and the live replicas (identity → weight) to the one that should own it.

    It must be a pure function of its arguments — every replica computes owners on its own — and
    return one of ``peers`` or ``None`` (nobody runs the cluster), and not raise. Changing the
    membership should move as few clusters as it can: each move is a hand-over.
    """

    def __call__(self, cluster: str, peers: Mapping[str, float], /) -> str | None: ...


@runtime_checkable
class PeerRegistry(Protocol):
    """The membership of a sharded controller, as this replica sees it.

    ``identity`` is this replica's id in the membership. ``run(changed)`` announces this replica
    and follows the others until cancelled (then it withdraws the announcement where it can),
    calling ``changed()`` whenever :meth:`peers` has changed; it raises only for errors that
    should stop the manager. :meth:`peers` returns the live replicas (identity → positive weight),
    this one included once its own announcement is seen. A replica that stops announcing itself
    must drop out of every replica's view in bounded time.
    """

    @property
    def identity(self) -> str: ...

    def peers(self) -> Mapping[str, float]: ...

    async def run(self, changed: Callable[[], None]) -> None: ...


class LeasePeers:
    """The default registry: each replica renews a peer Lease ``<prefix>-peer-<identity>-<hash>``
    every third of ``ttl`` and reads the others from a watch of those Leases (``informer``); a
    replica whose Lease has not changed for ``ttl`` by this process's clock, or was deleted, is
    gone. Renewals are cut off after a third of ``ttl``; failed ones are retried every
    ``retry_period``. Built by the coordinator on the Lease watch it keeps for its fences.
    """

    def __init__(
        self,
        client: Client,
        informer: Any,
        observations: Observations,
        *,
        namespace: str,
        lease_name: str,
        identity: str,
        weight: float,
        ttl: float,
        retry_period: float,
        prefix: str,
    ) -> None:
        self._informer = informer
        self._observations = observations
        self.namespace = namespace
        self._identity = identity
        self.ttl = ttl
        self.retry_period = retry_period
        self._lease = PeerLease(
            client,
            namespace=namespace,
            name=lease_name,
            identity=identity,
            weight=weight,
            ttl=ttl,
            prefix=prefix,
        )
        self._peers: dict[str, float] = {}

    @property
    def identity(self) -> str:
        return self._identity

    def peers(self) -> Mapping[str, float]:
        return self._peers

    async def run(self, changed: Callable[[], None]) -> None:
        renew_every = self.ttl / 3
        tick = min(self.retry_period, renew_every) / 2
        next_renew = 0.0
        try:
            while True:
                now = time.monotonic()
                if now >= next_renew:
                    try:
                        async with asyncio.timeout(renew_every):
                            await self._lease.renew()
                        next_renew = now + renew_every
                    except (APIError, TransportError, TimeoutError) as exc:
                        log.warning(
                            "renewing peer lease %s failed: %s", self._lease.name, str(exc) or "timeout"
                        )
                        next_renew = now + min(self.retry_period, renew_every)
                live = self._live()
                if live != self._peers:
                    self._peers = live
                    changed()
                await asyncio.sleep(tick)
        finally:
            self._peers = {}
            try:
                async with asyncio.timeout(renew_every):
                    await self._lease.delete()
            except TimeoutError:
                pass  # the others see this replica go when its Lease expires

    def _live(self) -> dict[str, float]:
        live: dict[str, float] = {}
        for lease in self._informer.list(self.namespace):
            meta = lease.get("metadata") or {}
            if (meta.get("labels") or {}).get(ROLE_LABEL) != "peer" or self._observations.expired(lease):
                continue
            try:
                weight = float((meta.get("annotations") or {}).get(WEIGHT_ANNOTATION, "1"))
            except ValueError:
                weight = 1.0
            live[str(lease["spec"]["holderIdentity"])] = weight if 0 < weight < math.inf else 1.0
        return live
