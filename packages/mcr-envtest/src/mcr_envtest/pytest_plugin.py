"""pytest fixtures: ``apiserver`` (fresh HTTPS ServerThread per test), ``fleet`` (factory) and
``kubectl`` (runs the kubectl binary against ``apiserver`` with a private KUBECACHEDIR); and the
``envtest_only(reason)`` marker.

When ``KUBEBUILDER_ASSETS`` names a directory of real control-plane binaries, the fixtures serve
real kube-apiservers (pooled control planes, each reset to its fresh state between tests: see
:mod:`mcr_envtest.real`) and a test marked ``envtest_only`` is skipped with its reason. The marker
is for tests that need what only mcr-envtest has (fault injection, restarts without state, speed
controls, direct access to its store); its reason is required. The session's control planes are
stopped when the session finishes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .fleet import FleetThread
from .real import assets_dir, close_default_pool
from .server_thread import ServerThread

__all__ = ["apiserver", "find_kubectl", "fleet", "kubectl"]

ENVTEST_ONLY = "envtest_only"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{ENVTEST_ONLY}(reason): needs what only mcr-envtest has (faults, restarts, speed controls, its"
        " store); skipped when KUBEBUILDER_ASSETS names the real control plane",
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """End the real control planes this process started (they die with it in any case)."""
    close_default_pool()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check every ``envtest_only`` marker has a reason; skip those tests against the real server."""
    real = assets_dir() is not None
    for item in items:
        marker = item.get_closest_marker(ENVTEST_ONLY)
        if marker is None:
            continue
        reason = marker.args[0] if marker.args else marker.kwargs.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{ENVTEST_ONLY} needs a reason (a string)")
        if real:
            item.add_marker(pytest.mark.skip(reason=f"{ENVTEST_ONLY}: {reason}"))


@pytest.fixture
def apiserver() -> Iterator[ServerThread]:
    """A fresh HTTPS server in its own thread, closed at teardown (in real mode its control plane
    goes back to the pool)."""
    with ServerThread() as srv:
        yield srv


@pytest.fixture
def fleet() -> Iterator[Callable[..., FleetThread]]:
    """A factory: ``fleet(n, **server_kwargs)`` returns started servers; all stop at teardown."""
    made: list[FleetThread] = []

    def make(n: int, **kwargs: Any) -> FleetThread:
        f = FleetThread(n, **kwargs)
        made.append(f)
        return f.start()

    yield make
    for f in made:
        f.close()


def find_kubectl() -> str | None:
    """kubectl next to the running interpreter first (a venv's bin), then on PATH."""
    candidate = Path(sys.executable).parent / "kubectl"
    if candidate.exists() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("kubectl")


@pytest.fixture
def kubectl(apiserver: ServerThread, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``kubectl("get", "ns", input=None, check=False, kubeconfig=None)`` → CompletedProcess (text).

    Skips the test when no kubectl binary is found.
    """
    binary = find_kubectl()
    if binary is None:
        pytest.skip("kubectl binary not found next to python or on PATH")
    cache = tmp_path / "kubecache"
    env = dict(os.environ, KUBECACHEDIR=str(cache), HOME=str(tmp_path))

    def run(
        *args: str,
        input: str | None = None,
        check: bool = False,
        kubeconfig: str | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        cfg = kubeconfig or apiserver.kubeconfig_path
        return subprocess.run(
            [binary, "--kubeconfig", cfg, *args],
            input=input,
            capture_output=True,
            text=True,
            env=env,
            check=check,
            timeout=timeout,
        )

    return run
