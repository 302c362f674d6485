"""Fleets: several independent servers, each with its own kubeconfig file."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from . import kubeconfig
from .server import Server, ServerThread

__all__ = ["Fleet", "FleetThread"]


def _write_kubeconfigs(directory: Path, configs: list[dict[str, Any]]) -> list[Path]:
    return [kubeconfig.write(cfg, directory / f"cluster-{i}.kubeconfig") for i, cfg in enumerate(configs)]


class Fleet:
    """``n`` servers in the running loop; ``kubeconfig_dir`` holds ``cluster-<i>.kubeconfig``.

    ``async with Fleet(3) as fleet``; :attr:`servers` lists them. Keyword arguments go to every
    :class:`Server`; a ``state_dir`` gets one subdirectory per cluster. Stopping stops all.
    """

    def __init__(
        self,
        n: int,
        *,
        kubeconfig_dir: str | os.PathLike[str] | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.kubeconfig_dir = (
            Path(kubeconfig_dir) if kubeconfig_dir else Path(tempfile.mkdtemp(prefix="mcr-fleet-"))
        )
        self.servers = [
            Server(
                name=f"cluster-{i}",
                state_dir=(Path(state_dir) / f"cluster-{i}") if state_dir else None,
                **kwargs,
            )
            for i in range(n)
        ]
        self.kubeconfig_paths: list[Path] = []

    async def start(self) -> Fleet:
        await asyncio.gather(*(s.start() for s in self.servers))
        self.kubeconfig_paths = _write_kubeconfigs(self.kubeconfig_dir, [s.kubeconfig for s in self.servers])
        return self

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.servers))

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
    """``n`` :class:`ServerThread` servers (each its own thread and loop); blocking controls."""

    def __init__(
        self,
        n: int,
        *,
        kubeconfig_dir: str | os.PathLike[str] | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.kubeconfig_dir = (
            Path(kubeconfig_dir) if kubeconfig_dir else Path(tempfile.mkdtemp(prefix="mcr-fleet-"))
        )
        self.servers = [
            ServerThread(
                name=f"cluster-{i}",
                state_dir=(Path(state_dir) / f"cluster-{i}") if state_dir else None,
                **kwargs,
            )
            for i in range(n)
        ]
        self.kubeconfig_paths: list[Path] = []

    def start(self) -> FleetThread:
        for s in self.servers:
            s.start()
        self.kubeconfig_paths = _write_kubeconfigs(self.kubeconfig_dir, [s.kubeconfig for s in self.servers])
        return self

    def close(self) -> None:
        for s in self.servers:
            s.close()

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
