"""``mcr-envtest serve``, ``mcr-envtest fleet up|down|add|remove`` and ``mcr-envtest kind ...``.

``serve`` and ``fleet up`` run until SIGINT/SIGTERM (or ``fleet down``); ``fleet down``, ``add``
and ``remove`` control a fleet started with ``fleet up --dir D`` from another terminal (see
:mod:`.fleetctl`). Exit status: 0 on success, 1 when a fleet cannot be controlled (none running,
unknown cluster) or a real control plane fails to start, 2 on usage errors, when the port cannot
be listened on, and when ``--real`` lacks its binaries or is given an option it cannot honour.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from . import fleetctl, kubeconfig, real
from .fleet import Fleet
from .server import Server

__all__ = ["main"]


_REAL_HELP = (
    "serve real kube-apiservers (one etcd, kube-controller-manager beside each) from"
    " $KUBEBUILDER_ASSETS or tools/kube/build.sh's cache; also on when KUBEBUILDER_ASSETS is set"
)


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
    s.add_argument("--real", action="store_true", help=_REAL_HELP)
    f = sub.add_parser("fleet", help="run several servers")
    fsub = f.add_subparsers(dest="fleet_command", required=True)
    up = fsub.add_parser("up", help="start N servers and write cluster-<i>.kubeconfig files")
    up.add_argument("--clusters", type=int, required=True)
    up.add_argument("--dir", required=True, help="directory for the kubeconfig files")
    up.add_argument("--state-dir", help="keep each cluster's objects in <state-dir>/cluster-<i>")
    up.add_argument("--history-size", type=int, default=10000)
    up.add_argument("--real", action="store_true", help=_REAL_HELP)
    _fleet_control_parsers(fsub)
    sub.add_parser(
        "kind", help="kind-compatible clusters: kind create|get|delete|version ...", add_help=False
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcr-envtest")
    except PackageNotFoundError:
        return "unknown"


def _fleet_control_parsers(fsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    down = fsub.add_parser("down", help="stop the fleet started with 'fleet up --dir DIR'")
    down.add_argument("--dir", required=True, help="the directory given to 'fleet up'")
    down.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for it to stop")
    add = fsub.add_parser("add", help="start one more cluster in a running fleet")
    add.add_argument("--dir", required=True, help="the directory given to 'fleet up'")
    add.add_argument("--name", help="cluster name (default: cluster-<next index>)")
    rm = fsub.add_parser("remove", help="stop one cluster of a running fleet")
    rm.add_argument("--dir", required=True, help="the directory given to 'fleet up'")
    rm.add_argument("name", help="the cluster to remove, e.g. cluster-1")


async def _fleet_control(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    try:
        if args.fleet_command == "down":
            pid = int(fleetctl.state_of(directory)["pid"])
            await fleetctl.request(directory, {"op": "down"})
            if not await fleetctl.wait_stopped(pid, args.timeout):
                why = f"the fleet in {directory} (pid {pid}) did not stop within {args.timeout:g}s"
                print(f"mcr-envtest: {why}", file=sys.stderr)
                return 1
            print(f"fleet in {directory} stopped")
        elif args.fleet_command == "add":
            reply = await fleetctl.request(directory, {"op": "add", "name": args.name})
            c = reply["cluster"]
            print(f"{c['name']}: {c['url']} kubeconfig: {c['kubeconfig']}")
        else:
            await fleetctl.request(directory, {"op": "remove", "name": args.name})
            print(f"{args.name} removed")
    except fleetctl.FleetControlError as exc:
        print(f"mcr-envtest: {exc}", file=sys.stderr)
        return 1
    return 0


def _listen_error(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        why = "the address is already in use"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        why = "permission denied (ports below 1024 need privileges)"
    else:
        why = exc.strerror or str(exc)
    return f"mcr-envtest: cannot listen on {host}:{port}: {why}"


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
        real=args.real or None,
    )
    try:
        await srv.start()
    except OSError as exc:
        await srv.close()
        print(_listen_error(args.host, args.port, exc), file=sys.stderr)
        return 2
    try:
        path = srv.kubeconfig_path
        if args.kubeconfig:
            path = str(kubeconfig.write(srv.kubeconfig, args.kubeconfig))
        print(f"mcr-envtest serving {srv.url}; kubeconfig: {path}", flush=True)
        await _wait_for_signal()
    finally:
        await srv.close()
    return 0


async def _fleet_up(args: argparse.Namespace) -> int:
    if args.clusters < 1:
        print("mcr-envtest: --clusters must be at least 1", file=sys.stderr)
        return 2
    directory = Path(args.dir)
    with contextlib.suppress(fleetctl.FleetControlError):
        fleetctl.state_of(directory)
        print(f"mcr-envtest: a fleet is already running in {directory}", file=sys.stderr)
        return 1
    fleet = Fleet(
        args.clusters,
        kubeconfig_dir=directory,
        state_dir=args.state_dir,
        history_size=args.history_size,
        real=args.real or None,
    )
    await fleetctl.run(fleet, directory, announce=lambda line: print(line, flush=True))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mcr-envtest`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["kind"]:
        from .kind import main as kind_main

        return kind_main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "serve":
        run = _serve
    elif args.fleet_command == "up":
        run = _fleet_up
    else:
        run = _fleet_control
    try:
        with contextlib.suppress(KeyboardInterrupt):
            return asyncio.run(run(args))
    except (real.AssetsError, real.RealModeError) as exc:
        print(f"mcr-envtest: {exc}", file=sys.stderr)
        return 2
    except real.ControlPlaneError as exc:
        print(f"mcr-envtest: {exc}", file=sys.stderr)
        return 1
    finally:
        real.close_default_pool()
    return 130


if __name__ == "__main__":
    sys.exit(main())
