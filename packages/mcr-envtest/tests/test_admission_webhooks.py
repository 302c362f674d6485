"""Admission webhooks: Validating/MutatingWebhookConfigurations are called as kube-apiserver calls
them (rules, selectors, matchConditions, failure policies, timeouts, AdmissionReview v1 fields,
JSON patches, reinvocation, warnings, denials, dry run), checked against a webhook server of the
test's own over HTTPS."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcr.testing import eventually

from .conftest import Raw
from .webhook_server import Hooks, sleep_then_allow

VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


@pytest.fixture
async def hooks(tmp_path: Path) -> AsyncIterator[Hooks]:
    h = Hooks()
    await h.start(tmp_path)
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def ns(raw: Raw) -> str:
    """A namespace of the test's own; every configuration selects only it."""
    name = f"wh-{uuid.uuid4().hex[:8]}"
    status, body = await raw.json(
        "POST", "/api/v1/namespaces", json={"metadata": {"name": name, "labels": {"webhook-test": name}}}
    )
    assert status == 201, body
    return name


def hook(
    hooks: Hooks,
    name: str,
    path: str,
    ns: str,
    *,
    operations: tuple[str, ...] = ("CREATE", "UPDATE", "DELETE"),
    resources: tuple[str, ...] = ("configmaps",),
    **extra: Any,
) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": hooks.url + path, "caBundle": hooks.ca_bundle},
        "rules": [
            {
                "operations": list(operations),
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": list(resources),
            }
        ],
        "namespaceSelector": {"matchLabels": {"webhook-test": ns}},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **extra,
    }


async def install(raw: Raw, path: str, name: str, webhooks: list[dict[str, Any]]) -> None:
    kind = "ValidatingWebhookConfiguration" if path == VWC else "MutatingWebhookConfiguration"
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": webhooks,
    }
    status, out = await raw.json("POST", path, json=body)
    assert status == 201, out


def cm(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"hooked": "yes", **labels}}, "data": {"k": "v"}}


async def test_configurations_are_served_with_defaults(raw: Raw, hooks: Hooks, ns: str) -> None:
    await install(raw, VWC, f"{ns}-v", [hook(hooks, "v.mcr.test", "/v", ns)])
    status, got = await raw.json("GET", f"{VWC}/{ns}-v")
    assert status == 200
    w = got["webhooks"][0]
    assert w["failurePolicy"] == "Fail"
    assert w["matchPolicy"] == "Equivalent"
    assert w["timeoutSeconds"] == 10
    assert w["objectSelector"] == {}
    assert w["rules"][0]["scope"] == "*"
    await install(raw, MWC, f"{ns}-m", [hook(hooks, "m.mcr.test", "/m", ns)])
    status, got = await raw.json("GET", f"{MWC}/{ns}-m")
    assert got["webhooks"][0]["reinvocationPolicy"] == "Never"
    assert (await raw.json("DELETE", f"{MWC}/{ns}-m"))[0] == 200


async def test_denial_carries_the_webhooks_code_and_message(raw: Raw, hooks: Hooks, ns: str) -> None:
    async def deny(req: dict[str, Any]) -> dict[str, Any]:
        if req["name"] == "forbidden":
            return {"allowed": False, "status": {"code": 403, "message": "no forbidden things"}}
        if req["name"] == "plain":
            return {"allowed": False, "status": {"message": "not like this"}}
        if req["name"] == "silent":
            return {"allowed": False}
        return {}

    hooks.behaviour["/deny"] = deny
    await install(raw, VWC, ns, [hook(hooks, "deny.mcr.test", "/deny", ns)])
    await hooks.active(raw, ns, ["/deny"])
    url = f"/api/v1/namespaces/{ns}/configmaps"
    status, body = await raw.json("POST", url, json=cm("forbidden"))
    assert status == 403
    assert body["message"] == 'admission webhook "deny.mcr.test" denied the request: no forbidden things'
    assert body["status"] == "Failure"
    assert body["code"] == 403
    status, body = await raw.json("POST", url, json=cm("plain"))
    assert status == 400
    assert body["message"] == 'admission webhook "deny.mcr.test" denied the request: not like this'
    status, body = await raw.json("POST", url, json=cm("silent"))
    assert status == 400
    assert body["message"] == 'admission webhook "deny.mcr.test" denied the request without explanation'
    assert (await raw.json("POST", url, json=cm("fine")))[0] == 201
    assert (await raw.json("GET", f"{url}/forbidden"))[0] == 404


