"""How the ClusterProfile provider gets credentials for a profile: pluggable kubeconfig strategies.

A strategy is any object with two methods (:class:`KubeconfigStrategy`, checked structurally):

* ``await strategy.kubeconfig(hub, profile)`` returns a :class:`ProfileKubeconfig` — a kubeconfig
  (YAML bytes or a document) for the profile's cluster and the source it came from — or raises
  :class:`NoKubeconfigError` when the profile has none usable now (reported; the profile is
  reconciled again when it or a watched object changes). Any other exception is reported too and
  the profile is reconciled again with the controller's backoff.
* ``strategy.watches()`` lists the extra objects whose changes concern profiles
  (:class:`StrategyWatch`: a kind, the profiles an object maps to, how the provider's cache holds
  that kind); the provider watches them so that, say, a rotated Secret re-engages its cluster.

``hub`` is the provider's private view of the hub cluster: ``hub.client`` reads through the
provider's cache (the ClusterProfiles and the strategy's watched kinds), ``hub.api_reader`` reads
the server. Two strategies ship here, upstream's two: :class:`AccessProviderStrategy` (KEP-5339
exec plugins) and :class:`SecretStrategy` (a consumer's kubeconfig Secrets).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mcr.cache import ByObject
from mcr.cache.selectors import label_value_problem
from mcr.reconcile import Request
from mcr_provider_inventory.access import AccessProviders, NoAccessProviderError

if TYPE_CHECKING:
    from mcr.cluster import Cluster

__all__ = [
    "CONSUMER_LABEL",
    "PROFILE_LABEL",
    "SECRET_KEY",
    "AccessProviderStrategy",
    "KubeconfigStrategy",
    "NoKubeconfigError",
    "ProfileKubeconfig",
    "SecretStrategy",
    "StrategyWatch",
]

CONSUMER_LABEL = "x-k8s.io/cluster-inventory-consumer"
"""Secret strategy: the label naming the consumer a kubeconfig Secret is meant for."""
PROFILE_LABEL = "x-k8s.io/cluster-profile"
"""Secret strategy: the label naming the ClusterProfile a kubeconfig Secret belongs to."""
SECRET_KEY = "Config"
"""Secret strategy: the data key holding the kubeconfig."""


@dataclass(frozen=True)
class ProfileKubeconfig:
    """A kubeconfig for a ClusterProfile's cluster, as a strategy found it.

    ``kubeconfig``: YAML bytes or a kubeconfig document (its current context is used); the
    cluster is rebuilt only when it changes. ``source`` names where it came from in problems and
    errors (``"Secret fleet/prod key 'Config'"``); never put credentials in it.
    ``local_credentials``: whether it may use the controller's own means (exec plugins, auth
    providers, token files) — true for plugins this process configured itself, false (refused)
    for kubeconfigs that others can write.
    """

    kubeconfig: bytes | Mapping[str, Any]
    source: str
    local_credentials: bool = False


@dataclass(frozen=True)
class StrategyWatch:
    """Objects whose changes concern profiles: the provider watches ``kind`` on the hub.

    ``profiles(obj)`` gives the requests (namespace and name) of the ClusterProfiles an object
    concerns; ``cache`` says how the provider's cache holds ``kind`` (a label selector, a
    transform), inheriting the provider's namespace.
    """

    kind: Any
    profiles: Callable[[Any], Iterable[Request]]
    cache: ByObject | None = None


class NoKubeconfigError(LookupError):
    """A strategy has no usable kubeconfig for a profile now; the message says why.

    ``source`` names what was looked at when it is not the profile itself (a Secret, say).
    """

    def __init__(self, reason: str, *, source: str | None = None) -> None:
        super().__init__(reason)
        self.source = source


@runtime_checkable
class KubeconfigStrategy(Protocol):
    """Finds a kubeconfig for a ClusterProfile (upstream's ``kubeconfigstrategy.Interface``)."""

    def watches(self) -> Sequence[StrategyWatch]:
        """The extra objects to watch so that their changes reconcile the profiles concerned."""
        ...

    async def kubeconfig(self, hub: Cluster, profile: Mapping[str, Any]) -> ProfileKubeconfig:
        """The kubeconfig of ``profile``'s cluster; :class:`NoKubeconfigError` when there is none."""
        ...


def _name(profile: Mapping[str, Any]) -> tuple[str, str]:
    meta = profile.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class AccessProviderStrategy:
    """KEP-5339 access providers: a configured exec plugin reaches what the profile lists in
    ``status.accessProviders`` (see :mod:`mcr_provider_inventory.access`).

    ``access_providers``: an :class:`AccessProviders` or its ``{"providers": [...]}`` document
    (:class:`~mcr_provider_inventory.AccessConfigError` when malformed). Nothing extra is watched:
    a profile's own changes re-engage its cluster when the built kubeconfig changes.
    """

    def __init__(self, access_providers: AccessProviders | Mapping[str, Any]) -> None:
        self.access_providers = (
            access_providers
            if isinstance(access_providers, AccessProviders)
            else AccessProviders.from_dict(access_providers)
        )

    def __repr__(self) -> str:
        return f"AccessProviderStrategy({self.access_providers.source!r})"

    def watches(self) -> Sequence[StrategyWatch]:
        return ()

    async def kubeconfig(self, hub: Cluster, profile: Mapping[str, Any]) -> ProfileKubeconfig:
        namespace, name = _name(profile)
        try:
            document = self.access_providers.kubeconfig_for(profile)
        except (NoAccessProviderError, ValueError) as exc:
            raise NoKubeconfigError(str(exc)) from None
        user = document["users"][0]["name"]
        source = f"ClusterProfile {namespace}/{name} (access provider {user!r})"
        # The exec plugin is one this process configured: it may run here.
        return ProfileKubeconfig(document, source, local_credentials=True)


class SecretStrategy:
    """A consumer's kubeconfig Secrets: the one Secret in the profile's namespace labelled
    ``x-k8s.io/cluster-inventory-consumer=<consumer_name>`` and ``x-k8s.io/cluster-profile=<name>``
    holds a kubeconfig under key ``Config``. Those Secrets are watched (and only those cached), so
    a rotated kubeconfig re-engages its cluster.

    ``consumer_name`` must be a valid label value (``ValueError`` naming it otherwise). The
    kubeconfigs may not use exec plugins, auth providers or token files unless
    ``allow_local_credentials``: whoever can write the Secrets could otherwise run commands in the
    controller or send its ServiceAccount token anywhere.
    """

    def __init__(self, consumer_name: str, *, allow_local_credentials: bool = False) -> None:
        problem = label_value_problem(consumer_name) if consumer_name else "it is empty"
        if problem is not None:
            raise ValueError(
                f"consumer_name {consumer_name!r} cannot be the value of the label "
                f"{CONSUMER_LABEL}: {problem}"
            )
        self.consumer_name = consumer_name
        self.allow_local_credentials = allow_local_credentials

    def __repr__(self) -> str:
        return f"SecretStrategy({self.consumer_name!r})"

    def watches(self) -> Sequence[StrategyWatch]:
        selector = f"{CONSUMER_LABEL}={self.consumer_name}"
        return (StrategyWatch("v1/Secret", _profile_of_secret, ByObject(label_selector=selector)),)

    async def kubeconfig(self, hub: Cluster, profile: Mapping[str, Any]) -> ProfileKubeconfig:
        namespace, name = _name(profile)
        selector = {CONSUMER_LABEL: self.consumer_name, PROFILE_LABEL: name}
        secrets = await hub.client.list("v1/Secret", namespace=namespace, label_selector=selector)
        wanted = (
            f"Secret labelled {CONSUMER_LABEL}={self.consumer_name}, {PROFILE_LABEL}={name} in {namespace}"
        )
        if len(secrets) != 1:
            found = ", ".join(sorted(s["metadata"]["name"] for s in secrets))
            raise NoKubeconfigError(
                f"no {wanted}" if not secrets else f"expected one {wanted}, found {len(secrets)}: {found}"
            )
        secret = secrets[0]
        source = f"Secret {namespace}/{secret['metadata']['name']} key {SECRET_KEY!r}"
        encoded = (secret.get("data") or {}).get(SECRET_KEY)
        if not encoded:
            raise NoKubeconfigError(f"has no kubeconfig under key {SECRET_KEY!r}", source=source)
        return ProfileKubeconfig(base64.b64decode(encoded), source, self.allow_local_credentials)


def _profile_of_secret(secret: Any) -> Iterable[Request]:
    meta = secret.get("metadata") or {}
    profile = (meta.get("labels") or {}).get(PROFILE_LABEL)
    return [Request(meta.get("namespace", ""), profile)] if profile else []
