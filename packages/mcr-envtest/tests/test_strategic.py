"""Strategic merge patch: merge keys, sets and directives."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client, config

from mcr_envtest import ServerThread, errors
from mcr_envtest.resources import Registry
from mcr_envtest.strategic import strategic_merge

REG = Registry()
DEPLOY = REG.by_kind("apps", "v1", "Deployment")
POD = REG.by_kind("", "v1", "Pod")
assert DEPLOY is not None
assert POD is not None


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "finalizers": ["a"], "labels": {"x": "1", "y": "2"}}, "spec": spec}


ORIGINAL = pod(
    containers=[
        {
            "name": "web",
            "image": "nginx:1",
            "env": [{"name": "A", "value": "1"}],
            "ports": [{"containerPort": 80}],
        },
        {"name": "side", "image": "busybox"},
    ],
    volumes=[{"name": "data", "emptyDir": {}}],
    tolerations=[{"key": "k"}],
)


def test_lists_merge_by_key_and_atomic_lists_are_replaced() -> None:
    out = strategic_merge(
        POD,
        ORIGINAL,
        {
            "spec": {
                "containers": [
                    {"name": "web", "image": "nginx:2", "env": [{"name": "B", "value": "2"}]},
                    {"name": "new", "image": "redis"},
                ],
                "tolerations": [{"key": "other"}],
            }
        },
    )
    containers = out["spec"]["containers"]
    assert [c["name"] for c in containers] == ["web", "new", "side"]  # as kube-apiserver orders them
    assert containers[0]["image"] == "nginx:2"
    assert containers[0]["env"] == [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]
    assert containers[0]["ports"] == [{"containerPort": 80}]
    assert out["spec"]["tolerations"] == [{"key": "other"}]
    assert ORIGINAL["spec"]["containers"][0]["image"] == "nginx:1"  # input untouched


def test_finalizers_are_a_merged_set_and_nulls_delete() -> None:
    out = strategic_merge(POD, ORIGINAL, {"metadata": {"finalizers": ["b", "a"], "labels": {"x": None}}})
    assert out["metadata"]["finalizers"] == ["a", "b"]
    assert out["metadata"]["labels"] == {"y": "2"}


def test_directives() -> None:
    out = strategic_merge(POD, ORIGINAL, {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["web"]
    out = strategic_merge(
        POD, ORIGINAL, {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "i"}]}}
    )
    assert out["spec"]["containers"] == [{"name": "only", "image": "i"}]
    out = strategic_merge(POD, ORIGINAL, {"metadata": {"labels": {"$patch": "replace", "z": "3"}}})
    assert out["metadata"]["labels"] == {"z": "3"}
    out = strategic_merge(POD, ORIGINAL, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert out["metadata"]["finalizers"] == []
    out = strategic_merge(
        POD, ORIGINAL, {"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "web"}]}}
    )
    assert [c["name"] for c in out["spec"]["containers"]] == ["side", "web"]
    out = strategic_merge(
        POD,
        ORIGINAL,
        {
            "spec": {
                "volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}]
            }
        },
    )
    assert out["spec"]["volumes"] == [{"name": "data", "hostPath": {"path": "/x"}}]


@pytest.mark.parametrize(
    "patch",
    [
        {"spec": {"containers": [{"image": "no-name"}]}},
        {"spec": {"containers": ["not-an-object"]}},
        {"$unknownDirective": 1},
        {"metadata": {"$retainKeys": "name"}},
    ],
)
def test_malformed_patches_raise(patch: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"."):
        strategic_merge(POD, ORIGINAL, patch)


def test_unknown_patch_type_is_an_internal_error_as_upstream() -> None:
    patch = {"spec": {"containers": [{"name": "c", "$patch": "explode", "ports": [{"containerPort": 80}]}]}}
    with pytest.raises(errors.StatusError) as caught:
        strategic_merge(POD, ORIGINAL, patch)
    assert caught.value.code == 500
    assert caught.value.message == (
        "unknown patch type: explode in map: map[$patch:explode name:c ports:[map[containerPort:80]]]"
    )


def test_strategic_patch_through_the_official_client(apiserver: ServerThread) -> None:
    api = config.new_client_from_config_dict(apiserver.kubeconfig)
    try:
        apps = client.AppsV1Api(api)
        body = {
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]},
                },
            },
        }
        apps.create_namespaced_deployment("default", body)
        # A dict body is sent as application/strategic-merge-patch+json by the client.
        out = apps.patch_namespaced_deployment(
            "web", "default", {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "3"}]}}}}
        )
        assert [(c.name, c.image) for c in out.spec.template.spec.containers] == [("a", "1"), ("b", "3")]
    finally:
        api.close()
