"""Scale-out: clusters spread over the replicas of a controller, fenced by Kubernetes Leases.

``Manager(config, provider=..., coordinator=ShardedCoordinator(namespace="my-controller"))`` on
every replica; see :class:`ShardedCoordinator` and docs/sharding.md. :class:`Sharder` and
:class:`PeerRegistry` are the protocols of its pluggable parts (who owns a cluster, who the
replicas are).
"""

from __future__ import annotations

from mcr.sharding.coordinator import ShardedCoordinator
from mcr.sharding.hashing import fence_name, owner, score
from mcr.sharding.leases import validate_timings
from mcr.sharding.peers import PeerRegistry, Sharder

__all__ = [
    "PeerRegistry",
    "ShardedCoordinator",
    "Sharder",
    "fence_name",
    "owner",
    "score",
    "validate_timings",
]
