"""examples/kind.py against kind clusters of mcr-envtest's kind command."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from mcr.cluster import Cluster
from mcr.errors import NotFoundError
from mcr.testing import eventually, import_script
from mcr_provider_kind import KindProvider

from .conftest import Kind

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def load_example(name: str) -> ModuleType:
    return import_script(EXAMPLES / f"{name}.py")


def members_in(kind: Kind, name: str, expected: str) -> Any:
    async def check() -> bool:
        text = (await asyncio.to_thread(kind, "get", "kubeconfig", "--name", name)).stdout
        async with Cluster.from_kubeconfig(yaml.safe_load(text), name=name) as cluster:
            try:
                cm = await cluster.api_reader.get("v1/ConfigMap", "kind-fleet", namespace="kube-public")
            except NotFoundError:
                return False
        return bool(cm["data"] == {"self": name, "members": expected})

    return check


async def test_every_kind_cluster_learns_the_fleet(kind: Kind) -> None:
    example = load_example("kind")
    for name in ("dev-a", "dev-b", "prod"):
        await asyncio.to_thread(kind.create, name)
    mgr = example.setup(KindProvider(prefix="dev-", poll_interval=0.1), resync=0.2)
    runner = asyncio.create_task(mgr.start(handle_signals=False))
    try:
        await eventually(members_in(kind, "dev-a", "dev-a,dev-b"), timeout=30)
        await eventually(members_in(kind, "dev-b", "dev-a,dev-b"), timeout=30)
        await asyncio.to_thread(kind.create, "dev-c")
        for name in ("dev-a", "dev-b", "dev-c"):
            await eventually(members_in(kind, name, "dev-a,dev-b,dev-c"), timeout=30)
        await asyncio.to_thread(kind.delete, "dev-b")
        await eventually(members_in(kind, "dev-a", "dev-a,dev-c"), timeout=30)
        assert not await members_in(kind, "prod", "")()  # not a dev- cluster: untouched
    finally:
        mgr.stop()
        await asyncio.wait_for(runner, 30)


async def test_the_example_runs_from_its_command_line(kind: Kind) -> None:
    example = load_example("kind")
    await asyncio.to_thread(kind.create, "solo")
    runner = asyncio.create_task(example.main(["--resync", "0.2"]))
    try:
        await eventually(members_in(kind, "solo", "solo"), timeout=30)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
