"""Scale-out: clusters spread over the replicas of a controller, fenced by Kubernetes Leases.

``Manager(config, provider=..., coordinator=ShardedCoordinator(namespace="my-controller"))`` on
every replica; see :class:`ShardedCoordinator` and docs/sharding.md.
"""

from __future__ import annotations

from mcr.sharding.coordinator import ShardedCoordinator
from mcr.sharding.hashing import fence_name, owner, score

__all__ = ["ShardedCoordinator", "fence_name", "owner", "score"]
