"""The garbage-collector policy for processes that cache many objects.

CPython's cyclic collector runs a young collection every 700 net container allocations and
rescans the older generations as the heap grows; decoding a 10,000-object list allocates ~100,000
containers, so with the interpreter's defaults the collector costs more than the JSON decoding
(PERFORMANCE.md §2.1). ``bench/core_cache`` measured the client CPU of decoding a 10k-ConfigMap
list: 185 ms with the default thresholds, 85 ms with thresholds of (50,000, 20, 100); with
50,000 more objects cached, 258 ms vs 94 ms. Freezing the heap after a sync (``gc.freeze()``)
saved little on top (79-92 ms) and keeps garbage cycles that die while frozen until the heap is
unfrozen, so it is opt-in:

* ``thresholds`` (default ``(50_000, 20, 100)``) are set while any cache using the policy runs,
  process-wide; the previous thresholds come back when the last such cache stops.
* ``freeze_after_sync`` (default off): after each informer's initial sync, one full collection,
  then ``gc.freeze()``: the synced objects move to the permanent generation, which collections
  skip. Stopping a cache unfreezes the heap, so cycles left by a stopped cache (a disengaged
  cluster) become collectable again.

Opt out per cache with ``CacheOptions(gc_policy=None)`` or for the whole process with the
environment variable ``MCR_GC_POLICY=off``.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

__all__ = ["GCPolicy"]

_active = 0
_saved: tuple[int, int, int] | None = None


@dataclass(frozen=True, slots=True)
class GCPolicy:
    """Collector thresholds while caches run, and whether to freeze after each initial sync."""

    thresholds: tuple[int, int, int] | None = (50_000, 20, 100)
    freeze_after_sync: bool = False

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

    def release(self) -> None:
        """Undo one :meth:`acquire` (a cache stopped).

        Unfreezes the heap, so whatever a stopped cache (or a disengaged cluster) left in
        reference cycles becomes collectable again; the next sync freezes the survivors. The last
        release restores the thresholds saved by the first acquire.
        """
        global _active, _saved
        if _active == 0:
            return
        _active -= 1
        if self.freeze_after_sync:
            gc.unfreeze()
        if _active == 0 and _saved is not None:
            gc.set_threshold(*_saved)
            _saved = None

    def after_sync(self) -> None:
        """Called once an informer's initial list is cached: collect, then freeze the heap."""
        if self.freeze_after_sync:
            gc.collect()
            gc.freeze()
