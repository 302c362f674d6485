"""CRUD through the official sync client against a real HTTPS server."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client


def test_default_namespaces_and_service_accounts(core: Any) -> None:
    names = [n.metadata.name for n in core.list_namespace().items]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    core.create_namespace({"metadata": {"name": "team-a"}})
    sas = core.list_namespaced_service_account("team-a").items
    assert [s.metadata.name for s in sas] == ["default"]


def test_configmap_lifecycle(core: Any) -> None:
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"x": "1"}})
    assert cm.metadata.uid
    assert cm.metadata.creation_timestamp is not None
    rv1 = int(cm.metadata.resource_version)
    cm2 = core.patch_namespaced_config_map("a", "default", {"data": {"x": "2"}})
    assert cm2.data == {"x": "2"}
    assert int(cm2.metadata.resource_version) > rv1
    cm3 = core.patch_namespaced_config_map("a", "default", {"data": {"x": "2"}})
    assert cm3.metadata.resource_version == cm2.metadata.resource_version  # no-op write
    cm2.data = {"x": "3"}
    cm4 = core.replace_namespaced_config_map("a", "default", cm2)
    assert cm4.data == {"x": "3"}
    cm2.metadata.resource_version = cm.metadata.resource_version
    with pytest.raises(client.ApiException) as exc:
        core.replace_namespaced_config_map("a", "default", cm2)
    assert exc.value.status == 409
    core.delete_namespaced_config_map("a", "default")
    with pytest.raises(client.ApiException) as exc:
        core.read_namespaced_config_map("a", "default")
    assert exc.value.status == 404


def test_create_errors(core: Any) -> None:
    core.create_namespaced_secret("default", {"metadata": {"name": "s"}, "stringData": {"a": "b"}})
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_secret("default", {"metadata": {"name": "s"}})
    assert exc.value.status == 409
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_config_map("nope", {"metadata": {"name": "x"}})
    assert exc.value.status == 404
    generated = core.create_namespaced_config_map("default", {"metadata": {"generateName": "gen-"}})
    assert generated.metadata.name.startswith("gen-")
    assert len(generated.metadata.name) == len("gen-") + 5
