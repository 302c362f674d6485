"""Random malformed requests: the server answers every one with a Status (never 5xx) and keeps
serving."""

from __future__ import annotations

import random

import orjson

from .conftest import Raw

PATHS = [
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/configmaps/x",
    "/api/v1/namespaces",
    "/api/v1/namespaces/default",
    "/apis/apps/v1/namespaces/default/deployments",
    "/apis/apps/v1/namespaces/default/deployments/d",
    "/apis/apps/v1/namespaces/default/deployments/d/scale",
    "/apis/apps/v1/namespaces/default/deployments/d/status",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "/api/v1/namespaces/default/serviceaccounts/default/token",
    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    "/api/v1/namespaces/default/pods",
    "/apis/coordination.k8s.io/v1/namespaces/default/leases/l",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "/api/v1/namespaces/x/finalize",
]
VALUES: list[object] = [
    None,
    1,
    "s",
    [],
    {},
    [1],
    {"a": None},
    True,
    {"metadata": "x"},
    {"metadata": {"name": 5}},
    {"metadata": {"name": "x", "labels": {"a": 1}}},
    {"metadata": {"name": "x", "finalizers": "f"}},
    {"metadata": {"name": "x", "ownerReferences": [{"uid": 5}]}},
    {"spec": None},
    {"spec": {"versions": [1]}},
    {"metadata": {"name": "d"}, "spec": {"replicas": "x"}},
    [{"op": "remove", "path": "/x"}],
    {"status": 5},
    {"metadata": {"name": "x", "resourceVersion": "abc"}},
    {"spec": {"names": 1, "versions": {}}},
]
CTYPES = [
    "application/json",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/yaml",
]
QUERIES = [
    "",
    "?watch=1&timeoutSeconds=1",  # (0 is kube-apiserver's default of up to an hour)
    "?limit=-1",
    "?resourceVersion=-5",
    "?fieldManager=a&force=true",
    "?dryRun=All",
    "?propagationPolicy=Bad",
    "?fieldValidation=Strict",
    "?labelSelector=!!",
    "?continue=eyJ2IjoxfQ",
]


def _body(rng: random.Random) -> bytes:
    if rng.random() < 0.2:
        return rng.choice([b"\xff\xfe", b"{", b"null", b"- a\n- b"])
    v = rng.choice(VALUES)
    if isinstance(v, dict) and rng.random() < 0.5:
        v = {"metadata": {"name": rng.choice(["x", "d", "l"])}, **v}
    return orjson.dumps(v)


async def test_random_bad_requests_never_fail_the_server(raw: Raw) -> None:
    rng = random.Random(20261121)
    for _ in range(400):
        method = rng.choice(["GET", "POST", "PUT", "PATCH", "DELETE"])
        path = rng.choice(PATHS) + rng.choice(QUERIES)
        async with raw.request(
            method, path, data=_body(rng), headers={"Content-Type": rng.choice(CTYPES)}
        ) as resp:
            payload = await resp.read()
            # kube-apiserver fails a get or watch with a malformed resourceVersion as an internal error
            malformed_rv = method == "GET" and "resourceVersion=-5" in path
            assert resp.status < 500 or (resp.status == 500 and malformed_rv), (method, path, payload[:300])
            if resp.status >= 400 and resp.content_type == "text/plain":
                assert (resp.status, payload) == (404, b"404 page not found\n"), (method, path)
            elif resp.status >= 400:
                assert orjson.loads(payload)["kind"] == "Status", (method, path)
    status, _ = await raw.json("GET", "/api/v1/namespaces/default")
    assert status == 200
