"""`mcr run` as a process: flags and environment variables, composed providers, SIGTERM, bad input.

Every run starts examples/run_echo.py, whose controller answers each ConfigMap labelled
``example.io/echo=true`` with a ConfigMap ``<name>-echo`` naming the cluster it was seen in.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcr.client import Client
from mcr.errors import NotFoundError
from mcr.rest.config import RestConfig
from mcr.testing import eventually
from mcr_envtest import FleetThread, ServerThread
from mcr_envtest.certs import CA

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "run_echo.py"
DOC = ROOT / "docs" / "run.md"
MCR = [sys.executable, "-m", "mcr", "run"]
WAIT = 60  # seconds for a process to start serving or to stop, on a loaded machine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCR_")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


class Run:
    """One `mcr run` process; its stderr lines are collected as they come."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        async for line in self.proc.stderr:
            self.lines.append(line.decode().rstrip("\n"))

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines if line.startswith("{")]

    async def stop(self) -> int:
        """SIGTERM, then the exit status (the process is killed if it does not stop in time)."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), WAIT)
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
            await asyncio.wait_for(self._reader, WAIT)
        status = self.proc.returncode
        assert status is not None
        return status


@contextlib.asynccontextmanager
async def mcr_run(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[Run]:
    proc = await asyncio.create_subprocess_exec(
        *MCR,
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env if env is not None else _env(),
        cwd=str(ROOT),
    )
    run = Run(proc)
    try:
        yield run
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        run._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run._reader


@contextlib.asynccontextmanager
async def client_of(kubeconfig: Path | dict[str, Any]) -> AsyncIterator[Client]:
    transport = RestConfig.from_kubeconfig(kubeconfig).transport("test")
    try:
        yield Client(transport)
    finally:
        await transport.close()


def _cm(name: str, namespace: str = "default", echo: bool = True) -> dict[str, Any]:
    labels = {"example.io/echo": "true"} if echo else {}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
    }


async def echo_of(client: Client, name: str, namespace: str = "default") -> str | None:
    """The cluster named by the echo of ``namespace/name``, None while there is none."""
    try:
        cm = await client.get("v1/ConfigMap", f"{name}-echo", namespace=namespace)
    except NotFoundError:
        return None
    cluster: str = cm["data"]["cluster"]
    return cluster


async def wait_echo(client: Client, name: str, namespace: str = "default", run: Run | None = None) -> str:
    async def seen() -> str | None:
        if run is not None and run.proc.returncode is not None:
            raise AssertionError("mcr run exited:\n" + "\n".join(run.lines[-30:]))
        return await echo_of(client, name, namespace)

    found = await eventually(seen, timeout=WAIT, interval=0.2, message=f"no echo of {namespace}/{name}")
    assert found is not None
    return found


async def _namespace(client: Client, name: str, labels: dict[str, str] | None = None) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}
    await client.create(body)


@pytest.mark.slow
async def test_two_providers_leader_election_metrics_probes_and_json_logs(
    apiserver: ServerThread, fleet: Callable[..., FleetThread]
) -> None:
    members = fleet(2)
    metrics, probes = _free_port(), _free_port()
    async with (
        client_of(apiserver.kubeconfig) as host,
        mcr_run(
            str(EXAMPLE),
            "--kubeconfig",
            str(apiserver.kubeconfig_path),
            "--provider",
            "file",
            "--provider-opt",
            f"directories={members.kubeconfig_dir}",
            "--provider",
            "team=namespace",
            "--provider-opt",
            "label_selector=mcr-run=team",
            "--leader-elect",
            "--leader-election-id",
            "echo-leader",
            "--leader-election-namespace",
            "kube-system",
            "--metrics-bind-address",
            f"127.0.0.1:{metrics}",
            "--health-probe-bind-address",
            f"127.0.0.1:{probes}",
            "--log-format",
            "json",
            "--log-level",
            "debug",
        ) as run,
        aiohttp.ClientSession() as http,
    ):
        # The file provider's clusters are named file#<kubeconfig path>+<context>.
        for path in members.kubeconfig_paths:
            async with client_of(path) as member:
                await member.create(_cm("hello"))
                assert (await wait_echo(member, "hello", run=run)).startswith(f"file#{path}+")
        # The namespace provider's clusters are the host's labelled namespaces: team#<namespace>.
        await _namespace(host, "team-a", {"mcr-run": "team"})
        await host.create(_cm("hello", "team-a"))
        assert await wait_echo(host, "hello", "team-a", run=run) == "team#team-a"

        lease = await host.get("coordination.k8s.io/v1/Lease", "echo-leader", namespace="kube-system")
        assert lease["spec"]["holderIdentity"]

        async with http.get(f"http://127.0.0.1:{probes}/readyz") as resp:
            assert resp.status == 200

        async def echo_reconciles() -> float:
            async with http.get(f"http://127.0.0.1:{metrics}/metrics") as resp:
                assert resp.status == 200
                text = await resp.text()
            return sum(
                s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
                if s.name == "controller_runtime_reconcile_total" and s.labels["controller"] == "echo"
            )

        # Metrics are batched for up to a second; one ConfigMap per cluster and the echoes were seen.
        await eventually(lambda: _at_least(echo_reconciles(), 3), timeout=WAIT, interval=0.2)

        assert await run.stop() == 0, "\n".join(run.lines[-30:])
    records = run.records()
    assert records
    assert len(records) == len([line for line in run.lines if line.strip()]), "a log line is not JSON"
    running = next(r for r in records if r["msg"] == "running")
    assert running["providers"] == "file=file team=namespace"
    assert any(r["level"] == "debug" for r in records), "--log-level debug logged nothing at debug"


@pytest.mark.slow
async def test_environment_variables_sharding_namespaces_and_uvloop(
    apiserver: ServerThread, fleet: Callable[..., FleetThread], tmp_path: Path
) -> None:
    pytest.importorskip("uvloop")
    (member_path,) = fleet(1).kubeconfig_paths
    probes = _free_port()
    # The host's kubeconfig with another context made current: only MCR_CONTEXT reaches the host.
    kubeconfig = copy.deepcopy(apiserver.kubeconfig)
    host_context = kubeconfig["current-context"]
    kubeconfig["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:9"}})
    kubeconfig["contexts"].append({"name": "elsewhere", "context": {"cluster": "nowhere", "user": "nobody"}})
    kubeconfig["users"].append({"name": "nobody", "user": {"token": "none"}})
    kubeconfig["current-context"] = "elsewhere"
    (tmp_path / "kubeconfig").write_text(json.dumps(kubeconfig))
    env = _env(
        MCR_KUBECONFIG=str(tmp_path / "kubeconfig"),
        MCR_CONTEXT=host_context,
        MCR_PROVIDER="file",
        MCR_PROVIDER_OPT=f"file.kubeconfigs={member_path}",
        MCR_NAMESPACE="ns-a ns-c",
        MCR_SHARD="true",
        MCR_SHARD_NAMESPACE="kube-system",
        MCR_SHARD_RETRY_PERIOD="0.5",
        MCR_METRICS_BIND_ADDRESS="0",
        MCR_HEALTH_PROBE_BIND_ADDRESS=f"127.0.0.1:{probes}",
        MCR_LOOP="uvloop",
    )
    async with (
        client_of(apiserver.kubeconfig) as host,
        client_of(member_path) as member,
        mcr_run("examples.run_echo", "--log-format", "json", env=env) as run,  # the module form
        aiohttp.ClientSession() as http,
    ):
        for ns in ("ns-a", "ns-b"):
            await _namespace(member, ns)
        await member.create(_cm("outside", "ns-b"))  # first: the cache restricted to ns-a never sees it
        await member.create(_cm("inside", "ns-a"))
        assert (await wait_echo(member, "inside", "ns-a", run=run)).startswith(f"{member_path}+")
        assert await echo_of(member, "outside", "ns-b") is None

        leases = await host.list("coordination.k8s.io/v1/Lease", namespace="kube-system")
        # The replica's peer Lease and the fence of the cluster it runs (held before it engages).
        names = sorted(item["metadata"]["name"] for item in leases)
        assert [n.split("-")[1] for n in names if n.startswith("mcr-")] == ["peer", "shard"], names
        async with http.get(f"http://127.0.0.1:{probes}/healthz") as resp:
            assert resp.status == 200
        assert await run.stop() == 0, "\n".join(run.lines[-30:])
    running = next(r for r in run.records() if r["msg"] == "running")
    assert running["loop"].startswith("uvloop")
    assert running["providers"] == "file=file"


@pytest.mark.slow
async def test_dev_fleet_with_the_file_provider() -> None:
    # --dev starts mcr-envtest servers; the real control plane (KUBEBUILDER_ASSETS) is a choice of
    # mcr-envtest's, not of this flag, and would only make the test slower.
    env = {k: v for k, v in _env().items() if k != "KUBEBUILDER_ASSETS"}
    async with mcr_run(
        str(EXAMPLE),
        "--dev",
        "--dev-clusters",
        "2",
        "--metrics-bind-address",
        "0",
        "--log-format",
        "json",
        env=env,
    ) as run:

        async def fleet_dir() -> str | None:
            if run.proc.returncode is not None:
                raise AssertionError("\n".join(run.lines[-30:]))
            up = [r for r in run.records() if r["msg"] == "dev fleet up"]
            return str(up[0]["kubeconfig_dir"]) if up else None

        found = await eventually(fleet_dir, timeout=WAIT, message="the dev fleet never came up")
        assert found is not None
        directory = Path(found)
        paths = sorted(await asyncio.to_thread(lambda: list(directory.glob("*.kubeconfig"))))
        assert len(paths) == 2
        for path in paths:
            async with client_of(path) as member:
                await member.create(_cm("hello"))
                assert await wait_echo(member, "hello", run=run) == f"{path}+{_context_of(path)}"
        assert await run.stop() == 0, "\n".join(run.lines[-30:])
    assert not await asyncio.to_thread(directory.exists), "the dev fleet's kubeconfigs outlive the run"


async def _post(client: Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = await client.transport.request(
        "POST", path, body=json.dumps(body).encode(), content_type="application/json"
    )
    out = resp.json()
    assert isinstance(out, dict)
    return out


async def test_secure_metrics_flags(apiserver: ServerThread, tmp_path: Path) -> None:
    ca = CA("mcr-run-metrics-ca")
    pair = ca.serving()
    (tmp_path / "serving.key").write_bytes(pair.key_pem)
    (tmp_path / "serving.crt").write_bytes(pair.cert_pem)
    metrics = _free_port()
    namespace = f"mcr-run-metrics-{uuid.uuid4().hex[:6]}"
    async with client_of(apiserver.kubeconfig) as host:
        await _namespace(host, namespace)
        # A ServiceAccount allowed to read /metrics, and its token.
        await host.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "scraper", "namespace": namespace},
            }
        )
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": namespace}}
        await host.create(
            {**role, "kind": "ClusterRole", "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}
        )
        await host.create(
            {
                **role,
                "kind": "ClusterRoleBinding",
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": namespace,
                },
                "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": namespace}],
            }
        )
        issued = await _post(
            host,
            f"/api/v1/namespaces/{namespace}/serviceaccounts/scraper/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
        token = issued["status"]["token"]
        tls = ssl.create_default_context(cadata=ca.cert_pem.decode())
        async with (
            mcr_run(
                str(EXAMPLE),
                "--kubeconfig",
                str(apiserver.kubeconfig_path),
                "--metrics-bind-address",
                f"127.0.0.1:{metrics}",
                "--metrics-secure",
                "--metrics-cert-path",
                str(tmp_path),
                "--metrics-cert-name",
                "serving.crt",
                "--metrics-cert-key",
                "serving.key",
                "--health-probe-bind-address",
                "0",
            ) as run,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls, force_close=True)) as http,
        ):

            async def scrape(bearer: str | None) -> int | None:
                if run.proc.returncode is not None:
                    raise AssertionError("mcr run exited:\n" + "\n".join(run.lines[-30:]))
                headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
                try:
                    async with http.get(f"https://127.0.0.1:{metrics}/metrics", headers=headers) as resp:
                        return resp.status
                except aiohttp.ClientConnectionError:
                    return None  # not serving yet

            # Served over HTTPS with the given pair (the client trusts only its CA), and guarded.
            assert await eventually(lambda: scrape(None), timeout=WAIT, interval=0.2) == 401
            assert await scrape("not-a-token") == 401
            assert await scrape(token) == 200
            assert await run.stop() == 0, "\n".join(run.lines[-30:])


async def _at_least(value: Awaitable[float], minimum: float) -> bool:
    return await value >= minimum


def _context_of(path: Path) -> str:
    import yaml

    context: str = yaml.safe_load(path.read_text())["current-context"]
    return context


def _mcr_run_sync(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[int, str]:
    done = subprocess.run(
        [*MCR, *args], capture_output=True, text=True, env=env or _env(), timeout=WAIT, cwd=str(cwd)
    )
    return done.returncode, done.stderr


KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}

BAD_INPUT = [
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--provider", "kubeconfg"], "no provider named 'kubeconfg' is installed; did you mean 'kubeconfig'?"),
    (
        ["--provider", "file", "--provider-opt", "poll_intervall=1"],
        "provider 'file' has no option 'poll_intervall'; did you mean 'poll_interval'?",
    ),
    (
        ["--provider", "file", "--provider-opt", "poll_interval=fast"],
        "option poll_interval='fast' of provider 'file': expected a number",
    ),
    (
        ["--provider", "file", "--provider-opt", "watch=maybe"],
        "option watch='maybe' of provider 'file': expected true or false",
    ),
    (
        ["--provider", "kubeconfig", "--provider-opt", "cluster=x"],
        "option 'cluster' of provider 'kubeconfig' takes",
    ),
    (["--provider", "kubeconfig"], "provider 'kubeconfig' needs --provider-opt namespace=..."),
    (
        ["--provider-opt", "poll_interval=1", "--provider", "file"],
        "--provider-opt 'poll_interval=1' comes before any --provider",
    ),
    (["--provider", "file", "--provider", "file"], "a provider named 'file' is already given"),
    (["--log-format", "xml"], "argument --log-format: invalid choice: 'xml'"),
    (["--leader-elect", "--kubeconfig", "{kubeconfig}"], "--leader-elect needs --leader-election-id"),
    (["--kubeconfig", "/nonexistent/kubeconfig"], "/nonexistent/kubeconfig"),
    (["--shard", "--shard-lease-duration", "-1"], "--shard-lease-duration must be a positive number"),
    (["--dev", "--leader-elect", "--leader-election-id", "x"], "need a local cluster: pass --kubeconfig"),
    (["--dev-clusters", "0"], "--dev-clusters must be at least 1"),
    (["--metrics-secure", "--kubeconfig", "{kubeconfig}"], "--metrics-secure needs --metrics-cert-path"),
    (
        ["--metrics-cert-path", "/tmp", "--kubeconfig", "{kubeconfig}"],
        "--metrics-cert-path is set but --metrics-secure is not",
    ),
    (
        ["--dev", "--metrics-secure", "--metrics-cert-path", "/tmp"],
        "--metrics-secure authenticates scrapers through the local cluster",
    ),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"  # read, never connected to: the errors come first
    kubeconfig.write_text(json.dumps(KUBECONFIG))
    args = [a.replace("{kubeconfig}", str(kubeconfig)) for a in args]
    status, err = _mcr_run_sync(str(EXAMPLE), *args)
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert message in err
    assert "pip" not in err


def test_an_environment_variable_that_does_not_parse_is_named() -> None:
    status, err = _mcr_run_sync(str(EXAMPLE), env=_env(MCR_LEADER_ELECT="maybe"))
    assert (status, err.strip()) == (2, "mcr run: $MCR_LEADER_ELECT='maybe': expected true or false")


def test_missing_module_file_and_setup(tmp_path: Path) -> None:
    (tmp_path / "nosetup.py").write_text("VALUE = 1\n")
    (tmp_path / "pkgapp").mkdir()
    (tmp_path / "pkgapp" / "__init__.py").write_text("")
    (tmp_path / "pkgapp" / "ctl.py").write_text("def other(mgr):\n    pass\n")
    cases = [
        (
            "no_such_app_module",
            "mcr run: cannot import 'no_such_app_module': no module named 'no_such_app_module'",
        ),
        ("missing.py", "mcr run: missing.py: no such file"),
        (
            "nosetup.py",
            "mcr run: nosetup.py defines no setup(mgr) function (mcr run calls it with the Manager)",
        ),
        (
            "pkgapp.ctl",
            "mcr run: pkgapp.ctl defines no setup(mgr) function (mcr run calls it with the Manager)",
        ),
    ]
    for app, message in cases:
        status, err = _mcr_run_sync(app, cwd=tmp_path)
        assert (status, err.strip()) == (2, message)


def test_dev_without_mcr_envtest_says_so(tmp_path: Path) -> None:
    hide = "import sys; sys.modules['mcr_envtest'] = None; from mcr.cli import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", hide, "run", str(EXAMPLE), "--dev"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=WAIT,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == "mcr run: --dev needs mcr-envtest, which is not installed: pip install mcr-envtest"
    )


def test_docs_page_shows_the_example() -> None:
    assert EXAMPLE.read_text().strip() in DOC.read_text()
