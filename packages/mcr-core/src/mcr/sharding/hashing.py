"""Weighted rendezvous hashing and fence names: which replica owns a cluster, and its Lease's name.

Every replica computes the same owner from the same membership, without talking to the others:
for cluster ``c`` and peer ``p`` with weight ``w``, ``u = hash(c, p)`` is a uniform number in the
open interval (0, 1) and the score is ``-ln(u) / w``; the peer with the lowest score owns ``c``.
That is an exponential variable of rate ``w`` per peer, so a peer's share of the clusters is its
weight over the total weight; adding or removing a peer moves only the clusters it wins or held.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping

__all__ = ["fence_name", "owner", "score"]

_SPAN = float(2**64)


def _unit(cluster: str, peer: str) -> float:
    """A uniform number in (0, 1), stable for (cluster, peer): never 0 nor 1, so ln is finite."""
    digest = hashlib.blake2b(f"{cluster}\x00{peer}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 0.5) / _SPAN


def score(cluster: str, peer: str, weight: float) -> float:
    """``-ln(u) / weight``: the lowest score over the peers owns ``cluster``."""
    if weight <= 0 or not math.isfinite(weight):
        raise ValueError(f"peer {peer!r}: weight must be a positive number, got {weight!r}")
    return -math.log(_unit(cluster, peer)) / weight


def owner(cluster: str, peers: Mapping[str, float]) -> str | None:
    """The peer that owns ``cluster`` among ``peers`` (id → weight); ``None`` when there are none.

    Ties (practically impossible) go to the smallest peer id, so every replica agrees.
    """
    best: tuple[float, str] | None = None
    for peer, weight in peers.items():
        candidate = (score(cluster, peer, weight), peer)
        if best is None or candidate < best:
            best = candidate
    return None if best is None else best[1]


_INVALID = re.compile(r"[^a-z0-9-]+")


def fence_name(prefix: str, cluster: str, *, limit: int = 63) -> str:
    """``<prefix>-<readable cluster>-<hash>``: a valid Lease name of at most ``limit`` characters.

    The readable part keeps ``[a-z0-9-]`` of the lowercased cluster name (other runs become ``-``);
    the 10-hex-digit hash of the exact cluster name keeps distinct clusters apart even when their
    readable parts are equal (``a_b`` and ``a-b``) or truncated.
    """
    digest = hashlib.blake2b(cluster.encode(), digest_size=5).hexdigest()
    readable = _INVALID.sub("-", cluster.lower()).strip("-")
    room = limit - len(prefix) - len(digest) - 2
    if room < 1:
        raise ValueError(f"lease name prefix {prefix!r} is too long for {limit}-character names")
    readable = readable[:room].strip("-")
    return f"{prefix}-{readable}-{digest}" if readable else f"{prefix}-{digest}"
