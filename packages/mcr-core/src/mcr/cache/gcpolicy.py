"""The garbage-collector policy for processes that cache many objects.

CPython's cyclic collector runs a young collection every 700 net container allocations and
rescans the older generations as the heap grows; decoding a 10,000-object list allocates ~100,000
containers, so with the interpreter's defaults the collector costs more than the JSON decoding.
Raised thresholds take most of that cost away (``bench/core_cache``; the figures are in the
mcr-core README). Freezing the heap after a sync (``gc.freeze()``) saves little on top and keeps
garbage cycles that die while frozen until the heap is unfrozen, so it is opt-in:

* ``thresholds`` (default ``(50_000, 20, 100)``) are set while any cache using the policy runs,
  process-wide; the previous thresholds come back when the last such cache stops.
* ``freeze_after_sync`` (default off): move the synced objects to the permanent generation
  (``gc.freeze()``, after one full collection), which collections skip. Each freeze costs a full
  collection (tens of ms with a few hundred thousand live containers), so it is coalesced and kept off
  the sync path: informer syncs only count the objects they cached, and once at least
  ``freeze_min_objects`` (10,000) were cached or dropped since the last freeze, one freeze is
  scheduled on the event loop (``loop.call_later``), at most one per ``freeze_interval`` (30 s).
* Stopping a cache (a disengaged cluster) does not unfreeze the heap: ``gc.unfreeze()`` is
  process-wide, so every removal would make the next freeze rescan everything. It need not: a
  stopped cache holds no reference cycle (informers call the cache back through a weak
  reference, reflectors let go of their informer when they end, a client makes its ``status``
  subresource client per access), so reference counting frees its objects — frozen or not — as
  soon as the last reference to the cluster goes (``tests/test_cluster.py`` checks this with the
  collector off). The dropped objects still count towards the next coalesced freeze, which
  collects whatever cycles user code left; the last cache to stop unfreezes the heap at once.

Opt out per cache with ``CacheOptions(gc_policy=None)`` or for the whole process with the
environment variable ``MCR_GC_POLICY=off``.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from dataclasses import dataclass

__all__ = ["GCPolicy"]

_active = 0
_saved: tuple[int, int, int] | None = None
_churn = 0  # objects cached or dropped by caches since the last freeze
_last_freeze = float("-inf")  # time.monotonic() of the last freeze
_scheduled: asyncio.TimerHandle | None = None
_scheduled_on: asyncio.AbstractEventLoop | None = None
_frozen = False


@dataclass(frozen=True, slots=True)
class GCPolicy:
    """Collector thresholds while caches run, and whether (and how often) to freeze the heap."""

    thresholds: tuple[int, int, int] | None = (50_000, 20, 100)
    freeze_after_sync: bool = False
    freeze_min_objects: int = 10_000
    freeze_interval: float = 30.0

    @classmethod
    def default(cls) -> GCPolicy | None:
        """The policy caches use unless told otherwise; ``None`` when ``MCR_GC_POLICY=off``."""
        if os.environ.get("MCR_GC_POLICY", "").strip().lower() in ("off", "0", "false", "none"):
            return None
        return cls()

    def acquire(self) -> None:
        """Apply the thresholds (the first active user saves the previous ones). Pair with :meth:`release`."""
        global _active, _saved
        if _active == 0:
            _saved = gc.get_threshold()
        _active += 1
        if self.thresholds is not None:
            gc.set_threshold(*self.thresholds)

    def release(self, objects: int = 0) -> None:
        """Undo one :meth:`acquire` (a cache that held ``objects`` objects stopped).

        Does not unfreeze the heap while other caches run: the dropped objects count towards the
        next coalesced freeze, which reclaims them (see the module docstring). The last release
        cancels a scheduled freeze, unfreezes the heap, forgets the freeze history and restores
        the thresholds saved by the first acquire. Extra releases are ignored.
        """
        global _active, _saved, _scheduled, _frozen, _churn, _last_freeze
        if _active == 0:
            return
        _active -= 1
        if _active == 0:
            if _scheduled is not None:
                _scheduled.cancel()
                _scheduled = None
            if _frozen:
                gc.unfreeze()
                _frozen = False
            _churn, _last_freeze = 0, float("-inf")
            if _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
        elif self.freeze_after_sync:
            self._count(objects)

    def after_sync(self, objects: int = 0) -> None:
        """Called once an informer's initial list cached ``objects`` objects; never collects here.

        With ``freeze_after_sync``, counts them and, past ``freeze_min_objects``, schedules one
        freeze on the running loop (or freezes at once when called without one).
        """
        if self.freeze_after_sync:
            self._count(objects)

    def _count(self, objects: int) -> None:
        global _churn, _scheduled, _scheduled_on
        _churn += objects
        if _churn < self.freeze_min_objects:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            _freeze()
            return
        if _scheduled is not None and _scheduled_on is loop and not _scheduled.cancelled():
            return  # one freeze is already due on this loop: coalesce
        delay = max(0.0, _last_freeze + self.freeze_interval - time.monotonic())
        _scheduled, _scheduled_on = loop.call_later(delay, _freeze), loop


def _freeze() -> None:
    """Reclaim garbage cycles (frozen ones included) and freeze what survives: one full collection."""
    global _churn, _last_freeze, _scheduled, _frozen
    _scheduled = None
    if _active == 0:
        return
    _churn = 0
    _last_freeze = time.monotonic()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _frozen = True
