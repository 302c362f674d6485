"""The examples that use the file provider, run against fleets of envtest servers."""

from __future__ import annotations

import asyncio
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mcr.cluster import Cluster
from mcr.errors import ClusterNotFoundError, NotFoundError
from mcr.testing import eventually, import_script
from mcr_provider_file import FileProvider

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def load_example(name: str) -> ModuleType:
    return import_script(EXAMPLES / f"{name}.py")


@pytest.fixture
async def clients() -> AsyncIterator[Any]:
    """``await clients(server)`` → a started mcr Cluster for ``server`` (stopped at teardown)."""
    made: list[Cluster] = []

    async def connect(server: Any) -> Cluster:
        cluster = Cluster.from_kubeconfig(server.kubeconfig, name=f"test-{len(made)}")
        await cluster.start()
        made.append(cluster)
        return cluster

    yield connect
    for cluster in made:
        await cluster.stop()


@pytest.fixture
async def run_manager() -> AsyncIterator[Any]:
    """Start a manager in a task; stopped gracefully (and awaited) at teardown."""
    running: list[tuple[Any, asyncio.Task[None]]] = []

    def start(mgr: Any) -> asyncio.Task[None]:
        task = asyncio.create_task(mgr.start(handle_signals=False))
        running.append((mgr, task))
        return task

    yield start
    for mgr, task in running:
        mgr.stop()
        await asyncio.wait_for(task, 30)