async def test_review_request_fields_for_create_update_delete(raw: Raw, hooks: Hooks, ns: str) -> None:
    await install(raw, VWC, ns, [hook(hooks, "rec.mcr.test", "/rec", ns)])
    await hooks.active(raw, ns, ["/rec"])
    url = f"/api/v1/namespaces/{ns}/configmaps"
    status, created = await raw.json("POST", url + "?fieldManager=tester", json=cm("one"))
    assert status == 201
    (req,) = hooks.requests("/rec", "one")
    assert req["operation"] == "CREATE"
    assert req["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert req["requestKind"] == req["kind"]
    assert req["requestResource"] == req["resource"]
    assert req["namespace"] == ns
    assert req["name"] == "one"
    assert "subResource" not in req
    assert req["dryRun"] is False
    assert req["userInfo"]["username"]
    assert req["object"]["metadata"]["uid"] == created["metadata"]["uid"]
    assert req["object"]["data"] == {"k": "v"}
    assert req.get("oldObject") is None
    assert req["options"]["kind"] == "CreateOptions"
    assert req["options"]["fieldManager"] == "tester"
    assert len(req["uid"]) == 36

    created["data"] = {"k": "w"}
    status, _ = await raw.json("PUT", f"{url}/one?dryRun=All", json=created)
    assert status == 200
    upd = hooks.requests("/rec", "one")[-1]
    assert upd["operation"] == "UPDATE"
    assert upd["dryRun"] is True
    assert upd["oldObject"]["data"] == {"k": "v"}
    assert upd["object"]["data"] == {"k": "w"}
    assert upd["options"]["kind"] == "UpdateOptions"
    assert upd["options"]["dryRun"] == ["All"]

    status, _ = await raw.json("DELETE", f"{url}/one")
    assert status == 200
    dele = hooks.requests("/rec", "one")[-1]
    assert dele["operation"] == "DELETE"
    assert dele.get("object") is None
    assert dele["oldObject"]["data"] == {"k": "v"}
    assert dele["options"]["kind"] == "DeleteOptions"


async def test_mutating_patch_lands_before_validation_with_warnings(raw: Raw, hooks: Hooks, ns: str) -> None:
    async def mutate(req: dict[str, Any]) -> dict[str, Any]:
        patch = b'[{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]'
        import base64

        return {
            "patchType": "JSONPatch",
            "patch": base64.b64encode(patch).decode(),
            "warnings": ['mutated "it"'],
        }

    async def validate(req: dict[str, Any]) -> dict[str, Any]:
        if req["object"]["metadata"]["labels"].get("mutated") != "yes":
            return {"allowed": False, "status": {"message": "not mutated"}}
        return {"warnings": ["validated"]}

    hooks.behaviour["/mutate"] = mutate
    hooks.behaviour["/validate"] = validate
    await install(raw, MWC, ns, [hook(hooks, "mutate.mcr.test", "/mutate", ns, operations=("CREATE",))])
    await install(raw, VWC, ns, [hook(hooks, "validate.mcr.test", "/validate", ns, operations=("CREATE",))])
    await hooks.active(raw, ns, ["/mutate", "/validate"])
    async with raw.request("POST", f"/api/v1/namespaces/{ns}/configmaps", json=cm("m")) as resp:
        assert resp.status == 201
        body = await resp.json()
        warnings = resp.headers.getall("Warning", [])
    assert body["metadata"]["labels"]["mutated"] == "yes"
    assert warnings == ['299 - "mutated \\"it\\""', '299 - "validated"']
    _status, stored = await raw.json("GET", f"/api/v1/namespaces/{ns}/configmaps/m")
    assert stored["metadata"]["labels"] == {"hooked": "yes", "mutated": "yes"}
    # the mutating webhook saw the object before the server filled in uid and timestamps
    (mreq,) = hooks.requests("/mutate", "m")
    assert "uid" not in mreq["object"]["metadata"]


async def test_reinvocation_if_needed(raw: Raw, hooks: Hooks, ns: str) -> None:
    import base64

    async def first(req: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def second(req: dict[str, Any]) -> dict[str, Any]:
        if "second" in req["object"]["metadata"]["labels"]:
            return {}
        patch = b'[{"op": "add", "path": "/metadata/labels/second", "value": "x"}]'
        return {"patchType": "JSONPatch", "patch": base64.b64encode(patch).decode()}

    hooks.behaviour["/first"] = first
    hooks.behaviour["/second"] = second
    await install(
        raw,
        MWC,
        ns,
        [
            hook(hooks, "first.mcr.test", "/first", ns, reinvocationPolicy="IfNeeded"),
            hook(hooks, "second.mcr.test", "/second", ns),
        ],
    )
    await hooks.active(raw, ns, ["/first", "/second"])
    status, body = await raw.json("POST", f"/api/v1/namespaces/{ns}/configmaps", json=cm("r"))
    assert status == 201, body
    assert body["metadata"]["labels"]["second"] == "x"
    calls = hooks.requests("/first", "r")
    assert len(calls) == 2
    assert "second" in calls[1]["object"]["metadata"]["labels"]
    assert len(hooks.requests("/second", "r")) == 1


async def test_rules_and_selectors_choose_the_requests(raw: Raw, hooks: Hooks, ns: str) -> None:
    await install(
        raw,
        VWC,
        ns,
        [
            hook(
                hooks,
                "sel.mcr.test",
                "/sel",
                ns,
                operations=("CREATE",),
                objectSelector={"matchLabels": {"hooked": "yes"}},
                matchConditions=[{"name": "not-skipped", "expression": 'object.metadata.name != "skipped"'}],
            )
        ],
    )
    await hooks.active(raw, ns, ["/sel"])
    url = f"/api/v1/namespaces/{ns}/configmaps"
    assert (await raw.json("POST", url, json=cm("a")))[0] == 201
    assert (await raw.json("POST", url, json={"metadata": {"name": "unlabelled"}}))[0] == 201
    assert (await raw.json("POST", url, json=cm("skipped")))[0] == 201
    _, a = await raw.json("GET", f"{url}/a")
    assert (await raw.json("PUT", f"{url}/a", json=a))[0] == 200
    secret = {"metadata": {"name": "a", "labels": {"hooked": "yes"}}}
    assert (await raw.json("POST", f"/api/v1/namespaces/{ns}/secrets", json=secret))[0] == 201
    assert (await raw.json("POST", "/api/v1/namespaces/default/configmaps", json=cm(f"{ns}-x")))[0] == 201
    await raw.json("DELETE", f"/api/v1/namespaces/default/configmaps/{ns}-x")
    seen = [(r["operation"], r["resource"]["resource"], r["name"]) for r in hooks.requests("/sel")]
    assert [s for s in seen if not s[2].startswith("probe")] == [("CREATE", "configmaps", "a")]


async def test_failure_policy_on_timeout(raw: Raw, hooks: Hooks, ns: str) -> None:
    async def slow(req: dict[str, Any]) -> dict[str, Any]:
        return await sleep_then_allow(4)

    hooks.behaviour["/slow-fail"] = slow
    hooks.behaviour["/slow-ignore"] = slow
    hooks.behaviour["/slow-hold"] = slow
    await install(
        raw,
        VWC,
        ns,
        [
            hook(
                hooks,
                "fail.mcr.test",
                "/slow-fail",
                ns,
                timeoutSeconds=1,
                objectSelector={"matchLabels": {"p": "fail"}},
            ),
            hook(
                hooks,
                "ignore.mcr.test",
                "/slow-ignore",
                ns,
                timeoutSeconds=1,
                failurePolicy="Ignore",
                objectSelector={"matchLabels": {"p": "ignore"}},
            ),
            hook(
                hooks,
                "hold.mcr.test",
                "/slow-hold",
                ns,
                timeoutSeconds=6,
                failurePolicy="Ignore",
                objectSelector={"matchLabels": {"p": "hold"}},
            ),
        ],
    )
    url = f"/api/v1/namespaces/{ns}/configmaps"

    async def denied() -> bool:
        status, _ = await raw.json(
            "POST", url + "?dryRun=All", json=cm(f"x-{uuid.uuid4().hex[:6]}", p="fail")
        )
        return status == 500

    await eventually(denied, timeout=30, interval=0.1, message="the failing webhook is called")
    began = time.monotonic()
    status, body = await raw.json("POST", url, json=cm("f", p="fail"))
    assert status == 500
    assert body["reason"] == "InternalError"
    prefix = 'Internal error occurred: failed calling webhook "fail.mcr.test": failed to call webhook: Post "'
    assert body["message"] == prefix + hooks.url + '/slow-fail?timeout=1s": context deadline exceeded'
    assert body["code"] == 500
    assert body["details"]["causes"][0]["message"] == body["message"].removeprefix(
        "Internal error occurred: "
    )
    assert time.monotonic() - began < 3.5
    began = time.monotonic()
    status, body = await raw.json("POST", url, json=cm("i", p="ignore"))
    assert status == 201, body
    assert time.monotonic() - began < 3.5
    # a webhook call in flight holds up no other request
    pending = asyncio.ensure_future(raw.json("POST", url, json=cm("h", p="hold")))
    try:
        await eventually(lambda: len(hooks.requests("/slow-hold", "h")) == 1, timeout=10, interval=0.02)
        began = time.monotonic()
        assert (await raw.json("GET", f"/api/v1/namespaces/{ns}"))[0] == 200
        assert time.monotonic() - began < 2
        assert not pending.done()
    finally:
        status, _ = await pending
    assert status == 201


async def test_unreachable_and_untrusted_webhooks(raw: Raw, hooks: Hooks, ns: str) -> None:
    other = Hooks()  # its CA did not sign the server's certificate
    bad_ca = hook(hooks, "ca.mcr.test", "/ca", ns, objectSelector={"matchLabels": {"p": "ca"}})
    bad_ca["clientConfig"]["caBundle"] = other.ca_bundle
    svc = hook(hooks, "svc.mcr.test", "/svc", ns, objectSelector={"matchLabels": {"p": "svc"}})
    svc["clientConfig"] = {"service": {"namespace": ns, "name": "nowhere", "path": "/svc"}}
    await install(raw, VWC, ns, [bad_ca, svc])
    url = f"/api/v1/namespaces/{ns}/configmaps"

    async def failing(p: str) -> dict[str, Any]:
        status, body = await raw.json("POST", url + "?dryRun=All", json=cm(f"x-{uuid.uuid4().hex[:6]}", p=p))
        assert status == 500, body
        return dict(body)

    body = await eventually(lambda: failing("ca"), timeout=30, interval=0.1)
    assert body["message"].startswith(
        'Internal error occurred: failed calling webhook "ca.mcr.test": failed to call webhook: Post "'
        + hooks.url
        + '/ca?timeout=10s": tls: failed to verify certificate: x509: certificate signed by unknown authority'
    ), body["message"]
    body = await eventually(lambda: failing("svc"), timeout=30, interval=0.1)
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "svc.mcr.test": failed to call webhook: Post "'
        f'https://nowhere.{ns}.svc:443/svc?timeout=10s": service "nowhere" not found'
    )


async def test_subresource_rules_and_delete_denial(raw: Raw, hooks: Hooks, ns: str) -> None:
    async def deny(req: dict[str, Any]) -> dict[str, Any]:
        return {"allowed": False, "status": {"code": 422, "reason": "Invalid", "message": "kept"}}

    hooks.behaviour["/status"] = deny
    hooks.behaviour["/delete"] = deny
    status_hook = hook(hooks, "status.mcr.test", "/status", ns, operations=("UPDATE",))
    status_hook["rules"][0]["resources"] = ["namespaces/status"]
    status_hook["rules"][0]["scope"] = "Cluster"
    delete_hook = hook(hooks, "delete.mcr.test", "/delete", ns, operations=("DELETE",))
    await install(raw, VWC, ns, [status_hook, delete_hook])
    _, current = await raw.json("GET", f"/api/v1/namespaces/{ns}")

    async def status_denied() -> dict[str, Any]:
        status, body = await raw.json("PUT", f"/api/v1/namespaces/{ns}/status?dryRun=All", json=current)
        assert status == 422, body
        return dict(body)

    body = await eventually(status_denied, timeout=30, interval=0.1)
    assert body["message"] == 'admission webhook "status.mcr.test" denied the request: kept'
    assert body["reason"] == "Invalid"
    req = hooks.requests("/status")[-1]
    assert req["subResource"] == "status"
    assert req["requestSubResource"] == "status"
    assert req["resource"] == {"group": "", "version": "v1", "resource": "namespaces"}
    assert req["name"] == ns
    # the namespace itself, not its status, is not sent to the status webhook
    current["metadata"]["labels"]["more"] = "x"
    status, _ = await raw.json("PUT", f"/api/v1/namespaces/{ns}", json=current)
    assert status == 200
    assert all(r.get("subResource") == "status" for r in hooks.requests("/status"))

    url = f"/api/v1/namespaces/{ns}/configmaps"
    assert (await raw.json("POST", url, json=cm("d")))[0] == 201

    async def delete_denied() -> dict[str, Any]:
        status, body = await raw.json("DELETE", f"{url}/d")
        assert status == 422, body
        return dict(body)

    body = await eventually(delete_denied, timeout=30, interval=0.1)
    assert body["message"] == 'admission webhook "delete.mcr.test" denied the request: kept'
    assert (await raw.json("GET", f"{url}/d"))[0] == 200
    dele = hooks.requests("/delete", "d")[-1]
    assert dele["operation"] == "DELETE"
    assert dele["namespace"] == ns


@pytest.mark.envtest_only("mcr-envtest's own warning about CEL its evaluator lacks")
async def test_unsupported_match_condition_is_named(raw: Raw, hooks: Hooks, ns: str) -> None:
    expression = "object.metadata.name.matches(quantity('1').asString())"
    w = hook(
        hooks,
        "cel.mcr.test",
        "/cel",
        ns,
        matchConditions=[{"name": "odd", "expression": expression}],
    )
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": ns},
        "webhooks": [w],
    }
    async with raw.request("POST", VWC, json=body) as resp:
        assert resp.status == 201
        warnings = resp.headers.getall("Warning", [])
    assert warnings == [
        '299 - "webhooks[0].matchConditions[0]: function '
        "'quantity' is not supported by mcr-envtest; "
        "the condition fails and the webhook's failurePolicy decides\""
    ]
    status, out = await raw.json("POST", f"/api/v1/namespaces/{ns}/configmaps", json=cm("c"))
    assert status == 500
    assert out["message"].startswith(
        'Internal error occurred: failed calling webhook "cel.mcr.test": '
        "failed to evaluate match conditions: "
    )
    assert hooks.requests("/cel") == []


async def test_webhook_configurations_are_never_sent_to_webhooks(raw: Raw, hooks: Hooks, ns: str) -> None:
    async def deny(req: dict[str, Any]) -> dict[str, Any]:
        return {"allowed": False}

    hooks.behaviour["/all"] = deny
    w = hook(hooks, "all.mcr.test", "/all", ns)
    w["rules"].append(
        {
            "operations": ["*"],
            "apiGroups": ["admissionregistration.k8s.io"],
            "apiVersions": ["*"],
            "resources": ["*"],
        }
    )
    await install(raw, VWC, ns, [w])
    await hooks.active(raw, ns, ["/all"])
    await install(raw, MWC, f"{ns}-other", [hook(hooks, "other.mcr.test", "/other", ns)])
    assert (await raw.json("DELETE", f"{MWC}/{ns}-other"))[0] == 200
    assert (await raw.json("DELETE", f"{VWC}/{ns}"))[0] == 200
    assert {r["resource"]["resource"] for r in hooks.requests("/all")} == {"configmaps"}
