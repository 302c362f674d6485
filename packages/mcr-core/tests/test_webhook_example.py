"""examples/webhooks.py against a fleet of two, and docs/webhooks.md shows its code as it is."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mcr.cluster import Cluster
from mcr.errors import APIError
from mcr.testing import eventually, import_script, running
from mcr_envtest.certs import CA

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "webhooks.py"
PAGE = ROOT / "docs" / "webhooks.md"


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}


async def test_example_freezes_one_cluster_and_notes_the_admitting_cluster(
    fleet: Any, tmp_path: Path
) -> None:
    example = import_script(EXAMPLE)
    servers = fleet(2).servers
    ca = CA("example-webhook-ca")
    pair = ca.serving(("127.0.0.1",))
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    clusters = {"east": servers[0].kubeconfig_path, "west": servers[1].kubeconfig_path}
    mgr, server = await example.build(
        clusters, tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "ca.crt", port=0
    )
    east = Cluster.from_kubeconfig(servers[0].kubeconfig, name="admin-east")
    west = Cluster.from_kubeconfig(servers[1].kubeconfig, name="admin-west")
    try:
        await east.client.create(configmap("freeze"))
        async with running(mgr):

            async def east_refuses() -> bool:
                try:
                    await east.client.create(configmap("probe"), dry_run=True)
                except APIError as exc:
                    return "namespace default is frozen in cluster 'east'" in str(exc)
                return False

            async def west_notes() -> bool:
                obj = await west.client.create(configmap("probe"), dry_run=True)
                return bool(obj["metadata"].get("annotations", {}).get(example.ADMITTED_IN) == "west")

            await eventually(east_refuses, timeout=60)
            await eventually(west_notes, timeout=60)
            assert server.check_ready()
            with pytest.raises(APIError, match="frozen"):
                await east.client.create(configmap("app"))
            created = await west.client.create(configmap("app"))
            assert created["metadata"]["annotations"] == {example.ADMITTED_IN: "west"}
        # Stopped with remove_on_disengage: the configurations are gone from both clusters.
        for admin in (east, west):
            kinds = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
            for kind in kinds:
                items = await admin.api_reader.list(f"admissionregistration.k8s.io/v1/{kind}")
                assert [
                    o["metadata"]["name"] for o in items if o["metadata"]["name"] == "example-webhooks"
                ] == []
    finally:
        await east.stop()
        await west.stop()


def test_the_page_shows_the_examples_code() -> None:
    source = EXAMPLE.read_text()
    marked = re.search(r"# --8<-- \[start:webhooks\]\n(.*?)# --8<-- \[end:webhooks\]", source, re.S)
    assert marked is not None
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert any(marked.group(1).strip() in b for b in blocks)
