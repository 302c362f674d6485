"""Fallback server process for the cache benchmarks when ``mcr-envtest serve`` is not installed.

Prints one JSON line ``{"url": ..., "kubeconfig": ...}`` once serving, then runs until its stdin
closes (the benchmark holds the pipe) or it is terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from mcr_envtest import Server


async def serve(history_size: int, https: bool) -> None:
    async with Server(https=https, history_size=history_size) as srv:
        print(json.dumps({"url": srv.url, "kubeconfig": srv.kubeconfig_path}), flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)  # EOF when the parent goes away


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--history-size", type=int, default=50_000)
    parser.add_argument("--https", action="store_true")
    args = parser.parse_args()
    asyncio.run(serve(args.history_size, args.https))


if __name__ == "__main__":
    main()
