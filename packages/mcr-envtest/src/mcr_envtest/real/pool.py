"""A process-wide pool of warm real control planes over one etcd.

Starting kube-apiserver costs seconds of CPU, so servers in real mode borrow control planes from
:func:`default_pool`: :meth:`Pool.acquire` hands out an idle one with the wanted :class:`Spec`
(starting one only when none is idle or being reset), :meth:`Pool.release` resets it to its
baseline in a background thread and makes it idle again, :meth:`Pool.discard` kills it. A control
plane whose reset fails, or one started for a fixed port, is discarded instead of reused; at most
``MCR_ENVTEST_POOL_MAX`` (default 8) idle control planes are kept.

The pool, its etcd and its token webhook start on first use and end with :meth:`Pool.close`,
which runs at interpreter exit; its processes also die with this process when it is killed. Its
files are in one directory under the system's temporary directory (``mcr-envtest-real-<pid>-*``; kept
at close when ``MCR_ENVTEST_KEEP_LOGS`` is set, for the logs); such directories left by processes
that no longer exist are removed when a pool starts.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import shutil
import tempfile
import threading
from pathlib import Path

from . import binaries
from .binaries import Binaries
from .controlplane import ControlPlane, Spec
from .etcd import Etcd
from .procs import ControlPlaneError
from .webhook import TokenWebhook

__all__ = ["Pool", "default_pool"]

log = logging.getLogger("mcr_envtest.real")
_DIR_PREFIX = "mcr-envtest-real-"


class Pool:
    """Warm control planes keyed by :class:`Spec`; every method is thread-safe and blocking."""

    def __init__(self, bins: Binaries, *, max_idle: int | None = None) -> None:
        self.binaries = bins
        self.max_idle = max_idle if max_idle is not None else int(os.environ.get("MCR_ENVTEST_POOL_MAX", "8"))
        self._cond = threading.Condition()
        self._idle: list[ControlPlane] = []
        self._resetting: list[ControlPlane] = []
        self._all: list[ControlPlane] = []
        self._count = 0
        self._root: Path | None = None
        self._etcd: Etcd | None = None
        self._webhook: TokenWebhook | None = None
        self._resets: queue.SimpleQueue[ControlPlane | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._closed = False

    def _ensure_started(self) -> tuple[Etcd, TokenWebhook, Path]:
        # under self._cond
        if self._closed:
            raise ControlPlaneError("the real control-plane pool is closed")
        if self._etcd is None or self._webhook is None or self._root is None:
            _remove_stale_dirs()
            root = Path(tempfile.mkdtemp(prefix=f"{_DIR_PREFIX}{os.getpid()}-"))
            etcd = Etcd(self.binaries.etcd, root)
            try:
                etcd.start()
            except BaseException:
                shutil.rmtree(root, ignore_errors=True)
                raise
            self._root, self._etcd, self._webhook = root, etcd, TokenWebhook(root)
            self._worker = threading.Thread(target=self._reset_loop, name="mcr-envtest-reset", daemon=True)
            self._worker.start()
        return self._etcd, self._webhook, self._root

    @property
    def etcd(self) -> Etcd | None:
        """The pool's etcd (None before the first control plane)."""
        return self._etcd

    def acquire(self, spec: Spec) -> ControlPlane:
        """A ready control plane with ``spec``, in its fresh state, for the caller's sole use."""
        with self._cond:
            while True:
                etcd, webhook, root = self._ensure_started()
                if spec.port == 0:
                    cp = next((c for c in reversed(self._idle) if c.spec == spec), None)  # latest first
                    if cp is not None:
                        self._idle.remove(cp)
                        return cp
                    if any(c.spec == spec for c in self._resetting):
                        self._cond.wait()
                        continue
                self._count += 1
                name = f"mcr-cp-{self._count}"
                break
        cp = ControlPlane(name, self.binaries, spec, etcd, webhook, root / name)
        with self._cond:
            self._all.append(cp)
        try:
            cp.start()
        except BaseException:
            self.discard(cp)
            raise
        return cp

    def release(self, cp: ControlPlane) -> None:
        """Give ``cp`` back: it is reset in the background, then handed out again."""
        cp.bind(None)
        if cp.spec.port != 0 or not cp.running:
            self.discard(cp)
            return
        with self._cond:
            if self._closed:
                return
            self._resetting.append(cp)
        self._resets.put(cp)

    def discard(self, cp: ControlPlane) -> None:
        """Kill ``cp``'s processes and delete its objects; it is not handed out again."""
        with self._cond:
            for group in (self._idle, self._resetting, self._all):
                with contextlib.suppress(ValueError):
                    group.remove(cp)
            self._cond.notify_all()
        try:
            cp.destroy()
        except ControlPlaneError as exc:
            log.warning("discarding %s: %s", cp.name, exc)
        shutil.rmtree(cp.directory, ignore_errors=True)

    def _reset_loop(self) -> None:
        while True:
            cp = self._resets.get()
            if cp is None:
                return
            try:
                cp.reset()
            except ControlPlaneError as exc:
                if not self._closed:  # a closing pool kills control planes mid-reset
                    log.warning("%s could not be reset and is discarded: %s", cp.name, exc)
                self.discard(cp)
                continue
            with self._cond:
                if cp not in self._resetting:
                    continue
                self._resetting.remove(cp)
                keep = not self._closed and len(self._idle) < self.max_idle
                if keep:
                    self._idle.append(cp)
                self._cond.notify_all()
            if not keep:
                self.discard(cp)

    def idle(self) -> int:
        """How many control planes wait to be handed out (being reset included)."""
        with self._cond:
            return len(self._idle) + len(self._resetting)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no control plane is being reset; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._resetting, timeout)

    def close(self) -> None:
        """Kill every control plane and etcd and remove the pool's files (idempotent)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            cps, self._all, self._idle, self._resetting = list(self._all), [], [], []
            self._cond.notify_all()
        self._resets.put(None)
        for cp in cps:
            cp.kill()
        if self._webhook is not None:
            self._webhook.close()
        if self._etcd is not None:
            self._etcd.stop()
        if self._root is not None and not os.environ.get("MCR_ENVTEST_KEEP_LOGS"):
            shutil.rmtree(self._root, ignore_errors=True)


def _remove_stale_dirs() -> None:
    for path in Path(tempfile.gettempdir()).glob(f"{_DIR_PREFIX}*"):
        pid = path.name.removeprefix(_DIR_PREFIX).partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_pool: Pool | None = None
_pool_lock = threading.Lock()


def default_pool() -> Pool:
    """The pool of this process for the binaries :func:`binaries.find` names (which raises
    :class:`~mcr_envtest.real.binaries.AssetsError` when they are missing); made on first use."""
    global _pool
    bins = binaries.find()
    with _pool_lock:
        if _pool is None or _pool._closed or _pool.binaries != bins:
            _pool = Pool(bins)
            atexit.register(_pool.close)
        return _pool


def close_default_pool() -> None:
    """Close this process' pool if one was started (a later :func:`default_pool` makes a new one)."""
    with _pool_lock:
        pool = _pool
    if pool is not None:
        pool.close()
