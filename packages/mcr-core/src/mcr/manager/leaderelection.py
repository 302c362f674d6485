"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

A :class:`LeaderElector` campaigns for one Lease: it retries every ``retry_period`` (jittered by up
to 1.2x, so replicas do not hit the server in lockstep) until it holds the lease, then renews it
every ``retry_period``. Another holder's lease counts as expired only when its record has not
changed for ``lease_duration`` by *this* process's monotonic clock (clock skew between replicas
cannot hand the lease to two holders).

Leadership is valid until ``renew_deadline`` after the send time of the last write of the lease
the server confirmed (its :attr:`LeaderElector.tenure`), on this process's monotonic clock: a
standby takes over only ``lease_duration`` after it saw that write, so the leader stops first,
with ``lease_duration - renew_deadline`` to spare. Each attempt to renew is cut off at that
deadline; when it passes — requests hanging, the server unreachable, or the process paused — the
tenure lapses at once (leader-only work checking it stops, see :meth:`mcr.Controller.fence`),
:meth:`LeaderElector.run` raises :class:`LeaderElectionLostError` and the manager stops; there is
no re-campaign, the process is expected to exit. So does finding the lease taken by another.

Writes use the lease's resourceVersion, so two candidates can never both win one round (the
loser gets 409 Conflict). ``leaseTransitions`` counts holder changes; times are MicroTime with
microseconds. With ``release_on_cancel``, cancelling a leader empties ``holderIdentity`` (and sets
``leaseDurationSeconds`` to 1) so a standby takes over at once instead of after the lease expires.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from mcr.controller.fence import Tenure
from mcr.errors import AlreadyExistsError, ConflictError, MCRError, NotFoundError
from mcr.metrics import LEADER_ELECTION_MASTER_STATUS, LEADER_ELECTION_SLOWPATH_TOTAL

if TYPE_CHECKING:
    from mcr.rest.transport import Transport

__all__ = [
    "JITTER_FACTOR",
    "SA_NAMESPACE_FILE",
    "LeaderElectionLostError",
    "LeaderElector",
    "format_micro_time",
    "lease_namespace",
    "validate_options",
]

log = logging.getLogger("mcr.leaderelection")

_MIN_ATTEMPT = 0.1  # of the request timeout: the least time worth starting a renewal with

JITTER_FACTOR = 1.2
"""client-go's jitter factor: acquisition retries wait ``retry_period * (1 + random() * 1.2)``."""


class LeaderElectionLostError(MCRError):
    """This replica lost (or could not renew) its leader lease; the manager stopped."""

    def __init__(self, lease: str, identity: str, reason: str) -> None:
        self.lease = lease
        self.identity = identity
        super().__init__(f"leader election lost: lease {lease} held by {identity!r}: {reason}")


def format_micro_time(ts: datetime.datetime | None = None) -> str:
    """A Kubernetes MicroTime (``2006-01-02T15:04:05.000000Z``) for ``ts`` (default: now, UTC)."""
    ts = ts if ts is not None else datetime.datetime.now(datetime.UTC)
    return ts.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
"""Where a pod finds its own namespace: the default namespace of the leader lease."""


def lease_namespace(namespace: str | None) -> str:
    """``namespace``, else the pod's own (:data:`SA_NAMESPACE_FILE`).

    ``ValueError`` when neither is known (not running in a cluster and none given).
    """
    if namespace:
        return namespace
    try:
        with open(SA_NAMESPACE_FILE, encoding="utf-8") as f:
            found = f.read().strip()
    except OSError:
        found = ""
    if not found:
        raise ValueError(
            "leader_election_namespace is required when not running in a cluster "
            f"({SA_NAMESPACE_FILE} not found)"
        )
    return found


def validate_options(
    name: str, namespace: str, lease_duration: float, renew_deadline: float, retry_period: float
) -> None:
    """Raise ``ValueError`` naming the option unless the lease is named and the timings are sane.

    client-go's rule: ``lease_duration > renew_deadline > 1.2 * retry_period > 0``.
    """
    if not name:
        raise ValueError("leader election needs a lease name (leader_election_id)")
    if not namespace:
        raise ValueError(f"leader election lease {name!r} needs a namespace (leader_election_namespace)")
    if not lease_duration > renew_deadline:
        raise ValueError(
            f"lease_duration ({lease_duration}) must be greater than renew_deadline ({renew_deadline})"
        )
    if not renew_deadline > JITTER_FACTOR * retry_period:
        raise ValueError(
            f"renew_deadline ({renew_deadline}) must be greater than "
            f"{JITTER_FACTOR} x retry_period ({retry_period})"
        )
    if retry_period <= 0:
        raise ValueError(f"retry_period ({retry_period}) must be positive")


