"""Multi-cluster scaling benchmarks (issue 5): B3 scaling curve, B4 memory per engaged cluster,
B6 time from a cluster appearing to its first reconcile, and fairness under a 10k backlog.

Run with ``python -m bench multicluster`` (``--quick`` for a short run). Prints one JSON line per
measurement and a summary; every ratio is against a floor measured in the same run against the
same servers, which run in another process (see :mod:`bench.multicluster.run`).
"""

from __future__ import annotations

from bench.multicluster.run import main

__all__ = ["main"]
