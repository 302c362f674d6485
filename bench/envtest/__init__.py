"""Benchmarks of the mcr-envtest API server: watch fan-out, list and create throughput.

Run with ``python -m bench envtest`` (``--quick`` for a short smoke run, ``--profile DIR`` to
write a cProfile of the server process). The server runs in its own process (``mcr-envtest
serve``); the client is a raw aiohttp + orjson reader in this process.
"""

from __future__ import annotations

from bench.envtest.run import main

__all__ = ["main"]
