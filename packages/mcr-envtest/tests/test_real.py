"""Real mode: the pooled kube-apiserver behind Server, its reset to a fresh state, its users,
its errors, and its processes' lifetime. Tests that start control planes run only when
KUBEBUILDER_ASSETS is set (the real lane)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from kubernetes import client

from mcr.testing import eventually
from mcr_envtest import Server, ServerThread
from mcr_envtest.real import AssetsError, ControlPlaneError, Pool, RealModeError, Spec, default_pool, find
from mcr_envtest.real.measure import CRD

from .conftest import Raw, close_client, sync_client

needs_real = pytest.mark.skipif(
    not os.environ.get("KUBEBUILDER_ASSETS"), reason="starts real control planes: set KUBEBUILDER_ASSETS"
)

GROUP, PLURAL, KIND = CRD["spec"]["group"], CRD["spec"]["names"]["plural"], CRD["spec"]["names"]["kind"]


async def _ok(raw: Raw, method: str, path: str, body: Any = None) -> Any:
    kind = "application/merge-patch+json" if method == "PATCH" else "application/json"
    headers = {"Content-Type": kind}
    status, doc = await raw.json(method, path, data=orjson.dumps(body) if body else None, headers=headers)
    assert status in (200, 201), (method, path, status, doc)
    return doc


async def _names(raw: Raw, path: str) -> list[str]:
    doc = await _ok(raw, "GET", path)
    return sorted(i["metadata"]["name"] for i in doc["items"])


async def _dirty(raw: Raw) -> None:
    """Leave behind what a test typically leaves: objects in a namespace of its own, in default,
    a CRD and its objects, RBAC, a changed built-in object and a deleted one."""
    await _ok(raw, "POST", "/api/v1/namespaces", {"metadata": {"name": "left"}})
    await _ok(raw, "POST", "/api/v1/namespaces/left/configmaps", {"metadata": {"name": "cm"}})
    await _ok(raw, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "cm"}})
    await _ok(raw, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)

    async def served() -> bool:
        async with raw.request("GET", f"/apis/{GROUP}/v1/namespaces/default/{PLURAL}") as resp:
            return resp.status == 200

    await eventually(served, timeout=30, message="the CRD is served")
    await _ok(
        raw,
        "POST",
        f"/apis/{GROUP}/v1/namespaces/default/{PLURAL}",
        {"apiVersion": f"{GROUP}/v1", "kind": KIND, "metadata": {"name": "w"}},
    )
    role = {"metadata": {"name": "left-role"}, "rules": []}
    await _ok(raw, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
    await _ok(
        raw,
        "PATCH",
        "/api/v1/namespaces/default",
        {"metadata": {"labels": {"left": "yes"}}},
    )
    await _ok(raw, "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/view")


async def _fresh(raw: Raw) -> None:
    namespaces = ["default", "kube-node-lease", "kube-public", "kube-system"]
    assert await _names(raw, "/api/v1/namespaces") == namespaces
    assert await _names(raw, "/api/v1/namespaces/default/configmaps") == ["kube-root-ca.crt"]
    assert await _names(raw, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions") == []
    async with raw.request("GET", f"/apis/{GROUP}/v1") as resp:
        assert resp.status == 404
    roles = await _names(raw, "/apis/rbac.authorization.k8s.io/v1/clusterroles")
    assert "left-role" not in roles
    assert "view" in roles
    default = await _ok(raw, "GET", "/api/v1/namespaces/default")
    assert "left" not in (default["metadata"].get("labels") or {})


@needs_real
async def test_a_released_control_plane_comes_back_fresh() -> None:
    async with Server(real=True) as first:
        cp = first.control_plane
        raw = Raw(first)
        try:
            await _fresh(raw)
            await _dirty(raw)
        finally:
            await raw.close()
    await asyncio.to_thread(default_pool().wait_idle, 60)
    async with Server(real=True) as second:
        assert second.control_plane is cp  # the same kube-apiserver, reset (the latest released first)
        raw = Raw(second)
        try:
            await _fresh(raw)
            await _dirty(raw)  # the same names can be created again, the CRD is served again
        finally:
            await raw.close()


@needs_real
async def test_the_previous_servers_token_is_not_accepted_after_release() -> None:
    async with Server(real=True) as first:
        old = first.admin_token
        cp = first.control_plane
    await asyncio.to_thread(default_pool().wait_idle, 60)
    async with Server(real=True) as second:
        assert second.control_plane is cp
        raw = Raw(second, token=old)
        try:

            async def refused() -> bool:
                status, _ = await raw.json("GET", "/api/v1/namespaces")
                return status == 401

            await eventually(refused, timeout=20, interval=0.5, message="the old admin token is refused")
        finally:
            await raw.close()


@needs_real
async def test_stop_and_start_keep_objects_and_port() -> None:
    async with Server(real=True) as srv:
        raw = Raw(srv)
        try:
            await _ok(raw, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "kept"}})
        finally:
            await raw.close()
        port = srv.port
        await srv.stop()
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection("127.0.0.1", port)
        # while kube-apiserver is down no other socket may take the port it comes back on
        other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            with pytest.raises(OSError, match="in use"):
                other.bind(("127.0.0.1", port))
        finally:
            other.close()
        await srv.start()
        assert srv.port == port
        raw = Raw(srv)
        try:
            assert "kept" in await _names(raw, "/api/v1/namespaces/default/configmaps")
        finally:
            await raw.close()


@needs_real
def test_users_added_at_run_time(apiserver: ServerThread) -> None:
    async def check() -> None:
        token_user = Raw(apiserver, token="bob-token")
        apiserver.add_user("bob", groups=["devs"], token="bob-token")
        try:
            status, doc = await token_user.json("GET", "/api/v1/namespaces")
            assert status == 403, doc
            assert 'User "bob"' in doc["message"]
        finally:
            await token_user.close()

    asyncio.run(check())


@needs_real
def test_fleet_members_share_one_etcd(fleet: Any) -> None:
    servers = fleet(2).servers
    planes = [s.control_plane for s in servers]
    assert planes[0].etcd is planes[1].etcd
    assert planes[0].prefix != planes[1].prefix
    assert len({s.url for s in servers}) == 2


@needs_real
def test_a_binary_that_fails_quotes_its_log(tmp_path: Path) -> None:
    real = find()
    fake = tmp_path / "kube-apiserver"
    fake.write_text("#!/bin/sh\necho 'flag provided but not defined: --oops' >&2\nexit 1\n")
    fake.chmod(0o755)
    pool = Pool(type(real)(real.etcd, fake, None))
    try:
        with pytest.raises(ControlPlaneError) as err:
            pool.acquire(Spec())
    finally:
        pool.close()
    message = str(err.value)
    assert message.startswith("kube-apiserver exited with status 1; log ")
    assert "kube-apiserver.log" in message
    assert "flag provided but not defined: --oops" in message


def _losing_the_port_once(binary: Path, directory: Path) -> tuple[Path, Path]:
    """A wrapper of ``binary`` whose first run fails as a binary whose port was taken fails; the
    second path exists once it has."""
    tried = directory / f"{binary.name}-tried"
    wrapper = directory / binary.name
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ ! -e "{tried}" ]; then\n'
        f'  touch "{tried}"\n'
        "  echo 'listen tcp 127.0.0.1:1: bind: address already in use' >&2\n"
        "  exit 1\n"
        "fi\n"
        f'exec "{binary}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, tried


@needs_real
@pytest.mark.parametrize("which", ["etcd", "kube-apiserver"])
def test_a_start_that_lost_its_port_is_tried_again(tmp_path: Path, which: str) -> None:
    """Ports are chosen free and bound by the binary a moment later; should another socket take
    one meanwhile, the process starts again on new ports."""
    real = find()
    if which == "etcd":
        wrapper, tried = _losing_the_port_once(real.etcd, tmp_path)
        bins = type(real)(wrapper, real.apiserver, None)
    else:
        wrapper, tried = _losing_the_port_once(real.apiserver, tmp_path)
        bins = type(real)(real.etcd, wrapper, None)
    pool = Pool(bins)
    try:
        cp = pool.acquire(Spec())
        assert tried.exists()
        assert cp.running
        assert cp.port > 0
    finally:
        pool.close()


def test_options_a_real_server_cannot_honour_are_named() -> None:
    with pytest.raises(RealModeError, match="history_size"):
        Server(real=True, history_size=20)
    with pytest.raises(RealModeError, match="bookmark_interval"):
        ServerThread(real=True, bookmark_interval=0.2)
    with pytest.raises(RealModeError, match="https"):
        Server(real=True, https=False)
    srv = Server(real=True)
    with pytest.raises(RealModeError, match="faults"):
        srv.faults.latency(1)
    with pytest.raises(RealModeError, match="store"):
        _ = srv.store


async def test_restart_without_state_is_envtest_only() -> None:
    srv = Server(real=True)
    with pytest.raises(RealModeError, match=r"restart\(keep_state=False\)"):
        await srv.restart(keep_state=False)


def test_missing_binaries_are_named_with_how_to_build_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    lacks = r"KUBEBUILDER_ASSETS=.* lacks etcd and kube-apiserver; .*tools/kube/build.sh"
    with pytest.raises(AssetsError, match=lacks):
        find()
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path / "absent"))
    with pytest.raises(AssetsError, match="is not a directory"):
        find()
    monkeypatch.delenv("KUBEBUILDER_ASSETS")
    monkeypatch.setenv("MCR_KUBE_CACHE", str(tmp_path / "cache"))
    with pytest.raises(AssetsError, match=r"cache/kube-1\.37\.2/bin \(KUBEBUILDER_ASSETS is not set\)"):
        find()


async def test_a_real_server_without_binaries_fails_to_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    srv = Server()
    assert srv.real
    with pytest.raises(AssetsError, match="lacks etcd and kube-apiserver"):
        await srv.start()


def test_children_die_with_the_process_that_started_them(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import os, sys
        from pathlib import Path
        from mcr_envtest.real.procs import spawn
        child = spawn("sleep", ["sleep", "300"], Path(sys.argv[1]))
        print(child.pid, flush=True)
        os.kill(os.getpid(), 9)
        """
    )
    log = tmp_path / "sleep.log"
    argv = [sys.executable, "-c", script, str(log)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pid = int(proc.stdout.strip())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the child outlived the process that started it"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


CLI = [sys.executable, "-c", "import sys; from mcr_envtest.cli import main; sys.exit(main())"]


def test_cli_real_without_binaries_says_how_to_build_them(tmp_path: Path) -> None:
    env = dict(os.environ, KUBEBUILDER_ASSETS=str(tmp_path / "none"))
    proc = subprocess.run([*CLI, "serve", "--real"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "KUBEBUILDER_ASSETS=" in lines[0]
    assert "tools/kube/build.sh" in lines[0]


@needs_real
async def test_cli_serve_and_fleet_up_real(tmp_path: Path) -> None:
    kc = tmp_path / "serve.kubeconfig"
    serve = await asyncio.create_subprocess_exec(
        *CLI, "serve", "--real", "--kubeconfig", str(kc), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    fleet_dir = tmp_path / "fleet"
    fleet = await asyncio.create_subprocess_exec(
        *CLI, "fleet", "up", "--real", "--clusters", "2", "--dir", str(fleet_dir),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    paths = [kc, fleet_dir / "cluster-0.kubeconfig", fleet_dir / "cluster-1.kubeconfig"]
    try:
        await eventually(lambda: all(p.exists() for p in paths), timeout=120, message="kubeconfigs written")
        ports = []
        for path in paths:
            doc = yaml.safe_load(path.read_text())
            ports.append(int(doc["clusters"][0]["cluster"]["server"].rpartition(":")[2]))
            api = sync_client(doc)
            try:
                assert client.VersionApi(api).get_code().git_version == "v1.37.2"
            finally:
                close_client(api)
    finally:
        for proc in (serve, fleet):
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        codes = [await asyncio.wait_for(p.wait(), 60) for p in (serve, fleet)]
    assert codes == [0, 0]
    for port in ports:
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection("127.0.0.1", port)
