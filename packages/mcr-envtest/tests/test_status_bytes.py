"""Status error bodies byte for byte as kube-apiserver writes them (key order, omitted empty
values, Go's HTML escaping, trailing newline), and the request/object size limits."""

from __future__ import annotations

import asyncio
import base64
import io
import re

import orjson
import pytest

from mcr_envtest import ServerThread

from .conftest import Raw

CM = "/api/v1/namespaces/default/configmaps"
JSON = {"Content-Type": "application/json"}


async def body_of(raw: Raw, method: str, path: str, **kwargs: object) -> tuple[int, bytes]:
    async with raw.request(method, path, **kwargs) as resp:
        assert resp.content_type == "application/json"
        return resp.status, await resp.read()


async def test_404_409_bytes(raw: Raw) -> None:
    status, body = await body_of(raw, "GET", f"{CM}/nope")
    assert status == 404
    assert body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"configmaps \\"nope\\" not found","reason":"NotFound",'
        b'"details":{"name":"nope","kind":"configmaps"},"code":404}\n'
    )
    status, created = await raw.json("POST", CM, json={"metadata": {"name": "x"}})
    assert status == 201
    status, body = await body_of(raw, "POST", CM, json={"metadata": {"name": "x"}})
    assert status == 409
    assert body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"configmaps \\"x\\" already exists","reason":"AlreadyExists",'
        b'"details":{"name":"x","kind":"configmaps"},"code":409}\n'
    )
    stale = dict(created, data={"k": "v"})
    stale["metadata"] = dict(created["metadata"], resourceVersion="1")
    status, body = await body_of(raw, "PUT", f"{CM}/x", json=stale)
    assert status == 409
    assert body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"Operation cannot be fulfilled on configmaps \\"x\\": the object has been modified; '
        b'please apply your changes to the latest version and try again","reason":"Conflict",'
        b'"details":{"name":"x","kind":"configmaps"},"code":409}\n'
    )
    status, body = await body_of(raw, "GET", "/apis/apps/v1/namespaces/default/deployments/gone")
    assert body.endswith(b'"details":{"name":"gone","group":"apps","kind":"deployments"},"code":404}\n')


async def test_422_bytes_with_causes_and_go_escaping(raw: Raw) -> None:
    status, body = await body_of(raw, "POST", CM, json={"metadata": {"name": "x", "labels": {"a": "<b>"}}})
    assert status == 422
    # a cause is {reason, message, field}; <, > and & are escaped as Go's encoder does
    assert b"<" not in body
    assert b">" not in body
    assert body.startswith(
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"ConfigMap \\"x\\" is invalid: metadata.labels: Invalid value: \\"\\u003cb\\u003e\\": '
    )
    assert body.endswith(b'"field":"metadata.labels"}]},"code":422}\n')
    decoded = orjson.loads(body)
    assert list(decoded) == [
        "kind",
        "apiVersion",
        "metadata",
        "status",
        "message",
        "reason",
        "details",
        "code",
    ]
    assert list(decoded["details"]) == ["name", "kind", "causes"]
    assert [list(c) for c in decoded["details"]["causes"]] == [["reason", "message", "field"]]
    assert decoded["details"]["causes"][0]["reason"] == "FieldValueInvalid"


async def test_401_403_bytes(apiserver: ServerThread, raw: Raw) -> None:
    anon = Raw(apiserver, token="wrong")
    try:
        status, body = await body_of(anon, "GET", CM)
    finally:
        await anon.close()
    assert status == 401
    assert body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"Unauthorized","reason":"Unauthorized","code":401}\n'
    )
    alice_cfg = apiserver.add_user("alice")
    alice = Raw(apiserver, token=alice_cfg["users"][0]["user"]["token"])
    try:
        status, body = await body_of(alice, "GET", CM)
        assert status == 403
        assert body == (
            b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            b'"message":"configmaps is forbidden: User \\"alice\\" cannot list resource \\"configmaps\\" '
            b'in API group \\"\\" in the namespace \\"default\\"","reason":"Forbidden",'
            b'"details":{"kind":"configmaps"},"code":403}\n'
        )
        status, body = await body_of(alice, "GET", "/apis/apps/v1/namespaces/default/deployments/web")
        assert body.endswith(
            b'"reason":"Forbidden","details":{"name":"web","group":"apps","kind":"deployments"},"code":403}\n'
        )
    finally:
        await alice.close()


