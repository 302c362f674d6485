"""examples/namespace.py against an mcr-envtest server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from mcr.cluster import Cluster
from mcr.errors import NotFoundError
from mcr.testing import eventually, import_script

from .conftest import configmap, make_namespace

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def load_example(name: str) -> ModuleType:
    return import_script(EXAMPLES / f"{name}.py")


def settings_of(admin: Cluster, namespace: str) -> Any:
    async def check() -> dict[str, str] | None:
        try:
            cm = await admin.api_reader.get("v1/ConfigMap", "tenant-settings", namespace=namespace)
        except NotFoundError:
            return None
        return dict(cm.get("data") or {})

    return check


async def test_every_tenant_namespace_gets_its_settings(
    apiserver: Any, admin: Cluster, tmp_path: Path
) -> None:
    example = load_example("namespace")
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump(apiserver.kubeconfig))
    await make_namespace(admin, "tenant-a", {"tenant": "true"})
    await make_namespace(admin, "not-a-tenant")
    await admin.api_reader.create(configmap("seed", namespace="not-a-tenant"))
    runner = asyncio.create_task(example.main(["--kubeconfig", str(config), "--selector", "tenant=true"]))
    try:
        await eventually(lambda: _is(settings_of(admin, "tenant-a"), {"tenant": "tenant-a"}), timeout=30)
        # A tenant created later; a deleted settings ConfigMap comes back.
        await make_namespace(admin, "tenant-b", {"tenant": "true"})
        await eventually(lambda: _is(settings_of(admin, "tenant-b"), {"tenant": "tenant-b"}), timeout=30)
        await admin.api_reader.delete("v1/ConfigMap", "tenant-settings", namespace="tenant-a")
        await eventually(lambda: _is(settings_of(admin, "tenant-a"), {"tenant": "tenant-a"}), timeout=30)
        assert await settings_of(admin, "not-a-tenant")() is None
        assert not runner.done()
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def _is(check: Any, expected: dict[str, str]) -> bool:
    return bool(await check() == expected)


async def test_sharded_replicas_split_the_namespaces_and_take_over(apiserver: Any, admin: Cluster) -> None:
    from mcr.rest.config import RestConfig
    from mcr.sharding import owner

    example = load_example("sharded_namespace")
    tenants = [f"tenant-{i}" for i in range(6)]
    for ns in tenants:
        await make_namespace(admin, ns)
    timings = {"lease_duration": 2.0, "renew_period": 0.5, "retry_period": 0.2}
    config = RestConfig.from_kubeconfig(apiserver.kubeconfig)
    replicas = {
        name: example.setup(
            config, identity=name, lease_namespace="default", controller_name=f"shard-owner-{name}", **timings
        )
        for name in ("r1", "r2")
    }
    tasks = {name: asyncio.create_task(m.start(handle_signals=False)) for name, m in replicas.items()}

    async def markers() -> dict[str, str | None]:
        return {ns: await marker(ns) for ns in tenants}

    async def marker(ns: str) -> str | None:
        try:
            cm = await admin.api_reader.get("v1/ConfigMap", "shard-owner", namespace=ns)
        except NotFoundError:
            return None
        return str(cm["data"]["replica"])

    try:
        expected = {ns: owner(ns, {"r1": 1.0, "r2": 1.0}) for ns in tenants}
        assert set(expected.values()) == {"r1", "r2"}, "both replicas get namespaces"

        async def split() -> bool:
            return await markers() == expected

        await eventually(split, timeout=30, message="each namespace marked by its owner")
        # r1 stops: it hands its namespaces over; r2 marks every one.
        replicas["r1"].stop()
        await asyncio.wait_for(tasks["r1"], 30)

        async def all_r2() -> bool:
            return set((await markers()).values()) == {"r2"}

        await eventually(all_r2, timeout=30, message="r2 took over after r1 stopped")
    finally:
        for name, m in replicas.items():
            m.stop()
            await asyncio.wait_for(tasks[name], 30)
