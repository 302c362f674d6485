"""The ``multi`` provider: several providers composed into one fleet, added and removed at runtime."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from mcr.errors import ClusterNotFoundError, MCRError
from mcr.multicluster import ProviderRunnable
from mcr.providers.clusters import Extract
from mcr.providers.tasks import cancel_and_wait

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.multicluster import Aware, ClusterName, Provider

__all__ = ["MultiProvider", "ProviderFailedError"]

log = logging.getLogger("mcr.providers")


class ProviderFailedError(MCRError):
    """A required member of a :class:`MultiProvider` failed (its ``start`` raised or returned).

    ``provider_name`` names the member; the member's own exception is the ``__cause__``.
    """

    def __init__(self, provider_name: str, reason: str) -> None:
        self.provider_name = provider_name
        self.reason = reason
        super().__init__(f"provider {provider_name!r} of the multi provider failed: {reason}")


def _reason(exc: BaseException | None) -> str:
    if exc is None:
        return "its start() returned while it should run until cancelled"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _Member:
    def __init__(self, name: str, provider: Provider, required: bool) -> None:
        self.name = name
        self.provider = provider
        self.required = required
        self.runner: asyncio.Task[None] | None = None
        # Tasks currently inside aware.engage for one of this member's clusters.
        self.engagements: set[asyncio.Task[Any]] = set()


class _PrefixedAware:
    """The aware a member provider sees: renames its clusters and tracks their engagements."""

    def __init__(self, multi: MultiProvider, member: _Member, aware: Aware) -> None:
        self._multi = multi
        self._member = member
        self._aware = aware

    @property
    def cluster_name_prefix(self) -> str:
        """What the names of this member's clusters get in front in the fleet (``"prod#"``).

        Includes the prefixes of enclosing multi providers. Members name per-instance things
        after it (a private controller, say), so two members of one kind never clash.
        """
        outer = getattr(self._aware, "cluster_name_prefix", "")
        return f"{outer if isinstance(outer, str) else ''}{self._multi.join(self._member.name, '')}"

    @property
    def local_cluster(self) -> Cluster | None:
        """The local cluster of the aware the multi provider runs with (a manager's), if any.

        Members that read their fleet from a host cluster (Secrets, ClusterProfiles, namespaces)
        find it here, as they would on the manager itself.
        """
        local: Cluster | None = getattr(self._aware, "local_cluster", None)
        return local

    async def engage(self, name: ClusterName, cluster: Cluster) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._member.engagements.add(task)
        try:
            await self._aware.engage(self._multi.join(self._member.name, name), cluster)
        finally:
            self._member.engagements.discard(task)


class MultiProvider:
    """Composes named providers; their clusters are named ``"<provider><separator><cluster>"``.

    Providers may be added and removed before or while this one runs. Each member that is a
    :class:`~mcr.multicluster.ProviderRunnable` is started by :meth:`start` in its own task, with an
    aware that prefixes its cluster names (and offers that prefix as ``cluster_name_prefix``, from
    which members derive their default controller names). Removing a member cancels that task and
    every engagement it made (even ones a misbehaving member failed to cancel), and waits for them
    to end. Field indexes are applied to every current member and to members added later.

    A member whose ``start`` ends on its own (raises, or returns) is never dropped silently: it is
    removed the same way, logged, and listed by :meth:`failures` (and :meth:`check_ready`, which a
    :class:`~mcr.Manager` serves as its ``provider`` readiness check) until it is removed or added
    again. A *required* member (the default) also ends :meth:`start` with
    :class:`ProviderFailedError`, after stopping the others: the fleet the program composed cannot
    run in part without it saying so.
    """

    def __init__(self, *, separator: str = "#") -> None:
        if not separator:
            raise ValueError("the multi provider's separator must not be empty")
        self.separator = separator
        self._members: dict[str, _Member] = {}
        self._indexes: list[tuple[Any, str, Extract]] = []
        self._aware: Aware | None = None
        self._lock = asyncio.Lock()
        self._failures: dict[str, str] = {}
        # Set by a required member's failure while running: start() then stops and raises.
        self._fatal: asyncio.Future[tuple[str, BaseException | None]] | None = None

    def __repr__(self) -> str:
        return f"MultiProvider(providers={self.provider_names()!r})"

    def join(self, provider_name: str, cluster_name: ClusterName) -> ClusterName:
        """The fleet-wide name of ``cluster_name`` from the member ``provider_name``."""
        return f"{provider_name}{self.separator}{cluster_name}"

    def provider_names(self) -> list[str]:
        """The member names, sorted."""
        return sorted(self._members)

    def provider(self, name: str) -> Provider:
        """The member named ``name``; ``KeyError`` if there is none."""
        return self._members[name].provider

    async def add_provider(self, name: str, provider: Provider, *, required: bool = True) -> None:
        """Add a member; it is started at once if this provider runs.

        ``required``: if the member's ``start`` fails (or returns), :meth:`start` fails with
        :class:`ProviderFailedError`; pass ``False`` for a member the fleet may run without (its
        failure is then logged, listed by :meth:`failures` and fails :meth:`check_ready`).
        Raises ``ValueError`` if ``name`` is taken or contains the separator. The stored field
        indexes are registered with it first; if that raises (other than some of its clusters
        failing, which is logged), it is not added. Adding a name forgets its earlier failure.
        """
        if self.separator in name:
            raise ValueError(f"provider name {name!r} must not contain the separator {self.separator!r}")
        async with self._lock:
            if name in self._members:
                raise ValueError(f"a provider named {name!r} is already part of the multi provider")
            for kind, field, extract in self._indexes:
                try:
                    await provider.index_field(kind, field, extract)
                except ExceptionGroup as group:
                    # Registered, but some of its clusters could not be indexed yet (unreachable):
                    # the member retries those itself; adding it must not fail because of them.
                    log.warning(
                        "provider %r: indexing field %r failed on some clusters: %s", name, field, group
                    )
            member = _Member(name, provider, required)
            self._members[name] = member
            self._failures.pop(name, None)
            if self._aware is not None:
                self._spawn(member, self._aware)

    async def remove_provider(self, name: str) -> bool:
        """Remove a member and disengage all its clusters; waits until they are disengaged.

        Returns whether a member of that name existed (removing twice is harmless). Removing the
        name of a failed member forgets its failure (and returns ``False``).
        """
        async with self._lock:
            member = self._members.pop(name, None)
            self._failures.pop(name, None)
        if member is None:
            return False
        await self._stop(member)
        return True

    async def get(self, name: ClusterName) -> Cluster:
        """Split ``name`` at the first separator and ask that member for the rest.

        Raises :class:`~mcr.ClusterNotFoundError` naming the provider when there is no such member
        (or no separator), and passes the member's own error through otherwise.
        """
        provider_name, sep, inner = name.partition(self.separator)
        member = self._members.get(provider_name) if sep else None
        if member is None:
            raise ClusterNotFoundError(
                name,
                f"cluster {name!r} not found: no provider {provider_name!r} in the multi provider"
                f" (providers: {', '.join(self.provider_names()) or 'none'})",
            )
        return await member.provider.get(inner)

    async def index_field(self, kind: Any, field: str, extract: Extract) -> None:
        """Index ``field`` through every current member and every member added later.

        Failures of individual members are raised together as an ``ExceptionGroup`` after all
        members were tried; the index stays stored for future members.
        """
        async with self._lock:
            self._indexes.append((kind, field, extract))
            errors: list[Exception] = []
            for member in list(self._members.values()):
                try:
                    await member.provider.index_field(kind, field, extract)
                except Exception as exc:  # noqa: BLE001 -- reported below, per provider
                    exc.add_note(f"while indexing field {field!r} through provider {member.name!r}")
                    errors.append(exc)
            if errors:
                raise ExceptionGroup(f"indexing field {field!r} failed in some providers", errors)

    def failures(self) -> dict[str, str]:
        """Members whose ``start`` failed (or returned) and why, by name, until removed or re-added."""
        return dict(sorted(self._failures.items()))

    def check_ready(self) -> None:
        """Raise ``RuntimeError`` naming every member that failed (see :meth:`failures`).

        A readiness check: :class:`~mcr.Manager` serves it at ``/readyz`` as ``provider``.
        """
        if self._failures:
            raise RuntimeError(
                "; ".join(f"provider {name!r} failed: {why}" for name, why in self.failures().items())
            )

    async def start(self, aware: Aware) -> None:
        """Start every runnable member with a prefixing aware; runs until cancelled.

        Cancelling stops every member and disengages all their clusters before re-raising. A
        required member that fails stops every other member the same way, then
        :class:`ProviderFailedError` is raised. Raises ``RuntimeError`` if already running.
        """
        async with self._lock:
            if self._aware is not None:
                raise RuntimeError("the multi provider is already running")
            self._aware = aware
            fatal = self._fatal = asyncio.get_running_loop().create_future()
            for member in self._members.values():
                self._spawn(member, aware)
        try:
            name, exc = await fatal
        finally:
            async with self._lock:
                self._aware = None
                self._fatal = None
                members = list(self._members.values())
            for member in members:
                await self._stop(member)
        raise ProviderFailedError(name, _reason(exc)) from exc

    # -- internals -------------------------------------------------------------------------------

    def _spawn(self, member: _Member, aware: Aware) -> None:
        provider = member.provider
        if not isinstance(provider, ProviderRunnable):
            log.info("provider %r has no start(); its clusters are reachable through get() only", member.name)
            return
        member.runner = asyncio.create_task(
            self._run_member(member, provider, _PrefixedAware(self, member, aware)),
            name=f"mcr-multi-provider[{member.name}]",
        )

    async def _run_member(self, member: _Member, provider: ProviderRunnable, aware: Aware) -> None:
        error: Exception | None = None
        try:
            await provider.start(aware)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 -- recorded and reported below, never dropped
            error = exc
        # Ended on its own: forget it, disengage whatever it left engaged, and say so.
        member.runner = None
        if self._members.get(member.name) is member:
            del self._members[member.name]
            self._failures[member.name] = _reason(error)
        what = "a required provider" if member.required else "a provider"
        log.error(
            "%s of the multi provider failed; its clusters are disengaged: %r: %s",
            what,
            member.name,
            _reason(error),
            exc_info=error,
        )
        await cancel_and_wait(list(member.engagements))
        fatal = self._fatal
        if member.required and fatal is not None and not fatal.done():
            fatal.set_result((member.name, error))

    async def _stop(self, member: _Member) -> None:
        runner, member.runner = member.runner, None
        if runner is not None:
            await cancel_and_wait([runner])
        # Engagements the member did not end itself when it was cancelled.
        await cancel_and_wait(list(member.engagements))
