"""examples/kubeconfig.py against a host and members (mcr-envtest over HTTPS)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from types import ModuleType

import yaml

from mcr.rest.config import RestConfig
from mcr.testing import eventually, import_script
from mcr_provider_kubeconfig import KubeconfigProvider

from .conftest import Host

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def load_example(name: str) -> ModuleType:
    return import_script(EXAMPLES / f"{name}.py")


async def test_create_secret_then_the_controller_inventories_the_cluster(host: Host, tmp_path: Path) -> None:
    example = load_example("kubeconfig")
    host_file = tmp_path / "host.yaml"
    host_file.write_text(yaml.safe_dump(host.members[0].kubeconfig))
    # A member kubeconfig that names its CA by file, as kind and cloud CLIs write them.
    member = yaml.safe_load(yaml.safe_dump(host.members[1].kubeconfig))
    ca = tmp_path / "ca.crt"
    ca.write_bytes(base64.b64decode(member["clusters"][0]["cluster"].pop("certificate-authority-data")))
    member["clusters"][0]["cluster"]["certificate-authority"] = "ca.crt"
    member_file = tmp_path / "member.kubeconfig"
    member_file.write_text(yaml.safe_dump(member))

    common = ["--kubeconfig", str(host_file), "--namespace", "fleet"]
    await example.main([*common, "create-secret", "--from", str(member_file), "--name", "member-1"])
    secret = await host.admin.api_reader.get("v1/Secret", "member-1", namespace="fleet")
    stored = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    assert "certificate-authority" not in stored["clusters"][0]["cluster"]  # inlined, no file path

    provider = KubeconfigProvider("fleet")
    mgr, inventory = example.setup(RestConfig.from_kubeconfig(host.members[0].kubeconfig), provider)
    runner = asyncio.create_task(mgr.start(handle_signals=False))
    try:
        await eventually(lambda: "kube-system" in inventory.namespaces.get("member-1", set()), timeout=30)
        cluster = await provider.get("member-1")
        await cluster.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
        await eventually(lambda: "team-a" in inventory.namespaces["member-1"], timeout=30)
        # A second cluster added while running.
        await example.main(
            [*common, "create-secret", "--from", str(host.members[2].kubeconfig_path), "--name", "m2"]
        )
        await eventually(lambda: "kube-system" in inventory.namespaces.get("m2", set()), timeout=30)
        assert "team-a" not in inventory.namespaces["m2"]
    finally:
        mgr.stop()
        await asyncio.wait_for(runner, 30)