@pytest.mark.envtest_only("compaction on demand and injected 429s are mcr-envtest faults")
async def test_410_and_429_bytes(apiserver: ServerThread, raw: Raw) -> None:
    _, lst = await raw.json("GET", CM)
    old = lst["metadata"]["resourceVersion"]
    await raw.json("POST", CM, json={"metadata": {"name": "y"}})
    apiserver.faults.compact()
    async with raw.request("GET", f"{CM}?watch=1&resourceVersion={old}") as resp:
        assert resp.status == 200
        line = await asyncio.wait_for(resp.content.readline(), 10)
    assert re.fullmatch(
        rb'\{"type":"ERROR","object":\{"kind":"Status","apiVersion":"v1","metadata":\{\},"status":"Failure",'
        rb'"message":"too old resource version: \d+ \(\d+\)","reason":"Expired","code":410\}\}\n',
        line,
    )
    apiserver.faults.fail_next(1, status=429, retry_after=2)
    status, body = await body_of(raw, "GET", CM)
    assert status == 429
    assert body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"Too many requests, please try again later.","reason":"TooManyRequests",'
        b'"details":{"retryAfterSeconds":2},"code":429}\n'
    )


async def test_request_body_over_3mib_is_413(raw: Raw) -> None:
    big = {"metadata": {"name": "big"}, "data": {"k": "x" * (3 * 1024 * 1024)}}
    status, body = await body_of(
        raw, "POST", CM, data=io.BytesIO(orjson.dumps(big)), headers={"Content-Type": "application/json"}
    )
    assert status == 413
    assert body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"Request entity too large: limit is 3145728",'
        b'"reason":"RequestEntityTooLarge","code":413}\n'
    )
    status, _ = await raw.json("GET", f"{CM}/big")
    assert status == 404


async def test_configmap_and_secret_data_over_1mib_is_422(raw: Raw) -> None:
    full = {"metadata": {"name": "full"}, "data": {"k": "x" * (1024 * 1024 + 1)}}
    status, body = await body_of(raw, "POST", CM, data=io.BytesIO(orjson.dumps(full)), headers=JSON)
    assert status == 422
    assert (
        b'"message":"ConfigMap \\"full\\" is invalid: []: Too long: may not be more than 1048576 bytes"'
        in body
    )
    ok = {"metadata": {"name": "edge"}, "data": {"k": "x" * (1024 * 1024)}}
    assert (await raw.json("POST", CM, data=io.BytesIO(orjson.dumps(ok)), headers=JSON))[0] == 201
    secret = {"metadata": {"name": "s"}, "data": {"k": base64.b64encode(b"x" * (1024 * 1024 + 3)).decode()}}
    status, body = await body_of(
        raw, "POST", "/api/v1/namespaces/default/secrets", data=io.BytesIO(orjson.dumps(secret)), headers=JSON
    )
    assert status == 422
    assert b"Too long: may not be more than 1048576 bytes" in body


async def test_object_over_etcd_limit_is_refused_like_etcd(raw: Raw) -> None:
    # under the 3 MiB body limit and not a ConfigMap, but over etcd's 1.5 MiB request limit
    doc = {"metadata": {"name": "huge", "annotations": {}}, "spec": {}}
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    status, before = await raw.json("POST", path, json=doc)
    assert status == 201
    status, body = await body_of(
        raw,
        "PATCH",
        f"{path}/huge",
        data=io.BytesIO(orjson.dumps({"metadata": {"labels": {f"k{i}": "v" * 60 for i in range(25000)}}})),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 500
    assert body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"etcdserver: request is too large","code":500}\n'
    )
    status, lease = await raw.json("GET", f"{path}/huge")
    assert status == 200
    assert lease["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert "labels" not in lease["metadata"]


async def test_success_bodies_end_with_newline(raw: Raw) -> None:
    for path in (CM, "/api/v1/namespaces/default", "/api/v1"):
        async with raw.request("GET", path) as resp:
            assert resp.status == 200
            assert (await resp.read()).endswith(b"}\n"), path
    async with raw.request("GET", "/version") as resp:  # indented, no final newline
        body = await resp.read()
        assert body.startswith(b'{\n  "major": "1",\n'), body
        assert body.endswith(b'"\n}'), body
