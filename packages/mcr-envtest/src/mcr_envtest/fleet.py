"""Fleets: several independent servers, each with its own kubeconfig file.

A fleet writes ``<kubeconfig_dir>/<name>.kubeconfig`` for every running member (names are
``cluster-<i>``) and removes those files when the member is removed or the fleet stops; a
``kubeconfig_dir`` the fleet created itself is removed as a whole.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from . import kubeconfig
from .server import Server
from .server_thread import ServerThread

__all__ = ["Fleet", "FleetThread"]


def _kubeconfig_path(directory: Path, name: str) -> Path:
    return directory / f"{name}.kubeconfig"


class _Members:
    """Naming, kubeconfig files and directories shared by :class:`Fleet` and :class:`FleetThread`."""

    def __init__(
        self,
        kubeconfig_dir: str | os.PathLike[str] | None,
        state_dir: str | os.PathLike[str] | None,
        kwargs: dict[str, Any],
    ) -> None:
        self._own_dir = kubeconfig_dir is None
        self.kubeconfig_dir = (
            Path(kubeconfig_dir)
            if kubeconfig_dir is not None
            else Path(tempfile.mkdtemp(prefix="mcr-fleet-"))
        )
        self._state_dir = Path(state_dir) if state_dir is not None else None
        self._kwargs = kwargs
        self._next = 0

    def server_kwargs(self, name: str | None) -> dict[str, Any]:
        if name is None:
            name = f"cluster-{self._next}"
        self._next = max(self._next, _index(name) + 1)
        return {
            "name": name,
            "state_dir": (self._state_dir / name) if self._state_dir is not None else None,
            **self._kwargs,
        }

    def write(self, name: str, config: dict[str, Any]) -> Path:
        self.kubeconfig_dir.mkdir(parents=True, exist_ok=True)
        return kubeconfig.write(config, _kubeconfig_path(self.kubeconfig_dir, name))

    def unlink(self, name: str) -> None:
        _kubeconfig_path(self.kubeconfig_dir, name).unlink(missing_ok=True)

    def cleanup(self, names: list[str]) -> None:
        for name in names:
            self.unlink(name)
        if self._own_dir:
            shutil.rmtree(self.kubeconfig_dir, ignore_errors=True)


def _index(name: str) -> int:
    _, _, tail = name.rpartition("-")
    return int(tail) if tail.isdigit() else -1


class Fleet:
    """``n`` servers in the running loop; ``kubeconfig_dir`` holds ``cluster-<i>.kubeconfig``.

    ``async with Fleet(3) as fleet``; :attr:`servers` lists the running members. Keyword arguments
    go to every :class:`Server`; a ``state_dir`` gets one subdirectory per cluster (kept on stop).
    :meth:`add` and :meth:`remove` change a running fleet. Stopping stops all members and removes
    their kubeconfig files. Repeated ``stop()`` is a no-op.
    """

    def __init__(
        self,
        n: int,
        *,
        kubeconfig_dir: str | os.PathLike[str] | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self._members = _Members(kubeconfig_dir, state_dir, kwargs)
        self.kubeconfig_dir = self._members.kubeconfig_dir
        self.servers = [Server(**self._members.server_kwargs(None)) for _ in range(n)]
        self.kubeconfig_paths: list[Path] = []

    async def start(self) -> Fleet:
        await asyncio.gather(*(s.start() for s in self.servers))
        self.kubeconfig_paths = [self._members.write(s.name, s.kubeconfig) for s in self.servers]
        return self

    async def add(self, name: str | None = None) -> Server:
        """Start one more member (named ``cluster-<next index>`` unless ``name`` is given) and
        write its kubeconfig; returns it. A name already in use raises ValueError."""
        if name is not None and any(s.name == name for s in self.servers):
            raise ValueError(f"fleet already has a cluster named {name!r}")
        srv = Server(**self._members.server_kwargs(name))
        await srv.start()
        self.servers.append(srv)
        self.kubeconfig_paths.append(self._members.write(srv.name, srv.kubeconfig))
        return srv

    async def remove(self, name: str) -> None:
        """Stop the member ``name`` and delete its kubeconfig; KeyError names an unknown member."""
        srv = next((s for s in self.servers if s.name == name), None)
        if srv is None:
            raise KeyError(f"fleet has no cluster named {name!r}")
        self.servers.remove(srv)
        self._members.unlink(name)
        self.kubeconfig_paths = [p for p in self.kubeconfig_paths if p.name != f"{name}.kubeconfig"]
        await srv.close()

    async def stop(self) -> None:
        await asyncio.gather(*(s.close() for s in self.servers))
        self._members.cleanup([s.name for s in self.servers])

    def __getitem__(self, i: int) -> Server:
        return self.servers[i]

    def __len__(self) -> int:
        return len(self.servers)

    async def __aenter__(self) -> Fleet:
        return await self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


class FleetThread:
    """``n`` :class:`ServerThread` servers (each its own thread and loop); blocking controls.

    Same contract as :class:`Fleet` (kubeconfig files removed on close)."""

    def __init__(
        self,
        n: int,
        *,
        kubeconfig_dir: str | os.PathLike[str] | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self._members = _Members(kubeconfig_dir, state_dir, kwargs)
        self.kubeconfig_dir = self._members.kubeconfig_dir
        self.servers = [ServerThread(**self._members.server_kwargs(None)) for _ in range(n)]
        self.kubeconfig_paths: list[Path] = []

    def start(self) -> FleetThread:
        # together: in real mode each may have to start a control plane
        with concurrent.futures.ThreadPoolExecutor(len(self.servers) or 1) as pool:
            list(pool.map(ServerThread.start, self.servers))
        self.kubeconfig_paths = [self._members.write(s.name, s.kubeconfig) for s in self.servers]
        return self

    def close(self) -> None:
        for s in self.servers:
            s.close()
        self._members.cleanup([s.name for s in self.servers])

    stop = close

    def __getitem__(self, i: int) -> ServerThread:
        return self.servers[i]

    def __len__(self) -> int:
        return len(self.servers)

    def __enter__(self) -> FleetThread:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
