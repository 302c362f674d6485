"""Controlling a running ``mcr-envtest fleet up --dir D`` from another process.

The running fleet keeps ``D/fleet.json`` (its pid, its control socket and its clusters: name,
URL, kubeconfig path) up to date and listens on a Unix socket for one-line JSON requests:
``{"op": "add", "name": N?}``, ``{"op": "remove", "name": N}``, ``{"op": "status"}`` and
``{"op": "down"}``; each gets one JSON line back, ``{"ok": true, ...}`` or ``{"ok": false,
"error": "..."}``. On stop the fleet removes its kubeconfigs, ``fleet.json`` and the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from .fleet import Fleet
from .real import ControlPlaneError

__all__ = ["STATE_FILE", "FleetControlError", "request", "run", "state_of", "wait_stopped"]

STATE_FILE = "fleet.json"
_MAX_SOCKET_PATH = 100  # sun_path is 104-108 bytes depending on the platform


class FleetControlError(Exception):
    """A control request could not be delivered or was refused; the message says why."""


def state_of(directory: Path) -> dict[str, Any]:
    """The state a running fleet wrote in ``directory``; FleetControlError when there is none or
    its process is gone (a stale file left by a killed fleet is removed)."""
    path = directory / STATE_FILE
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise FleetControlError(f"no running fleet in {directory} (no {STATE_FILE})") from None
    except (OSError, ValueError) as exc:
        raise FleetControlError(f"{path}: unreadable fleet state: {exc}") from None
    if not _alive(int(state.get("pid", 0))):
        path.unlink(missing_ok=True)
        raise FleetControlError(f"no running fleet in {directory} (process {state.get('pid')} is gone)")
    return state


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def request(directory: Path, message: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """Send one control request to the fleet running in ``directory`` and return its reply.

    Raises FleetControlError when no fleet runs there, it cannot be reached, or it refused."""
    state = state_of(directory)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(state["socket"]), timeout)
    except (OSError, TimeoutError, KeyError) as exc:
        raise FleetControlError(f"cannot reach the fleet in {directory}: {exc}") from None
    try:
        writer.write(json.dumps(message).encode() + b"\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
    except (OSError, TimeoutError) as exc:
        raise FleetControlError(f"the fleet in {directory} did not answer: {exc!r}") from None
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    try:
        reply: dict[str, Any] = json.loads(line)
    except ValueError:
        raise FleetControlError(f"the fleet in {directory} sent no reply") from None
    if not reply.get("ok"):
        raise FleetControlError(str(reply.get("error", "refused")))
    return reply


async def wait_stopped(pid: int, timeout: float) -> bool:
    """Poll until process ``pid`` has exited (True) or ``timeout`` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


class _Controller:
    """The running side: a fleet, its state file and its control socket."""

    def __init__(self, fleet: Fleet, directory: Path) -> None:
        self.fleet = fleet
        self.directory = directory
        self.stop = asyncio.Event()
        self._lock = asyncio.Lock()
        path = directory / "control.sock"
        if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
            path = Path(tempfile.mkdtemp(prefix="mcr-fleet-ctl-")) / "control.sock"
        self.socket_path = path

    def clusters(self) -> list[dict[str, str]]:
        return [
            {"name": s.name, "url": s.url, "kubeconfig": str(self.directory / f"{s.name}.kubeconfig")}
            for s in self.fleet.servers
        ]

    def write_state(self) -> None:
        state = {"pid": os.getpid(), "socket": str(self.socket_path), "clusters": self.clusters()}
        tmp = self.directory / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, self.directory / STATE_FILE)

    def remove_state(self) -> None:
        (self.directory / STATE_FILE).unlink(missing_ok=True)
        self.socket_path.unlink(missing_ok=True)
        if self.socket_path.parent != self.directory:
            with contextlib.suppress(OSError):
                self.socket_path.parent.rmdir()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                reply = await self._answer(json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                reply = {"ok": False, "error": f"bad request: {exc}"}
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except OSError:
            pass  # the requester went away
        finally:
            writer.close()

    async def _answer(self, msg: dict[str, Any]) -> dict[str, Any]:
        op = msg.get("op")
        async with self._lock:
            if op == "add":
                try:
                    srv = await self.fleet.add(msg.get("name"))
                except (ValueError, OSError, ControlPlaneError) as exc:
                    return {"ok": False, "error": str(exc)}
                self.write_state()
                return {"ok": True, "cluster": next(c for c in self.clusters() if c["name"] == srv.name)}
            if op == "remove":
                try:
                    await self.fleet.remove(str(msg["name"]))
                except KeyError as exc:
                    return {"ok": False, "error": str(exc.args[0])}
                self.write_state()
                return {"ok": True}
            if op == "status":
                return {"ok": True, "clusters": self.clusters()}
            if op == "down":
                self.stop.set()
                return {"ok": True}
        return {"ok": False, "error": f"unknown operation {op!r}"}


async def run(fleet: Fleet, directory: Path, *, announce: Any = print) -> None:
    """Start ``fleet``, write its state in ``directory`` and serve control requests until SIGINT,
    SIGTERM or a ``down`` request; then stop everything and remove the state. Cancellation stops
    the fleet too."""
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    ctl = _Controller(fleet, directory)
    await fleet.start()
    server: asyncio.base_events.Server | None = None
    loop = asyncio.get_running_loop()
    try:
        ctl.socket_path.unlink(missing_ok=True)
        server = await asyncio.start_unix_server(ctl.handle, path=str(ctl.socket_path))
        ctl.write_state()
        for c in ctl.clusters():
            announce(f"{c['name']}: {c['url']} kubeconfig: {c['kubeconfig']}")
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, ctl.stop.set)
        await ctl.stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if server is not None:
            server.close()
            await server.wait_closed()
        ctl.remove_state()
        await fleet.stop()
