"""The MultiProvider composes provider distributions: kind clusters next to kubeconfig Secrets.

Real servers only: kind clusters from mcr-envtest's kind-compatible command (on PATH as ``kind``),
a host mcr-envtest server holding kubeconfig Secrets for member servers. One controller reconciles
ConfigMaps in all of them; clusters are named ``kind#<kind cluster>`` and ``kc#<Secret>``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import mcr
from mcr.providers import MultiProvider, ProviderFailedError
from mcr.testing import eventually
from mcr_provider_kind import KindProvider
from mcr_provider_kubeconfig import KubeconfigProvider, kubeconfig_secret


@pytest.fixture
def kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    backend = shutil.which("mcr-envtest-kind")
    assert backend is not None, "mcr-envtest must be installed"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kind").symlink_to(backend)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("MCR_ENVTEST_KIND_HOME", str(tmp_path / "kind-home"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    try:
        yield bin_dir / "kind"
    finally:
        subprocess.run(
            [backend, "delete", "clusters", "--all"], capture_output=True, timeout=120, check=False
        )


def run_kind(*args: str) -> str:
    done = subprocess.run(["kind", *args], capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        raise AssertionError(f"kind {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}


async def test_kind_and_kubeconfig_providers_side_by_side(kind: Path, fleet: Any) -> None:
    host, member = fleet(2).servers
    await asyncio.to_thread(run_kind, "create", "cluster", "--name", "a")
    admin = mcr.Cluster.from_kubeconfig(host.kubeconfig, name="admin")
    await admin.api_reader.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet"}})
    await admin.api_reader.create(kubeconfig_secret("b", "fleet", yaml.safe_dump(member.kubeconfig)))

    multi = MultiProvider()
    await multi.add_provider("kind", KindProvider(poll_interval=0.1))
    await multi.add_provider("kc", KubeconfigProvider("fleet"))  # the host is the manager's cluster
    mgr = mcr.Manager(
        mcr.RestConfig.from_kubeconfig(host.kubeconfig),
        provider=multi,
        metrics_bind_address="0",
        health_probe_bind_address="0",
    )
    seen: set[tuple[str, str]] = set()

    async def reconcile(req: mcr.Request) -> None:
        seen.add((req.cluster_name, req.name))

    mcr.controller_managed_by(mgr).named("multi").for_("v1/ConfigMap").complete(reconcile)
    runner = asyncio.create_task(mgr.start(handle_signals=False))
    try:
        await eventually(lambda: {"kind#a", "kc#b"} <= {i.name for i in mgr.clusters()}, timeout=30)
        a = await mgr.get_cluster("kind#a")
        b = await mgr.get_cluster("kc#b")
        assert b.config.host == member.url
        await a.client.create(configmap("from-kind"))
        await b.client.create(configmap("from-secret"))
        await eventually(lambda: {("kind#a", "from-kind"), ("kc#b", "from-secret")} <= seen, timeout=30)
        assert ("kc#b", "from-kind") not in seen

        # Each provider's clusters come and go on their own.
        await asyncio.to_thread(run_kind, "delete", "cluster", "--name", "a")
        await eventually(lambda: "kind#a" not in {i.name for i in mgr.clusters()}, timeout=30)
        await b.client.create(configmap("still-here"))
        await eventually(lambda: ("kc#b", "still-here") in seen, timeout=30)
    finally:
        mgr.stop()
        await asyncio.wait_for(runner, 30)
        await admin.stop()


async def test_two_kubeconfig_providers_compose_without_naming_their_controllers(fleet: Any) -> None:
    # A prod and a staging KubeconfigProvider, each reading Secrets of the same namespace on its
    # own host: their default controller names must not clash in one process.
    prod_host, staging_host, prod_member, staging_member = fleet(4).servers
    admins = []
    for host, name, member in ((prod_host, "eu", prod_member), (staging_host, "test", staging_member)):
        admin = mcr.Cluster.from_kubeconfig(host.kubeconfig, name=f"admin-{name}")
        admins.append(admin)
        await admin.api_reader.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet"}}
        )
        await admin.api_reader.create(kubeconfig_secret(name, "fleet", yaml.safe_dump(member.kubeconfig)))
    prod = KubeconfigProvider("fleet", cluster=admins[0])
    staging = KubeconfigProvider("fleet", cluster=admins[1])
    multi = MultiProvider()
    await multi.add_provider("prod", prod)
    await multi.add_provider("staging", staging)
    mgr = mcr.Manager(provider=multi, metrics_bind_address="0")
    seen: set[tuple[str, str]] = set()

    async def reconcile(req: mcr.Request) -> None:
        seen.add((req.cluster_name, req.name))

    mcr.controller_managed_by(mgr).named("prod-and-staging").for_("v1/ConfigMap").complete(reconcile)
    runner = asyncio.create_task(mgr.start(handle_signals=False))
    try:
        await eventually(
            lambda: {"prod#eu", "staging#test"} <= {i.name for i in mgr.clusters()} or runner.done(),
            timeout=30,
        )
        assert not runner.done(), runner.exception()
        assert (prod.controller_name, staging.controller_name) == (
            "prod#kubeconfig-provider-fleet",
            "staging#kubeconfig-provider-fleet",
        )
        assert multi.failures() == {}
        for name in ("prod#eu", "staging#test"):
            await (await mgr.get_cluster(name)).client.create(configmap(f"in-{name.split('#')[1]}"))
        await eventually(lambda: {("prod#eu", "in-eu"), ("staging#test", "in-test")} <= seen, timeout=30)
    finally:
        mgr.stop()
        await asyncio.wait_for(runner, 30)
        for admin in admins:
            await admin.stop()


async def test_a_provider_that_cannot_start_fails_the_manager_it_was_composed_into(fleet: Any) -> None:
    # Two providers given the same controller name explicitly: the second cannot start. The
    # multi provider does not run on with part of the fleet missing: the manager's start fails,
    # naming the provider.
    (host,) = fleet(1).servers
    multi = MultiProvider()
    await multi.add_provider("prod", KubeconfigProvider("fleet", controller_name="fleet-secrets"))
    await multi.add_provider("staging", KubeconfigProvider("other", controller_name="fleet-secrets"))
    mgr = mcr.Manager(
        mcr.RestConfig.from_kubeconfig(host.kubeconfig), provider=multi, metrics_bind_address="0"
    )
    with pytest.raises(
        ProviderFailedError, match="controller with name 'fleet-secrets' already exists"
    ) as err:
        await asyncio.wait_for(mgr.start(handle_signals=False), 30)
    assert err.value.provider_name in ("prod", "staging")
