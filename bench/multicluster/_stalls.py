"""Where the event loop stalls: a watchdog thread that prints the loop thread's stack when it is late.

Opt-in for the measured processes: ``BENCH_STALL_MS=30`` makes the worker start :class:`Watchdog`,
which every millisecond or so checks a heartbeat the loop writes every 5 ms; when the heartbeat is
older than the threshold, the loop thread's current stack is sampled (once per stall, then again
each further threshold) and printed to stderr with the stall's age. Sampling while the loop is
still stuck shows the code that holds it, where a profiler's totals would spread it thin.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback


class Watchdog:
    """Samples the stack of the thread running ``loop`` when it misses its heartbeat by ``threshold_s``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, threshold_s: float) -> None:
        self._loop = loop
        self._threshold = threshold_s
        self._beat = time.monotonic()
        self._loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stall-watchdog", daemon=True)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = self._loop.create_task(self._heartbeat())
        self._thread.start()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.to_thread(self._thread.join)

    async def _heartbeat(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(0.005)

    def _watch(self) -> None:
        reported = 0.0  # the heartbeat last reported
        samples = 0
        while not self._stop.wait(0.001):
            beat = self._beat
            age = time.monotonic() - beat
            if age < self._threshold:
                continue
            if beat == reported and age < self._threshold * (samples + 1):
                continue
            samples = samples + 1 if beat == reported else 1
            reported = beat
            frame = sys._current_frames().get(self._loop_thread)
            if frame is None:
                continue
            stack = "".join(traceback.format_stack(frame, limit=25))
            print(
                f"--- loop late by {age * 1e3:.0f} ms (sample {samples}):\n{stack}",
                file=sys.stderr,
                flush=True,
            )
