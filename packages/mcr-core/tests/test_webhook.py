"""Admission webhooks for a fleet, against the API servers that call them (mcr-envtest or the real
kube-apiserver): per-cluster decisions, patches, registration, refusals, certificate rotation."""

from __future__ import annotations

import asyncio
import base64
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from kubernetes.client import V1ConfigMap

from mcr.errors import APIError, NotFoundError
from mcr.testing import eventually, import_script, running
from mcr.webhook import AdmissionRequest, Response, denied, path_for, webhook_managed_by
from mcr_envtest.certs import CA

fx = import_script(Path(__file__).with_name("webhook_fixtures.py"))


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    }


async def frozen(req: AdmissionRequest) -> Response | None:
    """Deny new ConfigMaps in a namespace where the cluster's cache holds a ConfigMap ``freeze``."""
    if req.name == "freeze":
        return None
    try:
        await req.cluster.client.get("v1/ConfigMap", "freeze", namespace=req.namespace)
    except NotFoundError:
        return None
    return denied(f"namespace {req.namespace} is frozen in cluster {req.cluster_name}")


async def denied_by_webhook(admin: Any, obj: dict[str, Any]) -> bool:
    try:
        await admin.client.create(obj, dry_run=True)
    except APIError as exc:
        return "frozen" in str(exc)
    return False


async def test_validator_decides_per_cluster_from_that_clusters_cache(fleet: Any, tmp_path: Path) -> None:
    servers = fleet(2).servers
    async with fx.webhook_fleet(servers, tmp_path) as wf:
        await wf.admins["a"].client.create(configmap("freeze"))
        webhook_managed_by(wf.server).for_("v1/ConfigMap").with_validator(
            frozen, operations=["CREATE"]
        ).complete()
        async with running(wf.manager):
            await fx.engage_all(wf)
            # The API server of a sees the configuration a moment after it is written.
            await eventually(lambda: denied_by_webhook(wf.admins["a"], configmap("x")), timeout=60)
            with pytest.raises(APIError, match="namespace default is frozen in cluster a"):
                await wf.admins["a"].client.create(configmap("x"))
            created = await wf.admins["b"].client.create(configmap("x"))
            assert created["metadata"]["name"] == "x"
            config = await wf.configuration("b")
            assert config is not None
            hook = config["webhooks"][0]
            assert hook["clientConfig"]["url"] == f"{wf.server.url}/validate/b/core/v1/configmap"
            assert hook["rules"][0]["resources"] == ["configmaps"]
            assert hook["rules"][0]["operations"] == ["CREATE"]
            assert hook["failurePolicy"] == "Fail"
            assert hook["sideEffects"] == "None"
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == wf.server.ca_bundle


DRY_RUNS: list[tuple[str, bool]] = []


async def label_with_cluster(req: AdmissionRequest) -> V1ConfigMap:
    DRY_RUNS.append((req.name, req.dry_run))
    cm: V1ConfigMap = req.object
    assert cm.metadata is not None
    cm.metadata.annotations = {**(cm.metadata.annotations or {}), "mcr.dev/cluster": req.cluster_name}
    cm.data = {**(cm.data or {}), "defaulted": "yes"}
    return cm


async def test_defaulter_patch_lands_with_typed_models(fleet: Any, tmp_path: Path) -> None:
    servers = fleet(1).servers
    async with fx.webhook_fleet(servers, tmp_path, names=("zone/1",)) as wf:
        webhook_managed_by(wf.server).for_(V1ConfigMap).with_defaulter(
            label_with_cluster,
            match_conditions=[{"name": "not-skipped", "expression": "object.metadata.name != 'skip'"}],
        ).complete()
        async with running(wf.manager):
            await fx.engage_all(wf)
            admin = wf.admins["zone/1"]

            async def mutated() -> bool:
                obj = await admin.client.create(configmap("probe", keep="1"), dry_run=True)
                return bool(obj["metadata"].get("annotations", {}).get("mcr.dev/cluster") == "zone/1")

            await eventually(mutated, timeout=60)
            obj = await admin.client.create(configmap("real", keep="1"))
            assert obj["metadata"]["annotations"] == {"mcr.dev/cluster": "zone/1"}
            assert obj["data"] == {"keep": "1", "defaulted": "yes"}
            assert ("probe", True) in DRY_RUNS
            assert ("real", False) in DRY_RUNS
            skipped = await admin.client.create(configmap("skip", keep="1"))
            assert "annotations" not in skipped["metadata"]
            config = await wf.configuration("zone/1", fx.MWC)
            assert config is not None
            hook = config["webhooks"][0]
            assert hook["clientConfig"]["url"].endswith("/mutate/zone~2f1/core/v1/configmap")
            assert hook["matchConditions"] == [
                {"name": "not-skipped", "expression": "object.metadata.name != 'skip'"}
            ]


def review(uid: str = "u-1") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "x",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": configmap("x"),
        },
    }


async def post(url: str, ctx: ssl.SSLContext, body: bytes) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as http, http.post(url, data=body, ssl=ctx) as resp:
        return resp.status, await resp.read()


