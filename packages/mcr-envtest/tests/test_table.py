"""Table output (F25)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from mcr_envtest import ServerThread
from mcr_envtest.resources import Registry
from mcr_envtest.table import human_duration, jsonpath, table_event_object, to_table

REG = Registry()


def columns(table: dict[str, Any]) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (40 * 86400, "40d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_builtin_columns() -> None:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    pod = {
        "metadata": {"name": "p", "creationTimestamp": now},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "containerStatuses": [{"ready": True, "restartCount": 2}]},
    }
    info = REG.by_kind("", "v1", "Pod")
    assert info is not None
    table = to_table(info, [pod], include_object="None", resource_version="7", continue_token="c")
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "7", "continue": "c"}
    assert columns(table) == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert table["rows"][0]["cells"][:4] == ["p", "1/2", "Running", "2"]
    assert "object" not in table["rows"][0]
    deploy = REG.by_kind("apps", "v1", "Deployment")
    cm = REG.by_kind("", "v1", "ConfigMap")
    ns = REG.by_kind("", "v1", "Namespace")
    assert deploy is not None
    assert cm is not None
    assert ns is not None
    assert columns(
        to_table(deploy, [], include_object="None", resource_version="1", continue_token=None)
    ) == [
        "Name",
        "Ready",
        "Up-to-date",
        "Available",
        "Age",
    ]
    row = to_table(
        cm,
        [{"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}],
        include_object="Metadata",
        resource_version="1",
        continue_token=None,
    )["rows"][0]
    assert row["cells"][:2] == ["c", 2]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"name": "c"},
    }
    assert columns(to_table(ns, [], include_object="None", resource_version="1", continue_token=None)) == [
        "Name",
        "Status",
        "Age",
    ]


def test_default_columns_and_crd_printer_columns() -> None:
    from .test_openapi import WIDGET_CRD

    crd_info = REG.by_kind("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
    assert crd_info is not None
    table = to_table(
        crd_info, [WIDGET_CRD], include_object="Object", resource_version="1", continue_token=None
    )
    assert columns(table) == ["Name", "Created At"]
    assert table["rows"][0]["object"] is WIDGET_CRD
    reg = Registry()
    crd = {
        **WIDGET_CRD,
        "spec": {
            **WIDGET_CRD["spec"],
            "versions": [
                {
                    **WIDGET_CRD["spec"]["versions"][0],
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                        {
                            "name": "Ready",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                        },
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                },
            ],
        },
    }
    (widget,) = reg.add_crd(crd)
    obj = {
        "metadata": {"name": "w"},
        "spec": {"size": 3},
        "status": {"conditions": [{"type": "Other", "status": "x"}, {"type": "Ready", "status": "True"}]},
    }
    table = to_table(widget, [obj], include_object="None", resource_version="1", continue_token=None)
    assert columns(table) == ["Name", "Size", "Ready", "Age"]
    assert table["rows"][0]["cells"] == ["w", 3, "True", None]
    first = table_event_object(widget, obj, include_object="None", first=True)
    later = table_event_object(widget, obj, include_object="None", first=False)
    assert len(first["columnDefinitions"]) == 4
    assert later["columnDefinitions"] is None
    assert later["rows"][0]["cells"][0] == "w"


def test_jsonpath_subset() -> None:
    obj = {"a": {"b.c": [1, {"d": 2}], "list": [{"n": "x", "v": 1}, {"n": "y", "v": 2}]}}
    assert jsonpath(obj, ".a['b.c'][1].d") == [2]
    assert jsonpath(obj, "{.a.list[*].v}") == [1, 2]
    assert jsonpath(obj, '.a.list[?(@.n=="y")].v') == [2]
    assert jsonpath(obj, ".missing.x") == []
    assert jsonpath(obj, "not a path") == []


def test_table_over_http(apiserver: ServerThread) -> None:
    import json
    import ssl
    import urllib.request

    from .test_openapi import raw_request

    raw_request(
        apiserver,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        {"metadata": {"name": "t"}, "data": {"k": "v"}},
    )
    req = urllib.request.Request(
        apiserver.url + "/api/v1/namespaces/default/configmaps",
        headers={
            "Authorization": f"Bearer {apiserver.admin_token}",
            "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        },
    )
    with urllib.request.urlopen(
        req, context=ssl.create_default_context(cafile=apiserver.ca_file), timeout=30
    ) as r:
        table = json.loads(r.read())
    assert table["kind"] == "Table"
    assert columns(table) == ["Name", "Data", "Age"]
    assert [row["cells"][:2] for row in table["rows"]] == [["kube-root-ca.crt", 1], ["t", 1]] or [
        row["cells"][:2] for row in table["rows"]
    ] == [["t", 1]]


def test_column_descriptions_come_from_the_api_documentation(apiserver: ServerThread) -> None:
    import json
    import ssl
    import urllib.request

    def table(path: str) -> dict[str, Any]:
        req = urllib.request.Request(
            apiserver.url + path,
            headers={
                "Authorization": f"Bearer {apiserver.admin_token}",
                "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io",
            },
        )
        context = ssl.create_default_context(cafile=apiserver.ca_file)
        with urllib.request.urlopen(req, context=context, timeout=30) as r:
            out: dict[str, Any] = json.loads(r.read())
            return out

    defs = {d["name"]: d for d in table("/api/v1/namespaces/default/configmaps")["columnDefinitions"]}
    assert defs["Name"]["description"].startswith("Name must be unique within a namespace.")
    assert defs["Data"]["description"].startswith("Data contains the configuration data.")
    assert defs["Data"]["type"] == "string"
    assert defs["Age"]["description"].startswith(
        "CreationTimestamp is a timestamp representing the server time"
    )
    assert "is in UTC.\n\nPopulated by the system." in defs["Age"]["description"]
    pods = {
        d["name"]: d["description"] for d in table("/api/v1/namespaces/default/pods")["columnDefinitions"]
    }
    assert pods["Ready"] == "The aggregate readiness state of this pod for accepting traffic."
    assert pods["Node"].startswith("NodeName indicates in which node this pod is scheduled.")
