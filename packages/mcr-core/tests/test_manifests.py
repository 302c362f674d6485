"""`mcr manifests`, `mcr fleet-rbac` and `mcr fleet-credentials`: rules derived from the code, and
enforced by a server that checks RBAC (mcr-envtest, or the real kube-apiserver in the real lane).

The sample app is examples/deploy/app.py: For ConfigMaps, Owns Secrets, and a declared ``patch``
on ConfigMaps.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import os
import re
import socket
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from mcr.client import Client
from mcr.errors import ForbiddenError, NotFoundError
from mcr.rest.config import RestConfig
from mcr.testing import eventually
from mcr_envtest import FleetThread, ServerThread

ROOT = Path(__file__).resolve().parents[3]
APP_DIR = ROOT / "examples" / "deploy"
WAIT = 60  # seconds, on a loaded machine
READ = ["get", "list", "watch"]
ALL = ["get", "list", "watch", "create", "update", "patch", "delete"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCR_")}
    return {**env, "PYTHONUNBUFFERED": "1"}


def _mcr(*args: str, cwd: Path = APP_DIR, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "mcr", *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _objects(out: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(out) if d]


def _one(objects: list[dict[str, Any]], kind: str, namespace: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"].get("namespace") == namespace]
    assert len(found) == 1, (kind, namespace, objects)
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# --- rules derived from the code -----------------------------------------------------------------


def test_manifests_derive_rules_probes_and_grace_period() -> None:
    out = _mcr(
        "manifests", "app.py", "--provider", "kubeconfig", "--provider-opt", "namespace=fleet",
        "--leader-elect", "--shard", "--events", "--namespace", "ops", "--image", "example/seal:1",
        "--graceful-shutdown-timeout", "40",
    ).stdout  # fmt: skip
    objects = _objects(out)
    assert [o["kind"] for o in objects][:3] == ["Namespace", "Namespace", "ServiceAccount"]
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"} == {"fleet", "ops"}
    cluster_role = _one(objects, "ClusterRole")
    # The controller watches provider clusters only: the hub's ClusterRole has the events alone.
    assert cluster_role["rules"] == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    # The kubeconfig provider's Secrets, through its plugin's hook: read, in its namespace only.
    assert _one(objects, "Role", "fleet")["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": READ}
    ]
    leases = _one(objects, "Role", "ops")["rules"]
    assert leases == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ALL},
    ]
    for kind, namespace in (("ClusterRoleBinding", None), ("RoleBinding", "fleet"), ("RoleBinding", "ops")):
        binding = _one(objects, kind, namespace)
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "app", "namespace": "ops"}]
        assert binding["roleRef"]["name"] == "app"
    pod = _one(objects, "Deployment", "ops")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "app"
    assert pod["terminationGracePeriodSeconds"] == 45
    (container,) = pod["containers"]
    assert container["image"] == "example/seal:1"
    assert container["command"] == ["mcr"]
    args = container["args"]
    assert args[:6] == ["run", "app.py", "--provider", "kubeconfig", "--provider-opt", "namespace=fleet"]
    assert " ".join(args[6:]) == (
        "--health-probe-bind-address :8081 --metrics-bind-address :8080 --graceful-shutdown-timeout 40 "
        "--leader-elect --leader-election-id app --leader-election-namespace ops "
        "--shard --shard-namespace ops"
    )
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}


def test_secure_metrics_get_review_rules_a_reader_role_and_the_certificate() -> None:
    objects = _objects(_mcr("manifests", "app.py", "--metrics-secure").stdout)
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRole"}
    assert {
        "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]
    } in roles["app"]["rules"]  # fmt: skip
    assert {
        "apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]
    } in roles["app"]["rules"]  # fmt: skip
    # For the scraper to be bound to; the operator itself is not.
    assert roles["app-metrics-reader"]["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    bound = {o["roleRef"]["name"] for o in objects if o["kind"] == "ClusterRoleBinding"}
    assert bound == {"app"}
    pod = _one(objects, "Deployment", "app-system")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    where = args[args.index("--metrics-cert-path") + 1]
    assert "--metrics-secure" in args
    assert container["volumeMounts"] == [{"name": "metrics-certs", "mountPath": where, "readOnly": True}]
    assert pod["volumes"] == [{"name": "metrics-certs", "secret": {"secretName": "app-metrics-cert"}}]
    # Without the flag: no review rules, no reader role, no volume.
    plain = _objects(_mcr("manifests", "app.py").stdout)
    assert all(o["metadata"]["name"] != "app-metrics-reader" for o in plain)
    assert "tokenreviews" not in json.dumps(plain)
    assert "volumes" not in _one(plain, "Deployment", "app-system")["spec"]["template"]["spec"]


def test_fleet_rbac_is_what_the_controllers_do_in_fleet_clusters() -> None:
    objects = _objects(_mcr("fleet-rbac", "app.py", "--name", "seal").stdout)
    (role,) = objects
    assert role["kind"] == "ClusterRole"
    assert role["metadata"]["name"] == "seal"
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ALL},
    ]


def test_composed_providers_each_add_their_rules_and_arguments() -> None:
    objects = _objects(
        _mcr(
            "manifests", "app.py", "--provider", "prod=kubeconfig", "--provider-opt", "namespace=a",
            "--provider", "stage=kubeconfig", "--provider-opt", "namespace=b",
        ).stdout
    )  # fmt: skip
    for namespace in ("a", "b"):
        assert _one(objects, "Role", namespace)["rules"] == [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": READ}
        ]
    (container,) = _one(objects, "Deployment", "app-system")["spec"]["template"]["spec"]["containers"]
    assert container["args"][2:10] == [
        "--provider", "prod=kubeconfig", "--provider-opt", "namespace=a",
        "--provider", "stage=kubeconfig", "--provider-opt", "namespace=b",
    ]  # fmt: skip


def test_namespace_provider_gets_the_fleet_rules_in_the_hub() -> None:
    # Its clusters are the hub's own namespaces: the controllers' rules are needed there.
    objects = _objects(_mcr("manifests", "app.py", "--provider", "namespace").stdout)
    assert _one(objects, "ClusterRole")["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": READ},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ALL},
    ]


APP = '''
import mcr
from mcr import rbac


class Worker:
    """A runnable with rules of its own."""

    rbac_rules = [rbac.Rule(("apps",), ("deployments",), ("get",), namespace="ops", on="fleet")]

    async def start(self):
        pass


def setup(mgr):
    async def reconcile(req):
        return None

    (
        mcr.controller_managed_by(mgr)
        .for_("apps/v1/Deployment")
        .watches("v1/Node", engage_with_local_cluster=True, engage_with_provider_clusters=False)
        .complete(reconcile)
    )
    mgr.add(Worker())
    rbac.declare(mgr, rbac.rule("example.io/v1/Widget", "update", subresource="status", on="both"))
'''


def test_sides_come_from_where_each_watch_engages(tmp_path: Path) -> None:
    (tmp_path / "widgets.py").write_text(APP)
    hub = _objects(_mcr("manifests", "widgets.py", "--provider", "single", cwd=tmp_path).stdout)
    assert _one(hub, "ClusterRole")["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": READ},  # engages the local cluster
        {"apiGroups": ["example.io"], "resources": ["widgets/status"], "verbs": ["update"]},
    ]
    assert not [o for o in hub if o["kind"] == "Role"]
    fleet = _objects(_mcr("fleet-rbac", "widgets.py", cwd=tmp_path).stdout)
    assert _one(fleet, "ClusterRole")["rules"] == [
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": READ},
        {"apiGroups": ["example.io"], "resources": ["widgets/status"], "verbs": ["update"]},
    ]
    assert _one(fleet, "Role", "ops")["rules"] == [
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}
    ]
    # Without a provider the builder's watches engage the local cluster: all of it is the hub's.
    single = _objects(_mcr("manifests", "widgets.py", cwd=tmp_path).stdout)
    resources = [r["resources"] for r in _one(single, "ClusterRole")["rules"]]
    assert resources == [["nodes"], ["deployments"], ["widgets/status"]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--provider", "kubeconfg"], "did you mean 'kubeconfig'?"),
        (["--provider", "kubeconfig"], "provider 'kubeconfig': needs --provider-opt namespace="),
        (["--name", "Not_A_Name"], "--name 'Not_A_Name' is not a valid Kubernetes name"),
        (["--replicas", "0"], "--replicas must be at least 1"),
    ],
)
def test_bad_input_is_one_line_naming_it(args: list[str], message: str) -> None:
    proc = _mcr("manifests", "app.py", *args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("mcr manifests: "), line
    assert message in line, line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--token-seconds", "60"], "--token-seconds must be at least 600"),
        (["--hub-context", "hub"], "pass --apply"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "/nonexistent/kubeconfig"),
    ],
)
def test_fleet_credentials_bad_input_is_one_line(args: list[str], message: str) -> None:
    proc = _mcr("fleet-credentials", "app.py", "--secret-namespace", "fleet", *args, check=False)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("mcr fleet-credentials: "), line
    assert message in line, line


def test_fleet_credentials_for_an_app_without_fleet_watches_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hub_only.py").write_text(
        "import mcr\n\n\ndef setup(mgr):\n    async def reconcile(req):\n        return None\n\n"
        "    mcr.controller_managed_by(mgr).named('n')"
        ".watches('v1/Node', engage_with_provider_clusters=False).complete(reconcile)\n"
    )
    proc = _mcr("fleet-credentials", "hub_only.py", "--secret-namespace", "fleet", cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "mcr fleet-credentials: hub_only.py's controllers watch no fleet cluster: there is nothing to grant"
    )


def test_app_without_setup_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty.py").write_text("X = 1\n")
    proc = _mcr("fleet-rbac", "empty.py", cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == "mcr fleet-rbac: empty.py defines no setup(mgr) function (called with the Manager)"
    )


# --- the deployment page ------------------------------------------------------------------------


def _block(lang: str, after: str) -> str:
    text = (ROOT / "docs" / "deployment.md").read_text()
    match = re.search(rf"{re.escape(after)}.*?```{lang}\n(?P<body>.*?)```", text, re.S)
    assert match is not None, f"docs/deployment.md: no {lang} block after {after!r}"
    return match.group("body")


def _distributions() -> set[str]:
    names = set()
    for pyproject in ROOT.glob("packages/*/pyproject.toml"):
        names.add(tomllib.loads(pyproject.read_text())["project"]["name"])
    return names


def test_the_dockerfile_names_files_and_commands_that_exist() -> None:
    dockerfile = _block("dockerfile", "Save this as `Dockerfile`")
    instructions = [line.split(None, 1) for line in dockerfile.splitlines() if line.strip()]
    seen = {op for op, _ in instructions}
    assert {"FROM", "RUN", "WORKDIR", "COPY", "USER", "ENTRYPOINT", "CMD"} <= seen
    for op, rest in instructions:
        if op == "COPY":
            *sources, _ = rest.split()
            for source in sources:
                assert (APP_DIR / source).is_file(), f"COPY {source}: not in {APP_DIR}"
        if op == "RUN":
            words = rest.split()
            assert words[:2] == ["pip", "install"], rest
            packages = [w for w in words[2:] if not w.startswith("-")]
            assert packages, rest
            assert set(packages) <= _distributions(), packages
    entrypoint = json.loads(dict(instructions)["ENTRYPOINT"])
    cmd = json.loads(dict(instructions)["CMD"])
    core = tomllib.loads((ROOT / "packages" / "mcr-core" / "pyproject.toml").read_text())
    assert entrypoint == ["mcr"]
    assert entrypoint[0] in core["project"]["scripts"]
    assert cmd[0] in _mcr("--help").stdout  # a subcommand of mcr
    assert (APP_DIR / cmd[1]).is_file()
    # The generated Deployment runs the same command, with its flags after it.
    container = _one(_objects(_mcr("manifests", "app.py").stdout), "Deployment", "app-system")
    (c,) = container["spec"]["template"]["spec"]["containers"]
    assert c["command"] == entrypoint
    assert c["args"][:2] == cmd


def test_the_fleet_role_on_the_page_is_what_fleet_rbac_prints() -> None:
    shown = yaml.safe_load(_block("yaml", "`mcr fleet-rbac app.py` prints"))
    (printed,) = _objects(_mcr("fleet-rbac", "app.py").stdout)
    assert shown["rules"] == printed["rules"]
    assert shown["metadata"]["name"] == printed["metadata"]["name"]


# --- enforced by a server ------------------------------------------------------------------------


async def _apply_all(config: RestConfig, objects: list[dict[str, Any]]) -> None:
    async with config.transport("admin") as transport:
        client = Client(transport, field_manager="test-manifests")
        for obj in objects:
            await client.apply(obj, force=True)


async def _delete_all(config: RestConfig, objects: list[dict[str, Any]]) -> None:
    async with config.transport("admin") as transport:
        client = Client(transport)
        for obj in reversed(objects):
            meta = obj["metadata"]
            with contextlib.suppress(NotFoundError):
                await client.delete(
                    obj["apiVersion"] + "/" + obj["kind"], meta["name"], namespace=meta.get("namespace")
                )


async def _token(config: RestConfig, namespace: str, name: str) -> str:
    async with config.transport("admin") as transport:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
        resp = await transport.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            body=json.dumps(body).encode(),
            content_type="application/json",
        )
    token = resp.json()["status"]["token"]
    assert isinstance(token, str)
    return token


def _token_kubeconfig(admin: dict[str, Any], token: str) -> dict[str, Any]:
    """``admin``'s kubeconfig with its user replaced by the bearer ``token``."""
    out = copy.deepcopy(admin)
    for user in out["users"]:
        user["user"] = {"token": token}
    return out


