"""The controller: per-cluster sources feed one fair work queue that workers drain into a reconciler.

A :class:`Controller` is both a runnable (:meth:`Controller.start` runs the workers until
cancelled) and multi-cluster *aware* (:meth:`Controller.engage` runs one cluster's watches for as
long as the cluster is engaged). What a reconcile's outcome does to its request is
:mod:`mcr.controller.outcome`'s (controller-runtime's result semantics).

What mcr does beyond upstream: engagement never blocks (each watch syncs in its own task with the
cache sync timeout and retries with backoff, a kind missing in one cluster is retried there
without failing the other watches); disengagement purges the cluster's queued and backed-off
items and cancels its in-flight reconciles; requests for clusters that are no longer engaged are
dropped; logs and metrics carry the cluster.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable
from typing import TYPE_CHECKING, ClassVar

from mcr import metrics
from mcr.controller.engagement import ClusterMetrics, EngagedCluster
from mcr.controller.fence import UNFENCED, FencedSteps, FenceLapsed, Tenure, cluster_fence
from mcr.controller.inflight import InFlight
from mcr.controller.outcome import drop_unfenced, drop_unserved, record_failure, record_result
from mcr.log import set_task_fields
from mcr.metrics.batching import Batch
from mcr.reconcile import Request, Result, as_reconcile_func, set_current_request
from mcr.source import Channel, ClusterFilter, Kind
from mcr.workqueue import QueueShutDown, WorkQueue
from mcr.workqueue.ratelimit import RateLimiter

if TYPE_CHECKING:
    from mcr.cluster import Cluster

__all__ = ["ClusterFilter", "Controller"]

log = logging.getLogger("mcr.controller")

RUN_LIMIT = 64
"""The most ready requests a single worker takes at once (see ``Controller._worker``)."""
RUN_SECONDS = 0.001
"""A worker's run of requests grows while runs take less than this (seconds), else starts over at one."""


