"""``mcr-envtest kind``: kind's commands, outputs and exit codes, backed by server processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

KIND = [sys.executable, "-c", "from mcr_envtest.cli import main; raise SystemExit(main())", "kind"]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    environ = {
        **os.environ,
        "MCR_ENVTEST_KIND_HOME": str(tmp_path / "home"),
        "KUBECONFIG": str(tmp_path / "kc"),
    }
    try:
        yield environ
    finally:
        subprocess.run(
            [*KIND, "delete", "clusters", "--all"], env=environ, capture_output=True, timeout=60, check=False
        )


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie left for an init that does not reap counts as stopped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def kind(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KIND, *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_create_get_use_and_delete_like_kind(env: dict[str, str], tmp_path: Path) -> None:
    empty = kind(env, "get", "clusters")
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "", "No kind clusters found.\n")

    created = kind(env, "create", "cluster", "--name", "alpha")
    assert created.returncode == 0, created.stderr
    assert 'Creating cluster "alpha" ...' in created.stderr
    assert 'Set kubectl context to "kind-alpha"' in created.stderr
    again = kind(env, "create", "cluster", "--name", "alpha")
    assert again.returncode == 1
    assert 'node(s) already exist for a cluster with the name "alpha"' in again.stderr
    assert kind(env, "create", "cluster", "--name", "beta").returncode == 0
    assert kind(env, "get", "clusters").stdout == "alpha\nbeta\n"

    # The merged kubeconfig: kind-<name> entries, current context the last created.
    merged = yaml.safe_load(Path(env["KUBECONFIG"]).read_text())
    assert merged["current-context"] == "kind-beta"
    assert {c["name"] for c in merged["contexts"]} == {"kind-alpha", "kind-beta"}

    # get kubeconfig prints a working kubeconfig for that cluster (used by the official client).
    text = kind(env, "get", "kubeconfig", "--name", "alpha").stdout
    doc = yaml.safe_load(text)
    assert doc["current-context"] == "kind-alpha"
    api = config.new_client_from_config_dict(doc)
    with api:
        names = {ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items}
    assert "kube-system" in names
    missing = kind(env, "get", "kubeconfig", "--name", "nope")
    assert missing.returncode == 1
    assert missing.stderr == "ERROR: could not locate any control plane nodes for cluster named 'nope'\n"

    # delete: the process and the state go, the kubeconfig entries too; deleting again is fine.
    pid = int((tmp_path / "home" / "alpha" / "pid").read_text())
    assert kind(env, "delete", "cluster", "--name", "alpha").returncode == 0
    assert not (tmp_path / "home" / "alpha").exists()
    assert not running(pid)
    assert kind(env, "delete", "cluster", "--name", "alpha").returncode == 0
    assert kind(env, "get", "clusters").stdout == "beta\n"
    merged = yaml.safe_load(Path(env["KUBECONFIG"]).read_text())
    assert {c["name"] for c in merged["contexts"]} == {"kind-beta"}
    assert "mcr-envtest" in kind(env, "version").stdout


def test_a_dead_server_is_not_listed_and_its_state_is_removed(env: dict[str, str], tmp_path: Path) -> None:
    assert kind(env, "create", "cluster", "--name", "gone").returncode == 0
    pid = int((tmp_path / "home" / "gone" / "pid").read_text())
    os.kill(pid, 9)
    listed = kind(env, "get", "clusters")
    assert listed.stdout == ""
    assert not (tmp_path / "home" / "gone").exists()
    assert kind(env, "delete", "clusters", "--all").stderr == "Deleted clusters: []\n"
