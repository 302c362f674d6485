"""Resource counts for leak checks in tests."""

from __future__ import annotations

import os

__all__ = ["open_sockets"]


def open_sockets(*, peer_port: int | None = None) -> int:
    """How many sockets this process holds (clients and in-process servers alike).

    For leak checks: compare the count before and after engaging and disengaging clusters. With
    ``peer_port``, only this process's TCP connections to that port count (e.g. to the API server
    under test), so that sockets other parts of the process open or close meanwhile — an
    in-process server's connections, a shared pool — do not move the count. Reads ``/proc``, so
    it works on Linux only (raises ``OSError`` elsewhere).
    """
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the fd closed while we were listing
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    if peer_port is None:
        return len(inodes)
    return len(inodes & _connections_to(peer_port))


def _connections_to(port: int) -> set[str]:
    """The inodes of the host's TCP sockets whose remote end is ``port``."""
    found = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:  # no IPv6 on this host
            continue
        for row in rows:
            fields = row.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found
