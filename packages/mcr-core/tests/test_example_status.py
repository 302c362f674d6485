"""examples/widget_status.py writes status through the client in every cluster of a fleet of two."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from pathlib import Path
from typing import Any

from mcr.cluster import Cluster
from mcr.errors import NoKindMatchError, NotFoundError
from mcr.providers import ClustersProvider
from mcr.testing import eventually, import_script

EXAMPLE = import_script(Path(__file__).resolve().parents[3] / "examples" / "widget_status.py")


async def _served(cluster: Cluster) -> bool:
    try:
        await cluster.api_reader.list(EXAMPLE.WIDGET, namespace="default")
    except (NotFoundError, NoKindMatchError) as exc:
        raise AssertionError(f"Widget not served yet: {exc}") from exc
    return True


async def test_widget_status_is_written_in_every_cluster(fleet: Any) -> None:
    servers = fleet(2).servers
    admins = [Cluster.from_kubeconfig(s.kubeconfig, name=f"admin-{i}") for i, s in enumerate(servers)]
    name = f"w-{uuid.uuid4().hex[:8]}"  # a real control plane is reused between tests
    provider = ClustersProvider()
    for i, (server, admin) in enumerate(zip(servers, admins, strict=True)):
        await EXAMPLE.install_crd(admin)
        await eventually(functools.partial(_served, admin), timeout=30, message="the Widget CRD is served")
        widget = {"apiVersion": "status.example.mcr.dev/v1", "kind": "Widget", "metadata": {"name": name}}
        await admin.api_reader.create(
            {**widget, "metadata": {"name": name, "namespace": "default"}, "spec": {"size": i + 1}}
        )
        await provider.add(f"cluster-{i}", Cluster.from_kubeconfig(server.kubeconfig, name=f"cluster-{i}"))
    mgr, _ = EXAMPLE.setup(provider)
    task = asyncio.create_task(mgr.start(handle_signals=False))
    try:

        async def status_of(i: int, generation: int, size: int) -> dict[str, Any]:
            got = await admins[i].api_reader.get(EXAMPLE.WIDGET, name, namespace="default")
            status = got.get("status") or {}
            assert status.get("observedGeneration") == generation, status
            assert status.get("size") == size, status
            assert got["metadata"]["generation"] == generation, "a status write changed the generation"
            ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
            assert len(ready) == 1, status
            assert ready[0]["status"] == "True", status
            assert ready[0]["message"] == f"size {size} observed in cluster cluster-{i}"
            assert isinstance(got, dict)
            return got

        first = [await eventually(functools.partial(status_of, i, 1, i + 1), timeout=30) for i in range(2)]

        # A spec change in one cluster: its status follows, the other cluster's is not written again.
        await admins[1].api_reader.patch(EXAMPLE.WIDGET, name, {"spec": {"size": 5}}, namespace="default")
        await eventually(lambda: status_of(1, 2, 5), timeout=30, message="the new size is observed")
        unchanged = await admins[0].api_reader.get(EXAMPLE.WIDGET, name, namespace="default")
        assert unchanged["metadata"]["resourceVersion"] == first[0]["metadata"]["resourceVersion"]
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 30)
        for admin in admins:
            with contextlib.suppress(NotFoundError):
                await admin.api_reader.delete(EXAMPLE.WIDGET, name, namespace="default")
            await admin.stop()
