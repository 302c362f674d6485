"""The manager's table of engaged clusters and the per-cluster tasks of every aware runnable.

:meth:`Engagements.engage` is the body of :meth:`mcr.manager.Manager.engage`. Each engagement runs
in a task of its own (so the provider's call only waits on it): the coordinator decides whether
this replica runs the cluster, and while it does, every *active* aware runnable is engaged with the
cluster in its own supervised task. Aware runnables become active when the manager starts them
(leader-election runnables only once elected); an aware activated after clusters were engaged is
engaged with every one of them at once (replay), which upstream does not do.

Engaging a name again, with the same or another cluster object, replaces the earlier engagement:
its tasks are cancelled and awaited (each aware tears that cluster down) before the new one
starts, and the earlier ``engage`` call returns. Cancelling an ``engage`` call disengages: it
returns only after every per-cluster task of that engagement has ended, then re-raises.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcr.log import fresh_context
from mcr.manager.runnables import runnable_name, stop_tasks
from mcr.metrics import CLUSTER_ENGAGE_TOTAL

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.manager.coordinator import Coordinator
    from mcr.manager.series import DepartedSeries
    from mcr.multicluster import Aware

__all__ = ["ClusterInfo", "ClusterRun", "ClusterState", "Engagements"]

log = logging.getLogger("mcr.manager")

_RETRY_INITIAL = 0.5
_RETRY_MAX = 30.0


class ClusterState(enum.StrEnum):
    """Where an engaged cluster stands.

    ``pending``: engaged, the controllers' watches are not all synced yet, or this replica does not
    run the cluster (the coordinator gave it to another replica, or leadership is still awaited).
    ``synced``: every watch synced. ``failed``: a watch cannot sync (unreachable, forbidden, sync
    timeout); it is being retried. ``error``: an aware runnable's ``engage`` raised; it is
    restarted with backoff.
    """

    PENDING = "pending"
    SYNCED = "synced"
    FAILED = "failed"
    ERROR = "error"


@dataclass(frozen=True)
class ClusterInfo:
    """A snapshot of one engaged cluster, as :meth:`mcr.manager.Manager.clusters` lists it.

    ``error``: for a ``failed`` cluster, why its watches fail (each failing runnable's watches, with
    the error they last got); otherwise the last error of an aware runnable's ``engage``, if any.
    """

    name: str
    cluster: Cluster
    state: ClusterState
    error: str | None
    engaged_at: float  # wall-clock time.time() of the engagement
    running: bool  # whether this replica runs its controllers (the coordinator said so)
    owner: str | None = None  # the replica that owns it, when the coordinator shards clusters


@dataclass(eq=False)
class _ClusterEntry:
    name: str
    cluster: Cluster
    engaged_at: float = field(default_factory=time.time)
    task: asyncio.Task[None] | None = None
    running: bool = False
    aware_tasks: dict[int, asyncio.Task[None]] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)  # per aware, while it is failing
    last_error: str | None = None


class ClusterRun:
    """What a coordinator is handed for one cluster: ``await run()`` engages every aware runnable
    with it until cancelled; ``await run.drain(timeout)`` first lets them finish the work in flight
    (a graceful hand-over to another replica)."""

    def __init__(self, engagements: Engagements, eng: _ClusterEntry) -> None:
        self._engagements = engagements
        self._eng = eng

    def __call__(self) -> Coroutine[Any, Any, None]:
        return self._engagements._run(self._eng)

    async def drain(self, timeout: float | None = None) -> bool:
        return await self._engagements.drain(self._eng.name, timeout)


class Engagements:
    """Engaged clusters, the active aware runnables, and the tasks joining them."""

    def __init__(
        self,
        coordinator: Coordinator,
        *,
        standby: Callable[[], bool] | None = None,
        departures: DepartedSeries | None = None,
    ) -> None:
        self.coordinator = coordinator
        # True while some aware runnables wait for leadership: clusters then count as pending.
        self._standby = standby
        # Told of every name that stops being engaged (and of every name engaged), if given.
        self._departures = departures
        self._awares: list[Aware] = []
        self._table: dict[str, _ClusterEntry] = {}
        # One lock per engaged name, so replacing one cluster never waits on another cluster's
        # teardown; a name's lock goes with its last engagement unless a call holds or awaits it.
        self._locks: dict[str, asyncio.Lock] = {}
        self.closed = False

    # -- queries ---------------------------------------------------------------------------------

    def get(self, name: str) -> Cluster | None:
        eng = self._table.get(name)
        return eng.cluster if eng is not None else None

    def names(self) -> list[str]:
        return sorted(self._table)

    def infos(self) -> list[ClusterInfo]:
        # Each aware reports all its clusters at once: ask each once, not once per cluster.
        reports = [r() for r in (getattr(a, "clusters", None) for a in self._awares) if callable(r)]
        failures: list[tuple[str, dict[str, str]]] = []
        for aware in self._awares:
            errors = getattr(aware, "cluster_errors", None)
            if callable(errors):
                failures.append((runnable_name(aware), errors()))
        standby = self._standby is not None and self._standby()
        return [self._info(eng, reports, failures, standby) for _, eng in sorted(self._table.items())]

    def _info(
        self,
        eng: _ClusterEntry,
        reports: list[dict[str, str]],
        failures: list[tuple[str, dict[str, str]]],
        standby: bool,
    ) -> ClusterInfo:
        owner_of = getattr(self.coordinator, "owner_of", None)
        state = self._state(eng, reports, standby)
        error = eng.last_error
        if state == ClusterState.FAILED:
            # Why its watches fail now (a kind the cluster does not serve, a sync timeout, ...).
            failing = [f"{name}: {errors[eng.name]}" for name, errors in failures if eng.name in errors]
            error = "; ".join(failing) or error
        return ClusterInfo(
            name=eng.name,
            cluster=eng.cluster,
            state=state,
            error=error,
            engaged_at=eng.engaged_at,
            running=eng.running,
            owner=owner_of(eng.name) if callable(owner_of) and eng.name else None,
        )

    @staticmethod
    def _state(eng: _ClusterEntry, reports: list[dict[str, str]], standby: bool) -> ClusterState:
        if eng.errors:
            return ClusterState.ERROR
        if not eng.running or standby:
            return ClusterState.PENDING
        states: list[str] = []
        for report in reports:
            state = report.get(eng.name)
            if state is None:
                states.append(ClusterState.PENDING)  # not engaged with it yet
            elif state != "filtered":
                states.append(str(state))
        if ClusterState.FAILED in states:
            return ClusterState.FAILED
        if all(s == ClusterState.SYNCED for s in states):
            return ClusterState.SYNCED
        return ClusterState.PENDING

    # -- aware runnables -------------------------------------------------------------------------

    def activate(self, aware: Aware) -> None:
        """Engage ``aware`` with every running engagement now and with every later one."""
        if any(a is aware for a in self._awares):
            return
        self._awares.append(aware)
        for eng in self._table.values():
            if eng.running:
                self._spawn(eng, aware)

    # -- engagement ------------------------------------------------------------------------------

    async def engage(self, name: str, cluster: Cluster, *, coordinate: bool = True) -> None:
        """Engage ``cluster`` as ``name`` until cancelled or replaced (see the module docstring).

        Errors raised by the coordinator propagate (the engagement is then dropped). After
        :meth:`close` a call waits, without engaging anything, until it is cancelled. The
        engagement's records and tasks carry none of the caller's log fields (a provider engages
        from its own reconciles): only ``cluster``.
        """
        with fresh_context(cluster=name):
            await self._engage(name, cluster, coordinate)

    async def _engage(self, name: str, cluster: Cluster, coordinate: bool) -> None:
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            if self.closed:  # also re-checked after waiting for the lock
                await asyncio.get_running_loop().create_future()
            old = self._table.get(name)
            if old is not None:
                log.info("replacing engaged cluster", extra={"cluster": name})
                await self._end(old, "replaced")
            eng = _ClusterEntry(name, cluster)
            self._table[name] = eng
            if self._departures is not None:
                self._departures.returned(name)
            eng.task = asyncio.create_task(self._coordinate(eng, coordinate), name=f"mcr-engagement-{name}")
        CLUSTER_ENGAGE_TOTAL.labels("engaged").inc()
        log.info("engaged cluster", extra={"cluster": name})
        try:
            await asyncio.wait([eng.task])
        except asyncio.CancelledError:
            await self._end(eng, "disengaged")
            log.info("disengaged cluster", extra={"cluster": name})
            self._left(name)
            raise
        if eng.task.cancelled():
            return  # replaced (or closed): the earlier caller's engagement simply ends
        exc = eng.task.exception()
        if exc is not None:
            self._drop(eng)
            CLUSTER_ENGAGE_TOTAL.labels("failed").inc()
            self._left(name)
            raise exc

    async def close(self) -> list[str]:
        """Disengage every cluster (awaiting all teardown); later ``engage`` calls engage nothing."""
        self.closed = True
        tasks = [e.task for e in self._table.values() if e.task is not None]
        overran = await stop_tasks(tasks, None)
        self._table.clear()
        return overran

    async def _end(self, eng: _ClusterEntry, result: str) -> None:
        if eng.task is not None:
            await stop_tasks([eng.task], None)
        self._drop(eng)
        CLUSTER_ENGAGE_TOTAL.labels(result).inc()

    def _drop(self, eng: _ClusterEntry) -> None:
        if self._table.get(eng.name) is eng:
            del self._table[eng.name]

    def _left(self, name: str) -> None:
        """``name``'s engagement ended without a successor: its lock goes, its series may go."""
        if name in self._table:
            return  # engaged again meanwhile
        lock = self._locks.get(name)
        if lock is not None and not lock.locked():  # unlocked: no call holds or awaits it
            del self._locks[name]
        if self._departures is not None and not self.closed:
            self._departures.departed(name)

    async def drain(self, name: str, timeout: float | None = None) -> bool:
        """Let every active aware with a ``drain`` stop taking work for ``name`` and finish what is
        in flight (``timeout`` seconds at most); returns whether all of them finished."""
        results = []
        for aware in list(self._awares):
            drain = getattr(aware, "drain", None)
            if callable(drain):
                results.append(bool(await drain(name, timeout)))
        return all(results)

    async def _coordinate(self, eng: _ClusterEntry, coordinate: bool) -> None:
        run = ClusterRun(self, eng)
        if coordinate:
            await self.coordinator.coordinate(eng.name, eng.cluster, run)
        else:
            await run()
        # A coordinator must not return while engaged; hold the engagement until cancelled.
        await asyncio.get_running_loop().create_future()

    async def _run(self, eng: _ClusterEntry) -> None:
        """Engage every active aware with ``eng`` until cancelled (the coordinator's ``run``)."""
        if eng.running:
            raise RuntimeError(f"cluster {eng.name!r} is already running on this replica")
        eng.running = True
        try:
            for aware in list(self._awares):
                self._spawn(eng, aware)
            await asyncio.get_running_loop().create_future()
        finally:
            eng.running = False
            tasks = list(eng.aware_tasks.values())
            eng.aware_tasks.clear()
            eng.errors.clear()
            await stop_tasks(tasks, None)

    def _spawn(self, eng: _ClusterEntry, aware: Aware) -> None:
        key = id(aware)
        if key in eng.aware_tasks:
            return
        task = asyncio.create_task(
            self._supervise(eng, aware), name=f"mcr-engage-{runnable_name(aware)}-{eng.name}"
        )
        eng.aware_tasks[key] = task
        task.add_done_callback(functools.partial(self._aware_done, eng, key))

    @staticmethod
    def _aware_done(eng: _ClusterEntry, key: int, task: asyncio.Task[None]) -> None:
        if eng.aware_tasks.get(key) is task:
            del eng.aware_tasks[key]

    async def _supervise(self, eng: _ClusterEntry, aware: Any) -> None:
        """Run ``aware.engage`` for ``eng``; restart it with backoff if it raises."""
        delay = _RETRY_INITIAL
        key = id(aware)
        while True:
            try:
                await aware.engage(eng.name, eng.cluster)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                message = f"{runnable_name(aware)}: {type(exc).__name__}: {exc}"
                eng.errors[key] = eng.last_error = message
                CLUSTER_ENGAGE_TOTAL.labels("failed").inc()
                log.exception(
                    "engaging cluster failed, retrying in %.1fs",
                    delay,
                    extra={"cluster": eng.name, "runnable": runnable_name(aware)},
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)
                eng.errors.pop(key, None)
                continue
            # Returned while still engaged: the aware considers its engagement done.
            log.debug("engage returned", extra={"cluster": eng.name, "runnable": runnable_name(aware)})
            return
