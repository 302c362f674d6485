"""Kubeconfig strategies: the two shipped ones behind one Protocol, a custom one, and rotation of
an engaged profile's credentials while it is unhealthy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
import yaml

import mcr
from mcr.cache import ByObject
from mcr.reconcile import Request
from mcr.testing import eventually
from mcr_provider_inventory import (
    AccessProviders,
    AccessProviderStrategy,
    ClusterProfileProvider,
    KubeconfigStrategy,
    NoKubeconfigError,
    ProfileKubeconfig,
    SecretStrategy,
    StrategyWatch,
)

from .conftest import Hub

LABEL = "example.com/kubeconfig-for"


class ConfigMapStrategy:
    """A strategy of the test's own: the kubeconfig of profile P is in the ConfigMap labelled
    ``example.com/kubeconfig-for=P`` (key ``kubeconfig``) of the profile's namespace."""

    def __init__(self, failing: set[str]) -> None:
        self.failing = failing  # profiles whose lookup raises (a store that is unreachable)
        self.calls: list[str] = []

    def watches(self) -> Sequence[StrategyWatch]:
        return (StrategyWatch("v1/ConfigMap", self._profiles, ByObject(label_selector=LABEL)),)

    @staticmethod
    def _profiles(obj: Any) -> Iterable[Request]:
        meta = obj["metadata"]
        return [Request(meta["namespace"], meta["labels"][LABEL])]

    async def kubeconfig(self, hub: mcr.Cluster, profile: Mapping[str, Any]) -> ProfileKubeconfig:
        namespace, name = profile["metadata"]["namespace"], profile["metadata"]["name"]
        self.calls.append(name)
        if name in self.failing:
            raise ConnectionError(f"credential store unreachable for {name}")
        found = await hub.client.list("v1/ConfigMap", namespace=namespace, label_selector={LABEL: name})
        if not found:
            raise NoKubeconfigError("no ConfigMap holds its kubeconfig", source=f"ConfigMaps of {namespace}")
        cm = found[0]
        return ProfileKubeconfig(
            cm["data"]["kubeconfig"].encode(), f"ConfigMap {namespace}/{cm['metadata']['name']}"
        )


def reasons(provider: ClusterProfileProvider) -> dict[str, str]:
    return {p.cluster: f"{p.source}: {p.reason}" for p in provider.problems()}


def test_the_shipped_strategies_satisfy_the_protocol_and_bad_input_is_refused() -> None:
    access = AccessProviderStrategy(
        {
            "providers": [
                {"name": "p", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}}
            ]
        }
    )
    assert isinstance(access.access_providers, AccessProviders)
    for strategy in (access, SecretStrategy("me"), ConfigMapStrategy(set())):
        assert isinstance(strategy, KubeconfigStrategy)
    assert access.watches() == ()
    (watch,) = SecretStrategy("me").watches()
    assert watch.kind == "v1/Secret"
    assert watch.cache is not None
    assert watch.cache.label_selector == "x-k8s.io/cluster-inventory-consumer=me"
    with pytest.raises(ValueError, match="consumer_name 'a b' cannot be the value of the label"):
        SecretStrategy("a b")
    with pytest.raises(TypeError, match="strategy 'nope' is not a KubeconfigStrategy"):
        ClusterProfileProvider(strategy="nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one credential strategy"):
        ClusterProfileProvider(strategy=SecretStrategy("me"), consumer_name="me")
    provider = ClusterProfileProvider(strategy=access)
    assert provider.strategy is access
    assert provider.access_providers is access.access_providers
    assert isinstance(ClusterProfileProvider(consumer_name="me").strategy, SecretStrategy)


async def test_a_strategy_of_ones_own_with_its_watches(hub: Hub, run: Any) -> None:
    async def configmap(profile: str, member: int) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{profile}-access", "namespace": "fleet", "labels": {LABEL: profile}},
            "data": {"kubeconfig": yaml.safe_dump(hub.members[member].kubeconfig)},
        }
        await hub.admin.api_reader.apply(body, field_manager="inventory-test", force=True)

    await hub.profile("a", 1)
    await hub.profile("b", 2)
    await hub.profile("c", 3)
    await configmap("a", 1)
    strategy = ConfigMapStrategy(failing={"c"})
    provider = ClusterProfileProvider(strategy=strategy, cluster=hub.admin, namespace="fleet")
    aware = run(provider)
    await eventually(lambda: "fleet/a" in aware.engaged, message="a engaged")
    assert aware.engaged["fleet/a"].config.host == hub.members[1].url
    await eventually(lambda: {"fleet/b", "fleet/c"} <= set(reasons(provider)), message="b and c reported")
    found = reasons(provider)
    assert found["fleet/b"] == "ConfigMaps of fleet: no ConfigMap holds its kubeconfig"
    assert found["fleet/c"].startswith(
        "ClusterProfile fleet/c: ConfigMapStrategy failed, retried with backoff"
    )
    assert "credential store unreachable for c" in found["fleet/c"]
    # The strategy's watch: a ConfigMap appearing engages b; changing a's re-engages a.
    await configmap("b", 2)
    await eventually(lambda: "fleet/b" in aware.engaged, message="b engaged by its ConfigMap")
    a = aware.engaged["fleet/a"]
    await configmap("a", 3)
    await eventually(lambda: aware.engaged.get("fleet/a") not in (None, a), message="a re-engaged")
    assert aware.engaged["fleet/a"].config.host == hub.members[3].url
    # A failing lookup is retried with backoff: once the store answers, c is engaged.
    await configmap("c", 3)
    calls = strategy.calls.count("c")
    await eventually(lambda: strategy.calls.count("c") > calls, message="c's lookup retried")
    strategy.failing.clear()
    await eventually(
        lambda: "fleet/c" in aware.engaged, timeout=30, message="c engaged once its lookup works"
    )
    assert set(reasons(provider)) == set()


async def test_rotated_credentials_take_effect_while_the_profile_is_unhealthy(hub: Hub, run: Any) -> None:
    # An engaged profile that turns unhealthy stays engaged (as upstream keeps it) and still
    # follows its credentials: its Secret rotating re-engages it with the new kubeconfig.
    await hub.profile("p", 1)
    await hub.secret("p", hub.members[1].kubeconfig)
    provider = ClusterProfileProvider(consumer_name="my-controller", cluster=hub.admin)
    aware = run(provider)
    await eventually(lambda: "fleet/p" in aware.engaged, message="p engaged")
    old = aware.engaged["fleet/p"]
    await hub.profile("p", 1, healthy=False)
    await hub.secret("p", hub.members[2].kubeconfig)
    await eventually(
        lambda: aware.engaged.get("fleet/p") not in (None, old), message="rotation while unhealthy"
    )
    assert aware.engaged["fleet/p"].config.host == hub.members[2].url
    # Credentials that go disengage it; it is engaged anew only once healthy again.
    await hub.secret("p", None)
    await eventually(lambda: "fleet/p" not in aware.engaged, message="broken Secret disengages")
    await hub.secret("p", hub.members[3].kubeconfig)
    await eventually(lambda: "not ready" in reasons(provider).get("fleet/p", ""))
    assert "fleet/p" not in aware.engaged
    await hub.profile("p", 1)
    await eventually(lambda: "fleet/p" in aware.engaged, message="engaged once healthy")
    assert aware.engaged["fleet/p"].config.host == hub.members[3].url
