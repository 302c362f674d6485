"""``mcr-envtest serve`` and ``mcr-envtest fleet up``: run servers until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from . import kubeconfig
from .fleet import Fleet
from .server import Server

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcr-envtest", description="A Kubernetes-compatible API server for tests and local fleets."
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run one server")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0, help="0 picks a free port")
    s.add_argument("--state-dir", help="keep objects in this directory across restarts")
    s.add_argument("--history-size", type=int, default=10000, help="watch events kept for resuming watches")
    s.add_argument("--kubeconfig", help="write the admin kubeconfig here (default: print its path)")
    s.add_argument("--http", action="store_true", help="serve plain HTTP instead of HTTPS")
    f = sub.add_parser("fleet", help="run several servers")
    fsub = f.add_subparsers(dest="fleet_command", required=True)
    up = fsub.add_parser("up", help="start N servers and write cluster-<i>.kubeconfig files")
    up.add_argument("--clusters", type=int, required=True)
    up.add_argument("--dir", required=True, help="directory for the kubeconfig files")
    up.add_argument("--state-dir", help="keep each cluster's objects in <state-dir>/cluster-<i>")
    up.add_argument("--history-size", type=int, default=10000)
    return p


async def _wait_for_signal() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _serve(args: argparse.Namespace) -> int:
    srv = Server(
        host=args.host,
        port=args.port,
        https=not args.http,
        history_size=args.history_size,
        state_dir=args.state_dir,
    )
    await srv.start()
    try:
        path = srv.kubeconfig_path
        if args.kubeconfig:
            path = str(kubeconfig.write(srv.kubeconfig, args.kubeconfig))
        print(f"mcr-envtest serving {srv.url}; kubeconfig: {path}", flush=True)
        await _wait_for_signal()
    finally:
        await srv.stop()
    return 0


async def _fleet_up(args: argparse.Namespace) -> int:
    if args.clusters < 1:
        print("mcr-envtest: --clusters must be at least 1", file=sys.stderr)
        return 2
    fleet = Fleet(
        args.clusters, kubeconfig_dir=Path(args.dir), state_dir=args.state_dir, history_size=args.history_size
    )
    await fleet.start()
    try:
        for srv, path in zip(fleet.servers, fleet.kubeconfig_paths, strict=True):
            print(f"{srv.name}: {srv.url} kubeconfig: {path}", flush=True)
        await _wait_for_signal()
    finally:
        await fleet.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mcr-envtest`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    run = _serve if args.command == "serve" else _fleet_up
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(run(args))
    return 130


if __name__ == "__main__":
    sys.exit(main())
