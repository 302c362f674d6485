"""RestConfig loading and per-cluster credentials, against a real mcr-envtest server."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import json
import os
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import Configuration

import mcr.rest.kubeconfig as mcr_kubeconfig
from mcr.cluster import Cluster
from mcr.errors import ConfigError, UnauthorizedError
from mcr.metrics import REGISTRY
from mcr.rest.config import RestConfig, load_config, load_config_async, load_yaml
from mcr.testing import eventually


async def _namespaces(config: RestConfig) -> list[str]:
    t = config.transport("cfg")
    try:
        body = (await t.request("GET", "/api/v1/namespaces")).json()
        return [n["metadata"]["name"] for n in body["items"]]
    finally:
        await t.close()


# --- errors name the file, the context and the field ---------------------------------------------


def test_unknown_context(apiserver: Any) -> None:
    with pytest.raises(ConfigError) as err:
        RestConfig.from_kubeconfig(apiserver.kubeconfig_path, context="nope")
    assert err.value.source == apiserver.kubeconfig_path
    assert err.value.context == "nope"
    assert apiserver.kubeconfig_path in str(err.value)
    assert "'nope'" in str(err.value)


def test_missing_certificate_file(apiserver: Any, tmp_path: Path) -> None:
    doc = copy.deepcopy(apiserver.kubeconfig)
    cluster = doc["clusters"][0]
    cluster["cluster"].pop("certificate-authority-data")
    cluster["cluster"]["certificate-authority"] = "missing-ca.crt"
    path = tmp_path / "kubeconfig"
    import yaml

    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as err:
        RestConfig.from_kubeconfig(path)
    e = err.value
    assert e.source == str(path)
    assert e.context == doc["current-context"]
    assert e.field == f"clusters[{cluster['name']}].certificate-authority"
    assert str(tmp_path / "missing-ca.crt") in str(e)


def test_bad_certificate_data(apiserver: Any) -> None:
    doc = copy.deepcopy(apiserver.kubeconfig)
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(b"not a cert").decode()
    with pytest.raises(ConfigError) as err:
        RestConfig.from_kubeconfig(doc)
    assert err.value.source == "<dict>"
    assert err.value.field == f"clusters[{doc['clusters'][0]['name']}].certificate-authority-data"
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = "%%% not base64"
    with pytest.raises(ConfigError, match="base64"):
        RestConfig.from_kubeconfig(doc)


def test_malformed_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters: [\n  - name: x\n   broken")
    with pytest.raises(ConfigError) as err:
        RestConfig.from_kubeconfig(bad)
    assert err.value.source == str(bad)
    assert "malformed YAML at line" in str(err.value)
    with pytest.raises(ConfigError) as err2:
        RestConfig.from_kubeconfig(tmp_path / "absent")
    assert str(tmp_path / "absent") in str(err2.value)


def test_load_yaml_reads_kubeconfigs_as_safe_load_does(tmp_path: Path) -> None:
    # The C parser where PyYAML has it (its wheels do); the same documents and the same errors.
    assert mcr_kubeconfig._SafeLoader is (yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)
    text = textwrap.dedent(
        f"""\
        apiVersion: v1
        kind: Config
        current-context: a  # a comment
        clusters:
        - name: a
          cluster: {{server: "https://127.0.0.1:6443", certificate-authority-data: {"QUJD" * 400}}}
        users:
        - name: a
          user: {{token: "yes", as-groups: [on, off, 0x10, 1e3, null, ~]}}
        contexts:
        - {{name: a, context: {{cluster: a, user: a, namespace: "007"}}}}
        """
    )
    doc = load_yaml(text)
    assert doc == yaml.safe_load(text)
    assert doc["users"][0]["user"]["as-groups"] == [True, False, 16, "1e3", None, None]  # YAML 1.1
    assert load_yaml(text.encode()) == doc
    assert load_yaml("") is None
    for bad in ("clusters: [\n  - name: x\n   broken", "a: b: c", "key: !!python/object:os.system x"):
        with pytest.raises(yaml.YAMLError) as err:
            load_yaml(bad)
        with pytest.raises(type(err.value)):
            yaml.safe_load(bad)
    mark = getattr(err.value, "problem_mark", None)
    assert mark is not None


def test_client_certificate_needs_key(apiserver: Any) -> None:
    doc = apiserver.add_user("certy", client_cert=True)
    doc["users"][0]["user"].pop("client-key-data")
    with pytest.raises(ConfigError) as err:
        RestConfig.from_kubeconfig(doc)
    assert err.value.field == "users[certy].client-key"


def test_credentials_never_in_repr(apiserver: Any) -> None:
    config = RestConfig.from_kubeconfig(apiserver.kubeconfig)
    assert apiserver.admin_token not in repr(config)
    assert apiserver.admin_token not in str(config)
    assert apiserver.admin_token not in repr(config.credentials)


# --- credentials that work -------------------------------------------------------------------


async def test_kubeconfig_file_token_and_ssl_context_sharing(apiserver: Any) -> None:
    a = RestConfig.from_kubeconfig(apiserver.kubeconfig_path)
    b = load_config(apiserver.kubeconfig)
    assert "default" in await _namespaces(a)
    assert await a.ssl_context() is await b.ssl_context()  # one context per CA


async def test_load_config_from_env(apiserver: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", apiserver.kubeconfig_path)
    config = load_config()
    assert config.source == apiserver.kubeconfig_path
    assert "default" in await _namespaces(config)


async def test_client_certificate(apiserver: Any) -> None:
    doc = apiserver.add_user("cert-admin", groups=["system:masters"], client_cert=True)
    config = RestConfig.from_kubeconfig(doc)
    assert config.client_cert_data is not None
    assert "default" in await _namespaces(config)


async def test_from_configuration(apiserver: Any) -> None:
    conf = Configuration()
    conf.host = apiserver.url
    conf.ssl_ca_cert = apiserver.ca_file
    conf.api_key = {"BearerToken": apiserver.admin_token}
    conf.api_key_prefix = {"BearerToken": "Bearer"}
    config = RestConfig.from_configuration(conf)
    assert "default" in await _namespaces(config)


async def test_in_cluster(apiserver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host, _, port = apiserver.url.removeprefix("https://").rpartition(":")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    token = tmp_path / "token"
    token.write_text(apiserver.admin_token)
    (tmp_path / "namespace").write_text("team-a\n")
    config = RestConfig.in_cluster(token_path=str(token), ca_path=apiserver.ca_file)
    assert config.namespace == "team-a"
    assert "default" in await _namespaces(config)


async def test_token_file_rotation(apiserver: Any, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    apiserver.add_user("rot", groups=["system:masters"], token="first-token")
    token_file.write_text("first-token\n")
    doc = copy.deepcopy(apiserver.kubeconfig)
    doc["users"][0]["user"] = {"tokenFile": str(token_file)}
    config = RestConfig.from_kubeconfig(doc)
    t = config.transport("rot")
    try:
        await t.request("GET", "/api/v1/namespaces")
        apiserver.add_user("rot", groups=["system:masters"], token="second-token")
        token_file.write_text("second-token\n")
        apiserver.authenticator.remove_token("first-token")
        # the 401 makes the transport re-read the file and retry once
        assert (await t.request("GET", "/api/v1/namespaces")).status == 200
    finally:
        await t.close()


# --- exec plugins --------------------------------------------------------------------------

PLUGIN = textwrap.dedent(
    """
    import datetime, json, os, sys
    state = sys.argv[1]
    lifetime = float(sys.argv[2])
    info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
    assert info["kind"] == "ExecCredential"
    path = os.path.join(state, "count")
    n = int(open(path).read()) + 1 if os.path.exists(path) else 1
    open(path, "w").write(str(n))
    expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=lifetime)
    print(json.dumps({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": f"exec-token-{n}", "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }))
    """
)


def _exec_kubeconfig(apiserver: Any, tmp_path: Path, lifetime: float) -> dict[str, Any]:
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    doc: dict[str, Any] = copy.deepcopy(apiserver.kubeconfig)
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(script), str(tmp_path), str(lifetime)],
            "interactiveMode": "Never",
        }
    }
    return doc


def _runs(tmp_path: Path) -> int:
    path = tmp_path / "count"
    return int(path.read_text()) if path.exists() else 0


def _unauthorized(cluster: str) -> float:
    """401 answers the transport of ``cluster`` has had."""
    return sum(
        s.value
        for metric in REGISTRY.collect()
        if metric.name == "rest_client_requests"
        for s in metric.samples
        if s.name.endswith("_total") and s.labels.get("cluster") == cluster and s.labels.get("code") == "401"
    )


# kube-apiserver goes on accepting a token it accepted within the last 10 s (its token success
# cache): a revoked token is refused within that long, not at once.
REVOCATION = 30.0


async def test_exec_plugin_tokens_are_refreshed_on_expiry(apiserver: Any, tmp_path: Path) -> None:
    for n in range(1, 30):
        apiserver.add_user("robot", groups=["system:masters"], token=f"exec-token-{n}")
    config = RestConfig.from_kubeconfig(_exec_kubeconfig(apiserver, tmp_path, lifetime=3))
    assert "exec-token" not in repr(config)
    t = config.transport("exec")
    refused = _unauthorized("exec")
    try:
        await t.request("GET", "/api/v1/namespaces")
        await t.request("GET", "/api/v1/namespaces")
        assert _runs(tmp_path) == 1  # cached until it expires

        async def plugin_ran_again() -> bool:
            assert (await t.request("GET", "/api/v1/namespaces")).status == 200
            return _runs(tmp_path) >= 2

        await eventually(plugin_ran_again, timeout=10, interval=0.2)
        apiserver.authenticator.remove_token("exec-token-1")  # the expired token is no longer accepted
        assert (await t.request("GET", "/api/v1/namespaces")).status == 200
    finally:
        await t.close()
    # the plugin re-ran because the token expired, not because the server rejected it
    assert _unauthorized("exec") == refused


async def test_exec_plugin_reruns_after_401(apiserver: Any, tmp_path: Path) -> None:
    for n in range(1, 5):
        apiserver.add_user("robot", groups=["system:masters"], token=f"exec-token-{n}")
    config = RestConfig.from_kubeconfig(_exec_kubeconfig(apiserver, tmp_path, lifetime=3600))
    t = config.transport("exec")
    try:
        await t.request("GET", "/api/v1/namespaces")
        apiserver.authenticator.remove_token("exec-token-1")  # revoked long before expiry

        async def reran() -> bool:
            assert (await t.request("GET", "/api/v1/namespaces")).status == 200
            return _runs(tmp_path) >= 2

        await eventually(reran, timeout=REVOCATION, interval=0.5)
        assert _runs(tmp_path) == 2
        for n in range(1, 5):
            apiserver.authenticator.remove_token(f"exec-token-{n}")

        async def refused() -> bool:
            try:
                await t.request("GET", "/api/v1/namespaces")
            except UnauthorizedError:  # one refresh per request, then the 401 surfaces
                return True
            return False

        await eventually(refused, timeout=REVOCATION, interval=0.5)
        assert _runs(tmp_path) == 3
    finally:
        await t.close()


async def test_clusters_naming_one_exec_plugin_share_its_runs(apiserver: Any, tmp_path: Path) -> None:
    """Ten clusters whose kubeconfigs name the same plugin configuration run it once, not ten
    times (client-go shares one authenticator too); a 401 on one of them re-runs it once."""
    for n in range(1, 4):
        apiserver.add_user("robot", groups=["system:masters"], token=f"exec-token-{n}")
    doc = _exec_kubeconfig(apiserver, tmp_path, lifetime=3600)
    transports = [RestConfig.from_kubeconfig(doc).transport(f"exec-{i}") for i in range(10)]
    try:
        statuses = await asyncio.gather(*(t.request("GET", "/api/v1/namespaces") for t in transports))
        assert [r.status for r in statuses] == [200] * 10
        assert _runs(tmp_path) == 1
        apiserver.authenticator.remove_token("exec-token-1")

        async def reran() -> bool:
            statuses = await asyncio.gather(*(t.request("GET", "/api/v1/namespaces") for t in transports))
            assert [r.status for r in statuses] == [200] * 10
            return _runs(tmp_path) >= 2

        await eventually(reran, timeout=REVOCATION, interval=0.5)
        assert _runs(tmp_path) == 2  # one re-run: the other nine 401s find token 1 already replaced
    finally:
        await asyncio.gather(*(t.close() for t in transports))


async def test_exec_plugins_with_cluster_info_run_per_cluster(fleet: Any, tmp_path: Path) -> None:
    """With ``provideClusterInfo`` the plugin's answer depends on the cluster: one run per cluster;
    without it, one run for both."""
    servers = fleet(2).servers
    for server in servers:
        for n in range(1, 4):
            server.add_user("robot", groups=["system:masters"], token=f"exec-token-{n}")
    for provide, expected in ((True, 2), (False, 1)):
        state = tmp_path / f"provide-{provide}"
        state.mkdir()
        configs = []
        for server in servers:
            doc = _exec_kubeconfig(server, state, lifetime=3600)
            doc["users"][0]["user"]["exec"]["provideClusterInfo"] = provide
            configs.append(RestConfig.from_kubeconfig(doc))
        for config in configs:
            assert "default" in await _namespaces(config)
        assert _runs(state) == expected


async def test_exec_plugin_failure_names_the_field(apiserver: Any, tmp_path: Path) -> None:
    doc = copy.deepcopy(apiserver.kubeconfig)
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": ["-c", "import sys; sys.stderr.write('no credentials for you'); sys.exit(3)"],
        }
    }
    t = RestConfig.from_kubeconfig(doc).transport("exec")
    try:
        with pytest.raises(ConfigError) as err:
            await t.request("GET", "/api/v1/namespaces")
    finally:
        await t.close()
    assert err.value.field == f"users[{doc['users'][0]['name']}].exec"
    assert "exited with 3" in str(err.value)
    assert "no credentials for you" in str(err.value)


async def test_a_failing_shared_exec_plugin_fails_once_for_every_waiting_cluster(
    apiserver: Any, tmp_path: Path
) -> None:
    """Clusters waiting for a shared plugin run that fails get its error, each naming its own
    kubeconfig, instead of running the plugin again one after the other."""
    log = tmp_path / "runs"
    script = f"import sys; open({str(log)!r}, 'a').write('x'); sys.stderr.write('denied'); sys.exit(3)"
    doc = copy.deepcopy(apiserver.kubeconfig)
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": ["-c", script],
        }
    }
    transports = [
        RestConfig.from_kubeconfig(doc, source=f"fleet/c{i}.kubeconfig").transport(f"c{i}") for i in range(10)
    ]
    try:
        results = await asyncio.gather(
            *(t.request("GET", "/api/v1/namespaces") for t in transports), return_exceptions=True
        )
    finally:
        await asyncio.gather(*(t.close() for t in transports))
    assert log.read_text() == "x"  # one run for the ten
    for i, err in enumerate(results):
        assert isinstance(err, ConfigError)
        assert (err.source, err.field) == (f"fleet/c{i}.kubeconfig", f"users[{doc['users'][0]['name']}].exec")
        assert "exited with 3: denied" in str(err)


def test_exec_expiry_parsing_is_timezone_aware() -> None:
    from mcr.rest.auth import _parse_time

    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    assert _parse_time(now.strftime("%Y-%m-%dT%H:%M:%SZ")) == now.timestamp()


# --- auth providers and merged kubeconfigs ------------------------------------------------


def _jwt(claims: dict[str, Any]) -> str:
    def part(d: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


async def test_oidc_id_token(apiserver: Any) -> None:
    token = _jwt({"sub": "oidc-user", "exp": int(time.time()) + 3600})
    apiserver.add_user("oidc-user", groups=["system:masters"], token=token)
    doc = copy.deepcopy(apiserver.kubeconfig)
    doc["users"][0]["user"] = {
        "auth-provider": {
            "name": "oidc",
            "config": {"id-token": token, "client-id": "c", "idp-issuer-url": "x"},
        }
    }
    config = RestConfig.from_kubeconfig(doc)
    assert token not in repr(config)
    assert "default" in await _namespaces(config)


async def test_oidc_without_usable_token_names_the_field(apiserver: Any) -> None:
    doc = copy.deepcopy(apiserver.kubeconfig)
    doc["users"][0]["user"] = {"auth-provider": {"name": "oidc", "config": {"client-id": "c"}}}
    t = RestConfig.from_kubeconfig(doc).transport("oidc")
    try:
        with pytest.raises(ConfigError) as err:
            await t.request("GET", "/api/v1/namespaces")
    finally:
        await t.close()
    assert err.value.field == f"users[{doc['users'][0]['name']}].auth-provider"


async def test_kubeconfig_env_merges_files(
    apiserver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    first = copy.deepcopy(apiserver.kubeconfig)
    first["current-context"] = "elsewhere"
    first["contexts"].append({"name": "elsewhere", "context": {"cluster": "far", "user": "nobody"}})
    first["clusters"].append({"name": "far", "cluster": {"server": "https://far.invalid"}})
    first["users"].append({"name": "nobody", "user": {}})
    second = {"clusters": [{"name": "far", "cluster": {"server": "https://ignored.invalid"}}]}
    (tmp_path / "a").write_text(yaml.safe_dump(first))
    (tmp_path / "b").write_text(yaml.safe_dump(second))
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    first["contexts"][-1]["context"]["namespace"] = "ns-far"
    (tmp_path / "a").write_text(yaml.safe_dump(first))
    far = load_config()
    assert far.namespace == "ns-far"
    assert far.host == "https://far.invalid"  # first definition wins; current-context from the first file
    assert far.context == "elsewhere"
    local = load_config(context=apiserver.kubeconfig["current-context"])
    assert "default" in await _namespaces(local)


CERT_PLUGIN = textwrap.dedent(
    """
    import datetime, json, os, sys
    state, lifetime = sys.argv[1], float(sys.argv[2])
    path = os.path.join(state, "count")
    n = int(open(path).read()) + 1 if os.path.exists(path) else 1
    open(path, "w").write(str(n))
    pair = json.load(open(os.path.join(state, f"pair{min(n, 2)}.json")))
    expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=lifetime)
    print(json.dumps({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {**pair, "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }))
    """
)


# Seconds the plugin's certificates are valid for. Its expirationTimestamp has whole seconds and mcr
# renews a credential a second before it expires (rest.auth.EXPIRY_SKEW): a lifetime of a few
# seconds leaves the first certificate valid for the first request even when the plugin process
# starts slowly on a loaded machine.
CERT_LIFETIME = 6


async def test_exec_plugin_client_certificates_rotate(apiserver: Any, tmp_path: Path) -> None:
    for i, user in ((1, "cert-one"), (2, "cert-two")):
        issued = apiserver.add_user(user, groups=["system:masters"], client_cert=True)["users"][0]["user"]
        pair = {
            "clientCertificateData": base64.b64decode(issued["client-certificate-data"]).decode(),
            "clientKeyData": base64.b64decode(issued["client-key-data"]).decode(),
        }
        (tmp_path / f"pair{i}.json").write_text(json.dumps(pair))
    script = tmp_path / "plugin.py"
    script.write_text(CERT_PLUGIN)
    doc = copy.deepcopy(apiserver.kubeconfig)
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(script), str(tmp_path), str(CERT_LIFETIME)],
        }
    }
    t = RestConfig.from_kubeconfig(doc).transport("exec-cert")

    async def whoami() -> str:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        resp = await t.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body=json.dumps(body).encode(),
            content_type="application/json",
        )
        return str(resp.json()["status"]["userInfo"]["username"])

    try:
        assert await whoami() == "cert-one"

        async def rotated() -> bool:
            return await whoami() == "cert-two"

        await eventually(rotated, timeout=4 * CERT_LIFETIME, interval=0.2)  # after expiry: the new cert
    finally:
        await t.close()
    assert t.connector is None


async def test_tls_server_name_and_verification(apiserver: Any) -> None:
    from mcr.errors import TransportError

    doc = copy.deepcopy(apiserver.kubeconfig)
    cluster = doc["clusters"][0]["cluster"]
    cluster["tls-server-name"] = "localhost"
    assert "default" in await _namespaces(RestConfig.from_kubeconfig(doc))
    cluster["tls-server-name"] = "wrong.example"
    with pytest.raises(TransportError) as err:
        await _namespaces(RestConfig.from_kubeconfig(doc))
    assert "certificate" in str(err.value).lower()
    cluster["insecure-skip-tls-verify"] = True
    insecure = RestConfig.from_kubeconfig(doc)
    assert not insecure.verify_ssl
    assert "default" in await _namespaces(insecure)


# --- parsing off the event loop ----------------------------------------------------------------


async def test_async_loaders_parse_off_the_event_loop(apiserver: Any, tmp_path: Path) -> None:
    """The kubeconfig is a FIFO whose writer waits for the loop to make progress: a parse on the
    loop would block it in ``open()``, so the writer would give up waiting and the loop would
    have ticked fewer than 5 times by then."""
    text = await asyncio.to_thread(Path(apiserver.kubeconfig_path).read_text)
    expected = RestConfig.from_kubeconfig(apiserver.kubeconfig_path)
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    async def parse_with_writer(parse: Any) -> tuple[Any, int]:
        fifo = tmp_path / f"fifo-{time.monotonic_ns()}"
        os.mkfifo(fifo)
        start = ticks
        seen: list[int] = []

        def writer() -> None:
            deadline = time.monotonic() + 3
            while ticks - start < 5 and time.monotonic() < deadline:
                time.sleep(0.005)
            seen.append(ticks - start)
            with open(fifo, "w") as f:  # blocks until the parser opened the FIFO
                f.write(text)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            result = await parse(str(fifo))
        finally:
            thread.join(5)
        return result, seen[0]

    beat = asyncio.create_task(heartbeat())
    try:
        config, progressed = await parse_with_writer(RestConfig.from_kubeconfig_async)
        assert progressed >= 5
        assert (config.host, config.ca_data) == (expected.host, expected.ca_data)
        config, progressed = await parse_with_writer(load_config_async)
        assert progressed >= 5
        assert config.host == expected.host
        cluster, progressed = await parse_with_writer(lambda p: Cluster.from_kubeconfig_async(p, name="fifo"))
        assert progressed >= 5
        assert (cluster.name, cluster.config.host) == ("fifo", expected.host)
    finally:
        beat.cancel()
        await asyncio.gather(beat, return_exceptions=True)


async def test_async_loader_raises_the_same_errors(apiserver: Any) -> None:
    with pytest.raises(ConfigError) as err:
        await RestConfig.from_kubeconfig_async(apiserver.kubeconfig_path, context="nope")
    assert err.value.context == "nope"
    assert err.value.source == apiserver.kubeconfig_path


async def test_a_wrong_ca_says_certificate_verification_failed(apiserver: Any) -> None:
    from mcr.errors import TransportError
    from mcr_envtest.certs import CA

    a = apiserver
    doc = copy.deepcopy(a.kubeconfig)
    # The server is reachable, but another CA than the one that issued its certificate is trusted.
    other = base64.b64encode(CA("another-ca").cert_pem).decode()
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = other
    started = time.monotonic()
    with pytest.raises(TransportError) as err:
        await _namespaces(RestConfig.from_kubeconfig(doc))
    message = str(err.value)
    assert "TLS certificate verification failed" in message, message
    assert "unreachable" not in message
    assert "certificate-authority" in message
    assert a.url in message
    assert time.monotonic() - started < 5, "a certificate error is not retried like a connection error"


def test_kubeconfig_env_naming_no_file_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcr.rest.config import load_config

    missing = str(tmp_path / "nope")
    monkeypatch.setenv("KUBECONFIG", missing)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")  # not taken: $KUBECONFIG was set
    for load in (load_config, lambda: RestConfig.from_kubeconfig(None)):
        with pytest.raises(ConfigError, match=f"KUBECONFIG names {missing}, but no such file exists"):
            load()
