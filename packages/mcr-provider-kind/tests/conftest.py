"""A ``kind`` command on PATH backed by mcr-envtest (``mcr-envtest-kind``), isolated per test."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Kind:
    """The test's kind: its state directory, kubeconfig and ``bin`` directory on PATH."""

    home: Path
    kubeconfig: Path
    bin: Path

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kind", *args], capture_output=True, text=True, check=check, timeout=120)

    def create(self, name: str) -> None:
        self("create", "cluster", "--name", name)

    def delete(self, name: str) -> None:
        self("delete", "cluster", "--name", name)


@pytest.fixture
def kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Kind]:
    backend = shutil.which("mcr-envtest-kind")
    assert backend is not None, "mcr-envtest (with its mcr-envtest-kind command) must be installed"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kind").symlink_to(backend)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("MCR_ENVTEST_KIND_HOME", str(tmp_path / "kind-home"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    k = Kind(tmp_path / "kind-home", tmp_path / "kubeconfig", bin_dir)
    try:
        yield k
    finally:
        # Every server process started by the test goes, whatever happened.
        subprocess.run(
            [backend, "delete", "clusters", "--all"], capture_output=True, timeout=120, check=False
        )
