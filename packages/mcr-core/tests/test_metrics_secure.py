"""/metrics over HTTPS behind TokenReview / SubjectAccessReview, with a certificate that rotates."""

from __future__ import annotations

import asyncio
import json
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mcr.manager import Manager, with_authentication_and_authorization
from mcr.rest.config import RestConfig, load_config
from mcr.rest.transport import Transport
from mcr.testing import eventually
from mcr_envtest import ServerThread
from mcr_envtest.certs import CA, KeyPair


async def _post(transport: Transport, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = await transport.request(
        "POST", path, body=json.dumps(body).encode(), content_type="application/json"
    )
    out = resp.json()
    assert isinstance(out, dict)
    return out


async def _service_account_token(transport: Transport, namespace: str, name: str) -> str:
    await _post(transport, f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": name}})
    out = await _post(
        transport,
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    token = out["status"]["token"]
    assert isinstance(token, str)
    return token


def _write(cert_dir: Path, pair: KeyPair) -> None:
    # Key first, then the certificate: the watcher only sees a complete new pair once both moved.
    for name, data in (("tls.key", pair.key_pem), ("tls.crt", pair.cert_pem)):
        tmp = cert_dir / f".{name}.tmp"
        tmp.write_bytes(data)
        tmp.replace(cert_dir / name)


async def _peer_cert(url: str, ca: CA) -> bytes:
    ctx = ssl.create_default_context(cadata=ca.cert_pem.decode())
    host, port = url.removeprefix("https://").rsplit(":", 1)
    _, writer = await asyncio.open_connection(host, int(port), ssl=ctx)
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True)
        assert der
        return bytes(der)
    finally:
        writer.close()
        await writer.wait_closed()


class Secured:
    def __init__(self, mgr: Manager, ca: CA, config: RestConfig, namespace: str) -> None:
        self.mgr, self.ca, self.config, self.namespace = mgr, ca, config, namespace

    async def scrape(self, token: str | None) -> tuple[int, str]:
        ctx = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        connector = aiohttp.TCPConnector(ssl=ctx, force_close=True)
        async with (
            aiohttp.ClientSession(connector=connector) as http,
            http.get(f"{self.mgr.metrics_url}/metrics", headers=headers) as resp,
        ):
            return resp.status, await resp.text()


@pytest.fixture
async def secured(apiserver: ServerThread, tmp_path: Path) -> AsyncIterator[Secured]:
    ca = CA("metrics-test-ca")
    _write(tmp_path, ca.serving())
    config = load_config(apiserver.kubeconfig)
    mgr = Manager(
        config,
        metrics_bind_address="127.0.0.1:0",
        metrics_secure_serving=True,
        metrics_cert_dir=str(tmp_path),
        metrics_filter_provider=with_authentication_and_authorization(),
    )
    task = asyncio.create_task(mgr.start(handle_signals=False))
    namespace = f"metrics-{uuid.uuid4().hex[:8]}"
    async with config.transport() as transport:
        await _post(transport, "/api/v1/namespaces", {"metadata": {"name": namespace}})
    await eventually(lambda: mgr.metrics_url, timeout=10)
    yield Secured(mgr, ca, config, namespace)
    mgr.stop()
    await asyncio.wait_for(task, 20)
    async with config.transport() as transport:
        await transport.request("DELETE", f"/api/v1/namespaces/{namespace}")


async def test_metrics_answer_401_403_or_200_by_token_and_rbac(secured: Secured) -> None:
    assert secured.mgr.metrics_url is not None
    assert secured.mgr.metrics_url.startswith("https://")
    role = f"metrics-reader-{secured.namespace}"
    async with secured.config.transport() as transport:
        allowed = await _service_account_token(transport, secured.namespace, "scraper")
        denied = await _service_account_token(transport, secured.namespace, "nobody")
        await _post(
            transport,
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {"metadata": {"name": role}, "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        )
        await _post(
            transport,
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": secured.namespace}],
            },
        )
        try:
            status, body = await secured.scrape(None)
            assert status == 401, body
            status, body = await secured.scrape("not-a-token")
            assert status == 401, body
            status, body = await secured.scrape(denied)
            assert status == 403, body
            assert f"system:serviceaccount:{secured.namespace}:nobody" in body
            status, body = await secured.scrape(allowed)
            assert status == 200, body
            assert "mcr_engaged_clusters" in body
        finally:
            await transport.request(
                "DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{role}"
            )
            await transport.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}")


async def test_a_rotated_certificate_is_served_without_a_restart(secured: Secured, tmp_path: Path) -> None:
    url = secured.mgr.metrics_url
    assert url is not None
    before = await _peer_cert(url, secured.ca)
    assert before == ssl.PEM_cert_to_DER_cert((tmp_path / "tls.crt").read_text())
    renewed = secured.ca.serving()
    _write(tmp_path, renewed)
    want = ssl.PEM_cert_to_DER_cert(renewed.cert_pem.decode())
    assert want != before

    async def served() -> bool:
        return await _peer_cert(url, secured.ca) == want

    await eventually(served, timeout=15, message="the renewed certificate is served")
    assert secured.mgr.metrics_url == url  # the same listener: no restart


def test_secure_serving_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="metrics_secure_serving needs metrics_cert_dir"):
        Manager(metrics_secure_serving=True)
    with pytest.raises(ValueError, match="metrics_cert_dir is set but metrics_secure_serving is off"):
        Manager(metrics_cert_dir=str(tmp_path))
    with pytest.raises(ValueError, match="metrics_filter_provider needs a local cluster"):
        Manager(metrics_filter_provider=with_authentication_and_authorization())


async def test_a_missing_certificate_fails_the_start_naming_the_file(tmp_path: Path) -> None:
    mgr = Manager(
        metrics_bind_address="127.0.0.1:0", metrics_secure_serving=True, metrics_cert_dir=str(tmp_path)
    )
    with pytest.raises(FileNotFoundError, match=r"tls\.crt"):
        await asyncio.wait_for(mgr.start(handle_signals=False), 20)


def _as_token(kubeconfig: dict[str, Any], token: str) -> dict[str, Any]:
    """``kubeconfig`` with every user replaced by ``token``."""
    users = [{"name": u["name"], "user": {"token": token}} for u in kubeconfig["users"]]
    return {**kubeconfig, "users": users}


async def test_the_operator_needs_only_the_auth_delegator_role(
    apiserver: ServerThread, tmp_path: Path
) -> None:
    ca = CA("metrics-test-ca")
    _write(tmp_path, ca.serving())
    admin = load_config(apiserver.kubeconfig)
    namespace = f"metrics-{uuid.uuid4().hex[:8]}"
    binding = f"metrics-operator-{namespace}"
    async with admin.transport() as transport:
        await _post(transport, "/api/v1/namespaces", {"metadata": {"name": namespace}})
        operator = await _service_account_token(transport, namespace, "operator")
        scraper = await _service_account_token(transport, namespace, "scraper")
        mgr = Manager(
            load_config(_as_token(apiserver.kubeconfig, operator)),
            metrics_bind_address="127.0.0.1:0",
            metrics_secure_serving=True,
            metrics_cert_dir=str(tmp_path),
            metrics_filter_provider=with_authentication_and_authorization(cache_ttl=0),
        )
        task = asyncio.create_task(mgr.start(handle_signals=False))
        try:
            await eventually(lambda: mgr.metrics_url, timeout=10)
            secured = Secured(mgr, ca, admin, namespace)
            # Without the role the operator cannot make the reviews: the scrape fails on its side.
            status, body = await secured.scrape(scraper)
            assert status == 500, body
            await _post(
                transport,
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                {
                    "metadata": {"name": binding},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "system:auth-delegator",
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}],
                },
            )

            async def reviewed() -> bool:
                status, body = await secured.scrape(scraper)
                assert status == 403, (status, body)  # reviewed: the scraper has no rule for /metrics
                return True

            await eventually(reviewed, timeout=15, message="the operator can review once bound")
        finally:
            mgr.stop()
            await asyncio.wait_for(task, 20)
            await transport.request(
                "DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{binding}"
            )
            await transport.request("DELETE", f"/api/v1/namespaces/{namespace}")
