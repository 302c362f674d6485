"""examples/cluster_api.py against a management server and workload servers over HTTPS."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from mcr.cluster import Cluster
from mcr.errors import NotFoundError
from mcr.testing import eventually, import_script

from .conftest import Management

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def load_example(name: str) -> ModuleType:
    return import_script(EXAMPLES / f"{name}.py")


def identity_is(workload: Cluster, expected: dict[str, str] | None) -> Any:
    async def check() -> bool:
        try:
            cm = await workload.api_reader.get("v1/ConfigMap", "cluster-identity", namespace="kube-public")
        except NotFoundError:
            return expected is None
        return cm.get("data") == expected

    return check


async def test_the_example_publishes_identities_and_follows_rotation(
    management: Management, tmp_path: Path
) -> None:
    m = management
    example = load_example("cluster_api")
    config = tmp_path / "management.yaml"
    config.write_text(yaml.safe_dump(m.servers[0].kubeconfig))
    workloads = [Cluster.from_kubeconfig(s.kubeconfig, name=f"w{i}") for i, s in enumerate(m.servers)]
    await m.cluster("alpha")
    await m.kubeconfig("alpha", m.servers[1])
    await m.cluster("beta", ready=False)
    await m.kubeconfig("beta", m.servers[2])
    runner = asyncio.create_task(example.main(["--kubeconfig", str(config), "--namespace", "tenants"]))
    alpha = {"namespace": "tenants", "cluster-name": "alpha"}
    try:
        await eventually(identity_is(workloads[1], alpha), timeout=30, message="alpha knows its identity")
        # Edited by someone: put back.
        await workloads[1].api_reader.patch(
            "v1/ConfigMap",
            "cluster-identity",
            {"data": {"cluster-name": "x"}},
            namespace="kube-public",
        )
        await eventually(identity_is(workloads[1], alpha), timeout=30, message="drift reverted")
        # beta is not initialized yet: nothing published there; then it is.
        assert await identity_is(workloads[2], None)()
        await m.cluster("beta")
        beta = {"namespace": "tenants", "cluster-name": "beta"}
        await eventually(identity_is(workloads[2], beta), timeout=30, message="beta once initialized")
        # alpha's kubeconfig rotates to another server: the identity follows, no restart.
        await m.kubeconfig("alpha", m.servers[3])
        await eventually(identity_is(workloads[3], alpha), timeout=30, message="rotation followed")
        assert not runner.done()
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        for w in workloads:
            await w.stop()