class Operator:
    """`mcr run` with the generated Deployment's arguments, probes on a free port."""

    def __init__(self, args: list[str], kubeconfig: Path) -> None:
        self.port = _free_port()
        swapped = {":8081": f"127.0.0.1:{self.port}", ":8080": "0"}
        self.args = [swapped.get(a, a) for a in args] + [
            "--kubeconfig",
            str(kubeconfig),
            "--log-format",
            "json",
        ]
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Operator:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mcr", *self.args, cwd=APP_DIR, env=_env(),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return self

    async def ready(self) -> bool:
        assert self.proc is not None
        if self.proc.returncode is not None:
            raise AssertionError(f"mcr run exited {self.proc.returncode}")
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{self.port}/readyz") as resp,
            ):
                return resp.status == 200
        except aiohttp.ClientError:
            return False

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.terminate()
        try:
            _, stderr = await asyncio.wait_for(self.proc.communicate(), WAIT)
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
        assert self.proc.returncode == 0, stderr.decode()[-4000:]


def _labelled(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"example.io/seal": "true"}},
        "data": {"greeting": "hello"},
    }


async def _sealed(client: Client, name: str, namespace: str) -> bool:
    try:
        secret = await client.get("v1/Secret", f"{name}-sealed", namespace=namespace)
        cm = await client.get("v1/ConfigMap", name, namespace=namespace)
    except NotFoundError:
        return False
    annotated = (cm["metadata"].get("annotations") or {}).get("example.io/sealed-secret") == f"{name}-sealed"
    return annotated and secret["data"] == {"greeting": base64.b64encode(b"hello").decode()}


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:6]


