"""Coordinators decide whether this replica runs the controllers of an engaged cluster.

When a provider engages a cluster with the manager, the manager hands the engagement to its
coordinator together with ``run``: a coroutine function that engages every multi-cluster-aware
runnable with that cluster and runs until cancelled. The coordinator calls ``run`` while this
replica owns the cluster and cancels it when ownership moves elsewhere (calling it again when
ownership comes back). :class:`BasicCoordinator` owns every cluster: one replica, or leader
election, runs everything. A sharded coordinator spreads clusters across replicas.

A coordinator that needs a background loop (membership, leases) also has ``async def start()``;
the manager then runs it as a runnable on every replica (``need_leader_election`` is honoured). A
coordinator with ``bind(manager)`` is handed its manager when the manager is created, and one with
``owner_of(name)`` reports each cluster's owner in :meth:`mcr.Manager.clusters`. The ``run`` it is
given also has ``await run.drain(timeout)``: the controllers stop taking work for the cluster and
finish what is in flight — call it before cancelling ``run()`` to hand a cluster over gracefully.
:class:`mcr.sharding.ShardedCoordinator` spreads clusters over replicas with Leases.

Fencing: a coordinator that runs a cluster only while it holds a lease publishes how long it is
sure to hold it — a :class:`Tenure` it confirms after each renewal — with
:func:`fence_cluster` before calling ``run()``, and withdraws it once ``run()`` has ended. Every
controller engaged with that cluster then starts a reconcile only while the tenure holds (checked
against the clock before each one, so a process resumed after a pause runs nothing queued) and
cancels its reconciles in flight the moment it lapses, without waiting for the coordinator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from mcr.controller.fence import Tenure, fence_cluster

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.multicluster import ClusterName

__all__ = ["BasicCoordinator", "Coordinator", "Tenure", "fence_cluster"]


@runtime_checkable
class Coordinator(Protocol):
    """Decides, per engaged cluster, whether this replica runs its controllers."""

    async def coordinate(
        self, name: ClusterName, cluster: Cluster, run: Callable[[], Awaitable[None]]
    ) -> None:
        """Run for as long as ``name`` is engaged; await ``run()`` while this replica owns it.

        Cancelling this coroutine is the disengagement: it cancels a ``run()`` in progress, waits for
        it, releases anything it holds for the cluster (a fencing lease) and re-raises
        ``CancelledError``. Errors from ``run()`` propagate. It must not return while engaged.
        """
        ...


class BasicCoordinator:
    """Owns every cluster: engages all aware runnables with each cluster (the default)."""

    async def coordinate(
        self, name: ClusterName, cluster: Cluster, run: Callable[[], Awaitable[None]]
    ) -> None:
        await run()

    def __repr__(self) -> str:
        return "BasicCoordinator()"
