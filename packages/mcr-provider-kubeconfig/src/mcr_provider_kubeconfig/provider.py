"""The kubeconfig provider: every labelled kubeconfig Secret of one namespace is a cluster.

The provider watches, on a host cluster (the manager's own by default), the Secrets of
``namespace`` labelled ``<label>=true`` (``sigs.k8s.io/multicluster-runtime-kubeconfig`` by
default) with a private controller and a private cache that holds only those Secrets. Each Secret
is a cluster named after the Secret, built from the kubeconfig under data key ``key``
(``kubeconfig`` by default; its current context is used).

A cluster is rebuilt and re-engaged only when the SHA-256 of its kubeconfig changes: edits to the
Secret's labels or annotations, and resyncs, keep the engaged cluster and its caches. A Secret that
is deleted, is being deleted, or loses the label disengages its cluster. A Secret whose key is
missing or empty, or whose kubeconfig cannot be used (malformed YAML, no current context, a
missing user), is reported — logged once, naming the Secret and the key, and listed by
:meth:`KubeconfigProvider.problems` — and disengages only its own cluster. Kubeconfig contents are
never logged.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcr.cache import ByObject, CacheOptions, NamespaceConfig
from mcr.cache.selectors import label_key_problem
from mcr.cluster import Cluster
from mcr.controller import Controller
from mcr.errors import NotFoundError
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

if TYPE_CHECKING:
    from mcr.multicluster import Aware

__all__ = ["DEFAULT_KEY", "DEFAULT_LABEL", "KubeconfigProvider", "kubeconfig_secret"]

log = logging.getLogger("mcr.providers.kubeconfig")

DEFAULT_LABEL = "sigs.k8s.io/multicluster-runtime-kubeconfig"
"""The label (with value ``"true"``) that marks a Secret as a cluster's kubeconfig."""
DEFAULT_KEY = "kubeconfig"
"""The Secret data key holding the kubeconfig."""


def kubeconfig_secret(
    name: str,
    namespace: str,
    kubeconfig: str | bytes,
    *,
    label: str = DEFAULT_LABEL,
    key: str = DEFAULT_KEY,
) -> dict[str, Any]:
    """The Secret manifest that makes ``kubeconfig`` the cluster ``name`` for this provider.

    Create or apply it in the provider's namespace of the host cluster (``kubectl apply -f``, or
    ``await client.apply(secret, field_manager=...)``).
    """
    raw = kubeconfig.encode() if isinstance(kubeconfig, str) else kubeconfig
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace, "labels": {label: "true"}},
        "data": {key: base64.b64encode(raw).decode()},
    }


class KubeconfigProvider(SourcedProvider):
    """Clusters from the kubeconfig Secrets of ``namespace`` (see the module docs).

    ``label``: the label marking those Secrets (value ``"true"``); ``key``: their data key.
    ``cluster`` is the host holding the Secrets (default: the manager's local cluster); the
    provider reads it through a private cache and never stops it. ``controller_name`` names the
    private controller (metrics, logs); by default ``kubeconfig-provider-<namespace>``, prefixed
    with its member name when it runs in a :class:`~mcr.providers.MultiProvider`
    (``prod#kubeconfig-provider-fleet``), so providers composed in one fleet never clash. A name
    given explicitly is used as is (controller names are unique per process).
    ``cluster_options`` are passed to each :class:`mcr.Cluster`; ``cluster_factory(config, name)``
    replaces that call altogether.

    Constructed directly or through ``mcr.providers.create("kubeconfig", namespace=...)``.
    """

    def __init__(
        self,
        namespace: str,
        *,
        label: str = DEFAULT_LABEL,
        key: str = DEFAULT_KEY,
        cluster: Cluster | None = None,
        controller_name: str | None = None,
        cluster_options: Mapping[str, Any] | None = None,
        cluster_factory: ClusterFactory | None = None,
        allow_local_credentials: bool = False,
    ) -> None:
        if not namespace:
            raise ValueError("KubeconfigProvider needs the namespace of its kubeconfig Secrets")
        problem = label_key_problem(label)
        if problem is not None:
            raise ValueError(f"KubeconfigProvider: label {label!r} is not a valid label key: {problem}")
        if not key:
            raise ValueError("key must not be empty")
        self.namespace = namespace
        self.label = label
        self.key = key
        self._explicit_name = controller_name
        self.controller_name = controller_name or f"kubeconfig-provider-{namespace}"
        """The private controller's name (the one in use while the provider runs)."""
        self._default_name = self.controller_name
        self._host = cluster
        self.allow_local_credentials = allow_local_credentials
        super().__init__(
            provider="kubeconfig",
            logger=log,
            cluster_options=cluster_options,
            cluster_factory=cluster_factory,
        )

    def __repr__(self) -> str:
        return f"KubeconfigProvider(namespace={self.namespace!r}, label={self.label!r}, key={self.key!r})"

    # -- running ---------------------------------------------------------------------------------

    async def start(self, aware: Aware) -> None:
        """Watch the Secrets and engage their clusters with ``aware`` until cancelled.

        Raises ``ValueError`` when there is no host cluster. Cancelling disengages every cluster,
        stops the private cache and controller, and re-raises ``CancelledError``.
        """
        host = host_cluster(aware, self._host, provider="kubeconfig")
        options = CacheOptions(
            default_namespaces={self.namespace: NamespaceConfig()},
            by_object={"v1/Secret": ByObject(label_selector=f"{self.label}=true")},
        )
        self.controller_name = controller_name_for(aware, self._default_name, self._explicit_name)
        view = Cluster(host.config, name=f"{self.controller_name}-host", cache_options=options)
        controller = Controller(self.controller_name, self._reconcile, need_leader_election=False)
        controller.watch(Kind("v1/Secret", engage_provider=False))
        await self.watch_sources(aware, controller, view)

    # -- reconcile -------------------------------------------------------------------------------

    async def _reconcile(self, req: Request) -> None:
        view = self.view
        where = f"Secret {req.namespace}/{req.name}"
        try:
            secret = await view.client.get("v1/Secret", req.name, namespace=req.namespace)
        except NotFoundError:
            await self.sourced.discard(req.name, why=f"{where} was deleted or lost its label")
            return
        if secret["metadata"].get("deletionTimestamp"):
            await self.sourced.discard(req.name, why=f"{where} is being deleted")
            return
        source = f"{where} key {self.key!r}"
        encoded = (secret.get("data") or {}).get(self.key)
        if not encoded:
            await self.sourced.reject(req.name, source=source, reason="missing or empty: no kubeconfig")
            return
        data = base64.b64decode(encoded)

        async def build() -> Cluster:
            config = await RestConfig.from_kubeconfig_data_async(data, source=source)
            if not self.allow_local_credentials:
                refuse_local_credentials(config, source)
            return self.make_cluster(config, req.name)

        await self.sourced.apply(req.name, source=source, fingerprint=fingerprint(data), build=build)
