"""The ClusterProfile provider: every ready ClusterProfile (KEP-4322) of a hub cluster is a cluster.

The provider watches ``multicluster.x-k8s.io/v1alpha1`` ClusterProfiles on a host ("hub") cluster
— the manager's own by default — with a private controller and a private cache, and engages one
cluster per profile, named ``"<namespace>/<name>"``. A profile is ready when ``is_ready(profile)``
says so (default: its condition ``ControlPlaneHealthy`` is ``True``). Credentials come from a
:class:`~mcr_provider_inventory.strategies.KubeconfigStrategy`, chosen at construction:

* **access providers** (KEP-5339, ``access_providers=``): a configured exec plugin reaches the
  cluster described in the profile's ``status.accessProviders`` (see :mod:`.access`);
* **Secret** (``consumer_name=``): the single Secret in the profile's namespace labelled
  ``x-k8s.io/cluster-inventory-consumer=<consumer_name>`` and ``x-k8s.io/cluster-profile=<name>``
  holds a kubeconfig under data key ``Config``; those Secrets are watched too, so a rotated
  kubeconfig re-engages the cluster;
* **any other** (``strategy=``): an object with ``kubeconfig(hub, profile)`` and ``watches()``.

A cluster is rebuilt and re-engaged only when the kubeconfig it is built from changes (a
fingerprint of the document or bytes): status heartbeats, condition timestamps and property
updates keep the engaged cluster. A profile that is not ready when first seen is not engaged until
it is. One that turns unhealthy while engaged stays engaged, as upstream keeps it (its cluster may
be briefly unreachable; controllers back off), and its credentials are still followed: a rotation
re-engages it at once, credentials that break or go disengage it, and it is engaged anew only once
it is ready again. A deleted or deleting profile is disengaged. A profile whose credentials cannot
be had (no matching access provider, a missing or malformed Secret, a strategy's error) is reported
— logged once and listed by :meth:`ClusterProfileProvider.problems` — and never affects other
profiles.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcr.cache import ByObject, CacheOptions, NamespaceConfig
from mcr.cluster import Cluster
from mcr.controller import Controller
from mcr.errors import NotFoundError
from mcr.handler import EnqueueRequestsFromMapFunc
from mcr.providers import (
    SourcedProvider,
    controller_name_for,
    fingerprint,
    host_cluster,
    refuse_local_credentials,
)
from mcr.providers.sourced import ClusterFactory
from mcr.reconcile import Request
from mcr.rest.config import RestConfig
from mcr.source import Kind
from mcr_provider_inventory.access import AccessProviders
from mcr_provider_inventory.crd import GROUP, KIND, VERSION
from mcr_provider_inventory.strategies import (
    CONSUMER_LABEL,
    PROFILE_LABEL,
    SECRET_KEY,
    AccessProviderStrategy,
    KubeconfigStrategy,
    NoKubeconfigError,
    ProfileKubeconfig,
    SecretStrategy,
)

if TYPE_CHECKING:
    from mcr.multicluster import Aware

__all__ = [
    "CLUSTER_PROFILE",
    "CONSUMER_LABEL",
    "PROFILE_LABEL",
    "SECRET_KEY",
    "ClusterProfileProvider",
    "control_plane_healthy",
]

log = logging.getLogger("mcr.providers.inventory")

CLUSTER_PROFILE = f"{GROUP}/{VERSION}/{KIND}"
"""The kind the provider watches, as mcr names kinds."""

IsReady = Callable[[Mapping[str, Any]], bool]


def control_plane_healthy(profile: Mapping[str, Any]) -> bool:
    """The default readiness test: the profile's condition ``ControlPlaneHealthy`` is ``True``."""
    for condition in (profile.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "ControlPlaneHealthy":
            return condition.get("status") == "True"
    return False


class ClusterProfileProvider(SourcedProvider):
    """Clusters from the ClusterProfiles of a hub cluster (see the module docs).

    Exactly one credential strategy: ``access_providers`` (an :class:`AccessProviders`, its
    ``{"providers": [...]}`` dict, or the path of its JSON file, read when the provider starts),
    ``consumer_name`` (the Secret strategy; ``allow_local_credentials`` lets its kubeconfigs use
    exec plugins, auth providers and token files) or ``strategy`` (any
    :class:`~mcr_provider_inventory.strategies.KubeconfigStrategy`). ``namespace`` limits the
    profiles (and the strategy's watched objects) to one namespace (default: all). ``cluster`` is
    the hub (default: the manager's local cluster); the provider reads it through a private cache
    of its own and never stops it. ``controller_name`` names the private controller (its metrics
    and logs); by default ``cluster-inventory-api-provider`` (``-<namespace>`` when limited to
    one), prefixed with its member name in a :class:`~mcr.providers.MultiProvider` so providers
    composed in one fleet never clash; a name given explicitly is used as is. ``cluster_options``
    are passed to each :class:`mcr.Cluster`; ``cluster_factory(config, name)`` replaces that call.

    Constructed directly or through ``mcr.providers.create("inventory", ...)``.
    """

    def __init__(
        self,
        *,
        access_providers: AccessProviders | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        consumer_name: str | None = None,
        strategy: KubeconfigStrategy | None = None,
        namespace: str | None = None,
        is_ready: IsReady = control_plane_healthy,
        cluster: Cluster | None = None,
        controller_name: str | None = None,
        cluster_options: Mapping[str, Any] | None = None,
        cluster_factory: ClusterFactory | None = None,
        allow_local_credentials: bool = False,
    ) -> None:
        if sum(x is not None for x in (access_providers, consumer_name, strategy)) != 1:
            raise ValueError(
                "ClusterProfileProvider needs exactly one credential strategy: access_providers=... "
                "(KEP-5339 exec plugins), consumer_name=... (kubeconfig Secrets) or strategy=..."
            )
        if strategy is not None and not isinstance(strategy, KubeconfigStrategy):
            raise TypeError(
                f"ClusterProfileProvider: strategy {strategy!r} is not a KubeconfigStrategy "
                "(async kubeconfig(hub, profile) and watches())"
            )
        self._access_file: str | None = None
        self.strategy: KubeconfigStrategy | None = strategy
        """The credential strategy (for an access-provider file: built when the provider starts)."""
        if consumer_name is not None:
            try:
                self.strategy = SecretStrategy(consumer_name, allow_local_credentials=allow_local_credentials)
            except ValueError as exc:
                raise ValueError(f"ClusterProfileProvider: {exc}") from None
        elif isinstance(access_providers, AccessProviders | Mapping):
            self.strategy = AccessProviderStrategy(access_providers)
        elif access_providers is not None:
            self._access_file = os.fspath(access_providers)
        self.consumer_name = consumer_name
        self.namespace = namespace
        self._explicit_name = controller_name
        self._default_name = controller_name or (
            f"cluster-inventory-api-provider-{namespace}" if namespace else "cluster-inventory-api-provider"
        )
        self.controller_name = self._default_name
        """The private controller's name (the one in use while the provider runs)."""
        self._is_ready = is_ready
        self._hub = cluster
        self.allow_local_credentials = allow_local_credentials
        super().__init__(
            provider="inventory", logger=log, cluster_options=cluster_options, cluster_factory=cluster_factory
        )

    @property
    def access_providers(self) -> AccessProviders | None:
        """The access providers in use, with the access-provider strategy (once read)."""
        strategy = self.strategy
        return strategy.access_providers if isinstance(strategy, AccessProviderStrategy) else None

    def __repr__(self) -> str:
        strategy = (
            repr(self.strategy) if self.strategy is not None else f"access_providers={self._access_file!r}"
        )
        return f"ClusterProfileProvider({strategy}, namespace={self.namespace!r})"

    # -- running ---------------------------------------------------------------------------------

    async def start(self, aware: Aware) -> None:
        """Watch the hub's ClusterProfiles and engage their clusters with ``aware`` until cancelled.

        Raises ``ValueError`` when there is no hub cluster, :class:`AccessConfigError` when the
        access-provider file cannot be used. Cancelling disengages every cluster, stops the private
        cache and controller, and re-raises ``CancelledError``.
        """
        hub = host_cluster(aware, self._hub, provider="inventory")
        if self.strategy is None:
            assert self._access_file is not None
            access = await asyncio.to_thread(AccessProviders.from_file, self._access_file)
            self.strategy = AccessProviderStrategy(access)
        strategy = self.strategy
        watches = list(strategy.watches())
        by_object: dict[Any, ByObject] = {w.kind: w.cache for w in watches if w.cache is not None}
        namespaces = None if self.namespace is None else {self.namespace: NamespaceConfig()}
        options = CacheOptions(default_namespaces=namespaces, by_object=by_object)
        self.controller_name = controller_name_for(aware, self._default_name, self._explicit_name)
        view = Cluster(hub.config, name=f"{self.controller_name}-hub", cache_options=options)
        controller = Controller(self.controller_name, self._reconcile, need_leader_election=False)
        controller.watch(Kind(CLUSTER_PROFILE, engage_provider=False))
        for watch in watches:
            controller.watch(
                Kind(watch.kind, EnqueueRequestsFromMapFunc(watch.profiles), engage_provider=False)
            )
        await self.watch_sources(aware, controller, view)

    # -- reconcile -------------------------------------------------------------------------------

    async def _reconcile(self, req: Request) -> None:
        view = self.view
        strategy = self.strategy
        assert strategy is not None
        name = f"{req.namespace}/{req.name}"
        source = f"ClusterProfile {name}"
        try:
            profile = await view.client.get(CLUSTER_PROFILE, req.name, namespace=req.namespace)
        except NotFoundError:
            await self.sourced.discard(name, why=f"{source} was deleted")
            return
        if profile["metadata"].get("deletionTimestamp"):
            await self.sourced.discard(name, why=f"{source} is being deleted")
            return
        engaged = self.sourced.fingerprint_of(name) is not None
        if not self._is_ready(profile) and not engaged:
            # Not engaged: wait until it is ready. An engaged one stays engaged while it is
            # unhealthy, and still follows its credentials (a rotation takes effect either way).
            await self.sourced.reject(
                name, source=source, reason="not ready (ControlPlaneHealthy is not True)"
            )
            return
        try:
            found = await strategy.kubeconfig(view, profile)
        except NoKubeconfigError as exc:
            await self.sourced.reject(name, source=exc.source or source, reason=str(exc))
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Perhaps passing (the hub or a vault unreachable): retried with the controller's
            # backoff, and an engaged cluster keeps its credentials meanwhile.
            if not engaged:
                why = str(exc) or type(exc).__name__
                reason = f"{type(strategy).__name__} failed, retried with backoff: {why}"
                await self.sourced.reject(name, source=source, reason=reason)
            raise
        await self._apply(name, found)

    async def _apply(self, name: str, found: ProfileKubeconfig) -> None:
        kubeconfig, source = found.kubeconfig, found.source
        trusted = found.local_credentials

        async def build() -> Cluster:
            if isinstance(kubeconfig, bytes | bytearray):
                config = await RestConfig.from_kubeconfig_data_async(bytes(kubeconfig), source=source)
            else:
                config = RestConfig.from_kubeconfig(dict(kubeconfig), source=source)
            if not trusted:
                refuse_local_credentials(config, source)
            return self.make_cluster(config, name)

        await self.sourced.apply(name, source=source, fingerprint=fingerprint(kubeconfig), build=build)
