"""The ClusterProfile provider: every ready ClusterProfile (KEP-4322) of a hub cluster is a cluster.

The provider watches ``multicluster.x-k8s.io/v1alpha1`` ClusterProfiles on a host ("hub") cluster
— the manager's own by default — with a private controller and a private cache, and engages one
cluster per profile, named ``"<namespace>/<name>"``. A profile is ready when ``is_ready(profile)``
says so (default: its condition ``ControlPlaneHealthy`` is ``True``). Credentials come from one of
two strategies, chosen at construction:

* **access providers** (KEP-5339, ``access_providers=``): a configured exec plugin reaches the
  cluster described in the profile's ``status.accessProviders`` (see :mod:`.access`);
* **Secret** (``consumer_name=``): the single Secret in the profile's namespace labelled
  ``x-k8s.io/cluster-inventory-consumer=<consumer_name>`` and ``x-k8s.io/cluster-profile=<name>``
  holds a kubeconfig under data key ``Config``; those Secrets are watched too, so a rotated
  kubeconfig re-engages the cluster.

A cluster is rebuilt and re-engaged only when the connection settings it is built from change (a
fingerprint of the built kubeconfig, or of the Secret's bytes): status heartbeats, condition
timestamps and property updates keep the engaged cluster. A profile that turns unhealthy while
engaged stays engaged (its cluster may be briefly unreachable; controllers back off); one that is
not ready when first seen is not engaged until it is. A deleted or deleting profile is disengaged.
A profile whose credentials cannot be built (no matching access provider, a missing or malformed
Secret) is reported — logged once and listed by :meth:`ClusterProfileProvider.problems` — and
never affects other profiles.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mcr.cache import ByObject, CacheOptions, NamespaceConfig
from mcr.cache.selectors import label_value_problem
from mcr.cluster import Cluster
from mcr.config import RestConfig
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
from mcr.source import Kind
from mcr_provider_inventory.access import AccessProviders, NoAccessProviderError
from mcr_provider_inventory.crd import GROUP, KIND, VERSION

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
CONSUMER_LABEL = "x-k8s.io/cluster-inventory-consumer"
"""Secret strategy: the label naming the consumer a kubeconfig Secret is meant for."""
PROFILE_LABEL = "x-k8s.io/cluster-profile"
"""Secret strategy: the label naming the ClusterProfile a kubeconfig Secret belongs to."""
SECRET_KEY = "Config"
"""Secret strategy: the data key holding the kubeconfig."""

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
    ``{"providers": [...]}`` dict, or the path of its JSON file, read when the provider starts) or
    ``consumer_name`` (the Secret strategy). ``namespace`` limits the profiles (and Secrets) watched
    to one namespace (default: all). ``cluster`` is the hub (default: the manager's local cluster);
    the provider reads it through a private cache of its own and never stops it.
    ``controller_name`` names the private controller (its metrics and logs); by default
    ``cluster-inventory-api-provider`` (``-<namespace>`` when limited to one), prefixed with its
    member name in a :class:`~mcr.providers.MultiProvider` so providers composed in one fleet
    never clash; a name given explicitly is used as is. ``cluster_options`` are passed to each
    :class:`mcr.Cluster`; ``cluster_factory(config, name)`` replaces that call altogether.

    Constructed directly or through ``mcr.providers.create("inventory", ...)``.
    """

    def __init__(
        self,
        *,
        access_providers: AccessProviders | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        consumer_name: str | None = None,
        namespace: str | None = None,
        is_ready: IsReady = control_plane_healthy,
        cluster: Cluster | None = None,
        controller_name: str | None = None,
        cluster_options: Mapping[str, Any] | None = None,
        cluster_factory: ClusterFactory | None = None,
        allow_local_credentials: bool = False,
    ) -> None:
        if (access_providers is None) == (consumer_name is None):
            raise ValueError(
                "ClusterProfileProvider needs exactly one credential strategy: "
                "access_providers=... (KEP-5339 exec plugins) or consumer_name=... (kubeconfig Secrets)"
            )
        if consumer_name is not None:
            problem = label_value_problem(consumer_name) if consumer_name else "it is empty"
            if problem is not None:
                raise ValueError(
                    f"ClusterProfileProvider: consumer_name {consumer_name!r} cannot be the value of "
                    f"the label {CONSUMER_LABEL}: {problem}"
                )
        self._access_source = access_providers
        self.access_providers: AccessProviders | None = (
            access_providers if isinstance(access_providers, AccessProviders) else None
        )
        if isinstance(access_providers, Mapping):
            self.access_providers = AccessProviders.from_dict(access_providers)
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

    def __repr__(self) -> str:
        strategy = f"consumer_name={self.consumer_name!r}" if self.consumer_name else "access_providers"
        return f"ClusterProfileProvider({strategy}, namespace={self.namespace!r})"

    # -- running ---------------------------------------------------------------------------------

    async def start(self, aware: Aware) -> None:
        """Watch the hub's ClusterProfiles and engage their clusters with ``aware`` until cancelled.

        Raises ``ValueError`` when there is no hub cluster, :class:`AccessConfigError` when the
        access-provider file cannot be used. Cancelling disengages every cluster, stops the private
        cache and controller, and re-raises ``CancelledError``.
        """
        hub = host_cluster(aware, self._hub, provider="inventory")
        if self.access_providers is None and self._access_source is not None:
            path = os.fspath(self._access_source)  # type: ignore[arg-type]
            self.access_providers = await asyncio.to_thread(AccessProviders.from_file, path)
        self.controller_name = controller_name_for(aware, self._default_name, self._explicit_name)
        view = Cluster(hub.config, name=f"{self.controller_name}-hub", cache_options=self._cache_options())
        controller = Controller(self.controller_name, self._reconcile, need_leader_election=False)
        controller.watch(Kind(CLUSTER_PROFILE, engage_provider=False))
        if self.consumer_name is not None:
            controller.watch(
                Kind("v1/Secret", EnqueueRequestsFromMapFunc(_profile_of_secret), engage_provider=False)
            )
        await self.watch_sources(aware, controller, view)

    # -- reconcile -------------------------------------------------------------------------------

    def _cache_options(self) -> CacheOptions:
        namespaces = None if self.namespace is None else {self.namespace: NamespaceConfig()}
        by_object = {}
        if self.consumer_name is not None:
            by_object["v1/Secret"] = ByObject(label_selector=f"{CONSUMER_LABEL}={self.consumer_name}")
        return CacheOptions(default_namespaces=namespaces, by_object=by_object)

    async def _reconcile(self, req: Request) -> None:
        view = self.view
        name = f"{req.namespace}/{req.name}"
        try:
            profile = await view.client.get(CLUSTER_PROFILE, req.name, namespace=req.namespace)
        except NotFoundError:
            await self.sourced.discard(name, why=f"ClusterProfile {name} was deleted")
            return
        if profile["metadata"].get("deletionTimestamp"):
            await self.sourced.discard(name, why=f"ClusterProfile {name} is being deleted")
            return
        source = f"ClusterProfile {name}"
        if not self._is_ready(profile):
            if name not in self.sourced.names():
                await self.sourced.reject(
                    name, source=source, reason="not ready (ControlPlaneHealthy is not True)"
                )
            return
        if self.consumer_name is not None:
            await self._from_secret(view, name, req.namespace, req.name)
        else:
            await self._from_access_provider(name, source, profile)

    async def _from_access_provider(self, name: str, source: str, profile: Mapping[str, Any]) -> None:
        providers = self.access_providers
        assert providers is not None
        try:
            kubeconfig = providers.kubeconfig_for(profile)
        except (NoAccessProviderError, ValueError) as exc:
            await self.sourced.reject(name, source=source, reason=str(exc))
            return
        user = kubeconfig["users"][0]["name"]

        async def build() -> Cluster:
            config = RestConfig.from_kubeconfig(kubeconfig, source=f"{source} (access provider {user!r})")
            return self.make_cluster(config, name)

        await self.sourced.apply(name, source=source, fingerprint=fingerprint(kubeconfig), build=build)

    async def _from_secret(self, view: Cluster, name: str, namespace: str, profile: str) -> None:
        selector = {CONSUMER_LABEL: str(self.consumer_name), PROFILE_LABEL: profile}
        secrets = await view.client.list("v1/Secret", namespace=namespace, label_selector=selector)
        wanted = (
            f"Secret labelled {CONSUMER_LABEL}={self.consumer_name}, {PROFILE_LABEL}={profile} in {namespace}"
        )
        if len(secrets) != 1:
            found = ", ".join(sorted(s["metadata"]["name"] for s in secrets))
            reason = (
                f"no {wanted}" if not secrets else f"expected one {wanted}, found {len(secrets)}: {found}"
            )
            await self.sourced.reject(name, source=f"ClusterProfile {name}", reason=reason)
            return
        secret = secrets[0]
        source = f"Secret {namespace}/{secret['metadata']['name']} key {SECRET_KEY!r}"
        encoded = (secret.get("data") or {}).get(SECRET_KEY)
        if not encoded:
            await self.sourced.reject(
                name, source=source, reason=f"has no kubeconfig under key {SECRET_KEY!r}"
            )
            return
        data = base64.b64decode(encoded)

        async def build() -> Cluster:
            config = await RestConfig.from_kubeconfig_data_async(data, source=source)
            if not self.allow_local_credentials:
                refuse_local_credentials(config, source)
            return self.make_cluster(config, name)

        await self.sourced.apply(name, source=source, fingerprint=fingerprint(data), build=build)


def _profile_of_secret(secret: Any) -> Iterable[Request]:
    meta = secret.get("metadata") or {}
    profile = (meta.get("labels") or {}).get(PROFILE_LABEL)
    return [Request(meta.get("namespace", ""), profile)] if profile else []
