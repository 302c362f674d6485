"""GVK/GVR, model-class mapping derived from the kubernetes package, and dict ⇄ model conversion."""

from __future__ import annotations

import datetime as dt

import pytest
from kubernetes import client as k8s
from kubernetes.aio import client as k8s_aio

from mcr.rest.kinds import GVK, GVR, gvk_of, is_model_class, model_class_for, object_key, to_dict, to_model


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (k8s.V1ConfigMap, GVK("", "v1", "ConfigMap")),
        (k8s.V1Secret, GVK("", "v1", "Secret")),
        (k8s.V1Namespace, GVK("", "v1", "Namespace")),
        (k8s.V1ServiceAccount, GVK("", "v1", "ServiceAccount")),
        (k8s.V1Pod, GVK("", "v1", "Pod")),
        (k8s.V1Service, GVK("", "v1", "Service")),
        (k8s.V1Deployment, GVK("apps", "v1", "Deployment")),
        (k8s.V1Lease, GVK("coordination.k8s.io", "v1", "Lease")),
        (k8s.CoreV1Event, GVK("", "v1", "Event")),
        (k8s.EventsV1Event, GVK("events.k8s.io", "v1", "Event")),
        (k8s.V1Role, GVK("rbac.authorization.k8s.io", "v1", "Role")),
        (k8s.V1RoleBinding, GVK("rbac.authorization.k8s.io", "v1", "RoleBinding")),
        (k8s.V1ClusterRole, GVK("rbac.authorization.k8s.io", "v1", "ClusterRole")),
        (k8s.V1ClusterRoleBinding, GVK("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")),
        (k8s.V1CustomResourceDefinition, GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")),
        (k8s.V1Job, GVK("batch", "v1", "Job")),
        (k8s.V2HorizontalPodAutoscaler, GVK("autoscaling", "v2", "HorizontalPodAutoscaler")),
        (k8s_aio.V1Deployment, GVK("apps", "v1", "Deployment")),
    ],
)
def test_model_classes(cls: type, expected: GVK) -> None:
    assert is_model_class(cls)
    assert gvk_of(cls) == expected


def test_strings_dicts_and_instances() -> None:
    assert gvk_of("v1/ConfigMap") == GVK("", "v1", "ConfigMap")
    assert gvk_of("apps/v1/Deployment") == GVK("apps", "v1", "Deployment")
    assert gvk_of("example.com/v1/Widget") == GVK("example.com", "v1", "Widget")
    assert gvk_of("Deployment") == GVK("apps", "v1", "Deployment")
    assert gvk_of({"apiVersion": "example.com/v1", "kind": "Widget"}) == GVK("example.com", "v1", "Widget")
    assert gvk_of(k8s.V1ConfigMap()) == GVK("", "v1", "ConfigMap")
    g = GVK("", "v1", "X")
    assert gvk_of(g) is g
    with pytest.raises(ValueError, match="apiVersion"):
        gvk_of({"metadata": {}})
    with pytest.raises(ValueError, match="not a built-in"):
        gvk_of("Widget")
    with pytest.raises(ValueError, match="not a top-level"):
        gvk_of(k8s.V1ObjectMeta)
    with pytest.raises(ValueError, match="cannot tell the kind"):
        gvk_of(42)


def test_gvk_gvr_strings() -> None:
    assert GVK("", "v1", "Pod").api_version == "v1"
    assert GVK("apps", "v1", "Deployment").api_version == "apps/v1"
    assert GVK.from_api_version("apps/v1", "Deployment") == GVK("apps", "v1", "Deployment")
    assert GVK.from_api_version("v1", "Pod") == GVK("", "v1", "Pod")
    assert str(GVR("apps", "v1", "deployments")) == "apps/v1/deployments"


def test_model_class_for() -> None:
    assert model_class_for(GVK("apps", "v1", "Deployment")) is k8s.V1Deployment
    assert model_class_for(GVK("", "v1", "Event")) is k8s.CoreV1Event
    assert model_class_for(GVK("events.k8s.io", "v1", "Event"), aio=True) is k8s_aio.EventsV1Event
    assert model_class_for(GVK("example.com", "v1", "Widget")) is None


def test_to_dict_wire_form_and_back() -> None:
    created = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
    cm = k8s.V1ConfigMap(
        metadata=k8s.V1ObjectMeta(name="a", namespace="b", creation_timestamp=created), data={"k": "v"}
    )
    d = to_dict(cm)
    assert d == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "b", "creationTimestamp": "2024-05-06T07:08:09Z"},
        "data": {"k": "v"},
    }
    back = to_model(k8s.V1ConfigMap, d)
    assert back.metadata is not None
    assert back.metadata.creation_timestamp == created
    assert back.data == {"k": "v"}
    plain = {"metadata": {"name": "x"}}
    assert to_dict(plain) is plain
    with pytest.raises(TypeError):
        to_dict(3)


def test_object_key() -> None:
    assert object_key({"metadata": {"name": "n", "namespace": "ns"}}) == ("ns", "n")
    assert object_key({"metadata": {"name": "cluster-scoped"}}) == ("", "cluster-scoped")
    assert object_key(k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="m", namespace="q"))) == ("q", "m")


def test_kind_strings_are_parsed_once_per_distinct_string() -> None:
    from mcr.rest.kinds import _gvk_of_string

    _gvk_of_string.cache_clear()
    first = gvk_of("apps/v1/Deployment")
    for _ in range(100):  # the reconcile read path names its kind on every get
        assert gvk_of("apps/v1/Deployment") is first
    assert gvk_of("ConfigMap") == GVK("", "v1", "ConfigMap")
    info = _gvk_of_string.cache_info()
    assert (info.misses, info.hits) == (2, 100)
    for _ in range(2):  # errors are raised every time, never cached as results
        with pytest.raises(ValueError, match="NoSuchKind"):
            gvk_of("NoSuchKind")
    assert _gvk_of_string.cache_info().currsize == 2
