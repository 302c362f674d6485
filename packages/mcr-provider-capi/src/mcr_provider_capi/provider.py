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

Upstream's options have counterparts here: ``object_to_watch`` watches another kind than
``Cluster`` (``ObjectToWatch``), ``get_kubeconfig`` finds the kubeconfig some other way
(``GetSecret``), ``predicates`` filter which objects become clusters (``Predicates``).
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mcr.cache import ByObject, CacheOptions, NamespaceConfig, strip_managed_fields
from mcr.cluster import Cluster
from mcr.controller import Controller
from mcr.errors import NotFoundError
from mcr.handler import EnqueueRequestsFromMapFunc
from mcr.predicate import Predicate
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
from mcr.rest.kinds import gvk_of
from mcr.source import Kind
from mcr_provider_capi.crd import GROUP, KIND, VERSION

if TYPE_CHECKING:
    from mcr.multicluster import Aware

__all__ = [
    "CLUSTER",
    "CLUSTER_NAME_LABEL",
    "SECRET_KEY",
    "ClusterAPIProvider",
    "GetKubeconfig",
    "IsReady",
    "control_plane_initialized",
]

log = logging.getLogger("mcr.providers.capi")

CLUSTER = f"{GROUP}/{VERSION}/{KIND}"
"""The kind the provider watches, as mcr names kinds."""
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
"""The label Cluster API puts on a cluster's Secrets, naming the cluster."""
SECRET_KEY = "value"
"""The data key of the kubeconfig in a ``<cluster>-kubeconfig`` Secret."""
_SUFFIX = "-kubeconfig"

IsReady = Callable[[Mapping[str, Any]], bool]
"""``is_ready(obj)``: whether a watched object's cluster may be engaged."""
GetKubeconfig = Callable[[Cluster, Mapping[str, Any]], Awaitable[bytes | str]]
"""``await get_kubeconfig(management, obj)``: the kubeconfig (YAML) of a watched object's cluster."""


def control_plane_initialized(obj: Mapping[str, Any]) -> bool:
    """The default readiness test: ``status.initialization.controlPlaneInitialized`` is true."""
    return ((obj.get("status") or {}).get("initialization") or {}).get("controlPlaneInitialized") is True


