"""Errors raised by the cache's readers (all :class:`mcr.errors.MCRError`)."""

from __future__ import annotations

from mcr.errors import MCRError

__all__ = ["CacheNotStartedError", "CacheSyncTimeoutError", "InformerNotFoundError"]


class CacheNotStartedError(MCRError):
    """A read reached a cache that was not started (or was stopped): start the cache or cluster first."""


class CacheSyncTimeoutError(MCRError, TimeoutError):
    """An informer did not finish its initial list within the cache's ``sync_timeout``.

    ``kind`` names the kind and ``cluster`` the cluster whose informer did not sync.
    """

    def __init__(self, kind: str, cluster: str, timeout: float) -> None:
        self.kind = kind
        self.cluster = cluster
        where = f" in cluster {cluster!r}" if cluster else ""
        super().__init__(f"timed out after {timeout:g}s waiting for the {kind} cache to sync{where}")


class InformerNotFoundError(MCRError, LookupError):
    """A read of a kind the cache has no informer for, with ``reader_fail_on_missing_informer`` set."""
