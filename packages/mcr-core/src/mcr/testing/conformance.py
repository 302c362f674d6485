"""The provider conformance suite: one check every provider's tests run.

:func:`check_provider` drives a provider with a :class:`RecordingAware` and checks the contract of
:class:`~mcr.multicluster.Provider` and :class:`~mcr.multicluster.ProviderRunnable`:

* clusters present at start, and clusters that appear later, are engaged;
* ``get(name)`` returns the very cluster object that was engaged;
* unknown names raise :class:`~mcr.ClusterNotFoundError` (which is also a ``LookupError``);
* a cluster that vanishes is disengaged (its engage call is cancelled) and no longer found;
* a cluster that changes is re-engaged with a new cluster object, the old engagement cancelled;
* ``index_field`` reaches every current cluster and every cluster that appears afterwards;
* cancelling ``start`` disengages everything and propagates the cancellation.

The test supplies how clusters appear, change and vanish for its provider (write a kubeconfig
file, call ``add``, …) and how to tell that a field index reached a cluster. A provider
distribution's test, with the ``fleet`` fixture of mcr-envtest::

    async def test_conformance(fleet, tmp_path):
        servers = fleet(3).servers
        provider = MyProvider(...)

        async def add() -> str:          # make a cluster appear; return the name it will get
            ...
        async def change(name) -> None:  # e.g. point it at another server
            ...
        async def remove(name) -> None:
            ...

        await check_provider(provider, add_cluster=add, change_cluster=change, remove_cluster=remove)
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcr.errors import ClusterNotFoundError
from mcr.testing._eventually import eventually

if TYPE_CHECKING:
    from mcr.cluster import Cluster

__all__ = [
    "IndexProbe",
    "RecordedEngagement",
    "RecordingAware",
    "cache_index_probe",
    "check_provider",
    "index_extract",
]


@dataclass(eq=False)
class RecordedEngagement:
    """One ``engage`` call seen by a :class:`RecordingAware`; ``ended`` once it was cancelled."""

    name: str
    cluster: Cluster
    ended: bool = False


class RecordingAware:
    """An :class:`~mcr.multicluster.Aware` that records engagements and holds each until cancelled.

    ``engaged`` maps each currently engaged name to its cluster; ``history`` lists every engagement
    in order. ``engage`` never returns on its own: it waits until cancelled, marks the engagement
    ended and re-raises the cancellation, as the contract requires.
    """

    def __init__(self) -> None:
        self.engaged: dict[str, Cluster] = {}
        self.history: list[RecordedEngagement] = []
        self.changed = asyncio.Event()

    async def engage(self, name: str, cluster: Cluster) -> None:
        record = RecordedEngagement(name, cluster)
        self.history.append(record)
        self.engaged[name] = cluster
        self.changed.set()
        try:
            await asyncio.Future()
        finally:
            record.ended = True
            if self.engaged.get(name) is cluster:
                del self.engaged[name]
            self.changed.set()

    def engagements(self, name: str) -> list[RecordedEngagement]:
        """Every engagement of ``name`` so far, oldest first."""
        return [e for e in self.history if e.name == name]

    def active(self, name: str) -> list[RecordedEngagement]:
        """The engagements of ``name`` not yet cancelled (more than one is a contract violation)."""
        return [e for e in self.history if e.name == name and not e.ended]


IndexProbe = Callable[["Cluster", str], Awaitable[bool]]
"""``probe(cluster, field)`` → whether an index on ``field`` registered through the provider works
on ``cluster``. The suite registers the index on ``"v1/ConfigMap"`` with an extractor that reads
``metadata.labels["mcr.conformance/index"]``."""

INDEX_KIND = "v1/ConfigMap"
INDEX_LABEL = "mcr.conformance/index"
INDEX_OBJECT = "mcr-conformance-index"


def index_extract(obj: Any) -> list[str]:
    """The extractor the suite indexes with: the value of the ``mcr.conformance/index`` label."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    value = labels.get(INDEX_LABEL)
    return [value] if value else []


async def cache_index_probe(cluster: Cluster, field: str) -> bool:
    """Whether ``field`` is indexed (with :func:`index_extract`) in ``cluster``'s cache.

    Creates (once) a ConfigMap ``mcr-conformance-index`` labelled for the index in namespace
    ``default`` through the cluster's client, then selects it from the cache by the indexed field.
    A cache without that index refuses the field selector (``ValueError``): the probe is false.
    """
    from mcr.errors import AlreadyExistsError

    with contextlib.suppress(AlreadyExistsError):
        await cluster.client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": INDEX_OBJECT, "namespace": "default", "labels": {INDEX_LABEL: "yes"}},
            }
        )
    try:
        found = await cluster.cache.list(INDEX_KIND, namespace="default", field_selector={field: "yes"})
    except ValueError:
        return False
    return any(_name_of(obj) == INDEX_OBJECT for obj in found)


