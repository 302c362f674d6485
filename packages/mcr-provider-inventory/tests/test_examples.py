"""examples/cluster_inventory_api.py against a hub and members (mcr-envtest over HTTPS)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from mcr.cluster import Cluster
from mcr.rest.config import RestConfig
from mcr.testing import eventually, import_script
from mcr_provider_inventory import CLUSTER_PROFILE, ClusterProfileProvider

from .conftest import Hub

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def load_example(name: str) -> ModuleType:
    return import_script(EXAMPLES / f"{name}.py")


async def stamps(member: Cluster, name: str, annotation: str) -> str | None:
    obj = await member.api_reader.get("v1/ConfigMap", name, namespace="default")
    return (obj["metadata"].get("annotations") or {}).get(annotation)


def stamped(member: Cluster, name: str, annotation: str, expected: str) -> Any:
    """A check for ``eventually``: ConfigMap ``name`` carries ``annotation: expected``."""

    async def check() -> bool:
        return await stamps(member, name, annotation) == expected

    return check


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}


async def test_the_example_stamps_configmaps_in_every_profiles_cluster(hub: Hub, tmp_path: Path) -> None:
    example = load_example("cluster_inventory_api")
    provider = ClusterProfileProvider(access_providers=hub.access_config(), namespace="fleet")
    mgr = example.setup(RestConfig.from_kubeconfig(hub.members[0].kubeconfig), provider)
    members = [Cluster.from_kubeconfig(hub.members[i].kubeconfig, name=f"member-{i}") for i in (1, 2, 3)]
    for member in members:
        await member.api_reader.create(configmap("settings"))
    await hub.profile("one", 1)
    await hub.profile("two", 2)
    await hub.profile("three", 3, healthy=False)
    runner = asyncio.create_task(mgr.start(handle_signals=False))
    try:
        for member, name in zip(members[:2], ("fleet/one", "fleet/two"), strict=True):
            await eventually(stamped(member, "settings", example.ANNOTATION, name), timeout=30, message=name)
        # Not ready: not engaged, not stamped. Healthy: stamped.
        assert await stamps(members[2], "settings", example.ANNOTATION) is None
        await hub.profile("three", 3)
        await eventually(stamped(members[2], "settings", example.ANNOTATION, "fleet/three"), timeout=30)
        # A deleted profile's cluster is no longer reconciled; the others still are.
        await hub.admin.api_reader.delete(CLUSTER_PROFILE, "one", namespace="fleet")
        await eventually(lambda: "fleet/one" not in provider.names(), message="fleet/one disengaged")
        await members[0].api_reader.create(configmap("later"))
        await members[1].api_reader.create(configmap("later"))
        await eventually(stamped(members[1], "later", example.ANNOTATION, "fleet/two"), timeout=30)
        assert await stamps(members[0], "later", example.ANNOTATION) is None
        assert await stamps(members[0], "settings", example.ANNOTATION) == "fleet/one"
    finally:
        mgr.stop()
        await asyncio.wait_for(runner, 30)
        for member in members:
            await member.stop()


async def test_the_example_runs_from_its_command_line(hub: Hub, tmp_path: Path) -> None:
    example = load_example("cluster_inventory_api")
    access = tmp_path / "clusterprofile-provider-file.json"
    access.write_text(json.dumps(hub.access_config()))
    hub_kubeconfig = tmp_path / "hub.yaml"
    hub_kubeconfig.write_text(yaml.safe_dump(hub.members[0].kubeconfig))
    with pytest.raises(SystemExit):  # a credential strategy is required
        await example.main(["--kubeconfig", str(hub_kubeconfig)])
    member = Cluster.from_kubeconfig(hub.members[1].kubeconfig, name="member-1")
    await member.api_reader.create(configmap("settings"))
    await hub.profile("one", 1)
    runner = asyncio.create_task(
        example.main(["--kubeconfig", str(hub_kubeconfig), "--access-providers", str(access)])
    )
    try:
        await eventually(stamped(member, "settings", example.ANNOTATION, "fleet/one"), timeout=30)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await member.stop()
