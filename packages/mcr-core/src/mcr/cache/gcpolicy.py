"""The garbage-collector policy for processes that cache many objects.

CPython's cyclic collector rescans every live container object on each full collection, so with
tens of thousands of cached dicts it, not JSON decoding, bounds ingest (PERFORMANCE.md §2.1/§2.5:
152k → 40k events/s). Cached objects are plain acyclic JSON dicts that reference counting frees
on its own, so scanning them is wasted work. The default policy therefore

* raises the collection thresholds while a cache runs (gen0 every 50,000 net allocations instead
  of 700), and
* after each informer's initial sync, runs one full collection and then ``gc.freeze()``s the heap:
  the synced objects move to the permanent generation, which collections skip. A frozen object
  that later becomes unreachable is still freed by reference counting (cached objects are
  acyclic); only reference *cycles* that die while frozen wait, until the next cache stop
  (cluster disengagement) unfreezes the heap so the collector can reclaim them.

The thresholds are process-wide: they are set when the first cache using a policy starts and
restored when the last one stops. Opt out per cache with ``CacheOptions(gc_policy=None)`` or for
the whole process with the environment variable ``MCR_GC_POLICY=off``. ``bench/core_cache``
measures ingest with and without the policy.
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
    freeze_after_sync: bool = True

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
