"""Impersonation headers with kube-apiserver's RBAC check (verb ``impersonate``)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcr.testing import eventually
from mcr_envtest import ServerThread

from .conftest import Raw

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
CM = "/api/v1/namespaces/default/configmaps"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def token_of(cfg: dict[str, Any]) -> str:
    return str(cfg["users"][0]["user"]["token"])


async def grant(raw: Raw, name: str, rules: list[dict[str, Any]], *, user: str) -> None:
    status, body = await raw.json(
        "POST", f"{RBAC}/clusterroles", json={"metadata": {"name": name}, "rules": rules}
    )
    assert status == 201, body
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
    }
    status, body = await raw.json("POST", f"{RBAC}/clusterrolebindings", json=binding)
    assert status == 201, body


async def whoami(r: Raw, headers: dict[str, str]) -> tuple[int, Any]:
    return await r.json("POST", WHOAMI, json={"apiVersion": "authentication.k8s.io/v1"}, headers=headers)


async def granted(r: Raw, headers: dict[str, str]) -> Any:
    """The review once a just-created grant applies (kube-apiserver's RBAC follows new bindings
    within moments, mcr-envtest's at once)."""

    async def allowed() -> Any:
        status, review = await whoami(r, headers)
        return review if status == 201 else None

    return await eventually(allowed, timeout=10, interval=0.05, message=f"impersonation allowed: {headers}")


async def test_admin_impersonates_and_requests_run_as_that_user(apiserver: ServerThread, raw: Raw) -> None:
    headers = {"Impersonate-User": "alice", "Impersonate-Group": "devs", "Impersonate-Extra-Scopes": "view"}
    status, review = await whoami(raw, headers)
    assert status == 201
    assert review["status"]["userInfo"] == {
        "username": "alice",
        "groups": ["devs", "system:authenticated"],
        "extra": {"scopes": ["view"]},
    }
    # alice has no rights: the impersonated request is denied as hers
    status, body = await raw.json("GET", CM, headers={"Impersonate-User": "alice"})
    assert status == 403
    assert body["message"] == (
        'configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" '
        'in the namespace "default"'
    )
    # impersonating system:masters grants what the group grants
    status, _ = await raw.json(
        "GET", CM, headers={"Impersonate-User": "alice", "Impersonate-Group": "system:masters"}
    )
    assert status == 200


async def test_impersonation_needs_the_impersonate_verb(apiserver: ServerThread, raw: Raw) -> None:
    bob = Raw(apiserver, token=token_of(apiserver.add_user("bob")))
    try:
        status, body = await whoami(bob, {"Impersonate-User": "alice"})
        assert status == 403
        # kube-apiserver 1.37 words this refusal through constrained impersonation
        # ("cannot impersonate-on:user-info:create resource ..."); mcr-envtest names the user
        assert 'User "bob" cannot impersonate' in body["message"]
        await grant(
            raw,
            "impersonate-alice",
            [
                {
                    "apiGroups": [""],
                    "resources": ["users"],
                    "verbs": ["impersonate"],
                    "resourceNames": ["alice"],
                }
            ],
            user="bob",
        )
        review = await granted(bob, {"Impersonate-User": "alice"})
        assert review["status"]["userInfo"]["username"] == "alice"
        # each part is checked: the group, the uid and the extras need their own grants
        status, body = await whoami(bob, {"Impersonate-User": "alice", "Impersonate-Group": "admins"})
        assert status == 403
        assert body["message"].startswith(
            'groups "admins" is forbidden: User "bob" cannot impersonate resource "groups"'
        )
        status, body = await whoami(bob, {"Impersonate-User": "alice", "Impersonate-Uid": "1234"})
        assert status == 403
        assert body["message"] == (
            'uids.authentication.k8s.io "1234" is forbidden: User "bob" cannot impersonate resource "uids" '
            'in API group "authentication.k8s.io" at the cluster scope'
        )
        status, body = await whoami(bob, {"Impersonate-User": "alice", "Impersonate-Extra-Scopes": "x"})
        assert status == 403
        assert (
            'cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io"'
            in body["message"]
        )
        await grant(
            raw,
            "impersonate-extras",
            [
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["uids", "userextras/scopes"],
                    "verbs": ["impersonate"],
                }
            ],
            user="bob",
        )
        review = await granted(
            bob, {"Impersonate-User": "alice", "Impersonate-Uid": "1234", "Impersonate-Extra-Scopes": "x"}
        )
        assert review["status"]["userInfo"]["uid"] == "1234"
        # a service account is checked as serviceaccounts in its namespace
        status, body = await whoami(bob, {"Impersonate-User": "system:serviceaccount:default:builder"})
        assert status == 403
        assert body["message"] == (
            'serviceaccounts "builder" is forbidden: User "bob" cannot impersonate resource '
            '"serviceaccounts" in API group "" in the namespace "default"'
        )
    finally:
        await bob.close()


async def test_groups_without_a_user_is_a_bad_request(raw: Raw) -> None:
    status, body = await whoami(raw, {"Impersonate-Group": "devs"})
    assert status == 400
    assert body["reason"] == "BadRequest"
    assert "without impersonating a user" in body["message"]


async def test_service_account_impersonation_gets_its_groups(raw: Raw) -> None:
    status, review = await whoami(raw, {"Impersonate-User": "system:serviceaccount:team:bot"})
    assert status == 201
    assert review["status"]["userInfo"]["groups"] == [
        "system:serviceaccounts",
        "system:serviceaccounts:team",
        "system:authenticated",
    ]


@pytest.mark.kubectl
def test_kubectl_as_and_auth_can_i(apiserver: ServerThread, kubectl: Kubectl, tmp_path: Path) -> None:
    ok = kubectl("create", "rolebinding", "alice-view", "--clusterrole=view", "--user=alice", "-n", "default")
    assert ok.returncode == 0, ok.stderr
    yes = kubectl("auth", "can-i", "list", "configmaps", "-n", "default", "--as=alice")
    assert (yes.returncode, yes.stdout.strip()) == (0, "yes")
    no = kubectl("auth", "can-i", "create", "configmaps", "-n", "default", "--as=alice")
    assert (no.returncode, no.stdout.strip()) == (1, "no")
    masters = kubectl("auth", "can-i", "create", "configmaps", "--as=alice", "--as-group=system:masters")
    assert (masters.returncode, masters.stdout.strip()) == (0, "yes")
    denied = kubectl("get", "secrets", "-n", "default", "--as=alice")
    assert denied.returncode == 1
    assert 'User "alice" cannot list resource "secrets"' in denied.stderr
    whoami = kubectl("auth", "whoami", "--as=alice", "--as-group=devs", "-o", "json")
    assert whoami.returncode == 0, whoami.stderr
    assert yaml.safe_load(whoami.stdout)["status"]["userInfo"]["groups"] == ["devs", "system:authenticated"]
    listed = kubectl("auth", "can-i", "--list", "-n", "default", "--as=alice")
    assert listed.returncode == 0, listed.stderr
    assert any(line.split()[:1] == ["configmaps"] for line in listed.stdout.splitlines())
    # a user without the impersonate verb gets a 403 naming whom it may not impersonate
    bob = tmp_path / "bob.kubeconfig"
    bob.write_text(yaml.safe_dump(apiserver.add_user("bob")))
    refused = kubectl("get", "configmaps", "--as=alice", kubeconfig=str(bob))
    assert refused.returncode == 1
    assert 'User "bob" cannot impersonate' in refused.stderr  # worded differently by 1.37, see above
