"""The Cluster API provider: every initialised Cluster API ``Cluster`` is a cluster.

The provider watches, on a management cluster (the manager's own by default), Cluster API
``Cluster`` objects (``cluster.x-k8s.io/v1beta2``) and the kubeconfig Secrets Cluster API writes
for them — ``<cluster>-kubeconfig`` in the cluster's namespace, labelled
``cluster.x-k8s.io/cluster-name=<cluster>``, kubeconfig under data key ``value`` — with a private
controller and a private cache holding only such labelled Secrets. Each Cluster whose
``is_ready(obj)`` is true (default: ``status.initialization.controlPlaneInitialized``) is engaged,
named ``"<namespace>/<name>"``.

Because the Secrets are watched, a rotated kubeconfig re-engages its cluster at once; a cluster is
rebuilt only when the kubeconfig's bytes change (Cluster status updates keep the engaged cluster).
A Cluster that is deleted or being deleted is disengaged; one that is not ready when first seen is
not engaged until it is. An engaged one that stops being ready stays engaged, as upstream keeps it
(its controllers back off while it is unreachable), and its kubeconfig Secret is still followed: a
rotation re-engages it with the new credentials at once, a Secret that breaks or goes disengages
it, and it is engaged anew only once it is ready again. A Cluster whose Secret is missing, has no
``value`` or holds an unusable kubeconfig is reported — logged once naming the Secret, listed by
:meth:`ClusterAPIProvider.problems` — and never affects the others; it is engaged as soon as the
Secret is usable.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mcr.cache import ByObject, CacheOptions, NamespaceConfig, strip_managed_fields
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
from mcr_provider_capi.crd import GROUP, KIND, VERSION

if TYPE_CHECKING:
    from mcr.multicluster import Aware

__all__ = ["CLUSTER", "CLUSTER_NAME_LABEL", "SECRET_KEY", "ClusterAPIProvider", "control_plane_initialized"]

log = logging.getLogger("mcr.providers.capi")

CLUSTER = f"{GROUP}/{VERSION}/{KIND}"
"""The kind the provider watches, as mcr names kinds."""
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
"""The label Cluster API puts on a cluster's Secrets, naming the cluster."""
SECRET_KEY = "value"
"""The data key of the kubeconfig in a ``<cluster>-kubeconfig`` Secret."""
_SUFFIX = "-kubeconfig"

IsReady = Callable[[Mapping[str, Any]], bool]


def control_plane_initialized(obj: Mapping[str, Any]) -> bool:
    """The default readiness test: ``status.initialization.controlPlaneInitialized`` is true."""
    return ((obj.get("status") or {}).get("initialization") or {}).get("controlPlaneInitialized") is True