@pytest.fixture
def admin(apiserver: ServerThread) -> RestConfig:
    return RestConfig.from_kubeconfig(apiserver.kubeconfig)


async def test_operator_runs_with_the_generated_service_account(
    apiserver: ServerThread, admin: RestConfig, unique: str, tmp_path: Path
) -> None:
    name, namespace = f"seal-{unique}", f"ops-{unique}"
    out = _mcr("manifests", "app.py", "--name", name, "--namespace", namespace, "--leader-elect").stdout
    objects = _objects(out)
    await _apply_all(admin, objects)
    try:
        token = await _token(admin, namespace, name)
        kubeconfig = tmp_path / "sa.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(_token_kubeconfig(apiserver.kubeconfig, token)))
        run_args = _one(objects, "Deployment", namespace)["spec"]["template"]["spec"]["containers"][0]["args"]
        async with config_client(admin) as client, Operator(run_args, kubeconfig) as operator:
            await eventually(operator.ready, timeout=WAIT)
            await client.create(_labelled("greeting", namespace))
            # Reads (ConfigMaps, Secrets), owned writes (the Secret), the declared patch (the
            # annotation) and the leader Lease all work with the generated rules.
            await eventually(lambda: _sealed(client, "greeting", namespace), timeout=WAIT)
            lease = await client.get("coordination.k8s.io/v1/Lease", name, namespace=namespace)
            assert lease["spec"]["holderIdentity"]
        sa = RestConfig.from_kubeconfig(_token_kubeconfig(apiserver.kubeconfig, token))
        async with config_client(sa) as as_operator:
            await as_operator.get("v1/Secret", "greeting-sealed", namespace=namespace)
            # Writes outside the rules: ConfigMaps are read and patched, never created or deleted.
            with pytest.raises(ForbiddenError):
                await as_operator.create(_labelled("intruder", namespace))
            with pytest.raises(ForbiddenError):
                await as_operator.delete("v1/ConfigMap", "greeting", namespace=namespace)
            with pytest.raises(ForbiddenError):
                await as_operator.list("apps/v1/Deployment", namespace=namespace)
    finally:
        await _delete_all(admin, objects)


