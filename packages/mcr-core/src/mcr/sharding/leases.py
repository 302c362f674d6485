"""The Leases of sharding: a replica's peer Lease, a cluster's fence Lease, and when they expire.

Expiry follows client-go's leader election: another holder's Lease counts as expired only when
its record (resourceVersion) has not changed for ``leaseDurationSeconds`` by *this* process's
monotonic clock, so clock skew between replicas never hands a Lease to two holders.
:class:`Observations` records, from the watch on the Leases, when each record was last seen to
change; writes are guarded by the resourceVersion, so of two replicas writing one Lease at once
one gets 409 Conflict and loses. None of these calls bounds its own time: the caller does (a
request cut off by a timeout counts as failed).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from mcr.errors import AlreadyExistsError, APIError, ConflictError, NotFoundError, TransportError
from mcr.manager.leaderelection import format_micro_time

if TYPE_CHECKING:
    from mcr.client import Client

__all__ = [
    "LEASE",
    "PREFIX_LABEL",
    "RENEW_DEADLINE_SHARE",
    "ROLE_LABEL",
    "WEIGHT_ANNOTATION",
    "FenceLease",
    "Observations",
    "PeerLease",
    "validate_timings",
]

LEASE = "coordination.k8s.io/v1/Lease"
PREFIX_LABEL = "sharding.mcr.io/prefix"
"""Label of every Lease of one sharded controller (its value is the lease name prefix)."""
ROLE_LABEL = "sharding.mcr.io/role"
"""``peer`` (a replica) or ``fence`` (a cluster)."""
CLUSTER_ANNOTATION = "sharding.mcr.io/cluster"
WEIGHT_ANNOTATION = "sharding.mcr.io/weight"

_API_ERRORS = (APIError, TransportError)

RENEW_DEADLINE_SHARE = 2 / 3
"""``renew_deadline`` defaults to this share of ``lease_duration`` (client-go's 10 s of 15 s)."""


def validate_timings(
    lease_duration: float,
    renew_deadline: float,
    renew_period: float,
    retry_period: float,
    peer_ttl: float,
    drain_timeout: float,
) -> None:
    """Raise ``ValueError`` naming the option unless the timings are sane.

    Every timing is a finite number of seconds, positive (``drain_timeout`` may be 0), and
    ``lease_duration > renew_deadline > renew_period``: the owner stops before a fence can be taken
    from it (the difference is the margin), and renews before its deadline.
    """
    for option, value in (
        ("lease_duration", lease_duration),
        ("renew_deadline", renew_deadline),
        ("renew_period", renew_period),
        ("retry_period", retry_period),
        ("peer_ttl", peer_ttl),
    ):
        if not (0 < value < math.inf):
            raise ValueError(f"{option} must be a positive number of seconds, got {value!r}")
    if not (0 <= drain_timeout < math.inf):
        raise ValueError(f"drain_timeout must be a number of seconds >= 0, got {drain_timeout!r}")
    if not renew_deadline < lease_duration:
        raise ValueError(
            f"renew_deadline ({renew_deadline}) must be shorter than lease_duration ({lease_duration}): "
            "a replica must stop running a cluster before another may take its fence"
        )
    if not renew_period < renew_deadline:
        raise ValueError(
            f"renew_period ({renew_period}) must be shorter than renew_deadline ({renew_deadline:.3g}; "
            f"default {RENEW_DEADLINE_SHARE:.2g} of lease_duration): a fence is renewed before its deadline"
        )


class Observations:
    """When this process last saw each Lease's record change (fed by the Lease watch)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str, float]] = {}

    def observe(self, lease: dict[str, Any]) -> float:
        """Note ``lease``'s resourceVersion; returns the monotonic time it was first seen."""
        meta = lease.get("metadata") or {}
        name, rv = str(meta.get("name")), str(meta.get("resourceVersion"))
        known = self._seen.get(name)
        if known is None or known[0] != rv:
            known = self._seen[name] = (rv, time.monotonic())
        return known[1]

    def forget(self, name: str) -> None:
        self._seen.pop(name, None)

    def expired(self, lease: dict[str, Any]) -> bool:
        """Whether ``lease`` is free: no holder, or unchanged for its duration by this clock."""
        spec = lease.get("spec") or {}
        if not spec.get("holderIdentity"):
            return True
        duration = float(spec.get("leaseDurationSeconds") or 0)
        return time.monotonic() - self.observe(lease) > duration


def _lease(namespace: str, name: str, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {},
    }


def _seconds(duration: float) -> int:
    return max(1, math.ceil(duration))


class FenceLease:
    """The fence Lease of one cluster: whoever holds it (unexpired) may run the cluster."""

    def __init__(
        self,
        client: Client,
        observations: Observations,
        *,
        namespace: str,
        name: str,
        cluster: str,
        identity: str,
        duration: float,
        prefix: str,
    ) -> None:
        self.client = client
        self.observations = observations
        self.namespace = namespace
        self.name = name
        self.cluster = cluster
        self.identity = identity
        self.duration = duration
        self.prefix = prefix
        self.held = False
        """Whether this replica wrote the Lease last as its holder (``False`` once lost or released)."""
        self._lease: dict[str, Any] | None = None  # the object of our last write

    async def _get(self) -> dict[str, Any] | None:
        try:
            lease: dict[str, Any] = await self.client.get(LEASE, self.name, namespace=self.namespace)
        except NotFoundError:
            return None
        return lease

    async def try_acquire(self) -> float | None:
        """Take the fence if it is free, expired or already ours.

        Returns the monotonic time the winning write was sent (the server confirmed it), or
        ``None`` when the fence is another's or the attempt failed (API errors are not raised:
        the caller retries).
        """
        try:
            lease = await self._get()
            now = format_micro_time()
            sent = time.monotonic()
            if lease is None:
                body = _lease(
                    self.namespace,
                    self.name,
                    {PREFIX_LABEL: self.prefix, ROLE_LABEL: "fence"},
                    {CLUSTER_ANNOTATION: self.cluster},
                )
                body["spec"] = self._spec(now, now, 0)
                self._lease = await self.client.create(body)
            else:
                spec = lease.get("spec") or {}
                holder = spec.get("holderIdentity") or ""
                if holder != self.identity and not self.observations.expired(lease):
                    return None
                transitions = int(spec.get("leaseTransitions") or 0) + (holder != self.identity)
                acquired = spec.get("acquireTime") if holder == self.identity else now
                lease["spec"] = self._spec(acquired or now, now, transitions)
                sent = time.monotonic()
                self._lease = await self.client.update(lease)
        except (AlreadyExistsError, ConflictError):
            return None
        except _API_ERRORS:
            return None
        self.held = True
        return sent

    async def renew(self) -> bool:
        """Renew the fence: ``True`` once the server confirmed it; ``False`` on an API error (then
        :attr:`held` stays true: the caller decides, by its deadline, when errors mean lost) or
        when another replica holds it now (then :attr:`held` is false)."""
        try:
            lease = self._lease
            if lease is not None:
                try:
                    self._lease = await self.client.update(self._renewed(lease))
                    return True
                except ConflictError:
                    self._lease = None  # changed by someone: read it and look
            lease = await self._get()
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                self.held = False
                return False
            self._lease = await self.client.update(self._renewed(lease))
        except _API_ERRORS:  # also 409 Conflict: changed again meanwhile, the next attempt reads it
            return False
        return True

    def _renewed(self, lease: dict[str, Any]) -> dict[str, Any]:
        spec = dict(lease.get("spec") or {})
        spec["renewTime"] = format_micro_time()
        spec["leaseDurationSeconds"] = _seconds(self.duration)
        return {**lease, "spec": spec}

    async def release(self) -> None:
        """Give the fence up (empty holder), so the next owner need not wait for expiry. Call it
        only once this replica's work for the cluster has stopped. Idempotent; errors are ignored
        (the fence then expires on its own)."""
        if not self.held:
            return
        self.held = False
        self._lease = None
        try:
            lease = await self._get()
            if lease is not None and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                lease["spec"]["renewTime"] = format_micro_time()
                await self.client.update(lease)
        except _API_ERRORS:
            return

    def _spec(self, acquired: str, renewed: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": _seconds(self.duration),
            "acquireTime": acquired,
            "renewTime": renewed,
            "leaseTransitions": transitions,
        }


class PeerLease:
    """This replica's announcement: ``<prefix>-peer-<identity>``, renewed, deleted on a clean stop."""

    def __init__(self, client: Client, *, namespace: str, name: str, identity: str, weight: float, ttl: float,
                 prefix: str) -> None:  # fmt: skip
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.weight = weight
        self.ttl = ttl
        self.prefix = prefix

    async def renew(self) -> None:
        """Create or renew the Lease. API errors propagate (the caller retries)."""
        now = format_micro_time()
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": _seconds(self.ttl), "renewTime": now}
        try:
            lease = await self.client.get(LEASE, self.name, namespace=self.namespace)
        except NotFoundError:
            body = _lease(
                self.namespace,
                self.name,
                {PREFIX_LABEL: self.prefix, ROLE_LABEL: "peer"},
                {WEIGHT_ANNOTATION: repr(float(self.weight))},
            )
            body["spec"] = {**spec, "acquireTime": now}
            await self.client.create(body)
            return
        lease["spec"] = {**(lease.get("spec") or {}), **spec}
        await self.client.update(lease)

    async def delete(self) -> None:
        """Remove the Lease, so the other replicas see this one leave at once; errors are ignored."""
        try:
            await self.client.delete(LEASE, self.name, namespace=self.namespace)
        except (*_API_ERRORS, NotFoundError):
            return
