"""The kind provider: every kind cluster whose name has the prefix is a cluster.

The provider lists clusters with ``kind get clusters`` every ``poll_interval`` seconds (2 s, as
upstream), reads each one's kubeconfig with ``kind get kubeconfig --name N`` and engages the
clusters whose name starts with ``prefix``, named as kind names them. A cluster that vanishes is
disengaged; one whose kubeconfig changes (deleted and re-created under the same name, say) is
rebuilt and re-engaged; an unchanged kubeconfig keeps the engaged cluster.

The ``kind`` command runs as a subprocess, never blocking the event loop, bounded by
``command_timeout``. If the first listing fails, :meth:`KindProvider.start` raises (a missing
``kind`` binary is a :class:`KindNotFoundError` saying how to fix it); later failures are logged
once per distinct error and the poll goes on with the clusters it has. A cluster whose kubeconfig
cannot be read or used is reported — logged once, listed by :meth:`KindProvider.problems` — and
never affects the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcr.cluster import Cluster
from mcr.providers import SourcedProvider, cancel_and_wait, fingerprint
from mcr.providers.sourced import ClusterFactory
from mcr.rest.config import RestConfig
from mcr_provider_kind._cli import KindError, resolve, run

if TYPE_CHECKING:
    from mcr.multicluster import Aware

__all__ = ["KindProvider"]

log = logging.getLogger("mcr.providers.kind")


class KindProvider(SourcedProvider):
    """Clusters from the local kind clusters whose name starts with ``prefix`` (see the module docs).

    ``poll_interval``: seconds between listings (2.0); ``kind_command``: the kind executable (a
    name on ``PATH`` or a path); ``command_timeout``: seconds a kind command may take (30).
    ``cluster_options`` are passed to each :class:`mcr.Cluster`; ``cluster_factory(config, name)``
    replaces that call altogether.

    Constructed directly or through ``mcr.providers.create("kind", ...)``.
    """

    def __init__(
        self,
        prefix: str = "",
        poll_interval: float = 2.0,
        *,
        kind_command: str = "kind",
        command_timeout: float = 30.0,
        cluster_options: Mapping[str, Any] | None = None,
        cluster_factory: ClusterFactory | None = None,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, got {poll_interval!r}")
        self.prefix = prefix
        self.poll_interval = poll_interval
        self.kind_command = kind_command
        self.command_timeout = command_timeout
        super().__init__(
            provider="kind", logger=log, cluster_options=cluster_options, cluster_factory=cluster_factory
        )
        self._last_error: str | None = None

    def __repr__(self) -> str:
        return f"KindProvider(prefix={self.prefix!r}, poll_interval={self.poll_interval!r})"

    # -- running ---------------------------------------------------------------------------------

    async def start(self, aware: Aware) -> None:
        """List kind clusters every ``poll_interval`` seconds and engage them with ``aware``.

        Raises :class:`KindNotFoundError` / :class:`KindError` when the first listing fails.
        Cancelling disengages every cluster and re-raises ``CancelledError``.
        """
        command = resolve(self.kind_command)
        await self.refresh(command, raise_errors=True)
        engaged = asyncio.get_running_loop().create_task(self.sourced.run(aware), name="mcr-kind-clusters")
        try:
            while True:
                await asyncio.sleep(self.poll_interval)
                if engaged.done():
                    engaged.result()
                await self.refresh(command)
        finally:
            await cancel_and_wait([engaged])

    # -- polling ---------------------------------------------------------------------------------

    async def refresh(self, command: str | None = None, *, raise_errors: bool = False) -> None:
        """List the kind clusters once and engage, re-engage or disengage to match."""
        command = command or resolve(self.kind_command)
        try:
            listing = await run(command, "get", "clusters", timeout=self.command_timeout)
        except KindError as exc:
            if raise_errors:
                raise
            self._report(str(exc))
            return
        self._report(None)
        names = {line.strip() for line in listing.splitlines() if line.strip().startswith(self.prefix)}
        names.discard("")
        for gone in set(self.sourced.names()) - names:
            await self.sourced.discard(gone, why=f"kind cluster {gone!r} no longer exists")
        for stale in {p.cluster for p in self.sourced.problems()} - names:
            await self.sourced.discard(stale)
        # A task group, not gather: cancelled, it waits until every kind command is killed and reaped.
        async with asyncio.TaskGroup() as group:
            for name in sorted(names):
                group.create_task(self._read(command, name), name=f"mcr-kind-read-{name}")

    async def _read(self, command: str, name: str) -> None:
        source = f"kind cluster {name!r}"
        try:
            text = await run(command, "get", "kubeconfig", "--name", name, timeout=self.command_timeout)
        except KindError as exc:
            await self.sourced.reject(name, source=source, reason=str(exc))
            return

        async def build() -> Cluster:
            config = await RestConfig.from_kubeconfig_data_async(
                text, source=f"from `kind get kubeconfig --name {name}`"
            )
            return self.make_cluster(config, name)

        await self.sourced.apply(name, source=source, fingerprint=fingerprint(text), build=build)

    def _report(self, error: str | None) -> None:
        if error is not None and error != self._last_error:
            log.warning("kind provider: listing clusters failed (keeping the clusters it has): %s", error)
        elif error is None and self._last_error is not None:
            log.info("kind provider: listing clusters works again")
        self._last_error = error
