"""What providers that read their fleet from a cluster (Secrets, Cluster API, ClusterProfiles,
namespaces) share: finding that *host* cluster, and running a private controller on it.

Such a provider watches objects in the host cluster — usually the manager's own (local) cluster —
and turns them into engaged clusters. It runs its watch as an ordinary mcr
:class:`~mcr.controller.Controller` (work queue, retries with backoff, metrics under the
controller's name) engaged with the host cluster only, inside its own ``start``; so it needs no
manager-specific setup, works under :class:`~mcr.providers.MultiProvider`, and runs on every
replica (the manager starts providers before leader election).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcr.cluster import Cluster
from mcr.multicluster import LOCAL_CLUSTER
from mcr.providers.clusters import Extract
from mcr.providers.sourced import ClusterFactory, Problem, SourcedClusters
from mcr.providers.tasks import cancel_and_wait

if TYPE_CHECKING:
    from mcr.controller import Controller
    from mcr.multicluster import Aware, ClusterName
    from mcr.rest.config import RestConfig

__all__ = ["SourcedProvider", "controller_name_for", "host_cluster", "run_controller", "run_sourced"]


def host_cluster(aware: Any, explicit: Cluster | None, *, provider: str) -> Cluster:
    """The cluster a provider reads its fleet from.

    ``explicit`` when given; else the local cluster of the aware the provider was started with (an
    :class:`mcr.Manager` with a config has one, and :class:`~mcr.providers.MultiProvider` passes its
    own aware's through). Raises ``ValueError`` naming ``provider`` when there is none.
    """
    if explicit is not None:
        return explicit
    local = getattr(aware, "local_cluster", None)
    if local is None:
        raise ValueError(
            f"the {provider} provider needs a host cluster to watch: pass cluster=mcr.Cluster(...) "
            "or run it under an mcr.Manager that has a config (its local cluster is used)"
        )
    if not isinstance(local, Cluster):
        raise TypeError(f"the {provider} provider: local_cluster of {aware!r} is not an mcr.Cluster")
    return local


def controller_name_for(aware: Any, default: str, explicit: str | None = None) -> str:
    """The name of a provider's private controller, unique among the providers of one fleet.

    ``explicit`` (the user's ``controller_name=``) is used as given. Otherwise ``default`` — which
    the provider derives from what sets the instance apart (its namespace, say) — is prefixed with
    the ``cluster_name_prefix`` of the aware it was started with: a member ``prod`` of a
    :class:`~mcr.providers.MultiProvider` runs ``"prod#<default>"``, so two providers of one kind
    composed in one fleet never clash on the name (controller names are unique per process).
    """
    if explicit:
        return explicit
    prefix = getattr(aware, "cluster_name_prefix", "")
    return f"{prefix}{default}" if isinstance(prefix, str) else default


async def run_controller(controller: Controller, cluster: Cluster, *, name: str = LOCAL_CLUSTER) -> None:
    """Run ``controller``'s workers and engage it with ``cluster`` (as ``name``) until cancelled.

    Starts ``cluster`` first (idempotent; a cluster passed in by the caller is never stopped here).
    Cancelling disengages the controller (its queued requests are dropped, in-flight reconciles
    cancelled), stops its workers, waits for both, then re-raises ``CancelledError``. If the
    workers end on their own with an error, the engagement is cancelled and the error raised.
    """
    await cluster.start()
    loop = asyncio.get_running_loop()
    workers = loop.create_task(controller.start(), name=f"mcr-provider-controller-{controller.name}")
    engagement = loop.create_task(
        controller.engage(name, cluster), name=f"mcr-provider-engage-{controller.name}"
    )
    try:
        await asyncio.wait([workers, engagement], return_when=asyncio.FIRST_COMPLETED)
    finally:
        # Disengage before stopping the workers, so no reconcile starts for a cluster on its way out.
        await cancel_and_wait([engagement])
        await cancel_and_wait([workers])
    for task in (workers, engagement):
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error
    raise RuntimeError(f"controller {controller.name!r} of a provider stopped on its own")


async def run_sourced(sourced: SourcedClusters, aware: Aware, controller: Controller, view: Cluster) -> None:
    """A provider's ``start``: engage ``sourced``'s clusters with ``aware`` while ``controller``
    watches their sources on ``view`` (the provider's private view of the host), until cancelled.

    ``view`` belongs to the provider: it is stopped at the end, however this returns. Cancelling
    disengages every cluster, stops the controller, and re-raises ``CancelledError``; if either
    part fails on its own, the other is cancelled and the error raised.
    """
    loop = asyncio.get_running_loop()
    tasks = [
        loop.create_task(sourced.run(aware), name=f"mcr-provider-clusters-{controller.name}"),
        loop.create_task(run_controller(controller, view), name=f"mcr-provider-watch-{controller.name}"),
    ]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
        raise RuntimeError(f"provider controller {controller.name!r} stopped on its own")
    finally:
        await cancel_and_wait(tasks)
        await view.stop()


class SourcedProvider:
    """The part every provider built on :class:`SourcedClusters` shares: the Provider methods and
    how a cluster is made from a :class:`~mcr.rest.config.RestConfig`.

    ``provider`` names it in logs; ``cluster_options`` are passed to each :class:`mcr.Cluster`,
    ``cluster_factory(config, name)`` replaces that call altogether. Subclasses find their sources,
    call :meth:`SourcedClusters.apply` / ``reject`` / ``discard`` on :attr:`sourced`, and run
    :meth:`SourcedClusters.run` (or :func:`mcr.providers.run_sourced`) in their ``start``.
    """

    def __init__(
        self,
        *,
        provider: str,
        logger: logging.Logger,
        cluster_options: Mapping[str, Any] | None = None,
        cluster_factory: ClusterFactory | None = None,
    ) -> None:
        self.sourced = SourcedClusters(provider=provider, logger=logger)
        self._view: Cluster | None = None
        self._cluster_options = dict(cluster_options or {})
        self._factory = cluster_factory or self._new_cluster

    async def get(self, name: ClusterName) -> Cluster:
        """The engaged cluster ``name``; :class:`~mcr.ClusterNotFoundError` otherwise."""
        return await self.sourced.get(name)

    async def index_field(self, kind: Any, field: str, extract: Extract) -> None:
        """Index ``field`` of ``kind`` on every current and future cluster."""
        await self.sourced.index_field(kind, field, extract)

    def names(self) -> list[str]:
        """The engaged cluster names, sorted."""
        return self.sourced.names()

    def problems(self) -> list[Problem]:
        """Sources that yield no cluster right now, and why (never credential values)."""
        return self.sourced.problems()

    async def watch_sources(self, aware: Aware, controller: Any, view: Cluster) -> None:
        """:func:`mcr.providers.run_sourced` with ``view`` available as :attr:`view` meanwhile (the
        private view of the host the controller's reconciles read their sources from)."""
        self._view = view
        try:
            await run_sourced(self.sourced, aware, controller, view)
        finally:
            self._view = None

    @property
    def view(self) -> Cluster:
        """The private view of the host while :meth:`watch_sources` runs (``RuntimeError`` else)."""
        view = self._view
        if view is None:
            raise RuntimeError(f"{self!r} is not started: its sources are read only while it runs")
        return view

    def make_cluster(self, config: RestConfig, name: str) -> Cluster:
        """A new cluster ``name`` for ``config``, through ``cluster_factory`` if one was given."""
        return self._factory(config, name)

    def _new_cluster(self, config: RestConfig, name: str) -> Cluster:
        return Cluster(config, name=name, **self._cluster_options)
