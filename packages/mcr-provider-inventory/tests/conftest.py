"""A hub (mcr-envtest with the ClusterProfile CRD) and member servers for the provider's tests."""

from __future__ import annotations

import base64
import copy
import json
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcr.cluster import Cluster
from mcr.errors import NotFoundError
from mcr.testing import RecordingAware, eventually, providers_started
from mcr_provider_inventory import CLUSTER_PROFILE, CLUSTER_PROFILE_CRD, CONSUMER_LABEL, PROFILE_LABEL

PLUGIN = """\
import json, os, sys
info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "{}")
config = ((info.get("spec") or {}).get("cluster") or {}).get("config") or {}
try:
    with open(os.environ["TOKENS_FILE"]) as f:
        token = json.load(f)[config["clusterName"]]
except (KeyError, OSError, ValueError) as exc:
    sys.stderr.write(f"no token for this cluster: {exc!r}\\n")
    sys.exit(1)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": token}}))
"""
"""An exec plugin: the token of the cluster named by the profile's exec extension, from a file."""


@dataclass
class Hub:
    """The hub server, an admin client for it, the member servers and the exec plugin setup."""

    admin: Cluster
    members: list[Any]
    plugin: Path
    tokens: Path

    def access_config(self, name: str = "robot-tokens", **policies: str) -> dict[str, Any]:
        """A KEP-5339 access-provider document using the test's exec plugin."""
        entry: dict[str, Any] = {
            "name": name,
            "execConfig": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": sys.executable,
                "args": [str(self.plugin)],
                "env": [{"name": "TOKENS_FILE", "value": str(self.tokens)}],
                "provideClusterInfo": True,
            },
        }
        entry.update(policies)
        return {"providers": [entry]}

    async def profile(
        self,
        name: str,
        member: int | None,
        *,
        namespace: str = "fleet",
        healthy: bool = True,
        provider: str = "robot-tokens",
        extensions: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Create (or replace the status of) profile ``namespace/name`` reaching ``members[member]``."""
        try:
            obj = await self.admin.api_reader.get(CLUSTER_PROFILE, name, namespace=namespace)
        except NotFoundError:
            obj = await self.admin.api_reader.create(
                {
                    "apiVersion": "multicluster.x-k8s.io/v1alpha1",
                    "kind": "ClusterProfile",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {"displayName": name, "clusterManager": {"name": "test"}},
                }
            )
        obj["status"] = status(
            self.members[member] if member is not None else None,
            healthy=healthy,
            provider=provider,
            cluster_name=f"member-{member}",
            extensions=extensions,
        )
        return dict(await self.admin.api_reader.status.update(obj))

    async def patch_status(self, name: str, status_patch: dict[str, Any], namespace: str = "fleet") -> None:
        await self.admin.api_reader.status.patch(
            CLUSTER_PROFILE, name, {"status": status_patch}, namespace=namespace
        )

    async def secret(
        self,
        profile: str,
        kubeconfig: dict[str, Any] | bytes | None,
        *,
        name: str | None = None,
        consumer: str = "my-controller",
        namespace: str = "fleet",
        annotations: dict[str, str] | None = None,
    ) -> None:
        """Create or replace the consumer's kubeconfig Secret for ``profile``."""
        data = {}
        if kubeconfig is not None:
            raw = kubeconfig if isinstance(kubeconfig, bytes) else yaml.safe_dump(kubeconfig).encode()
            data["Config"] = base64.b64encode(raw).decode()
        obj = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name or f"{profile}-{consumer}",
                "namespace": namespace,
                "labels": {CONSUMER_LABEL: consumer, PROFILE_LABEL: profile},
                "annotations": annotations or {},
            },
            "data": data,
        }
        try:
            current = await self.admin.api_reader.get(
                "v1/Secret", obj["metadata"]["name"], namespace=namespace
            )
        except NotFoundError:
            await self.admin.api_reader.create(obj)
            return
        obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await self.admin.api_reader.update(obj)


def status(
    server: Any,
    *,
    healthy: bool = True,
    provider: str = "robot-tokens",
    cluster_name: str = "",
    extensions: list[dict[str, Any]] | None = None,
    heartbeat: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    """A ClusterProfile status: the ControlPlaneHealthy condition and one access provider."""
    out: dict[str, Any] = {
        "conditions": [
            {
                "type": "ControlPlaneHealthy",
                "status": "True" if healthy else "False",
                "reason": "Probe",
                "message": "",
                "lastTransitionTime": heartbeat,
            }
        ],
    }
    if server is not None:
        cluster = copy.deepcopy(server.kubeconfig["clusters"][0]["cluster"])
        cluster["extensions"] = [
            {"name": "client.authentication.k8s.io/exec", "extension": {"clusterName": cluster_name}},
            *(extensions or []),
        ]
        out["accessProviders"] = [{"name": provider, "cluster": cluster}]
    return out


@pytest.fixture
async def hub(fleet: Any, tmp_path: Path) -> AsyncIterator[Hub]:
    """Server 0 is the hub (ClusterProfile CRD, namespace ``fleet``); servers 1-3 are members,
    each with a token user ``robot`` whose token the exec plugin hands out by cluster name."""
    servers = fleet(4).servers
    tokens = {}
    for i, srv in enumerate(servers[1:], start=1):
        token = f"member-{i}-token"
        srv.add_user("robot", groups=["system:masters"], token=token)
        tokens[f"member-{i}"] = token
    (tmp_path / "tokens.json").write_text(json.dumps(tokens))
    (tmp_path / "plugin.py").write_text(PLUGIN)
    admin = Cluster.from_kubeconfig(servers[0].kubeconfig, name="hub-admin")
    await admin.api_reader.create(copy.deepcopy(CLUSTER_PROFILE_CRD))

    async def served() -> bool:
        try:
            await admin.api_reader.list(CLUSTER_PROFILE, namespace="fleet")
        except Exception:  # noqa: BLE001 -- not served yet
            return False
        return True

    await eventually(served, message="ClusterProfile CRD served")
    await admin.api_reader.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet"}})
    try:
        yield Hub(admin, [servers[0], *servers[1:]], tmp_path / "plugin.py", tmp_path / "tokens.json")
    finally:
        await admin.stop()


HubCluster = Callable[[Hub], Cluster]


@pytest.fixture
async def run() -> AsyncIterator[Callable[[Any], RecordingAware]]:
    """Start providers with a RecordingAware each; cancelled and awaited at the end of the test."""
    async with providers_started() as start:
        yield start
