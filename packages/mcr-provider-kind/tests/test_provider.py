"""KindProvider against the kind-compatible command of mcr-envtest (real server processes)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import mcr.plugins
import mcr.providers
from mcr.errors import ClusterNotFoundError
from mcr.multicluster import Provider, ProviderRunnable
from mcr.testing import RecordingAware, check_provider, eventually, providers_started
from mcr_provider_kind import KindError, KindNotFoundError, KindProvider, __version__

from .conftest import Kind

# Seconds for the provider to see a change: each poll runs the kind CLI as a subprocess, and each
# engagement connects to a new server; on a loaded CI machine that takes far longer than on a
# quiet one.
CLI = 30.0


@pytest.fixture
async def run() -> AsyncIterator[Callable[[KindProvider], RecordingAware]]:
    """Start providers with a RecordingAware each; cancelled and awaited at the end of the test."""
    async with providers_started() as start:
        yield start


def test_options_and_registration() -> None:
    provider = KindProvider()
    assert isinstance(provider, Provider)
    assert isinstance(provider, ProviderRunnable)
    assert (provider.prefix, provider.poll_interval, provider.kind_command) == ("", 2.0, "kind")
    with pytest.raises(ValueError, match="poll_interval must be positive"):
        KindProvider(poll_interval=0)
    entry = mcr.plugins.load_registry().info("kind")
    assert (entry.distribution, entry.version) == ("mcr-provider-kind", __version__)
    assert mcr.providers.create("kind", prefix="dev-").prefix == "dev-"


async def test_a_missing_kind_binary_is_a_clear_error() -> None:
    provider = KindProvider(kind_command="kind-is-not-installed-here")
    with pytest.raises(
        KindNotFoundError, match=r"'kind-is-not-installed-here' was not found on PATH: install kind"
    ):
        await provider.start(RecordingAware())


async def test_engage_prefix_reengage_and_disengage(kind: Kind, run: Any) -> None:
    await asyncio.to_thread(kind.create, "dev-a")
    await asyncio.to_thread(kind.create, "other")
    provider = KindProvider(prefix="dev-", poll_interval=0.1)
    aware = run(provider)
    await eventually(lambda: set(aware.engaged) == {"dev-a"}, timeout=CLI, message="dev-a engaged, not other")
    a = aware.engaged["dev-a"]
    assert {ns["metadata"]["name"] for ns in await a.api_reader.list("v1/Namespace")} >= {"kube-system"}

    await asyncio.to_thread(kind.create, "dev-b")
    await eventually(lambda: "dev-b" in aware.engaged, timeout=CLI, message="new kind cluster engaged")
    assert aware.engaged["dev-a"] is a  # an unchanged kubeconfig keeps the cluster

    # Re-created under the same name: another server, another kubeconfig: re-engaged.
    await asyncio.to_thread(kind.delete, "dev-a")
    await asyncio.to_thread(kind.create, "dev-a")
    await eventually(lambda: aware.engaged.get("dev-a") not in (None, a), timeout=CLI, message="re-engaged")
    new = aware.engaged["dev-a"]
    assert new.config.host != a.config.host
    assert await new.api_reader.list("v1/Namespace")

    await asyncio.to_thread(kind.delete, "dev-b")
    await eventually(lambda: "dev-b" not in aware.engaged, timeout=CLI, message="deleted cluster disengaged")
    with pytest.raises(ClusterNotFoundError):
        await provider.get("dev-b")


async def test_a_broken_kubeconfig_and_a_failing_kind_leave_the_others_alone(
    kind: Kind, run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcr.providers.kind")
    await asyncio.to_thread(kind.create, "good")
    await asyncio.to_thread(kind.create, "broken")
    (kind.home / "broken" / "kubeconfig").write_text("clusters: [\n  - {")
    provider = KindProvider(poll_interval=0.1)
    aware = run(provider)
    await eventually(
        lambda: "good" in aware.engaged and provider.problems(),
        timeout=CLI,
        message="good engaged, broken reported",
    )
    [problem] = provider.problems()
    assert problem.cluster == "broken"
    assert "kind get kubeconfig --name broken" in problem.reason
    good = aware.engaged["good"]
    assert await good.api_reader.list("v1/Namespace")

    # The kind command starts failing: a warning, the clusters stay; it recovers.
    real = kind.bin / "kind"
    target = real.readlink()
    real.unlink()
    real.write_text("#!/bin/sh\necho 'ERROR: failed to list clusters: docker is not running' >&2\nexit 1\n")
    real.chmod(0o755)
    await eventually(
        lambda: any("docker is not running" in r.getMessage() for r in caplog.records), timeout=CLI
    )
    assert aware.engaged["good"] is good
    real.unlink()
    real.symlink_to(target)
    await eventually(
        lambda: any("listing clusters works again" in r.getMessage() for r in caplog.records), timeout=CLI
    )
    assert aware.engaged["good"] is good
    warnings = [r for r in caplog.records if "docker is not running" in r.getMessage()]
    assert len(warnings) == 1, "a repeated failure is logged once"


async def test_the_first_listing_failing_fails_start(kind: Kind) -> None:
    failing = kind.bin / "kind"
    failing.unlink()
    failing.write_text("#!/bin/sh\necho 'ERROR: boom' >&2\nexit 1\n")
    failing.chmod(0o755)
    with pytest.raises(KindError, match="`kind get clusters` failed: ERROR: boom"):
        await KindProvider().start(RecordingAware())


async def test_conformance(kind: Kind) -> None:
    counter = itertools.count()
    await asyncio.to_thread(kind.create, "existing")

    async def add() -> str:
        name = f"c{next(counter)}"
        await asyncio.to_thread(kind.create, name)
        return name

    async def change(name: str) -> None:
        await asyncio.to_thread(kind.delete, name)
        await asyncio.to_thread(kind.create, name)

    async def remove(name: str) -> None:
        await asyncio.to_thread(kind.delete, name)

    await check_provider(
        KindProvider(poll_interval=0.1),
        existing=["existing"],
        add_cluster=add,
        change_cluster=change,
        remove_cluster=remove,
        timeout=30,
    )
