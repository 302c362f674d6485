"""CRD conversion served by the webhook server: the API server converts between two versions of a
custom resource by calling the path of the cluster the CRD lives in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcr.errors import APIError
from mcr.testing import eventually, import_script, running
from mcr.webhook import webhook_managed_by

fx = import_script(Path(__file__).with_name("webhook_fixtures.py"))

GROUP = "example.mcr.test"
CRD = "apiextensions.k8s.io/v1/CustomResourceDefinition"


def version(name: str, field: str, *, storage: bool) -> dict[str, Any]:
    return {
        "name": name,
        "served": True,
        "storage": storage,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {field: {"type": "integer"}}}},
            }
        },
    }


WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [version("v1", "size", storage=True), version("v2", "replicas", storage=False)],
    },
}


def convert(obj: dict[str, Any], desired: str, cluster_name: str) -> dict[str, Any]:
    """v1 ``spec.size`` ⇄ v2 ``spec.replicas``; the cluster that asked is noted in an annotation."""
    spec = obj.get("spec", {})
    value = spec.get("size", spec.get("replicas"))
    obj["spec"] = {"replicas": value} if desired == f"{GROUP}/v2" else {"size": value}
    obj["apiVersion"] = desired
    obj["metadata"].setdefault("annotations", {})["example.mcr.test/converted-in"] = cluster_name
    return obj


def widget(api_version: str, name: str, spec: dict[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


async def test_conversion_between_two_crd_versions(fleet: Any, tmp_path: Path) -> None:
    servers = fleet(1).servers
    async with fx.webhook_fleet(servers, tmp_path, names=("east",)) as wf:
        admin = wf.admins["east"]
        await admin.client.create(WIDGETS)

        async def established() -> bool:
            crd = await admin.api_reader.get(CRD, f"widgets.{GROUP}")
            conditions = (crd.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        await eventually(established, timeout=60)
        webhook_managed_by(wf.server).for_(f"{GROUP}/v1/Widget").with_converter(convert).complete()
        async with running(wf.manager):
            await fx.engage_all(wf)

            async def webhook_strategy() -> bool:
                crd = await admin.api_reader.get(CRD, f"widgets.{GROUP}")
                return bool((crd["spec"].get("conversion") or {}).get("strategy") == "Webhook")

            await eventually(webhook_strategy, timeout=60)
            crd = await admin.api_reader.get(CRD, f"widgets.{GROUP}")
            client_config = crd["spec"]["conversion"]["webhook"]["clientConfig"]
            assert client_config["url"] == f"{wf.server.url}/convert/east/{GROUP}/widget"

            await admin.client.create(widget(f"{GROUP}/v1", "small", {"size": 3}))

            async def read_as_v2() -> dict[str, Any] | None:
                try:
                    obj: dict[str, Any] = await admin.api_reader.get(
                        f"{GROUP}/v2/Widget", "small", namespace="default"
                    )
                except APIError:  # the API server may not call the webhook yet
                    return None
                return obj if obj.get("spec") == {"replicas": 3} else None

            as_v2 = await eventually(read_as_v2, timeout=60)
            assert as_v2 is not None
            assert as_v2["metadata"]["annotations"]["example.mcr.test/converted-in"] == "east"

            await admin.client.create(widget(f"{GROUP}/v2", "large", {"replicas": 7}))
            stored = await admin.api_reader.get(f"{GROUP}/v1/Widget", "large", namespace="default")
            assert stored["spec"] == {"size": 7}


async def test_a_kind_a_cluster_lacks_is_registered_once_its_crd_appears(fleet: Any, tmp_path: Path) -> None:
    servers = fleet(1).servers
    async with fx.webhook_fleet(servers, tmp_path, names=("east",)) as wf:
        admin = wf.admins["east"]
        webhook_managed_by(wf.server).for_("v1/ConfigMap").with_validator(lambda req: None).complete()
        webhook_managed_by(wf.server).for_(f"{GROUP}/v1/Widget").with_validator(lambda req: None).complete()
        async with running(wf.manager):
            await fx.engage_all(wf)

            async def hooks() -> list[str]:
                config = await wf.configuration("east")
                return [] if config is None else [h["name"] for h in config["webhooks"]]

            # The kinds it serves are registered without waiting for the one it does not serve.
            assert await eventually(hooks, timeout=60) == [f"configmap.v1.core.{fx.NAME}"]
            await admin.client.create(WIDGETS)
            widget_hook = f"widget.v1.{GROUP}.{fx.NAME}"
            await eventually(lambda: _has(hooks, widget_hook), timeout=60)


async def _has(hooks: Any, name: str) -> bool:
    return name in await hooks()
