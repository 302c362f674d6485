"""Real control-plane binaries from ``KUBEBUILDER_ASSETS`` (etcd + kube-apiserver).

When the ``KUBEBUILDER_ASSETS`` environment variable is set, :class:`~mcr_envtest.Server` starts
these binaries instead of the built-in server (like controller-runtime's envtest). Faults,
``restart(keep_state=False)`` and client-certificate users are not available there.

This path cannot run in mcr's CI (no binaries); it is exercised by hand. A directory without the
two binaries fails fast with :class:`AssetsError` naming the directory and what is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import ssl
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

__all__ = ["AssetsError", "ExternalControlPlane", "assets_dir"]

ENV = "KUBEBUILDER_ASSETS"


class AssetsError(RuntimeError):
    """KUBEBUILDER_ASSETS is set but unusable; the message names the directory and the problem."""


def assets_dir() -> Path | None:
    """The KUBEBUILDER_ASSETS directory, or None when the variable is unset or empty."""
    value = os.environ.get(ENV, "").strip()
    return Path(value) if value else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ExternalControlPlane:
    """etcd + kube-apiserver processes serving ``https://127.0.0.1:<port>``.

    :meth:`start` raises :class:`AssetsError` for a bad assets directory and ``TimeoutError`` when
    the apiserver is not ready within ``ready_timeout`` seconds; :meth:`stop` terminates both
    processes (kill after 5 s) and removes the data directory. Both are idempotent.
    """

    def __init__(
        self, directory: Path, *, admin_token: str, port: int = 0, ready_timeout: float = 60.0
    ) -> None:
        self.directory = directory
        self.admin_token = admin_token
        self.port = port
        self.ready_timeout = ready_timeout
        self._procs: list[asyncio.subprocess.Process] = []
        self._work: Path | None = None
        self.ca_file = ""

    def check(self) -> tuple[Path, Path]:
        """The (etcd, kube-apiserver) binary paths; AssetsError when missing."""
        d = self.directory
        if not d.is_dir():
            raise AssetsError(f"{ENV}={d}: not a directory (expected etcd and kube-apiserver binaries in it)")
        missing = [n for n in ("etcd", "kube-apiserver") if not os.access(d / n, os.X_OK)]
        if missing:
            raise AssetsError(f"{ENV}={d}: missing executable {' and '.join(missing)}")
        return d / "etcd", d / "kube-apiserver"

    async def start(self) -> None:
        etcd, apiserver = self.check()
        if self._procs:
            return
        work = self._work = Path(tempfile.mkdtemp(prefix="mcr-envtest-assets-"))
        client_port, peer_port = _free_port(), _free_port()
        self.port = self.port or _free_port()
        etcd_proc = await asyncio.create_subprocess_exec(
            str(etcd),
            f"--data-dir={work / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{client_port}",
            f"--advertise-client-urls=http://127.0.0.1:{client_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync=true",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        self._procs.append(etcd_proc)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        sa_key = work / "sa.key"
        sa_key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        tokens = work / "tokens.csv"
        tokens.write_text(f'{self.admin_token},envtest-admin,envtest-admin,"system:masters"\n')
        cert_dir = work / "certs"
        api_proc = await asyncio.create_subprocess_exec(
            str(apiserver),
            f"--etcd-servers=http://127.0.0.1:{client_port}",
            f"--cert-dir={cert_dir}",
            f"--secure-port={self.port}",
            "--bind-address=127.0.0.1",
            f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={sa_key}",
            f"--service-account-signing-key-file={sa_key}",
            "--service-account-issuer=https://envtest.local",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        self._procs.append(api_proc)
        self.ca_file = str(cert_dir / "apiserver.crt")
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # readiness probe only; clients verify with ca_file
        while loop.time() < deadline:
            for p in self._procs:
                if p.returncode is not None:
                    raise AssetsError(
                        f"{ENV}={self.directory}: a control-plane process exited ({p.returncode})"
                    )
            with contextlib.suppress(OSError):
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=ctx)
                writer.write(
                    b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                    b"Authorization: Bearer " + self.admin_token.encode() + b"\r\n\r\n"
                )
                data = await reader.read()
                writer.close()
                if b" 200 " in data.split(b"\r\n", 1)[0]:
                    return
            await asyncio.sleep(0.2)
        raise TimeoutError(f"{ENV}={self.directory}: kube-apiserver not ready on port {self.port}")

    async def stop(self) -> None:
        procs, self._procs = self._procs, []
        for p in reversed(procs):
            if p.returncode is None:
                p.terminate()
                try:
                    await asyncio.wait_for(p.wait(), 5)
                except TimeoutError:
                    p.kill()
                    await p.wait()
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)
            self._work = None
