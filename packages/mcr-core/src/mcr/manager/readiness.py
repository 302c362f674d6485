"""The manager's default ``/readyz`` checks: ``caches-synced`` and ``provider-started``.

A check raises with the reason it fails (see :mod:`mcr.manager.probes`); both fail until the
manager has started, so a probe never reports ready before the manager could do its work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcr.cluster import Cluster

__all__ = ["caches_synced", "provider_started"]

_SHOWN = 5


def caches_synced(
    started: Callable[[], bool], clusters: Callable[[], Iterable[tuple[str, Cluster]]]
) -> Callable[[], None]:
    """A check passing once the manager ``started()`` and every started informer of the ``clusters()``
    it is given has synced; it names the clusters and kinds still syncing."""

    def check() -> None:
        if not started():
            raise RuntimeError("the manager has not started")
        pending: list[str] = []
        for name, cluster in clusters():
            if not cluster.started:
                pending.append(f"cluster {name!r} (cache not started)")
                continue
            for gvk, informer in cluster.cache.informers().items():
                if informer.started and not informer.has_synced:
                    pending.append(f"{gvk.api_version}/{gvk.kind} in cluster {name!r}")
        if pending:
            pending.sort()
            more = f" and {len(pending) - _SHOWN} more" if len(pending) > _SHOWN else ""
            raise RuntimeError(f"caches not synced: {', '.join(pending[:_SHOWN])}{more}")

    return check


def provider_started(started: Callable[[], bool]) -> Callable[[], None]:
    """A check passing once the manager has started its provider."""

    def check() -> None:
        if not started():
            raise RuntimeError("the provider has not started")

    return check
