"""Child processes of the real control plane: started to die with this process, logged to files.

Every binary is started from one long-lived spawner thread with ``PR_SET_PDEATHSIG`` = SIGKILL
(Linux): the kernel kills the child when the thread that forked it ends, and that thread ends only
with this process, so no etcd or kube-apiserver outlives a test run that was killed. Each child
writes its stdout and stderr to one log file; a child that exits early is reported with the tail
of that file. :meth:`Child.stop` sends SIGTERM, then SIGKILL after a timeout.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import ctypes.util
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["PORT_ATTEMPTS", "Child", "ControlPlaneError", "port_taken", "reserve_port", "spawn", "tail"]

_PR_SET_PDEATHSIG = 1


class ControlPlaneError(RuntimeError):
    """A real control-plane process could not be started or served nothing; the message names the
    binary and quotes the end of its log."""


# A port handed to a binary is reserved (see reserve_port) for as long as the binary may listen on
# it. Should a start still find its port taken, it is tried again on new ports.
PORT_ATTEMPTS = 3


def reserve_port(port: int = 0) -> socket.socket:
    """A socket bound to 127.0.0.1:``port`` (0: a free port) with ``SO_REUSEADDR``, not listening.

    While it is open no other socket can take the port (another process's outgoing connection
    included), yet a binary that binds the port with ``SO_REUSEADDR``, as every Go listener does,
    listens on it beside this socket; connections are refused while none listens. The caller owns
    the socket and closes it once the port is no longer the binary's.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


def port_taken(exc: ControlPlaneError) -> bool:
    """Whether the process ``exc`` reports exited because a port given to it was in use."""
    return "address already in use" in str(exc)


def tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file (empty when it cannot be read)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _die_with_parent_fn() -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int

    def preexec() -> None:  # runs in the forked child: only the prepared foreign call
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return preexec


_Job = tuple[Callable[[], subprocess.Popen[bytes]], "concurrent.futures.Future[subprocess.Popen[bytes]]"]


class _Spawner:
    """The thread that forks every child (PDEATHSIG follows the forking thread's life)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def run(self, fn: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="mcr-envtest-spawner", daemon=True)
                self._thread.start()
        fut: concurrent.futures.Future[subprocess.Popen[bytes]] = concurrent.futures.Future()
        self._jobs.put((fn, fut))
        return fut.result()

    def _loop(self) -> None:
        while True:
            fn, fut = self._jobs.get()
            try:
                fut.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 (handed to the caller waiting on the future)
                fut.set_exception(exc)


_spawner = _Spawner()
_preexec = _die_with_parent_fn()


class Child:
    """One running binary; :attr:`log` is its log file."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], log: Path) -> None:
        self.name = name
        self.popen = popen
        self.log = log

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def check(self) -> None:
        """Raise :class:`ControlPlaneError` (with the log's tail) when the process has exited."""
        code = self.popen.poll()
        if code is not None:
            raise ControlPlaneError(self.exited_message(code))

    def exited_message(self, code: int) -> str:
        return f"{self.name} exited with status {code}; log {self.log}:\n{tail(self.log)}"

    def cpu_seconds(self) -> float:
        """User + system CPU time the process has used so far (0.0 when unknown)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_bytes(self) -> int:
        """Resident set size in bytes (0 when unknown)."""
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL when it has not exited after ``timeout`` seconds; waits for it.
        Idempotent."""
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def kill(self) -> None:
        """SIGKILL without waiting for a clean shutdown (idempotent)."""
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()


def spawn(name: str, argv: Sequence[str], log: Path, *, cwd: Path | None = None) -> Child:
    """Start ``argv`` with stdout and stderr appended to ``log``; it dies with this process."""
    log.parent.mkdir(parents=True, exist_ok=True)

    def start() -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            out.write(f"--- {time.strftime('%H:%M:%S')} {' '.join(argv)}\n".encode())
            out.flush()
            return subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                preexec_fn=_preexec,
                start_new_session=True,
                close_fds=True,
            )

    try:
        popen = _spawner.run(start)
    except OSError as exc:
        raise ControlPlaneError(f"cannot start {name} ({argv[0]}): {exc}") from None
    return Child(name, popen, log)