class config_client:
    """An uncached client of ``config``, its transport closed on exit."""

    def __init__(self, config: RestConfig) -> None:
        self._transport = config.transport("test")

    async def __aenter__(self) -> Client:
        return Client(self._transport, field_manager="test-manifests")

    async def __aexit__(self, *exc: object) -> None:
        await self._transport.close()


async def test_fleet_credentials_let_the_operator_reach_a_fleet_cluster(
    fleet: Any, unique: str, tmp_path: Path
) -> None:
    servers: FleetThread = await asyncio.to_thread(fleet, 2)
    hub_server, member = servers[0], servers[1]
    hub = RestConfig.from_kubeconfig(hub_server.kubeconfig)
    name, namespace, secrets = f"seal-{unique}", f"ops-{unique}", f"fleet-{unique}"
    objects = _objects(
        _mcr(
            "manifests", "app.py", "--name", name, "--namespace", namespace,
            "--provider", "kubeconfig", "--provider-opt", f"namespace={secrets}",
        ).stdout
    )  # fmt: skip
    await _apply_all(hub, objects)
    fleet_objects: list[dict[str, Any]] = []
    try:
        proc = _mcr(
            "fleet-credentials", "app.py", "--name", name, "--kubeconfig", str(servers.kubeconfig_paths[1]),
            "--namespace", namespace, "--cluster-name", "member", "--secret-namespace", secrets,
            "--apply", "--hub-kubeconfig", hub_server.kubeconfig_path,
        )  # fmt: skip
        assert proc.stdout == ""
        assert "token" not in proc.stderr.replace("token expires", "")
        fleet_objects = [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": k, "metadata": {"name": name}}
            for k in ("ClusterRoleBinding", "ClusterRole")
        ] + [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}]
        member_admin = RestConfig.from_kubeconfig(member.kubeconfig)
        async with config_client(hub) as hub_client, config_client(member_admin) as member_client:
            secret = await hub_client.get("v1/Secret", "member", namespace=secrets)
            assert secret["metadata"]["labels"] == {"sigs.k8s.io/multicluster-runtime-kubeconfig": "true"}
            issued = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
            role = await member_client.get("rbac.authorization.k8s.io/v1/ClusterRole", name)
            assert role["rules"] == _objects(_mcr("fleet-rbac", "app.py").stdout)[0]["rules"]

            token = await _token(hub, namespace, name)
            kubeconfig = tmp_path / "hub-sa.kubeconfig"
            kubeconfig.write_text(yaml.safe_dump(_token_kubeconfig(hub_server.kubeconfig, token)))
            run_args = _one(objects, "Deployment", namespace)["spec"]["template"]["spec"]["containers"][0][
                "args"
            ]
            await member_client.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}, force=True
            )
            async with Operator(run_args, kubeconfig) as operator:
                await eventually(operator.ready, timeout=WAIT)
                await member_client.create(_labelled(f"greeting-{unique}", "apps"))
                await eventually(lambda: _sealed(member_client, f"greeting-{unique}", "apps"), timeout=WAIT)
        async with config_client(RestConfig.from_kubeconfig(issued)) as as_fleet:
            await as_fleet.list("v1/ConfigMap", namespace="apps")
            with pytest.raises(ForbiddenError):
                await as_fleet.create(_labelled("intruder", "apps"))
            with pytest.raises(ForbiddenError):
                await as_fleet.delete("v1/ConfigMap", f"greeting-{unique}", namespace="apps")
            with pytest.raises(ForbiddenError):
                await as_fleet.list("apps/v1/Deployment", namespace="apps")
    finally:
        await _delete_all(hub, objects)
        await _delete_all(RestConfig.from_kubeconfig(member.kubeconfig), fleet_objects)