async def test_disengaged_and_unknown_clusters_are_refused_and_unregistered(
    fleet: Any, tmp_path: Path
) -> None:
    servers = fleet(2).servers
    async with fx.webhook_fleet(servers, tmp_path) as wf:
        webhook_managed_by(wf.server).for_("v1/ConfigMap").with_validator(frozen).complete()
        async with running(wf.manager):
            ctx = ssl.create_default_context(cafile=str(wf.certs / "ca.crt"))
            await fx.engage_all(wf)
            await eventually(lambda: wf.configuration("a"), timeout=60)
            await eventually(lambda: wf.configuration("b"), timeout=60)
            url = wf.server.url
            assert url is not None

            status, body = await post(
                url + path_for("validate", "b", "", "v1", "ConfigMap"), ctx, orjson.dumps(review())
            )
            assert status == 200
            assert orjson.loads(body)["response"]["allowed"] is True

            await wf.provider.remove("b")
            await eventually(lambda: "b" not in wf.server.engaged(), timeout=30)
            await eventually(lambda: _absent(wf, "b"), timeout=30)
            assert await wf.configuration("a") is not None

            for cluster in ("b", "never-engaged"):
                status, body = await post(
                    url + path_for("validate", cluster, "", "v1", "ConfigMap"), ctx, orjson.dumps(review())
                )
                answer = orjson.loads(body)["response"]
                assert status == 200
                assert answer["uid"] == "u-1"
                assert answer["allowed"] is False
                assert answer["status"]["code"] == 404
                assert f"cluster {cluster!r} is not engaged" in answer["status"]["message"]

            path = path_for("validate", "a", "", "v1", "ConfigMap")
            status, body = await post(url + path, ctx, b"{not json")
            assert status == 400
            assert b"not JSON" in body
            status, body = await post(
                url + path,
                ctx,
                orjson.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}),
            )
            assert status == 400
            assert b"no request object" in body
            status, body = await post(url + "/validate/a/core/v1", ctx, orjson.dumps(review()))
            assert status == 404
            assert b"expected /validate/<cluster>/<group>/<version>/<kind>" in body


async def _absent(wf: Any, cluster: str) -> bool:
    return await wf.configuration(cluster) is None


async def handshake_ca(url: str, ca_pem: bytes) -> bool:
    """Whether the server's certificate verifies against ``ca_pem`` alone."""
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    try:
        await post(url + "/validate/~/core/v1/configmap", ctx, b"{}")
    except aiohttp.ClientConnectorCertificateError:
        return False
    return True


async def test_certificate_rotation_updates_ca_bundles_without_failed_admissions(
    fleet: Any, tmp_path: Path
) -> None:
    servers = fleet(2).servers
    async with fx.webhook_fleet(servers, tmp_path) as wf:
        webhook_managed_by(wf.server).for_("v1/ConfigMap").with_validator(frozen).complete()
        wf.manager.add_readyz_check("webhook", wf.server.check_ready)
        async with running(wf.manager):
            await fx.engage_all(wf)
            await wf.admins["a"].client.create(configmap("freeze"))
            await eventually(lambda: denied_by_webhook(wf.admins["a"], configmap("x")), timeout=60)
            url = wf.server.url
            assert url is not None
            assert wf.server.check_ready()
            old_ca = (wf.certs / "ca.crt").read_bytes()

            failures: list[str] = []
            calls = 0

            async def admit_continuously() -> None:
                nonlocal calls
                while True:
                    calls += 1
                    if not await denied_by_webhook(wf.admins["a"], configmap(f"x{calls}")):
                        failures.append(f"call {calls} was not answered by the webhook")
                    await asyncio.sleep(0.05)

            load = asyncio.create_task(admit_continuously())
            try:
                new_ca = CA("webhook-ca-2")
                fx.write_pair(wf.certs, new_ca)
                for cluster in ("a", "b"):

                    async def bundled(cluster: str = cluster) -> bool:
                        config = await wf.configuration(cluster)
                        bundle = (
                            base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"])
                            if config
                            else b""
                        )
                        return new_ca.cert_pem.strip() in bundle and old_ca.strip() in bundle

                    await eventually(bundled, timeout=30)
                await eventually(lambda: handshake_ca(url, new_ca.cert_pem), timeout=30)
                before = calls
                await eventually(lambda: calls >= before + 5, timeout=30)
            finally:
                load.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await load
            assert not failures, failures
            assert not await handshake_ca(url, old_ca)


async def test_slow_webhook_under_failure_policies_ignore_and_fail(fleet: Any, tmp_path: Path) -> None:
    servers = fleet(1).servers
    called: list[str] = []

    async def slow(req: AdmissionRequest) -> Response | None:
        called.append(f"{req.kind.kind}/{req.name}")
        await asyncio.sleep(4)
        return denied("answered too late to count")

    async with fx.webhook_fleet(servers, tmp_path, names=("a",)) as wf:
        webhook_managed_by(wf.server).for_("v1/ConfigMap").with_validator(
            slow, failure_policy="Ignore", timeout_seconds=1
        ).complete()
        webhook_managed_by(wf.server).for_("v1/Secret").with_validator(
            slow, failure_policy="Fail", timeout_seconds=1
        ).complete()
        async with running(wf.manager):
            await fx.engage_all(wf)
            admin = wf.admins["a"]
            attempt = 0

            async def ignored_after_a_call() -> bool:
                nonlocal attempt
                attempt += 1
                name = f"cm-{attempt}"
                await admin.client.create(configmap(name))  # admitted either way: Ignore
                return f"ConfigMap/{name}" in called

            await eventually(ignored_after_a_call, timeout=60)

            async def refused_by_timeout() -> bool:
                nonlocal attempt
                attempt += 1
                secret = {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": f"s-{attempt}", "namespace": "default"},
                }
                try:
                    await admin.client.create(secret)
                except APIError as exc:
                    return "failed calling webhook" in str(exc) and f"Secret/s-{attempt}" in called
                return False

            await eventually(refused_by_timeout, timeout=60)