class ClusterAPIProvider(SourcedProvider):
    """Clusters from the Cluster API ``Cluster`` objects of a management cluster (see the module docs).

    ``namespace`` limits the objects (and Secrets) watched to one namespace (default: all).
    ``is_ready(obj)`` decides when an object's cluster is engaged. ``cluster`` is the management
    cluster (default: the manager's local cluster); the provider reads it through a private cache
    and never stops it. ``controller_name`` names the private controller (metrics, logs); by default
    ``cluster-api-provider`` (``-<namespace>`` when limited to one), prefixed with its member name
    in a :class:`~mcr.providers.MultiProvider` so providers composed in one fleet never clash; a
    name given explicitly is used as is. ``cluster_options`` are passed to each
    :class:`mcr.Cluster` and ``cluster_factory(config, name)`` replaces that call.

    ``object_to_watch``: the kind whose objects become clusters (default :data:`CLUSTER`; any
    kind mcr can name, e.g. a custom resource of a provisioner), named ``"<namespace>/<name>"``
    (``"<name>"`` for a cluster-scoped kind). The default ``is_ready`` reads Cluster API's
    ``status.initialization.controlPlaneInitialized``: give another kind the test that suits it.

    ``get_kubeconfig``: ``await get_kubeconfig(management, obj)`` returns the kubeconfig (bytes or
    text) of ``obj``'s cluster, instead of the ``<name>-kubeconfig`` Secret. ``management.client``
    reads through the provider's cache (the watched objects, and the Secrets labelled
    ``cluster.x-k8s.io/cluster-name``, whose changes reconcile the object of the same name), and
    ``management.api_reader`` reads the server directly. If it raises, the object is reconciled
    again with the controller's backoff (the error is logged naming the object, and listed by
    :meth:`problems` while the object is not engaged); an engaged cluster keeps its credentials
    meanwhile. An empty result is a problem like a missing Secret.

    ``predicates``: :class:`mcr.predicate.Predicate` objects filtering the watched objects' events,
    as upstream's ``Predicates`` do; an object also becomes a cluster only while every predicate
    passes it as created (``p.create(obj)``), which is checked whenever it is reconciled (a Secret
    change cannot engage an object they exclude), and an update that takes an object out of their
    selection is let through so that its cluster is disengaged. A predicate that drops status
    updates also hides readiness changes.

    Constructed directly or through ``mcr.providers.create("capi", ...)``. Invalid options (a kind
    that cannot be named, something that is not a predicate) raise ``ValueError`` / ``TypeError``
    here.
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
        object_to_watch: Any = CLUSTER,
        get_kubeconfig: GetKubeconfig | None = None,
        predicates: Iterable[Predicate] = (),
    ) -> None:
        try:
            self._kind_name = gvk_of(object_to_watch).kind
        except ValueError as exc:
            raise ValueError(f"ClusterAPIProvider: object_to_watch {object_to_watch!r}: {exc}") from None
        self.object_to_watch = object_to_watch
        self.predicates = tuple(predicates)
        for p in self.predicates:
            if not isinstance(p, Predicate):
                raise TypeError(
                    f"ClusterAPIProvider: predicates: {p!r} is not a predicate "
                    "(an object with create, update, delete and generic; see mcr.predicate)"
                )
        if get_kubeconfig is not None and not callable(get_kubeconfig):
            raise TypeError(f"ClusterAPIProvider: get_kubeconfig {get_kubeconfig!r} is not callable")
        self._get_kubeconfig = get_kubeconfig
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
        kind = "" if self.object_to_watch == CLUSTER else f", object_to_watch={self.object_to_watch!r}"
        return f"ClusterAPIProvider(namespace={self.namespace!r}{kind})"

    # -- running ---------------------------------------------------------------------------------

    async def start(self, aware: Aware) -> None:
        """Watch the objects and their kubeconfig Secrets; engage ready ones with ``aware`` until cancelled.

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
        events = (_Selection(self.predicates),) if self.predicates else ()
        controller.watch(Kind(self.object_to_watch, None, *events, engage_provider=False))
        controller.watch(
            Kind("v1/Secret", EnqueueRequestsFromMapFunc(_cluster_of_secret), engage_provider=False)
        )
        await self.watch_sources(aware, controller, view)

    # -- reconcile -------------------------------------------------------------------------------

    async def _reconcile(self, req: Request) -> None:
        view = self.view
        name = f"{req.namespace}/{req.name}" if req.namespace else req.name
        what = f"{self._kind_name} {name}"
        try:
            obj = await view.client.get(self.object_to_watch, req.name, namespace=req.namespace or None)
        except NotFoundError:
            await self.sourced.discard(name, why=f"{what} was deleted")
            return
        if obj["metadata"].get("deletionTimestamp"):
            await self.sourced.discard(name, why=f"{what} is being deleted")
            return
        if not all(p.create(obj) for p in self.predicates):
            await self.sourced.discard(name, why=f"{what} is filtered out by the provider's predicates")
            return
        if not self._is_ready(obj) and self.sourced.fingerprint_of(name) is None:
            # Not engaged: wait until it is ready. An engaged one stays engaged while it is not
            # ready, and still follows its kubeconfig (a rotation must take effect either way).
            reason = "not ready (its control plane is not initialized)"
            await self.sourced.reject(name, source=what, reason=reason)
            return
        if self._get_kubeconfig is not None:
            source = f"{what} (get_kubeconfig)"
            found = await self._lookup(view, name, source, obj)
            if found is None:
                return
            data = found
        else:
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

    async def _lookup(self, view: Cluster, name: str, source: str, obj: Mapping[str, Any]) -> bytes | None:
        """The kubeconfig ``get_kubeconfig`` returns for ``obj``; ``None`` when it returned none.

        Its errors propagate (the controller retries with backoff), recorded as a problem first
        unless the cluster is engaged: an engaged cluster keeps its credentials meanwhile.
        """
        assert self._get_kubeconfig is not None
        try:
            raw = await self._get_kubeconfig(view, obj)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self.sourced.fingerprint_of(name) is None:
                reason = f"failed, retried with backoff: {str(exc) or type(exc).__name__}"
                await self.sourced.reject(name, source=source, reason=reason)
            raise
        data = raw.encode() if isinstance(raw, str) else raw
        if not isinstance(data, bytes | bytearray) or not data:
            await self.sourced.reject(name, source=source, reason="returned no kubeconfig")
            return None
        return bytes(data)


class _Selection:
    """The watched kind's event filter when ``predicates`` are given.

    Events pass as the predicates say, but for two: a deletion always passes (so an engaged
    cluster is disengaged whatever the predicates say of deletes), and so does an update that takes
    the object out of their selection (judged by each predicate's ``create``), so that its
    cluster is disengaged.
    """

    __slots__ = ("predicates",)

    def __init__(self, predicates: tuple[Predicate, ...]) -> None:
        self.predicates = predicates

    def _selects(self, obj: Any) -> bool:
        return all(p.create(obj) for p in self.predicates)

    def create(self, obj: Any) -> bool:
        return self._selects(obj)

    def update(self, old: Any, new: Any) -> bool:
        if all(p.update(old, new) for p in self.predicates):
            return True
        return old is not None and self._selects(old) and not self._selects(new)

    def delete(self, obj: Any) -> bool:
        return True

    def generic(self, obj: Any) -> bool:
        return all(p.generic(obj) for p in self.predicates)


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