def configmap(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


async def test_uniform_reconciler_follows_the_fleet(
    fleet: Any, tmp_path: Path, clients: Any, run_manager: Any
) -> None:
    example = load_example("uniform_reconciler")
    servers = fleet(4).servers
    fleet_dir = tmp_path / "fleet"
    fleet_dir.mkdir()
    for i in range(3):
        shutil.copy(servers[i].kubeconfig_path, fleet_dir / f"cluster-{i}.kubeconfig")
    provider = FileProvider(directories=[fleet_dir], poll_interval=0.1)
    mgr, reporter = example.setup(provider)
    for i, server in enumerate(servers):
        client = (await clients(server)).client
        await client.create(configmap("greeting", {"from": f"cluster-{i}"}))

    def name_of(i: int) -> str:
        return provider.cluster_name(
            fleet_dir / f"cluster-{i}.kubeconfig", servers[i].kubeconfig["current-context"]
        )

    run_manager(mgr)
    # Every cluster is engaged and the same reconciler runs for each one's ConfigMaps.
    await eventually(
        lambda: all(
            reporter.seen[name_of(i)].get("default/greeting") == {"from": f"cluster-{i}"} for i in range(3)
        ),
        timeout=30,
        message="greeting reconciled in every cluster",
    )
    assert {info.name for info in mgr.clusters()} >= {name_of(i) for i in range(3)}

    # Updates and deletions in one cluster reach the reconciler for that cluster only.
    one = (await clients(servers[1])).client
    await one.delete("v1/ConfigMap", "greeting", namespace="default")
    await eventually(lambda: "default/greeting" not in reporter.seen[name_of(1)], timeout=30)
    assert reporter.seen[name_of(0)]["default/greeting"] == {"from": "cluster-0"}

    # A new kubeconfig file engages its cluster; removing one disengages it.
    shutil.copy(servers[3].kubeconfig_path, fleet_dir / "cluster-3.kubeconfig")
    await eventually(
        lambda: reporter.seen[name_of(3)].get("default/greeting") == {"from": "cluster-3"},
        timeout=30,
        message="cluster added as a file is reconciled",
    )
    (fleet_dir / "cluster-0.kubeconfig").unlink()
    await eventually(
        lambda: name_of(0) not in {info.name for info in mgr.clusters()},
        timeout=30,
        message="cluster of a removed file disengaged",
    )
    with pytest.raises(ClusterNotFoundError):
        await mgr.get_cluster(name_of(0))
    # The others keep running: a new ConfigMap in cluster 2 is still reconciled.
    two = (await clients(servers[2])).client
    await two.create(configmap("late", {"k": "v"}))
    await eventually(lambda: reporter.seen[name_of(2)].get("default/late") == {"k": "v"}, timeout=30)


async def test_copy_configmaps_copies_and_reverts_drift(
    fleet: Any, tmp_path: Path, clients: Any, run_manager: Any
) -> None:
    example = load_example("copy_configmaps")
    servers = fleet(4).servers
    hub, members = servers[0], servers[1:]
    fleet_dir = tmp_path / "fleet"
    fleet_dir.mkdir()
    for i, server in enumerate(members[:2]):
        shutil.copy(server.kubeconfig_path, fleet_dir / f"member-{i}.kubeconfig")
    provider = FileProvider(directories=[fleet_dir], poll_interval=0.1)
    mgr, _ = example.setup(hub.kubeconfig, provider)
    local = (await clients(hub)).client
    remote = [(await clients(s)).client for s in members]

    await local.create(configmap("settings", {"mode": "blue"}, {example.PROPAGATE: "true"}))
    await local.create(configmap("private", {"secret": "no"}))
    run_manager(mgr)

    async def copy_in(client: Any, name: str = "settings") -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await client.get("v1/ConfigMap", name, namespace="default")
        except NotFoundError:
            return None
        return obj

    async def copies_are(data: dict[str, str] | None, targets: list[Any]) -> bool:
        for client in targets:
            obj = await copy_in(client)
            if data is None:
                if obj is not None:
                    return False
            elif obj is None or obj.get("data") != data:
                return False
        return True

    await eventually(
        lambda: copies_are({"mode": "blue"}, remote[:2]), timeout=30, message="copied to the fleet"
    )
    copied = await copy_in(remote[0])
    assert copied is not None
    assert copied["metadata"]["labels"] == {example.PROPAGATED_FROM: "default.settings"}
    assert await copy_in(remote[0], "private") is None  # unlabelled ConfigMaps stay home

    # Drift in a fleet cluster is reverted; a deleted copy comes back.
    drifted = {**copied, "data": {"mode": "red"}}
    await remote[0].update(drifted)
    await remote[1].delete("v1/ConfigMap", "settings", namespace="default")
    await eventually(lambda: copies_are({"mode": "blue"}, remote[:2]), timeout=30, message="drift reverted")

    # Changing the source updates every copy.
    source = await local.get("v1/ConfigMap", "settings", namespace="default")
    await local.update({**source, "data": {"mode": "green"}})
    await eventually(
        lambda: copies_are({"mode": "green"}, remote[:2]), timeout=30, message="source change copied"
    )

    # A cluster joining the fleet gets its copy.
    shutil.copy(members[2].kubeconfig_path, fleet_dir / "member-2.kubeconfig")
    await eventually(lambda: copies_are({"mode": "green"}, remote), timeout=30, message="new cluster seeded")

    # Deleting the source deletes the copies.
    await local.delete("v1/ConfigMap", "settings", namespace="default")
    await eventually(lambda: copies_are(None, remote), timeout=30, message="copies deleted with the source")


async def test_uniform_reconciler_runs_as_a_script_and_stops_on_sigint(fleet: Any, clients: Any) -> None:
    servers = fleet(2)
    client = (await clients(servers.servers[1])).client
    await client.create(configmap("hello", {"k": "v"}))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / "uniform_reconciler.py"),
        "--kubeconfig-dir",
        str(servers.kubeconfig_dir),
        "--interval",
        "0.2",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    expected = f"ConfigMap default/hello in cluster {servers.kubeconfig_paths[1]}+"
    lines: list[str] = []
    try:
        async with asyncio.timeout(60):
            while not any(expected in line for line in lines):
                line = (await proc.stderr.readline()).decode()
                assert line, f"the example exited early: {''.join(lines)}"
                lines.append(line)
        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(30):
            rest = await proc.stderr.read()
            assert await proc.wait() == 0, rest.decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