class ClusterAPIProvider(SourcedProvider):
    """Clusters from the Cluster API ``Cluster`` objects of a management cluster (see the module docs).

    ``namespace`` limits the Clusters (and Secrets) watched to one namespace (default: all).
    ``is_ready(obj)`` decides when a Cluster is engaged. ``cluster`` is the management cluster
    (default: the manager's local cluster); the provider reads it through a private cache and never
    stops it. ``controller_name`` names the private controller (metrics, logs); by default
    ``cluster-api-provider`` (``-<namespace>`` when limited to one), prefixed with its member name
    in a :class:`~mcr.providers.MultiProvider` so providers composed in one fleet never clash; a
    name given explicitly is used as is. ``cluster_options`` are passed to each
    :class:`mcr.Cluster` and ``cluster_factory(config, name)`` replaces that call.

    Constructed directly or through ``mcr.providers.create("capi", ...)``.
    """

    def __init__(
        self,
        *,
        namespace: str | None = None,
        is_ready: IsReady = control_plane_initialized,
        cluster: Cluster | None = None,
        controller_name: str | None = None,
        cluster_options: Mapping[str, Any] | None = None,
        cluster_factory: ClusterFactory | None = None,
        allow_local_credentials: bool = False,
    ) -> None:
        self.namespace = namespace
        self._explicit_name = controller_name
        self._default_name = controller_name or (
            f"cluster-api-provider-{namespace}" if namespace else "cluster-api-provider"
        )
        self.controller_name = self._default_name
        """The private controller's name (the one in use while the provider runs)."""
        self._is_ready = is_ready
        self._management = cluster
        self.allow_local_credentials = allow_local_credentials
        super().__init__(
            provider="capi", logger=log, cluster_options=cluster_options, cluster_factory=cluster_factory
        )

    def __repr__(self) -> str:
        return f"ClusterAPIProvider(namespace={self.namespace!r})"

    # -- running ---------------------------------------------------------------------------------

    async def start(self, aware: Aware) -> None:
        """Watch Clusters and their kubeconfig Secrets; engage ready ones with ``aware`` until cancelled.

        Raises ``ValueError`` when there is no management cluster. Cancelling disengages every
        cluster, stops the private cache and controller, and re-raises ``CancelledError``.
        """
        management = host_cluster(aware, self._management, provider="capi")
        namespaces = None if self.namespace is None else {self.namespace: NamespaceConfig()}
        options = CacheOptions(
            default_namespaces=namespaces,
            by_object={
                "v1/Secret": ByObject(label_selector=CLUSTER_NAME_LABEL, transform=_kubeconfig_secrets_only)
            },
        )
        self.controller_name = controller_name_for(aware, self._default_name, self._explicit_name)
        view = Cluster(management.config, name=f"{self.controller_name}-management", cache_options=options)
        controller = Controller(self.controller_name, self._reconcile, need_leader_election=False)
        controller.watch(Kind(CLUSTER, engage_provider=False))
        controller.watch(
            Kind("v1/Secret", EnqueueRequestsFromMapFunc(_cluster_of_secret), engage_provider=False)
        )
        await self.watch_sources(aware, controller, view)

    # -- reconcile -------------------------------------------------------------------------------

    async def _reconcile(self, req: Request) -> None:
        view = self.view
        name = f"{req.namespace}/{req.name}"
        try:
            obj = await view.client.get(CLUSTER, req.name, namespace=req.namespace)
        except NotFoundError:
            await self.sourced.discard(name, why=f"Cluster {name} was deleted")
            return
        if obj["metadata"].get("deletionTimestamp"):
            await self.sourced.discard(name, why=f"Cluster {name} is being deleted")
            return
        if not self._is_ready(obj) and self.sourced.fingerprint_of(name) is None:
            # Not engaged: wait until it is ready. An engaged one stays engaged while it is not
            # ready, and still follows its Secret (a rotation must take effect either way).
            reason = "not ready (its control plane is not initialized)"
            await self.sourced.reject(name, source=f"Cluster {name}", reason=reason)
            return
        secret_name = f"{req.name}{_SUFFIX}"
        source = f"Secret {req.namespace}/{secret_name} key {SECRET_KEY!r}"
        try:
            secret = await view.client.get("v1/Secret", secret_name, namespace=req.namespace)
        except NotFoundError:
            reason = f"not found (or without the {CLUSTER_NAME_LABEL} label Cluster API sets)"
            await self.sourced.reject(name, source=source, reason=reason)
            return
        encoded = (secret.get("data") or {}).get(SECRET_KEY)
        if not encoded:
            await self.sourced.reject(name, source=source, reason="missing or empty: no kubeconfig")
            return
        data = base64.b64decode(encoded)

        async def build() -> Cluster:
            config = await RestConfig.from_kubeconfig_data_async(data, source=source)
            if not self.allow_local_credentials:
                refuse_local_credentials(config, source)
            return self.make_cluster(config, name)

        await self.sourced.apply(name, source=source, fingerprint=fingerprint(data), build=build)


def _is_kubeconfig_secret(meta: dict[str, Any]) -> bool:
    """Whether a Secret's metadata names the kubeconfig Secret of the cluster it is labelled with."""
    cluster = (meta.get("labels") or {}).get(CLUSTER_NAME_LABEL)
    return bool(cluster) and meta.get("name") == f"{cluster}{_SUFFIX}"


def _kubeconfig_secrets_only(secret: dict[str, Any]) -> dict[str, Any]:
    """The cache transform of the provider's Secrets: keep the data of kubeconfig Secrets only.

    Cluster API labels a cluster's CA, etcd and service-account Secrets too; their private keys
    have no business in this process's memory, so they are cached as metadata only.
    """
    strip_managed_fields(secret)
    if not _is_kubeconfig_secret(secret["metadata"]):
        secret.pop("data", None)
        secret.pop("stringData", None)
    return secret


def _cluster_of_secret(secret: Any) -> Iterable[Request]:
    meta = secret.get("metadata") or {}
    # Only the kubeconfig Secret of a cluster matters (Cluster API also labels CA and etcd Secrets).
    if _is_kubeconfig_secret(meta):
        return [Request(meta.get("namespace", ""), meta["labels"][CLUSTER_NAME_LABEL])]
    return []
