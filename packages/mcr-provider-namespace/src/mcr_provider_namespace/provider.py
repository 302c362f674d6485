"""The namespace provider: every namespace of one host cluster is a cluster, named after it.

Inside a namespace cluster every namespaced object lives in namespace ``default``; reads and
writes go to the host namespace the cluster is named after (see
:class:`~mcr_provider_namespace.NamespaceCluster`). All namespace clusters share the host's cache:
one informer per kind for the whole host, and one dispatcher per informer that hands each event to
its namespace's handlers — a namespace cluster adds bookkeeping, never a watch or a copy of the
objects.

The provider watches the host's Namespaces (through the host's cache, with a private controller):
a namespace that appears is engaged; one that is deleted, or starts terminating, is disengaged
(also when the informer learns of the deletion only by relisting). ``label_selector`` limits the
namespaces, ``exclude`` names namespaces never engaged (names or shell-style patterns).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from mcr.cache.selectors import parse_label_selector
from mcr.cluster import Cluster
from mcr.controller import Controller
from mcr.errors import NotFoundError
from mcr.providers import Clusters, cancel_and_wait, controller_name_for, host_cluster, run_controller
from mcr.reconcile import Request
from mcr.source import Kind
from mcr_provider_namespace._cache import SharedViews
from mcr_provider_namespace.cluster import NamespaceCluster

if TYPE_CHECKING:
    from mcr.multicluster import Aware, ClusterName

__all__ = ["NamespaceProvider"]

log = logging.getLogger("mcr.providers.namespace")

DEFAULT_CONTROLLER_NAME = "namespace-provider"


class NamespaceProvider:
    """Clusters from the namespaces of ``cluster`` (default: the manager's local cluster).

    ``label_selector`` (a selector string or mapping) keeps only the namespaces it matches;
    ``exclude`` names namespaces never engaged: names or shell-style patterns (``kube-*``, matched
    case-sensitively with :func:`fnmatch.fnmatchcase`; a namespace name never contains ``*``, ``?``
    or ``[``, so a plain name matches only itself). ``controller_name`` names
    the private controller that watches Namespaces; by default ``namespace-provider``, prefixed with
    the member's name inside a :class:`~mcr.providers.MultiProvider` so that two namespace providers
    of one fleet never clash. The provider starts the host (idempotent) and never stops a host it
    was given.

    Constructed directly or through ``mcr.providers.create("namespace", ...)``.
    """

    def __init__(
        self,
        cluster: Cluster | None = None,
        *,
        label_selector: str | Mapping[str, str] | None = None,
        exclude: Iterable[str] = (),
        controller_name: str | None = None,
    ) -> None:
        self._host = cluster
        self.label_selector = label_selector
        self._selector = parse_label_selector(label_selector) if label_selector else None
        self.exclude = frozenset(exclude)
        self._patterns = tuple(p for p in self.exclude if any(c in p for c in "*?["))
        self._explicit_name = controller_name
        self.controller_name = controller_name or DEFAULT_CONTROLLER_NAME
        self._clusters = Clusters()
        self._shared: SharedViews | None = None
        self._running_host: Cluster | None = None
        self._pending_indexes: list[tuple[Any, str, Callable[[Any], list[str]]]] = []

    def __repr__(self) -> str:
        return f"NamespaceProvider(label_selector={self.label_selector!r}, exclude={sorted(self.exclude)!r})"

    # -- Provider --------------------------------------------------------------------------------

    async def get(self, name: ClusterName) -> Cluster:
        """The engaged namespace cluster ``name``; ``ClusterNotFoundError`` otherwise."""
        return await self._clusters.get(name)

    async def index_field(self, kind: Any, field: str, extract: Callable[[Any], list[str]]) -> None:
        """Index ``field`` on the host's cache, once for every namespace cluster."""
        if self._shared is None:
            self._pending_indexes.append((kind, field, extract))
        else:
            await self._shared.index_field(kind, field, extract)

    def names(self) -> list[str]:
        """The engaged namespace clusters, sorted."""
        return self._clusters.names()

    async def start(self, aware: Aware) -> None:
        """Watch the host's namespaces and engage them with ``aware`` until cancelled.

        Raises ``ValueError`` without a host cluster. Cancelling disengages every namespace cluster
        and re-raises ``CancelledError``; the host keeps running if it was given.
        """
        host = host_cluster(aware, self._host, provider="namespace")
        shared = SharedViews(host.cache)
        for kind, field, extract in self._pending_indexes:
            await shared.index_field(kind, field, extract)
        self._shared, self._running_host = shared, host
        self.controller_name = controller_name_for(aware, DEFAULT_CONTROLLER_NAME, self._explicit_name)
        controller = Controller(self.controller_name, self._reconcile, need_leader_election=False)
        controller.watch(Kind("v1/Namespace", engage_provider=False))
        loop = asyncio.get_running_loop()
        tasks = [
            loop.create_task(self._clusters.run(aware), name="mcr-namespace-clusters"),
            loop.create_task(run_controller(controller, host), name="mcr-namespace-controller"),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
            raise RuntimeError("the namespace provider stopped on its own")  # pragma: no cover
        finally:
            await cancel_and_wait(tasks)
            shared.close()
            self._shared = self._running_host = None

    # -- reconcile -------------------------------------------------------------------------------

    def wanted(self, namespace: Mapping[str, Any]) -> bool:
        """Whether ``namespace`` (a Namespace object) is a cluster of this provider."""
        meta = namespace.get("metadata") or {}
        name = meta.get("name") or ""
        if name in self.exclude or meta.get("deletionTimestamp"):
            return False
        if any(fnmatchcase(name, pattern) for pattern in self._patterns):
            return False
        if (namespace.get("status") or {}).get("phase") == "Terminating":
            return False
        return self._selector is None or self._selector.matches(meta.get("labels") or {})

    async def _reconcile(self, req: Request) -> None:
        host, shared = self._running_host, self._shared
        assert host is not None, "reconcile runs only while the provider is started"
        assert shared is not None
        try:
            namespace = await host.client.get("v1/Namespace", req.name)
        except NotFoundError:
            namespace = None
        if namespace is None or not self.wanted(namespace):
            if await self._clusters.remove(req.name):
                why = "deleted" if namespace is None else "terminating or no longer selected"
                log.info("namespace provider: disengaging %r: the namespace is %s", req.name, why)
            return
        if req.name not in self._clusters:
            await self._clusters.add(req.name, NamespaceCluster(host, req.name, shared))
            log.info("namespace provider: engaging namespace %r", req.name, extra={"cluster": req.name})
