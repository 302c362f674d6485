"""An apply that changes only field ownership is a real write; an identical apply is a no-op."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import Raw

PATH = "/api/v1/namespaces/default/configmaps/owned"
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def doc(value: str) -> bytes:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: owned\ndata:\n  k: {value}\n".encode()


async def apply(raw: Raw, manager: str, value: str, *, force: bool = False) -> tuple[int, Any]:
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return await raw.json(
        "PATCH", PATH + query, data=doc(value), headers={"Content-Type": "application/apply-patch+yaml"}
    )


def managers(obj: dict[str, Any]) -> list[str]:
    return [e["manager"] for e in obj["metadata"]["managedFields"]]


async def test_shared_ownership_is_stored_and_named_in_later_conflicts(raw: Raw) -> None:
    status, first = await apply(raw, "alpha", "one")
    assert status == 201
    # the same value from another manager: only the ownership changes (both now own .data.k)
    status, shared = await apply(raw, "beta", "one")
    assert status == 200
    assert int(shared["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert sorted(managers(shared)) == ["alpha", "beta"]
    status, stored = await raw.json("GET", PATH)
    assert sorted(managers(stored)) == ["alpha", "beta"]
    status, conflict = await apply(raw, "gamma", "two")
    assert status == 409
    assert conflict["message"] == (
        'Apply failed with 2 conflicts: conflicts with "alpha":\n- .data.k\nconflicts with "beta":\n- .data.k'
    )
    # kube-apiserver's order of the causes is not fixed
    assert sorted(c["message"] for c in conflict["details"]["causes"]) == [
        'conflict with "alpha"',
        'conflict with "beta"',
    ]


async def test_ownership_only_json_patch_of_managed_fields_is_stored(raw: Raw) -> None:
    _, first = await apply(raw, "alpha", "one")
    entry = dict(first["metadata"]["managedFields"][0], manager="renamed")
    patch = [{"op": "replace", "path": "/metadata/managedFields", "value": [entry]}]
    status, moved = await raw.json(
        "PATCH", PATH, json=patch, headers={"Content-Type": "application/json-patch+json"}
    )
    assert status == 200
    assert managers(moved) == ["renamed"]
    assert moved["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    status, conflict = await apply(raw, "gamma", "two")
    assert status == 409
    assert conflict["details"]["causes"][0]["message"] == 'conflict with "renamed"'


async def test_identical_apply_stays_a_noop(raw: Raw) -> None:
    _, first = await apply(raw, "alpha", "one")
    status, again = await apply(raw, "alpha", "one")
    assert status == 200
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert again["metadata"]["managedFields"] == first["metadata"]["managedFields"]


@pytest.mark.kubectl
def test_kubectl_diff_server_side_after_moving_to_server_side_apply(kubectl: Kubectl, tmp_path: Path) -> None:
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_bytes(doc("one"))
    two.write_bytes(doc("two"))
    ok = kubectl("apply", "-f", str(one))  # client-side apply: kubectl-client-side-apply owns the fields
    assert ok.returncode == 0, ok.stderr
    # moving to server-side apply: kubectl hands the fields to its SSA manager with a patch that
    # changes only managedFields
    ok = kubectl("apply", "--server-side", "-f", str(one))
    assert ok.returncode == 0, ok.stderr
    got = kubectl("get", "configmap", "owned", "--show-managed-fields", "-o", "json")
    assert "kubectl-client-side-apply" not in got.stdout
    diff = kubectl("diff", "--server-side", "-f", str(two))
    # exit 1: differences found, no error; a stale owner would make it a conflict (exit > 1)
    assert diff.returncode == 1, diff.stderr
    assert "-  k: one" in diff.stdout
    assert "+  k: two" in diff.stdout
