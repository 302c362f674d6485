"""One real control plane: kube-apiserver (+ kube-controller-manager) over a shared etcd.

Files (certificates, keys, kubeconfigs, logs) live in the control plane's own directory. The
apiserver serves a certificate of mcr-envtest's CA and trusts that CA for client certificates, so
``ca_file``, kubeconfigs and ``add_user(client_cert=True)`` look the same as with mcr-envtest.
Bearer tokens come from a token file read at start (a private probe token) and from the process'
token webhook (users added at run time).

Fresh state: once kube-apiserver is ready and kube-controller-manager has published the default
ServiceAccounts and ``kube-root-ca.crt`` ConfigMaps, every key under the control plane's etcd
prefix is recorded as the baseline. :meth:`ControlPlane.reset` makes etcd look like that baseline
again: keys written since are deleted, baseline keys that were changed or deleted are written back
with their baseline value (except keys the control plane itself keeps renewing: its identity lease
and master lease). The writes go through etcd, so kube-apiserver's watch cache, its CRD handlers,
RBAC and admission informers and kube-controller-manager all follow them like any other change;
the reset returns once the apiserver serves the baseline namespaces again and no longer serves
the API groups of deleted CRDs.
"""

from __future__ import annotations

import http.client
import json
import secrets
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mcr_envtest import certs, kubeconfig

from .binaries import Binaries
from .etcd import KV, Entry, Etcd
from .procs import PORT_ATTEMPTS, Child, ControlPlaneError, port_taken, reserve_port, spawn
from .webhook import Lookup, TokenWebhook

__all__ = ["ControlPlane", "Spec"]

BOOT_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
CONTROLLERS = (
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "deployment-controller",
    "replicaset-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
)
# keys the control plane keeps rewriting itself: never deleted or written back by a reset
_OWN = (
    b"/masterleases/",
    b"/peerserverleases/",
    b"/leases/kube-system/apiserver-",
    b"/leases/kube-system/kube-apiserver-",
)
_CRDS = b"/apiextensions.k8s.io/customresourcedefinitions/"
_RBAC_KINDS = {"clusterroles", "clusterrolebindings", "roles", "rolebindings"}


@dataclass(frozen=True)
class Spec:
    """What a control plane is started with: anonymous requests allowed, owner-reference garbage
    collection on, and the port (0: any free port)."""

    anonymous: bool = False
    owner_gc: bool = True
    port: int = 0


