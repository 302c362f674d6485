"""One etcd for every real control plane of this process, and a client of its JSON gateway.

Each control plane keeps its objects under its own ``--etcd-prefix``, so one etcd serves any
number of them. :class:`KV` speaks etcd's v3 JSON gateway (``/v3/kv/range``, ``/v3/kv/txn``,
keys and values base64) over plain HTTP on loopback; the control planes' reset uses it.
"""

from __future__ import annotations

import base64
import http.client
import json
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .procs import PORT_ATTEMPTS, Child, ControlPlaneError, port_taken, reserve_port, spawn

__all__ = ["KV", "Entry", "Etcd"]

_TXN_OPS = 128  # etcd's default --max-txn-ops


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _prefix_end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


@dataclass(frozen=True)
class Entry:
    """One key's modification revision and (unless read keys-only) value."""

    mod_revision: int
    value: bytes


class KV:
    """A small client of etcd's JSON gateway (one persistent connection, thread-safe).

    Every method raises :class:`~mcr_envtest.real.procs.ControlPlaneError` naming etcd when a
    request fails.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self._lock = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None

    def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        with self._lock:
            for attempt in (1, 2):
                if self._conn is None:
                    self._conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                try:
                    self._conn.request("POST", path, data, {"Content-Type": "application/json"})
                    resp = self._conn.getresponse()
                    text = resp.read()
                except (OSError, http.client.HTTPException) as exc:
                    self._conn.close()
                    self._conn = None
                    if attempt == 2:
                        raise ControlPlaneError(f"etcd on 127.0.0.1:{self.port}: {path}: {exc}") from None
                    continue
                if resp.status != 200:
                    why = f"{resp.status} {text[:300]!r}"
                    raise ControlPlaneError(f"etcd on 127.0.0.1:{self.port}: {path}: {why}")
                result: dict[str, Any] = json.loads(text)
                return result
        raise AssertionError("unreachable")

    def range(self, prefix: bytes, *, keys_only: bool = False) -> dict[bytes, Entry]:
        """Every key under ``prefix`` with its entry (values empty when ``keys_only``)."""
        reply = self._call(
            "/v3/kv/range",
            {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix)), "keys_only": keys_only},
        )
        return {
            base64.b64decode(kv["key"]): Entry(
                int(kv.get("mod_revision", 0)), base64.b64decode(kv.get("value", ""))
            )
            for kv in reply.get("kvs") or []
        }

    def apply(self, deletes: list[bytes], puts: dict[bytes, bytes]) -> int:
        """Delete ``deletes`` and write ``puts`` in transactions of at most 128 operations;
        returns etcd's revision after the last one (0 when there was nothing to do)."""
        ops: list[dict[str, Any]] = [{"request_delete_range": {"key": _b64(k)}} for k in deletes]
        ops += [{"request_put": {"key": _b64(k), "value": _b64(v)}} for k, v in puts.items()]
        revision = 0
        for i in range(0, len(ops), _TXN_OPS):
            reply = self._call("/v3/kv/txn", {"success": ops[i : i + _TXN_OPS]})
            revision = int((reply.get("header") or {}).get("revision", 0))
        return revision

    def delete_prefix(self, prefix: bytes) -> None:
        """Delete every key under ``prefix``."""
        self._call("/v3/kv/deleterange", {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix))})

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class Etcd:
    """An etcd process on loopback with its data in ``directory/etcd`` and its log beside it.

    :meth:`start` raises :class:`ControlPlaneError` (naming etcd and its log) when it exits or
    does not answer within ``timeout`` seconds; :meth:`stop` stops it and removes its data.
    """

    def __init__(self, binary: Path, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.port = 0
        self.child: Child | None = None
        self.kv: KV | None = None
        self._ports: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self._start(timeout)
                return
            except ControlPlaneError as exc:
                if attempt == PORT_ATTEMPTS or not port_taken(exc):
                    raise
                self.stop()

    def _start(self, timeout: float) -> None:
        self._release_ports()
        self._ports = [reserve_port(), reserve_port()]  # held while etcd runs: see reserve_port
        self.port, peer = (int(s.getsockname()[1]) for s in self._ports)
        data = self.directory / "etcd"
        self.child = spawn(
            "etcd",
            [
                str(self.binary),
                "--name=mcr-envtest",
                f"--data-dir={data}",
                f"--listen-client-urls={self.url}",
                f"--advertise-client-urls={self.url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=mcr-envtest=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            self.directory / "etcd.log",
        )
        self.kv = KV(self.port)
        deadline = time.monotonic() + timeout
        while True:
            self.child.check()
            try:
                self.kv.range(b"/mcr-envtest-probe", keys_only=True)
                return
            except ControlPlaneError:
                if time.monotonic() > deadline:
                    self.child.kill()
                    raise ControlPlaneError(
                        f"etcd did not answer on {self.url} within {timeout:g}s; log {self.child.log}"
                    ) from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.kv is not None:
            self.kv.close()
        if self.child is not None:
            self.child.stop(5.0)
            self.child = None
        self._release_ports()
        shutil.rmtree(self.directory / "etcd", ignore_errors=True)

    def _release_ports(self) -> None:
        for sock in self._ports:
            sock.close()
        self._ports = []
