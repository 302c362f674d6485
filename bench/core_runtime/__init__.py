"""Benchmarks of mcr's controller runtime: queue cost per item, no-op reconcile throughput (B2).

Run with ``python -m bench core_runtime`` (add ``--quick`` for a short smoke run). Prints one
JSON line per measurement and a summary table; every ratio is against a floor measured in the
same run.
"""

from __future__ import annotations

from bench.core_runtime.run import main

__all__ = ["main"]