class ControlPlane:
    """kube-apiserver and kube-controller-manager for one etcd prefix. Blocking methods; one
    caller at a time. Errors are :class:`ControlPlaneError` naming the binary and its log."""

    def __init__(
        self, name: str, binaries: Binaries, spec: Spec, etcd: Etcd, webhook: TokenWebhook, directory: Path
    ) -> None:
        self.name = name
        self.binaries = binaries
        self.spec = spec
        self.etcd = etcd
        self.webhook = webhook
        self.directory = directory
        self.prefix = f"/{name}"
        self.port = spec.port
        # the port stays reserved until destroy(), through restarts: see reserve_port
        self._reserved: socket.socket | None = None
        self.apiserver: Child | None = None
        self.controller_manager: Child | None = None
        self.ready_seconds = 0.0
        self.reset_seconds = 0.0
        self._token = secrets.token_urlsafe(24)
        self._baseline: dict[bytes, Entry] = {}
        self._ctx = ssl.create_default_context(cadata=certs.process_ca().cert_pem.decode())

    # ------------------------------------------------------------------ files
    def _write_files(self) -> None:
        d = self.directory
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        ca = certs.process_ca()
        (d / "ca.crt").write_bytes(ca.cert_pem)
        hosts = ("127.0.0.1", "::1", "localhost", "10.96.0.1", "kubernetes", "kubernetes.default")
        serving = ca.serving((*hosts, "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))
        (d / "serving.crt").write_bytes(serving.cert_pem)
        _private(d / "serving.key", serving.key_pem)
        sa = ec.generate_private_key(ec.SECP256R1())
        _private(
            d / "sa.key",
            sa.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            ),
        )
        (d / "sa.pub").write_bytes(
            sa.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        line = f'{self._token},mcr-envtest-probe,mcr-envtest-probe,"system:masters"\n'
        _private(d / "tokens.csv", line.encode())
        self.webhook.config(d / "token-webhook.kubeconfig", self.name)
        pair = ca.client("system:kube-controller-manager", ("system:masters",))
        kubeconfig.write(
            kubeconfig.build(
                server=self.url,
                ca_pem=ca.cert_pem,
                user="system:kube-controller-manager",
                client_cert_pem=pair.cert_pem,
                client_key_pem=pair.key_pem,
                cluster_name=self.name,
            ),
            d / "controller-manager.kubeconfig",
        )

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _apiserver_argv(self) -> list[str]:
        d = self.directory
        argv = [
            str(self.binaries.apiserver),
            f"--etcd-servers={self.etcd.url}",
            f"--etcd-prefix={self.prefix}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",  # it refuses loopback addresses
            f"--secure-port={self.port}",
            f"--tls-cert-file={d / 'serving.crt'}",
            f"--tls-private-key-file={d / 'serving.key'}",
            f"--client-ca-file={d / 'ca.crt'}",
            f"--token-auth-file={d / 'tokens.csv'}",
            f"--authentication-token-webhook-config-file={d / 'token-webhook.kubeconfig'}",
            "--authentication-token-webhook-version=v1",
            "--authentication-token-webhook-cache-ttl=0s",
            f"--anonymous-auth={'true' if self.spec.anonymous else 'false'}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/12",  # kubeadm's and mcr-envtest's
            "--allow-privileged=true",
            "--profiling=false",
        ]
        if self.binaries.controller_manager is None:
            argv.append("--disable-admission-plugins=ServiceAccount")
        if not self.spec.owner_gc:
            argv.append("--enable-garbage-collector=false")
        return argv

    def _controller_manager_argv(self, kcm: Path) -> list[str]:
        d = self.directory
        controllers = [c for c in CONTROLLERS if self.spec.owner_gc or c != "garbage-collector-controller"]
        return [
            str(kcm),
            f"--kubeconfig={d / 'controller-manager.kubeconfig'}",
            f"--controllers={','.join(controllers)}",
            f"--enable-garbage-collector={'true' if self.spec.owner_gc else 'false'}",
            "--leader-elect=false",
            "--secure-port=0",
            f"--root-ca-file={d / 'ca.crt'}",
            f"--service-account-private-key-file={d / 'sa.key'}",
            "--use-service-account-credentials=false",
            "--profiling=false",
        ]

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 120.0) -> None:
        """Write the files, start both processes, wait until ready and record the baseline."""
        chosen = not self.port
        if not chosen:
            _check_free(self.port)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._reserve()
            self._write_files()
            try:
                self.start_processes(timeout)
                break
            except ControlPlaneError as exc:
                if not chosen or attempt == PORT_ATTEMPTS or not port_taken(exc):
                    raise
                self.stop_processes()
                self._release()
                self.port = 0
        self._wait(self._bootstrapped, timeout, "kube-controller-manager's default ServiceAccounts")
        self._baseline = self._quiet_keys(timeout)

    def _reserve(self) -> None:
        if self._reserved is None:
            self._reserved = reserve_port(self.port)
            self.port = int(self._reserved.getsockname()[1])

    def _release(self) -> None:
        if self._reserved is not None:
            self._reserved.close()
            self._reserved = None

    def _quiet_keys(self, timeout: float) -> dict[bytes, Entry]:
        """The keys under the prefix once kube-controller-manager's start-up writes (such as the
        aggregated ClusterRoles) are over: two reads half a second apart that agree."""
        kv = self.etcd.kv
        assert kv is not None
        root = self.prefix.encode() + b"/"
        deadline = time.monotonic() + timeout
        last = kv.range(root)
        while True:
            time.sleep(0.5)
            now = kv.range(root)
            same = now.keys() == last.keys() and all(
                _own(k, root) or now[k].mod_revision == e.mod_revision for k, e in last.items()
            )
            if same or time.monotonic() > deadline:
                return now
            last = now

    def start_processes(self, timeout: float = 120.0) -> None:
        """Start kube-apiserver on :attr:`port` (again, after :meth:`stop_processes`) and wait
        for /readyz; then start kube-controller-manager."""
        began = time.monotonic()
        log = self.directory / "kube-apiserver.log"
        self.apiserver = spawn("kube-apiserver", self._apiserver_argv(), log)
        self._wait(lambda: self._get("/readyz")[0] == 200, timeout, "kube-apiserver /readyz")
        self.ready_seconds = time.monotonic() - began
        kcm = self.binaries.controller_manager
        if kcm is not None:
            self.controller_manager = spawn(
                "kube-controller-manager",
                self._controller_manager_argv(kcm),
                self.directory / "kube-controller-manager.log",
            )

    def stop_processes(self, timeout: float = 10.0) -> None:
        """Stop kube-controller-manager and kube-apiserver (SIGTERM, SIGKILL after ``timeout``);
        etcd keeps the objects."""
        for child in (self.controller_manager, self.apiserver):
            if child is not None:
                child.stop(timeout)
        self.controller_manager = self.apiserver = None

    @property
    def running(self) -> bool:
        return self.apiserver is not None and self.apiserver.alive()

    def children(self) -> list[Child]:
        return [c for c in (self.apiserver, self.controller_manager) if c is not None]

    def bind(self, lookup: Lookup | None) -> None:
        """Authenticate run-time bearer tokens with ``lookup`` (None: with nobody)."""
        self.webhook.bind(self.name, lookup)

    def kill(self) -> None:
        """Kill both processes and give the port up; the objects stay in etcd (idempotent)."""
        for child in self.children():
            child.kill()
        self.controller_manager = self.apiserver = None
        self._release()

    def destroy(self) -> None:
        """Kill both processes, give the port up and delete the control plane's keys (idempotent)."""
        self.bind(None)
        self.kill()
        if self.etcd.kv is not None and self.etcd.child is not None and self.etcd.child.alive():
            self.etcd.kv.delete_prefix(self.prefix.encode() + b"/")

    # ------------------------------------------------------------------ reset
    def reset(self, timeout: float = 30.0) -> None:
        """Bring the objects back to the baseline (see the module docstring)."""
        kv = self.etcd.kv
        assert kv is not None
        for child in self.children():
            child.check()
        began = time.monotonic()
        try:
            self._reset(kv, timeout)
        finally:
            self.reset_seconds = time.monotonic() - began

    def _reset(self, kv: KV, timeout: float) -> None:
        root = self.prefix.encode() + b"/"
        now = kv.range(root, keys_only=True)
        deletes = [k for k in now if k not in self._baseline and not _own(k, root)]
        puts = {
            k: e.value
            for k, e in self._baseline.items()
            if not _own(k, root) and (k not in now or now[k].mod_revision != e.mod_revision)
        }
        if not deletes and not puts:
            return
        with (self.directory / "resets.log").open("a") as log:  # what each reset undid
            undone = [k[len(root) :].decode(errors="replace") for k in [*deletes, *puts]]
            log.write(f"{time.strftime('%H:%M:%S')} deleted {len(deletes)}, restored {len(puts)}: {undone}\n")
        kv.apply(deletes, puts)
        crds = root + _CRDS[1:]
        groups = {k[len(crds) :].partition(b".")[2].decode() for k in deletes if k.startswith(crds)}
        touched = {k[len(root) :].partition(b"/")[0].decode() for k in [*deletes, *puts]}
        rbac = {kind: self._baseline_names(root, kind) for kind in _RBAC_KINDS & touched}
        self._wait(lambda: self._settled(groups, rbac), timeout, "kube-apiserver to serve the reset objects")
        # written back: remember their new revisions; written meanwhile by controllers: delete
        again = kv.range(root, keys_only=True)
        for k in puts:
            if k in again:
                self._baseline[k] = Entry(again[k].mod_revision, self._baseline[k].value)
        late = [k for k in again if k not in self._baseline and not _own(k, root)]
        if late:
            kv.apply(late, {})

    def _settled(self, groups: set[str], rbac: dict[str, set[str]]) -> bool:
        """True once the apiserver serves the baseline namespaces, no longer serves the deleted
        CRDs' groups, and its watch cache (which its RBAC authorizer follows) holds exactly the
        baseline objects of each RBAC kind the reset touched."""
        if self._names("/api/v1/namespaces") != set(BOOT_NAMESPACES):
            return False
        if any(self._get(f"/apis/{g}")[0] != 404 for g in groups):
            return False
        return all(
            self._names(f"/apis/rbac.authorization.k8s.io/v1/{kind}?resourceVersion=0") == names
            for kind, names in rbac.items()
        )

    def _names(self, path: str) -> set[str] | None:
        status, body = self._get(path)
        if status != 200:
            return None
        items = json.loads(body).get("items") or []
        return {
            "/".join(filter(None, (i["metadata"].get("namespace"), i["metadata"]["name"]))) for i in items
        }

    def _baseline_names(self, root: bytes, kind: str) -> set[str]:
        start = root + kind.encode() + b"/"
        return {k[len(start) :].decode() for k in self._baseline if k.startswith(start)}

    def _bootstrapped(self) -> bool:
        if self.binaries.controller_manager is None:
            return True
        for path, name in (("serviceaccounts", "default"), ("configmaps", "kube-root-ca.crt")):
            status, body = self._get(f"/api/v1/{path}?fieldSelector=metadata.name%3D{name}")
            if status != 200:
                return False
            have = {i["metadata"]["namespace"] for i in json.loads(body).get("items", [])}
            if not have >= set(BOOT_NAMESPACES):
                return False
        return True

    # ------------------------------------------------------------------ probes
    def _get(self, path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self._ctx, timeout=10)
        try:
            conn.request("GET", path, headers={"Authorization": f"Bearer {self._token}"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        except (OSError, http.client.HTTPException):
            return 0, b""
        finally:
            conn.close()

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            for child in self.children():
                child.check()
            if time.monotonic() > deadline:
                logs = ", ".join(str(c.log) for c in self.children())
                raise ControlPlaneError(
                    f"{self.name}: timed out after {timeout:g}s waiting for {what}; logs: {logs}"
                )
            time.sleep(0.05)

    def usage(self) -> dict[str, Any]:
        """CPU seconds and RSS bytes of each running process, by binary name."""
        return {c.name: {"cpu_seconds": c.cpu_seconds(), "rss_bytes": c.rss_bytes()} for c in self.children()}


def _own(key: bytes, root: bytes) -> bool:
    rest = key[len(root) - 1 :]
    return rest.startswith(_OWN)


def _check_free(port: int) -> None:
    """Raise OSError (EADDRINUSE, ...) when 127.0.0.1:``port`` cannot be listened on."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


def _private(path: Path, data: bytes) -> None:
    path.touch(mode=0o600)
    path.write_bytes(data)
