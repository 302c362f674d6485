"""Bad input never crashes the server and never half-applies a write; errors are Status objects."""

from __future__ import annotations

import io

import orjson
import pytest

from mcr.testing import eventually
from mcr_envtest import ServerThread

from .conftest import Raw

CM = "/api/v1/namespaces/default/configmaps"


def assert_status(body: dict, code: int, reason: str) -> None:
    assert body["kind"] == "Status"
    assert body["apiVersion"] == "v1"
    assert body["status"] == "Failure"
    assert (body["code"], body["reason"]) == (code, reason)


@pytest.mark.parametrize(
    ("data", "ctype"),
    [
        (b"{not json", "application/json"),
        (b"a: [unclosed", "application/yaml"),
        (b"", "application/json"),
        (b"[1, 2]", "application/json"),
    ],
)
async def test_malformed_bodies_are_400(raw: Raw, data: bytes, ctype: str) -> None:
    status, body = await raw.json("POST", CM, data=data, headers={"Content-Type": ctype})
    assert status == 400
    assert_status(body, 400, "BadRequest")


async def test_yaml_body_is_accepted(raw: Raw) -> None:
    status, body = await raw.json(
        "POST",
        CM,
        data=b"metadata:\n  name: yml\ndata:\n  k: v\n",  # (a bare y is YAML 1.1's true)
        headers={"Content-Type": "application/yaml"},
    )
    assert status == 201
    assert body["data"] == {"k": "v"}


async def test_unknown_resource_and_paths_are_404(raw: Raw) -> None:
    for path in (
        "/api/v1/nothings",
        "/api/v1/namespaces/default/configmaps/x/y/z",
    ):
        status, body = await raw.json("GET", path)
        assert status == 404, path
        assert_status(body, 404, "NotFound")
        assert body["message"] == "the server could not find the requested resource"
        assert body["details"] == {}
    for path in ("/apis/nope.example.com/v1/things", "/nothing"):  # nothing served there at all
        async with raw.request("GET", path) as resp:
            assert resp.status == 404, path
            assert resp.content_type == "text/plain"
            assert await resp.read() == b"404 page not found\n"


async def test_not_found_details_use_plural(raw: Raw) -> None:
    _status, body = await raw.json("GET", "/apis/apps/v1/namespaces/default/deployments/web")
    assert_status(body, 404, "NotFound")
    assert body["message"] == 'deployments.apps "web" not found'
    assert body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}


async def test_invalid_name_is_422_with_causes(raw: Raw) -> None:
    status, body = await raw.json("POST", CM, json={"metadata": {"name": "Not_Valid"}})
    assert status == 422
    assert_status(body, 422, "Invalid")
    assert body["details"]["kind"] == "ConfigMap"
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    status, body = await raw.json("POST", CM, json={"metadata": {}})
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "metadata.name"


async def test_oversized_body_is_413(raw: Raw) -> None:
    big = orjson.dumps({"metadata": {"name": "big"}, "data": {"k": "x" * (3 * 1024 * 1024 + 10)}})
    status, body = await raw.json(
        "POST", CM, data=io.BytesIO(big), headers={"Content-Type": "application/json"}
    )
    assert status == 413
    assert body["reason"] == "RequestEntityTooLarge"
    status, _ = await raw.json("GET", f"{CM}/big")
    assert status == 404


async def test_unsupported_patch_type_is_415(raw: Raw) -> None:
    await raw.json("POST", CM, json={"metadata": {"name": "p"}})
    status, body = await raw.json("PATCH", f"{CM}/p", data=b"{}", headers={"Content-Type": "text/plain"})
    assert status == 415
    assert_status(body, 415, "UnsupportedMediaType")
    assert body["message"] == "415: Unsupported Media Type"


async def test_namespace_mismatch_is_400(raw: Raw) -> None:
    status, body = await raw.json("POST", CM, json={"metadata": {"name": "m", "namespace": "kube-system"}})
    assert status == 400
    assert body["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request"
    )


async def test_failed_json_patch_applies_nothing(raw: Raw) -> None:
    status, cm = await raw.json("POST", CM, json={"metadata": {"name": "j"}, "data": {"a": "1"}})
    ops = [
        {"op": "replace", "path": "/data/a", "value": "2"},
        {"op": "test", "path": "/data/a", "value": "9"},
    ]
    status, _body = await raw.json(
        "PATCH", f"{CM}/j", data=orjson.dumps(ops), headers={"Content-Type": "application/json-patch+json"}
    )
    assert status == 422
    status, after = await raw.json("GET", f"{CM}/j")
    assert after["data"] == {"a": "1"}
    assert after["metadata"]["resourceVersion"] == cm["metadata"]["resourceVersion"]


