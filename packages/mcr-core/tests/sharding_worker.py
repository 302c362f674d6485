"""One replica of a sharded (or leader-elected) controller, for the multi-process tests.

``python sharding_worker.py HOST_KUBECONFIG FLEET_DIR IDENTITY LOG [options]`` runs a manager whose
local cluster is the host (it holds the Leases), whose provider reads the fleet's kubeconfig files,
and whose coordinator is a ShardedCoordinator with short timings. Each reconcile of a ConfigMap
appends ``{"r": identity, "c": cluster, "s": start, "e": end}`` to LOG (one JSON line, written
when it ends). SIGTERM stops it gracefully; SIGKILL is the crash the tests inflict.

Options for the chaos tests (test_sharding_chaos.py, test_leader_chaos.py):

- ``--timings JSON``: the coordinator's (or, with ``--leader``, the manager's leader election)
  timings instead of :data:`TIMINGS`.
- ``--chaos``: times are ``time.monotonic()`` (one clock for every process of the host); each
  reconcile takes :data:`WORK` seconds and asks to run again after :data:`PERIOD` (so every owned
  cluster is reconciled all the time, events or not); a reconcile that is cancelled is logged with
  ``"x": 1`` and ``e`` the moment the cancellation reached it. A piece of work that completes
  reads its end and then awaits once more before it counts as done, so the fence mcr checks at
  each step of fenced work held at a step after its end (a process stopped between that check
  and the clock reading cannot stretch a completed piece past its freeze).
- ``--leader``: no sharding; leader election on the host instead (Lease ``chaos-leader``), the
  controller needing leadership, plus a leader-only runnable that logs a 20 ms piece of work every
  50 ms as cluster ``"<runnable>"``. Losing leadership ends the process with status 3.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from typing import Any, TextIO

from mcr.builder import controller_managed_by
from mcr.manager import LeaderElectionLostError, Manager, RunnableFunc
from mcr.reconcile import Request, Result
from mcr.rest.config import RestConfig
from mcr.sharding import ShardedCoordinator
from mcr_provider_file import FileProvider

TIMINGS = {
    "lease_duration": 2.0,
    "renew_period": 0.5,
    "retry_period": 0.3,
    "peer_ttl": 2.0,
    "drain_timeout": 2.0,
}
WORK = 0.03
"""Seconds a chaos reconcile takes (one await)."""
PERIOD = 0.25
"""Seconds after which a chaos reconcile asks to run again."""
RUNNABLE = "<runnable>"
"""The cluster name under which the leader-only runnable logs its work."""
LOST_LEADERSHIP = 3


class ReconcileLog:
    """Writes one JSON line per finished (or cancelled) piece of work."""

    def __init__(self, identity: str, out: TextIO, *, chaos: bool) -> None:
        self.identity = identity
        self.out = out
        self.clock = time.monotonic if chaos else time.time

    def write(self, cluster: str, start: float, end: float, *, cancelled: bool = False) -> None:
        entry: dict[str, Any] = {"r": self.identity, "c": cluster, "s": start, "e": end}
        if cancelled:
            entry["x"] = 1
        self.out.write(json.dumps(entry) + "\n")


async def main(host: str, fleet_dir: str, identity: str, log: TextIO, args: argparse.Namespace) -> int:
    timings = json.loads(args.timings) if args.timings else TIMINGS
    record = ReconcileLog(identity, log, chaos=args.chaos)
    clock = record.clock
    options: dict[str, Any] = {}
    if args.leader:
        options = {
            "leader_election": True,
            "leader_election_id": "chaos-leader",
            "leader_election_namespace": "default",
            **timings,
        }
    else:
        options = {"coordinator": ShardedCoordinator(namespace="default", identity=identity, **timings)}
    mgr = Manager(
        RestConfig.from_kubeconfig(host),
        provider=FileProvider(directories=[fleet_dir], poll_interval=0.2),
        metrics_bind_address="0",
        health_probe_bind_address="0",
        graceful_shutdown_timeout=10,
        identity=identity,
        **options,
    )

    async def reconcile(req: Request) -> Result | None:
        start = clock()
        if not args.chaos:
            await asyncio.sleep(0.05)
            record.write(req.cluster_name, start, clock())
            return None
        try:
            await asyncio.sleep(WORK)
            end = clock()
            await asyncio.sleep(0)  # a fenced step after the end (see --chaos above)
        except asyncio.CancelledError:
            record.write(req.cluster_name, start, clock(), cancelled=True)
            raise
        record.write(req.cluster_name, start, end)
        return Result(requeue_after=PERIOD)

    controller_managed_by(mgr).named("sharded").for_("v1/ConfigMap").complete(reconcile)

    if args.leader:

        async def leader_work() -> None:
            while True:
                start = clock()
                try:
                    await asyncio.sleep(0.02)
                    end = clock()
                    await asyncio.sleep(0)
                except asyncio.CancelledError:
                    record.write(RUNNABLE, start, clock(), cancelled=True)
                    raise
                record.write(RUNNABLE, start, end)
                await asyncio.sleep(0.03)

        mgr.add(RunnableFunc(leader_work, need_leader_election=True, name="leader-work"))
    try:
        await mgr.start()
    except LeaderElectionLostError as exc:
        print(f"{identity}: {exc}", file=sys.stderr)
        return LOST_LEADERSHIP
    return 0


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("host")
    parser.add_argument("fleet_dir")
    parser.add_argument("identity")
    parser.add_argument("log")
    parser.add_argument("--timings", default="")
    parser.add_argument("--chaos", action="store_true")
    parser.add_argument("--leader", action="store_true")
    return parser.parse_args(argv)


class _Monotonic(logging.Formatter):
    """Log lines stamped with time.monotonic(), comparable with the reconcile log of ``--chaos``."""

    def format(self, record: logging.LogRecord) -> str:
        cluster = getattr(record, "cluster", None)
        where = f" [{cluster.rsplit('/', 1)[-1]}]" if isinstance(cluster, str) else ""
        return f"{time.monotonic():.3f} {record.name}{where}: {super().format(record)}"


if __name__ == "__main__":
    arguments = _parse(sys.argv[1:])
    if arguments.chaos:
        handler = logging.StreamHandler()
        handler.setFormatter(_Monotonic())
        logging.basicConfig(level=logging.INFO, handlers=[handler])
    with open(arguments.log, "a", buffering=1) as reconcile_log:
        sys.exit(
            asyncio.run(
                main(arguments.host, arguments.fleet_dir, arguments.identity, reconcile_log, arguments)
            )
        )
