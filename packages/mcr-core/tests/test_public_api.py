"""The public facade: exactly the curated names, each importable from ``mcr``."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import types
import warnings
from typing import Any

import pytest

import mcr

EXPECTED = {
    "GVK", "GVR", "LOCAL_CLUSTER", "APIError", "AlreadyExistsError", "Aware", "Builder", "Client",
    "Cluster", "ClusterInfo", "ClusterName", "ClusterNotFoundError", "ClusterState", "ConfigError",
    "ConflictError", "Controller", "ForbiddenError", "GoneError", "InvalidError",
    "LeaderElectionLostError", "MCRError", "Manager", "NoKindMatchError", "NotFoundError", "Provider",
    "ProviderRunnable", "Reconciler", "Request", "RestConfig", "Result", "TerminalError",
    "TooManyRequestsError", "TransportError", "UnauthorizedError", "WebhookServer", "__version__",
    "controller_managed_by", "current_cluster", "handler", "is_already_exists", "is_conflict",
    "is_gone", "is_not_found", "load_config", "load_config_async", "predicate", "providers", "run", "source",
    "webhook", "webhook_managed_by",
}  # fmt: skip


def test_exported_names_are_exactly_the_curated_set() -> None:
    assert set(mcr.__all__) == EXPECTED
    assert len(mcr.__all__) == len(set(mcr.__all__))


def test_every_exported_name_resolves() -> None:
    for name in mcr.__all__:
        assert getattr(mcr, name) is not None, name


def test_submodules_are_modules() -> None:
    for name in ("handler", "predicate", "providers", "source", "webhook"):
        assert isinstance(getattr(mcr, name), types.ModuleType)


def test_version_matches_distribution() -> None:
    assert mcr.__version__ == importlib.metadata.version("mcr-core")


def test_errors_form_one_hierarchy() -> None:
    for name in ("ClusterNotFoundError", "ConfigError", "NotFoundError", "TerminalError", "TransportError"):
        assert issubclass(getattr(mcr, name), mcr.MCRError), name
    assert issubclass(mcr.ClusterNotFoundError, LookupError)
    assert issubclass(mcr.NotFoundError, mcr.APIError)


def test_public_classes_report_the_public_module() -> None:
    assert mcr.Manager.__module__ == "mcr"
    assert mcr.Request.__module__ == "mcr"
    assert repr(mcr.Request("ns", "n", "c")).startswith("Request(")


_ON_UVLOOP = """
import asyncio, sys
import mcr

async def main(kubeconfig):
    async with mcr.Cluster.from_kubeconfig(kubeconfig, name="uv") as cluster:
        names = [ns["metadata"]["name"] for ns in await cluster.api_reader.list("v1/Namespace")]
    return type(asyncio.get_running_loop()).__module__, "kube-system" in names

print(*mcr.run(main(sys.argv[1]), loop="uvloop"))
"""


def test_run_on_uvloop_talks_to_a_cluster(apiserver: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _ON_UVLOOP, str(apiserver.kubeconfig_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["uvloop", "True"]


def test_run_refuses_an_unknown_loop_and_closes_the_coroutine() -> None:
    async def main() -> int:
        return 1

    assert mcr.run(main()) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an un-awaited coroutine would warn
        with pytest.raises(ValueError, match="loop must be 'asyncio' or 'uvloop'"):
            mcr.run(main(), loop="trio")