async def test_not_acceptable_is_406(raw: Raw) -> None:
    status, body = await raw.json("GET", CM, headers={"Accept": "text/html"})
    assert status == 406
    assert body["reason"] == "NotAcceptable"
    assert body["message"] == (
        "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, "
        "application/vnd.kubernetes.protobuf, application/json;stream=watch, "
        "application/vnd.kubernetes.protobuf;stream=watch"
    )
    status, body = await raw.json("GET", f"{CM}/any", headers={"Accept": "text/html"})
    assert (status, body["message"]) == (
        406,
        "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, "
        "application/vnd.kubernetes.protobuf",
    )
    async with raw.request("GET", CM, headers={"Accept": "text/html,application/json"}) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "application/json"


async def test_method_not_allowed(raw: Raw) -> None:
    status, body = await raw.json("PUT", CM, json={})
    assert status == 405
    assert body["reason"] == "MethodNotAllowed"
    status, body = await raw.json("GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert status == 405


@pytest.mark.envtest_only("a 2-event watch history (history_size) is mcr-envtest's")
async def test_expired_continue_token_is_410() -> None:
    from mcr_envtest import ServerThread

    with ServerThread(history_size=2) as srv:
        r = Raw(srv)
        try:
            # the namespace's kube-root-ca.crt sorts after the c's
            async def root_ca() -> bool:
                return await r.status("GET", f"{CM}/kube-root-ca.crt") == 200

            await eventually(root_ca, message="no kube-root-ca.crt")
            for i in range(4):
                await r.json("POST", CM, json={"metadata": {"name": f"c{i}"}})
            status, page = await r.json("GET", f"{CM}?limit=2")
            token = page["metadata"]["continue"]
            assert page["metadata"]["remainingItemCount"] == 3
            status, page2 = await r.json("GET", f"{CM}?limit=2&continue={token}")
            assert [i["metadata"]["name"] for i in page2["items"]] == ["c2", "c3"]
            assert page2["metadata"]["remainingItemCount"] == 1
            for i in range(4, 8):
                await r.json("POST", CM, json={"metadata": {"name": f"c{i}"}})
            status, body = await r.json("GET", f"{CM}?limit=2&continue={token}")
            assert status == 410
            assert body["reason"] == "Expired"
            assert body["metadata"]["continue"]
        finally:
            await r.close()


async def test_paginated_list_is_a_consistent_snapshot(raw: Raw) -> None:
    for i in range(4):
        await raw.json("POST", CM, json={"metadata": {"name": f"s{i}", "labels": {"page": "yes"}}})
    _, page = await raw.json("GET", f"{CM}?limit=2&labelSelector=page")
    await raw.json("DELETE", f"{CM}/s3")
    await raw.json("POST", CM, json={"metadata": {"name": "s9", "labels": {"page": "yes"}}})
    cont = page["metadata"]["continue"]
    _status, page2 = await raw.json("GET", f"{CM}?limit=2&labelSelector=page&continue={cont}")
    assert [i["metadata"]["name"] for i in page2["items"]] == ["s2", "s3"]
    assert page2["metadata"]["resourceVersion"] == page["metadata"]["resourceVersion"]


async def test_bad_query_values(raw: Raw) -> None:
    for q in ("limit=abc", "labelSelector=a%20in%20(", "resourceVersion=xyz", "continue=%%%"):
        status, body = await raw.json("GET", f"{CM}?{q}")
        assert status == 400, q
        assert body["reason"] == "BadRequest"
    # kube-apiserver fails a watch or a get with a malformed resourceVersion as an internal error
    for q in ("/x?resourceVersion=-5", "?resourceVersion=xyz&watch=1"):
        status, body = await raw.json("GET", f"{CM}{q}")
        assert status == 500, q
        assert body["message"].startswith('resourceVersion: Invalid value: "'), body
        assert "reason" not in body
    status, body = await raw.json("GET", f"{CM}?resourceVersionMatch=Exact")
    assert status == 422
    status, _body = await raw.json("GET", f"{CM}?sendInitialEvents=true")
    assert status == 422


async def test_too_large_resource_version_is_504(raw: Raw) -> None:
    status, lst = await raw.json("GET", CM)
    ahead = int(lst["metadata"]["resourceVersion"]) + 1000
    status, body = await raw.json("GET", f"{CM}?resourceVersion={ahead}")
    assert status == 504
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


async def test_unauthenticated_is_401(apiserver: ServerThread) -> None:
    r = Raw(apiserver, token="wrong")
    try:
        status, body = await r.json("GET", CM)
        assert status == 401
        assert body["reason"] == "Unauthorized"
    finally:
        await r.close()
