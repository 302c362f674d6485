"""File-system notifications for the file provider (``watchfiles``), with polling as the fallback.

:class:`Notifier` watches a set of directories and sets :attr:`Notifier.changed` whenever anything
in them changes. The provider re-scans its sources then (a scan is cheap: files are re-read only
when their stat changed). Where notifications cannot be had — ``watchfiles`` is not importable,
the system refuses another watch (inotify limits), or a watched directory vanishes — the notifier
reports itself inactive and the provider polls instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from mcr.providers import cancel_and_wait

__all__ = ["Notifier", "Root"]

log = logging.getLogger("mcr.providers.file")

Root = tuple[str, bool]
"""A directory to watch and whether its subdirectories are watched too."""

# Group the events of one save (write + rename, or kubelet's ..data symlink swap) into one wake-up.
_DEBOUNCE_MS = 150
_STEP_MS = 25


class Notifier:
    """Watches directories; :attr:`changed` is set on every change below them.

    :meth:`watch` (re)starts watching a new set of roots; it returns whether notifications are
    active. :meth:`close` stops the watcher threads and waits for them; it is idempotent. Every
    task this object starts is owned, cancelled and awaited by it.
    """

    def __init__(self, *, enabled: bool = True) -> None:
        self.changed = asyncio.Event()
        self._enabled = enabled
        self._roots: frozenset[Root] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stop: Any = None  # the anyio.Event the watcher threads poll
        self._failed = False
        self._unavailable_logged = False

    @property
    def active(self) -> bool:
        """Whether changes are currently noticed without polling."""
        return bool(self._tasks) and not self._failed and all(not t.done() for t in self._tasks)

    async def watch(self, roots: Iterable[Root]) -> bool:
        """Watch ``roots`` from now on (no restart if they are the ones watched); returns :attr:`active`."""
        wanted = frozenset(roots)
        if wanted == self._roots and (self.active or self._failed):
            return self.active
        await self._halt()
        self._roots = wanted
        self._failed = False
        if not self._enabled or not wanted:
            return False
        try:
            import anyio
            from watchfiles import awatch
        except ImportError as exc:
            if not self._unavailable_logged:
                self._unavailable_logged = True
                log.info("file provider: watchfiles is not available (%s); polling instead", exc)
            return False
        self._stop = anyio.Event()
        for recursive in (False, True):
            paths = sorted(path for path, rec in wanted if rec is recursive)
            if paths:
                self._tasks.append(
                    asyncio.create_task(
                        self._follow(awatch, paths, recursive), name="mcr-file-provider-watch"
                    )
                )
        return True

    async def close(self) -> None:
        """Stop watching; returns once the watcher threads have ended."""
        await self._halt()
        self._roots = None

    async def _halt(self) -> None:
        if self._stop is not None:
            # The watcher threads check this every few milliseconds and return: cancelling the
            # tasks alone would leave each thread running until its own timeout.
            self._stop.set()
            self._stop = None
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)

    async def _follow(self, awatch: Any, paths: list[str], recursive: bool) -> None:
        try:
            async for _ in awatch(
                *paths,
                watch_filter=None,
                debounce=_DEBOUNCE_MS,
                step=_STEP_MS,
                stop_event=self._stop,
                recursive=recursive,
                ignore_permission_denied=True,
            ):
                self.changed.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 -- any watcher failure: fall back to polling
            self._failed = True
            log.warning(
                "file provider: cannot watch %s for changes (%s: %s); polling instead",
                ", ".join(paths),
                type(exc).__name__,
                exc,
            )
            self.changed.set()  # let the provider re-plan now
