"""Resource counts for leak checks in tests."""

from __future__ import annotations

import os

__all__ = ["open_sockets"]


def open_sockets() -> int:
    """How many sockets this process holds (clients and in-process servers alike).

    For leak checks: compare the count before and after engaging and disengaging clusters. Reads
    ``/proc/self/fd``, so it works on Linux only (raises ``OSError`` elsewhere).
    """
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:  # the fd closed while we were listing
            continue
    return count