def _name_of(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return str(meta.get("name")) if isinstance(meta, dict) else str(getattr(obj.metadata, "name", ""))


async def check_provider(
    provider: Any,
    *,
    existing: Sequence[str] = (),
    add_cluster: Callable[[], Awaitable[str]] | None = None,
    change_cluster: Callable[[str], Awaitable[None]] | None = None,
    remove_cluster: Callable[[str], Awaitable[None]] | None = None,
    index_probe: IndexProbe | None = cache_index_probe,
    timeout: float = 15.0,
) -> None:
    """Check that ``provider`` (a Provider and ProviderRunnable, not yet started) keeps the contract.

    ``existing``: names the provider has before it starts. ``add_cluster()`` makes a new cluster
    appear and returns the name the provider will give it; ``change_cluster(name)`` changes it so
    the provider must hand out a new cluster object; ``remove_cluster(name)`` makes it vanish. Pass
    ``None`` for what the provider cannot do (a single cluster never changes): those checks are
    skipped, but at least one cluster must exist (``existing`` or ``add_cluster``). ``index_probe``
    tells whether the suite's field index reached a cluster (default :func:`cache_index_probe`,
    which needs reachable clusters); with ``None`` the index checks only require ``index_field``
    to succeed. Raises ``AssertionError`` describing the first violation.
    Starts the provider itself and cancels it at the end (also on failure).
    """
    if not existing and add_cluster is None:
        raise ValueError("check_provider needs existing clusters or add_cluster")
    aware = RecordingAware()
    runner = asyncio.create_task(provider.start(aware), name="mcr-conformance-provider")
    try:
        await _check(provider, aware, runner, existing, add_cluster, change_cluster, remove_cluster,
                     index_probe, timeout)  # fmt: skip
    finally:
        if not runner.done():
            runner.cancel()
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(runner), timeout)
        except TimeoutError:
            raise AssertionError(
                f"provider.start() did not end within {timeout}s of its cancellation"
            ) from None
    # Stopping the provider disengaged everything.
    leftover = [e.name for e in aware.history if not e.ended]
    assert not leftover, f"clusters still engaged after the provider was cancelled: {leftover}"
    assert runner.cancelled(), "provider.start() swallowed its cancellation instead of re-raising it"


async def _check(
    provider: Any,
    aware: RecordingAware,
    runner: asyncio.Task[None],
    existing: Sequence[str],
    add_cluster: Callable[[], Awaitable[str]] | None,
    change_cluster: Callable[[str], Awaitable[None]] | None,
    remove_cluster: Callable[[str], Awaitable[None]] | None,
    index_probe: IndexProbe | None,
    timeout: float,
) -> None:
    def running() -> None:
        if runner.done():
            runner.result()  # raises the provider's error
            raise AssertionError("provider.start() returned while it should run until cancelled")

    async def engaged(name: str) -> Cluster:
        def check() -> Cluster | None:
            running()
            return aware.engaged.get(name)

        cluster: Cluster | None = await eventually(
            check, timeout=timeout, message=f"cluster {name!r} engaged"
        )
        assert cluster is not None
        assert len(aware.active(name)) == 1, f"cluster {name!r} engaged more than once at a time"
        got: object = await provider.get(name)
        assert got is cluster, f"get({name!r}) returned another object than the engaged cluster"
        return cluster

    async def indexed(cluster: Cluster, name: str) -> None:
        if index_probe is not None:
            probe = index_probe

            async def check() -> bool:
                return await probe(cluster, "conformance")

            await eventually(
                check,
                timeout=timeout,
                message=f"field index applied to cluster {name!r}",
            )

    async def not_found(name: str) -> None:
        try:
            await provider.get(name)
        except ClusterNotFoundError:
            return
        except LookupError as exc:
            raise AssertionError(f"get({name!r}) raised {exc!r}, not a ClusterNotFoundError") from exc
        raise AssertionError(f"get({name!r}) should raise ClusterNotFoundError")

    # Engage on start, and on appear.
    names = list(existing)
    for name in existing:
        await engaged(name)
    if add_cluster is not None:
        names.append(await add_cluster())
        await engaged(names[-1])

    # Unknown names.
    await not_found("mcr-conformance-no-such-cluster")
    await not_found(names[0] + "-no-such-cluster")

    # index_field reaches the current clusters...
    await provider.index_field(INDEX_KIND, "conformance", index_extract)
    for name in names:
        await indexed(aware.engaged[name], name)

    # ...and the future ones.
    if add_cluster is not None:
        later = await add_cluster()
        assert later not in names, f"add_cluster returned the name {later!r} twice"
        cluster = await engaged(later)
        await indexed(cluster, later)
        names.append(later)

    # Re-engage on change: a new object replaces the old, whose engagement is cancelled.
    if change_cluster is not None:
        name = names[-1]
        old = aware.engaged[name]
        await change_cluster(name)

        def replaced() -> bool:
            running()
            new = aware.engaged.get(name)
            return new is not None and new is not old

        await eventually(replaced, timeout=timeout, message=f"cluster {name!r} re-engaged after a change")
        old_engagements = [e for e in aware.engagements(name) if e.cluster is old]
        assert all(e.ended for e in old_engagements), f"old engagement of {name!r} not cancelled"
        new = await engaged(name)
        await indexed(new, name)

    # Disengage on vanish.
    if remove_cluster is not None:
        name = names.pop()
        gone = aware.engaged[name]
        await remove_cluster(name)

        def disengaged() -> bool:
            running()
            return all(e.ended for e in aware.engagements(name)) and name not in aware.engaged

        await eventually(disengaged, timeout=timeout, message=f"cluster {name!r} disengaged after removal")
        await not_found(name)
        # The others are untouched.
        for other in names:
            assert other in aware.engaged, f"removing {name!r} disengaged {other!r} too"
        assert all(e.cluster is not gone or e.ended for e in aware.history)

    running()


def __getattr__(name: str) -> Any:
    if name == "Engagement":  # RecordedEngagement's former name, kept for one release
        warnings.warn(
            f"{__name__}.Engagement is deprecated; use {__name__}.RecordedEngagement",
            DeprecationWarning,
            stacklevel=2,
        )
        return RecordedEngagement
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