@dataclass
class _Observed:
    spec: dict[str, Any]
    at: float  # monotonic time when this record was first seen


class LeaderElector:
    """Campaigns for and holds one Lease through ``transport`` (which this object does not own).

    ``elected`` is set while this replica leads; ``tenure`` says until when it may be sure to
    (give ``tenure`` to share one made beforehand, e.g. with the runnables it fences). ``run``
    campaigns, then renews until cancelled (returns by re-raising ``CancelledError`` after the
    optional release; the tenure is released) or until leadership is lost (raises
    :class:`LeaderElectionLostError`; the tenure lapsed). ``run`` may be called once.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_cancel: bool = False,
        tenure: Tenure | None = None,
    ) -> None:
        validate_options(name, namespace, lease_duration, renew_deadline, retry_period)
        self._transport = transport
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self.request_timeout = max(renew_deadline / 2, 1.0)
        self.elected = asyncio.Event()
        self.tenure = tenure if tenure is not None else Tenure(f"leader lease {namespace}/{name}")
        self._sent = 0.0  # monotonic send time of the last write the server confirmed
        self._observed: _Observed | None = None
        self._lease: dict[str, Any] | None = None  # the last lease object read or written by us
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._rng = random.Random()
        LEADER_ELECTION_MASTER_STATUS.labels(name).set(0)

    @property
    def lease_key(self) -> str:
        return f"{self.namespace}/{self.name}"

    # -- running ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire, then renew until cancelled or lost (see the class docstring)."""
        try:
            await self._acquire()
            log.info("became leader", extra={"lease": self.lease_key, "identity": self.identity})
            self.elected.set()
            LEADER_ELECTION_MASTER_STATUS.labels(self.name).set(1)
            await self._renew_loop()
        except asyncio.CancelledError:
            # Leader-only work has stopped (the manager stops it first): the tenure ends quietly.
            self.tenure.release()
            if self.release_on_cancel and self.elected.is_set():
                await self._release()
            raise
        except BaseException:
            self.tenure.lapse()
            raise
        finally:
            self.elected.clear()
            LEADER_ELECTION_MASTER_STATUS.labels(self.name).set(0)

    async def _acquire(self) -> None:
        log.info(
            "attempting to acquire leader lease", extra={"lease": self.lease_key, "identity": self.identity}
        )
        while True:
            sent = time.monotonic()
            # Held once the write is confirmed within the renew deadline of its sending.
            if await self._try_acquire_or_renew() and self.tenure.confirm(sent + self.renew_deadline):
                self._sent = sent
                return
            await asyncio.sleep(self.retry_period * (1 + self._rng.random() * JITTER_FACTOR))

    async def _renew_loop(self) -> None:
        """Renew every ``retry_period`` after the last confirmed write's sending, retrying until the
        tenure's deadline (each attempt is cut off there); raise when leadership is lost."""
        tenure = self.tenure
        while True:
            await asyncio.sleep(max(self._sent + self.retry_period - time.monotonic(), 0.0))
            while True:
                sent = time.monotonic()
                # An attempt with almost no time left would only be cut off mid-request.
                if tenure.valid_until - sent < _MIN_ATTEMPT * min(self.request_timeout, self.renew_deadline):
                    raise LeaderElectionLostError(
                        self.lease_key, self.identity, f"failed to renew within {self.renew_deadline}s"
                    )
                if await self._try_acquire_or_renew(deadline=tenure.valid_until):
                    if not tenure.confirm(sent + self.renew_deadline):
                        raise LeaderElectionLostError(
                            self.lease_key, self.identity, f"renewal confirmed after {self.renew_deadline}s"
                        )
                    self._sent = sent
                    break
                await asyncio.sleep(min(self.retry_period, max(tenure.valid_until - time.monotonic(), 0.0)))

    # -- one round -------------------------------------------------------------------------------

    async def _try_acquire_or_renew(self, *, deadline: float | None = None) -> bool:
        """One client-go ``tryAcquireOrRenew`` round; False on any error or when another holds it.

        If the caller is cancelled meanwhile, the request in flight is allowed to finish (it is
        bounded by the request timeout) before ``CancelledError`` propagates: abandoning a lease
        write half-way would leave us unsure whether it landed.
        """
        timeout = self.request_timeout
        if deadline is not None:
            timeout = min(timeout, max(deadline - time.monotonic(), 0.001))
        attempt = asyncio.create_task(self._bounded_round(timeout), name=f"mcr-lease-{self.lease_key}")
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            await asyncio.wait([attempt])
            if not attempt.cancelled():
                attempt.exception()  # retrieved: the cancellation wins
            raise

    async def _bounded_round(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                return await self._round()
        except TimeoutError:
            log.warning("lease request timed out", extra={"lease": self.lease_key, "timeout": timeout})
            return False
        except LeaderElectionLostError:
            raise
        except MCRError as exc:
            log.warning(
                "error acquiring or renewing the leader lease",
                extra={"lease": self.lease_key, "error": str(exc)},
            )
            return False

    async def _round(self) -> bool:
        now = format_micro_time()
        # Fast path: we lead and hold the last lease object we wrote; update it directly.
        if self.elected.is_set() and self._lease is not None:
            try:
                self._lease = await self._put(self._renewed(self._lease, now))
                self._observe(self._lease)
                return True
            except ConflictError:
                LEADER_ELECTION_SLOWPATH_TOTAL.labels(self.name).inc()
        try:
            lease = await self._get()
        except NotFoundError:
            try:
                self._lease = await self._create(now)
            except AlreadyExistsError:
                return False
            self._observe(self._lease)
            return True
        self._observe(lease)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        assert self._observed is not None
        held_by_other = holder and holder != self.identity
        if held_by_other and self._observed.at + self._duration_of(spec) > time.monotonic():
            if self.elected.is_set():
                raise LeaderElectionLostError(self.lease_key, self.identity, f"lease taken by {holder!r}")
            return False
        try:
            self._lease = await self._put(self._renewed(lease, now))
        except ConflictError:
            return False
        self._observe(self._lease)
        return True

    def _duration_of(self, spec: dict[str, Any]) -> float:
        value = spec.get("leaseDurationSeconds")
        return float(value) if isinstance(value, int | float) and value > 0 else self.lease_duration

    def _observe(self, lease: dict[str, Any]) -> None:
        spec = dict(lease.get("spec") or {})
        if self._observed is None or self._observed.spec != spec:
            self._observed = _Observed(spec, time.monotonic())

    def _renewed(self, lease: dict[str, Any], now: str) -> dict[str, Any]:
        spec = dict(lease.get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            # Taking over (from another holder or a released lease) is a transition, as in client-go.
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.setdefault("leaseTransitions", 0)
        spec.setdefault("acquireTime", now)
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = max(round(self.lease_duration), 1)
        spec["renewTime"] = now
        return {**lease, "spec": spec}

    async def _release(self) -> None:
        """Empty the holder so a standby can take over at once; errors are logged, not raised."""
        lease = self._lease
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        now = format_micro_time()
        spec = dict(lease.get("spec") or {})
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=now, acquireTime=now)
        try:
            async with asyncio.timeout(self.request_timeout):
                await self._put({**lease, "spec": spec})
            log.info("released leader lease", extra={"lease": self.lease_key, "identity": self.identity})
        except (TimeoutError, MCRError) as exc:
            log.warning("failed to release leader lease", extra={"lease": self.lease_key, "error": str(exc)})

    # -- HTTP ------------------------------------------------------------------------------------

    async def _get(self) -> dict[str, Any]:
        resp = await self._transport.request("GET", self._path)
        lease: dict[str, Any] = resp.json()
        return lease

    async def _create(self, now: str) -> dict[str, Any]:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(round(self.lease_duration), 1),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        resp = await self._transport.request(
            "POST", self._collection, body=orjson.dumps(body), content_type="application/json"
        )
        created: dict[str, Any] = resp.json()
        return created

    async def _put(self, lease: dict[str, Any]) -> dict[str, Any]:
        resp = await self._transport.request(
            "PUT", self._path, body=orjson.dumps(lease), content_type="application/json"
        )
        updated: dict[str, Any] = resp.json()
        return updated