class Controller:
    """Reconciles requests from its sources with ``reconciler`` across every engaged cluster.

    ``reconciler``: an ``async def (req) -> Result | None``, an object with such a ``reconcile``
    method, or a sync function (run in a thread). Options (controller-runtime defaults):
    ``max_concurrent_reconciles`` (1), ``rate_limiter`` (per-item exponential 5 ms..1000 s),
    ``cache_sync_timeout`` (120 s, per watch and cluster), ``reconcile_timeout`` (none; read when
    the workers start; a timeout counts as an error), ``need_leader_election`` (true),
    ``cluster_filter`` (``fn(name, cluster)``:
    clusters it rejects are not watched at all), ``skip_name_validation`` (names must be unique
    among live controllers, else ``ValueError``), ``engage_retry`` (first and longest delay between
    attempts to start a failed watch; 1 s and 60 s).
    """

    # The live controllers by name: names are unique per process, as controller-runtime's.
    _names: ClassVar[weakref.WeakValueDictionary[str, Controller]] = weakref.WeakValueDictionary()

    def __init__(
        self,
        name: str,
        reconciler: object,
        *,
        max_concurrent_reconciles: int = 1,
        rate_limiter: RateLimiter | None = None,
        cache_sync_timeout: float = 120.0,
        reconcile_timeout: float | None = None,
        need_leader_election: bool = True,
        cluster_filter: ClusterFilter | None = None,
        skip_name_validation: bool = False,
        engage_retry: tuple[float, float] = (1.0, 60.0),
    ) -> None:
        if not name:
            raise ValueError("a controller needs a name")
        if max_concurrent_reconciles < 1:
            raise ValueError(
                f"controller {name!r}: max_concurrent_reconciles must be >= 1, "
                f"got {max_concurrent_reconciles}"
            )
        if not skip_name_validation:
            if name in Controller._names:
                raise ValueError(
                    f"controller with name {name!r} already exists; controller names must be unique "
                    "(or pass skip_name_validation=True)"
                )
            Controller._names[name] = self
        self.name = name
        self._reconcile = as_reconcile_func(reconciler)
        self.reconciler = reconciler
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.cache_sync_timeout = cache_sync_timeout
        self.reconcile_timeout = reconcile_timeout
        self._need_leader_election = need_leader_election
        self.cluster_filter = cluster_filter
        self.engage_retry = engage_retry
        self.queue: WorkQueue[Request] = WorkQueue(name, rate_limiter=rate_limiter)
        self._kinds: list[Kind] = []
        self._channels: list[Channel] = []
        self._engagements: dict[str, EngagedCluster] = {}
        self._ever_engaged = False
        self._inflight = InFlight()  # per worker: its task and the request it is reconciling
        self._draining: set[str] = set()  # clusters being handed over (see drain)
        self._leadership: Tenure = UNFENCED  # see fence()
        # Bumped whenever a cluster may stop being served (engage, drain, disengage): a worker
        # re-checks the cluster of the next request it holds then, else once per cluster in a run.
        self._served_epoch = 0
        self._started = False
        self._cluster_metrics: dict[str, ClusterMetrics] = {}
        batch = self.queue.metrics_batch
        assert batch is not None  # a named queue records metrics
        # One batch for the queue's and the reconcile metrics: the queue arms its timer on every
        # pop and done, which covers the worker's observations in between.
        self._batch: Batch = batch
        metrics.MAX_CONCURRENT_RECONCILES.labels(name).set(max_concurrent_reconciles)
        inflight = self._inflight  # not self: the gauge must not keep the controller alive
        metrics.ACTIVE_WORKERS.labels(name).set_function(lambda: float(inflight.active()))

    def __repr__(self) -> str:
        return f"Controller({self.name!r})"

    # --- wiring -------------------------------------------------------------------------------

    def watch(self, source: Kind | Channel) -> None:
        """Add a source. A :class:`Kind` also starts on every cluster already engaged."""
        if isinstance(source, Kind):
            self._kinds.append(source)
            for eng in self._engagements.values():
                if self._selects(eng.name, eng.cluster) and source.should_engage(eng.name, eng.cluster):
                    eng.start_watch(source, self.queue, self.name, self.cache_sync_timeout, self.engage_retry)
        elif isinstance(source, Channel):
            if self._started:
                raise RuntimeError(f"controller {self.name!r}: add Channel sources before start()")
            self._channels.append(source)
        else:
            raise TypeError(f"controller {self.name!r}: not a source: {source!r}")

    @property
    def sources(self) -> list[Kind]:
        """The :class:`~mcr.source.Kind` sources added with :meth:`watch`, in order (a copy)."""
        return list(self._kinds)

    def flush_metrics(self) -> None:
        """Hand batched reconcile counts and durations to Prometheus now (else within a second)."""
        self._batch.flush()
        self.queue.flush_metrics()

    def need_leader_election(self) -> bool:
        """Whether the manager runs this controller only while it holds leadership."""
        return self._need_leader_election

    def fence(self, tenure: Tenure) -> None:
        """Reconcile only while ``tenure`` holds (the manager passes its leader election's to a
        controller that needs leadership).

        A worker compares the clock with the tenure before each reconcile and drops the request
        once it has passed (a paused process reconciles nothing when it resumes); when the tenure
        lapses, every reconcile in flight is cancelled. A cluster's own fence, which a coordinator
        publishes for the clusters it runs, is checked the same way besides.
        """
        self._leadership = tenure
        tenure.on_lapse(self._leadership_lapsed)

    def _leadership_lapsed(self) -> None:
        cancelled = self._inflight.cancel(None)
        log.warning("leadership lapsed: cancelled %d reconciles", cancelled, extra={"controller": self.name})

    # --- clusters -----------------------------------------------------------------------------

    def clusters(self) -> dict[str, str]:
        """Engaged clusters and their watch state: ``pending``, ``synced``, ``failed`` (or ``filtered``)."""
        return {
            name: (eng.state() if self._selects(name, eng.cluster) else "filtered")
            for name, eng in self._engagements.items()
        }

    def cluster_errors(self) -> dict[str, str]:
        """Why the watches of each cluster in state ``failed`` fail (their last errors), by cluster."""
        return {
            name: "; ".join(eng.errors.values())
            for name, eng in self._engagements.items()
            if eng.errors and self._selects(name, eng.cluster)
        }

    def cluster_state(self, name: str) -> str | None:
        """One cluster's entry of :meth:`clusters` (``None`` when not engaged), in O(watches).

        For callers that look clusters up one at a time: calling :meth:`clusters` per cluster
        would cost O(clusters) each, O(clusters^2) in all.
        """
        eng = self._engagements.get(name)
        if eng is None:
            return None
        return eng.state() if self._selects(name, eng.cluster) else "filtered"

    def _selects(self, name: str, cluster: Cluster) -> bool:
        return self.cluster_filter is None or bool(self.cluster_filter(name, cluster))

    async def engage(self, name: str, cluster: Cluster) -> None:
        """Watch ``cluster`` for as long as this call runs (see :class:`mcr.multicluster.Aware`).

        Returns nothing while engaged; it does not wait for caches (each watch syncs in the
        background with ``cache_sync_timeout`` and retries with backoff). Cancellation is
        disengagement: the cluster's registrations are removed, its queued, delayed and backed-off
        requests purged, its in-flight reconciles cancelled; then ``CancelledError`` propagates.
        Engaging ``name`` again (same or another cluster object) replaces the earlier engagement,
        whose call then returns without purging anything. When the coordinator fences the cluster
        (:func:`mcr.manager.coordinator.fence_cluster`), its requests are reconciled only while
        the fence holds, and its reconciles in flight are cancelled when the fence lapses.
        """
        old = self._engagements.get(name)
        if old is not None:
            old.superseded.set()
            await old.stop()
        self._draining.discard(name)
        eng = EngagedCluster(name, cluster, cluster_fence(name, cluster))
        if eng.fence is not UNFENCED:
            eng.unwatch = eng.fence.on_lapse(lambda: self._fence_lapsed(eng))
        self._engagements[name] = eng
        self._ever_engaged = True
        self._served_epoch += 1
        if self._selects(name, cluster):
            for src in self._kinds:
                if src.should_engage(name, cluster):
                    eng.start_watch(src, self.queue, self.name, self.cache_sync_timeout, self.engage_retry)
        try:
            await eng.superseded.wait()
        except asyncio.CancelledError:
            await self._disengage(eng)
            raise
        finally:
            eng.unwatch()
        await eng.stop()

    async def drain(self, name: str, timeout: float | None = None) -> bool:
        """Stop taking work for cluster ``name`` and wait until its reconciles in flight finish.

        Its watches stop and its queued requests are dropped; the engagement itself stays until
        ``engage`` is cancelled. Returns ``False`` if reconciles still ran after ``timeout`` s.
        """
        self._draining.add(name)  # workers drop its requests they hold but have not started
        self._served_epoch += 1
        eng = self._engagements.get(name)
        if eng is not None:
            await eng.stop()
        self.queue.forget_cluster(name)
        try:
            async with asyncio.timeout(timeout):
                # Polled: a hand-over is rare, and the workers' hot path stays free of signalling.
                while self._inflight.running_for(name):  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
        except TimeoutError:
            return False
        return True

    async def _disengage(self, eng: EngagedCluster) -> None:
        await eng.stop()
        if self._engagements.get(eng.name) is not eng:
            return  # replaced meanwhile: the new engagement owns the queue entries
        del self._engagements[eng.name]
        self._served_epoch += 1
        self._draining.discard(eng.name)
        dropped = self.queue.forget_cluster(eng.name)
        cancelled = self._inflight.cancel(eng.name)
        log.info(
            "disengaged cluster: dropped %d queued requests, cancelled %d reconciles",
            dropped,
            cancelled,
            extra={"controller": self.name, "cluster": eng.name},
        )
        self._retire_metrics(eng.name)

    def _fence_lapsed(self, eng: EngagedCluster) -> None:
        if self._engagements.get(eng.name) is not eng:
            return  # replaced or disengaged: the reconciles in flight belong to another engagement
        cancelled = self._inflight.cancel(eng.name)
        log.warning(
            "the cluster's fence lapsed: cancelled %d reconciles",
            cancelled,
            extra={"controller": self.name, "cluster": eng.name},
        )

    def _retire_metrics(self, cluster: str) -> None:
        """Stop batching the metrics of a disengaged cluster once none of its reconciles runs.

        Its values are handed to Prometheus first (the series stay, as in controller-runtime);
        without this, every cluster name ever engaged would keep its batched metrics, and each
        flush would visit them. Called at disengagement and when a reconcile that disengagement
        cancelled has finished.
        """
        if cluster in self._engagements or self._inflight.running_for(cluster):
            return
        m = self._cluster_metrics.pop(cluster, None)
        if m is not None:
            self._batch.discard(m.members())

    # --- running ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Run the workers (and Channel sources) until cancelled; a runnable for the manager.

        On cancellation: stops handing out requests, lets in-flight reconciles finish (a second
        cancellation cuts that short), then stops the workers and re-raises. Calling it twice is an
        error. The controller's name is released when it stops.
        """
        if self._started:
            raise RuntimeError(f"controller {self.name!r} was already started")
        self._started = True
        loop = asyncio.get_running_loop()
        self._inflight.current[:] = [None] * self.max_concurrent_reconciles
        workers = self._inflight.tasks
        workers[:] = [
            loop.create_task(self._worker(i), name=f"mcr-worker-{self.name}-{i}")
            for i in range(self.max_concurrent_reconciles)
        ]
        channels = [
            loop.create_task(ch.run(self.queue), name=f"mcr-channel-{self.name}") for ch in self._channels
        ]
        try:
            await asyncio.wait(workers)
        finally:
            try:
                await self.queue.shutdown(drain=True)
            finally:
                for task in (*workers, *channels):
                    task.cancel()
                await asyncio.gather(*workers, *channels, return_exceptions=True)
                self.flush_metrics()
                if Controller._names.get(self.name) is self:
                    del Controller._names[self.name]

    async def _worker(self, slot: int) -> None:
        """One worker: take a request, reconcile it, record the outcome, mark it done; repeat.

        The per-request work is inlined here (no coroutine per request besides the reconciler's,
        the uncommon outcomes in methods of their own) and everything that stays the same between
        requests is bound once. The worker runs in its own task, so it sets the ``controller``
        log field once; per request it sets only the current request (from which logs read
        cluster, namespace and name).
        """
        queue = self.queue
        task = asyncio.current_task()
        assert task is not None
        take = queue.take
        engagements = self._engagements
        cluster_metrics = self._cluster_metrics
        current = self._inflight.current
        aborted = self._inflight.aborted
        timeout = self.reconcile_timeout
        call = self._reconcile if timeout is None else self._reconcile_within
        # The current request is set per request and not reset after it: resetting costs as much
        # as setting, and nothing runs in this task between two requests but this loop, which
        # clears it before waiting for work and before logging about a request it drops.
        set_request = set_current_request
        clock = queue.clock
        batch = self._batch
        controller = self.name
        forget = queue.forget
        backed_off = queue.backed_off  # items with a failure history to forget on success
        set_task_fields(controller=controller)
        # A single worker takes the ready requests in runs (`take`), sized so that a run takes
        # about a millisecond: doubled after a faster run, back to one request after a slower one.
        # Runs save the per-request hand-out; short ones keep the queue's de-duplication and
        # fairness (a request held in a run is processing, so an event for it requeues it). With
        # several workers each takes one request at a time: a run would hold requests that an
        # idle worker could have started.
        most = RUN_LIMIT if self.max_concurrent_reconciles == 1 else 1
        size = 1
        draining = self._draining
        finish_all = queue.finish_all
        steps = FencedSteps()  # drives the reconciles of fenced clusters (see below)
        while True:
            reqs = take(size)
            if not reqs:
                set_request(None)
                try:
                    await queue.wait()
                except QueueShutDown:
                    return
                continue
            start = began = queue.popped_at  # the hand-out, on the queue's clock
            lead = self._leadership
            served: str | None = None  # a cluster checked in this run, as of `epoch`
            epoch = -1
            # A run's requests are counted per cluster they take in turn (`seg`, that cluster's
            # metrics): `ok` successes, and reconcile times in the slots of its time histogram
            # (`counts[k]` takes every time in (`low`, `high`], see BatchedHistogram.slot), whose
            # sum is the time since `since` as each starts where the one before ended. The
            # successes and the sum are settled into `seg` when the run moves to another
            # cluster's requests and when it ends.
            seg: ClusterMetrics | None = None
            ok = 0
            since = start
            try:
                for req in reqs:
                    try:
                        cluster = req.cluster_name
                        if cluster is not served or epoch != self._served_epoch:
                            eng = engagements.get(cluster)
                            if (draining and cluster in draining) or (eng is None and self._ever_engaged):
                                set_request(None)
                                drop_unserved(queue, req, controller, handed_over=cluster in draining)
                                continue
                            fence = UNFENCED if eng is None else eng.fence
                            # Not kept past this check: an idle worker holding the EngagedCluster would
                            # keep a disengaged cluster (its cache, informers, objects) alive.
                            eng = None
                            fenced = fence is not UNFENCED or lead is not UNFENCED
                            steps.first, steps.second = fence, lead
                            if seg is not None:
                                seg.settle(ok, start - since)
                                ok = 0
                            seg = m = cluster_metrics.get(cluster) or self._metrics_for(cluster)
                            served, epoch, since = cluster, self._served_epoch, start
                            counts, slot_of = m.time.counts, m.time.slot  # locals: no lookups per request
                            k, low, high = 0, 0.0, -1.0  # an empty range: the first time asks slot_of
                        if fenced:
                            # The fences, against the time the previous reconcile ended (or the run
                            # was handed out): the queue's clock is time.monotonic, as the tenures'.
                            # Then each step of the reconcile is checked again.
                            if start >= fence.valid_until or start >= lead.valid_until:
                                set_request(None)
                                drop_unfenced(queue, req, fence, lead, controller)
                                continue
                            reconcile: Awaitable[Result | None] = steps.run(call(req))
                        else:
                            reconcile = call(req)
                        current[slot] = req
                        set_request(req)
                        try:
                            result = await reconcile
                            if result is None:
                                if backed_off and req in backed_off:
                                    forget(req)
                                ok += 1  # success.inc(); the batch is armed below
                            else:
                                record_result(self.queue, req, result, m)
                        except FenceLapsed:
                            # Resumed after its fence lapsed (a paused process, say): the worker's
                            # own exception, never a cancellation of the worker; it goes on.
                            queue.forget(req)
                            log.info("reconcile cancelled: the fence lapsed")
                        except asyncio.CancelledError:
                            # Disengagement cancelled only this reconcile (no other cancellation is
                            # pending): the worker goes on; the `finally` takes the cancel back.
                            if req not in aborted or task.cancelling() > 1:
                                raise
                            queue.forget(req)
                            log.info("reconcile cancelled: cluster disengaged or its fence lapsed")
                        except Exception as exc:  # noqa: BLE001  # any reconciler error: recorded, requeued
                            record_failure(self.queue, req, exc, m, timed=self.reconcile_timeout is not None)
                        finally:
                            end = clock()
                            # The reconcile time, mirrored into the queue's work duration (same
                            # start and end): recorded once, so the queue is told `finish`.
                            took = end - start
                            if not low < took <= high:
                                k, low, high = slot_of(took)
                            counts[k] += 1
                            start = end  # the next held request starts now
                            current[slot] = None
                            if aborted and req in aborted:
                                # Disengagement or a lapsed fence cancelled this reconcile (it
                                # ended either way).
                                aborted.discard(req)
                                task.uncancel()
                                # The run's counts for this cluster go in before its metrics may.
                                m.settle(ok, start - since)
                                ok, since = 0, start
                                self._retire_metrics(cluster)
                    except Exception:
                        # Every reconciler outcome is handled above; reaching here is a bug in mcr,
                        # and a worker must survive it.
                        metrics.RECONCILE_PANICS_TOTAL.labels(controller, req.cluster_name).inc()
                        log.exception(
                            "internal error while processing %s", req, extra={"controller": controller}
                        )
            finally:
                # The run's requests stop processing together, when it ends or is cancelled (an
                # event for one of them meanwhile queues it again now).
                finish_all(reqs)
                if seg is not None:
                    seg.settle(ok, start - since)
                if batch.timer is None:
                    batch.touch()  # the run's observations reach Prometheus within the interval
            if most > 1:
                size = min(size * 2, most) if clock() - began < RUN_SECONDS else 1

    async def _reconcile_within(self, req: Request) -> Result | None:
        """The reconciler, bounded by ``reconcile_timeout`` (raises ``TimeoutError`` after it)."""
        async with asyncio.timeout(self.reconcile_timeout):
            return await self._reconcile(req)

    def _metrics_for(self, cluster: str) -> ClusterMetrics:
        m = self._cluster_metrics.get(cluster)
        if m is None:
            m = self._cluster_metrics[cluster] = ClusterMetrics(self._batch, self.name, cluster)
            # A reconcile's time is its work duration in the queue (from hand-out to done).
            self.queue.mirror_work_duration(m.time)
        return m
