"""Quickstart: one controller reconciling ConfigMaps across a local fleet of mcr-envtest servers.

What it shows, in order:

1. three mcr-envtest API servers (HTTPS, no Docker) start, each writing a kubeconfig file into a
   directory;
2. a manager with the file provider watching that directory engages each of them, and the README's
   uniform ConfigMap reconciler (``uniform_reconciler.py``) runs in every cluster;
3. a fourth cluster appears (its kubeconfig file is written) and is engaged while the controller
   runs; then the first cluster's file is removed and that cluster is disengaged.

Reconciles are printed per cluster as they happen. It ends by itself after the demo (``--forever``
keeps it running until Ctrl-C)::

    python examples/quickstart.py
    python examples/quickstart.py --clusters 5 --forever
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mcr.cluster import Cluster
from mcr.manager import Manager
from mcr.testing import eventually
from mcr_envtest import Server
from mcr_envtest.kubeconfig import write as write_kubeconfig
from mcr_provider_file import FileProvider

# The README's sample controller lives beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from uniform_reconciler import ConfigMapReporter, setup

log = logging.getLogger("quickstart")


async def _create_configmaps(server: Server, cluster_label: str, count: int) -> None:
    """Create ``count`` ConfigMaps in ``default`` on ``server`` through mcr's own client."""
    async with Cluster.from_kubeconfig(server.kubeconfig, name=cluster_label) as cluster:
        for i in range(count):
            await cluster.client.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"greeting-{i}", "namespace": "default"},
                    "data": {"hello": cluster_label},
                }
            )


def _cluster_of(mgr: Manager, path: Path) -> str | None:
    """The engaged cluster name built from kubeconfig file ``path``, if any."""
    for info in mgr.clusters():
        if info.name.startswith(str(path) + "+"):
            return info.name
    return None


def _greetings(reporter: ConfigMapReporter, cluster_name: str | None) -> list[str]:
    """The ConfigMaps the demo created (``default/greeting-<i>``) that ``cluster_name``'s reconciles saw.

    The reconciler sees every ConfigMap of a cluster; a real cluster also holds its own (such as
    ``kube-root-ca.crt`` in each namespace), which the demo does not count.
    """
    seen = reporter.seen.get(cluster_name or "", {})
    return sorted(key for key in seen if key.startswith("default/greeting-"))


def _print_table(mgr: Manager, reporter: ConfigMapReporter) -> None:
    print("\n  cluster                                              state     greetings reconciled")
    for info in sorted(mgr.clusters(), key=lambda i: i.name):
        seen = _greetings(reporter, info.name)
        short = info.name if len(info.name) < 52 else "…" + info.name[-51:]
        print(f"  {short:<52} {info.state.value:<9} {len(seen):>3}  {', '.join(seen)[:60]}")
    print()


async def run(clusters: int, forever: bool, per_cluster: int) -> dict[str, dict[str, dict[str, str]]]:
    """Run the demo; returns what the reconciler saw, per cluster name."""
    workdir = Path(tempfile.mkdtemp(prefix="mcr-quickstart-"))
    servers = [Server(name=f"cluster-{i}") for i in range(clusters + 1)]
    await asyncio.gather(*(s.start() for s in servers[:clusters]))
    paths = [workdir / f"cluster-{i}.kubeconfig" for i in range(clusters + 1)]
    try:
        for server, path in zip(servers[:clusters], paths, strict=False):
            write_kubeconfig(server.kubeconfig, path)
        print(f"Started {clusters} mcr-envtest servers; kubeconfigs in {workdir}")
        for i, server in enumerate(servers[:clusters]):
            await _create_configmaps(server, f"cluster-{i}", per_cluster)

        provider = FileProvider(directories=[workdir], poll_interval=0.5)
        mgr, reporter = setup(provider)
        manager_task = asyncio.create_task(mgr.start(handle_signals=False), name="quickstart-manager")
        try:
            await eventually(
                lambda: all(
                    len(_greetings(reporter, _cluster_of(mgr, p))) >= per_cluster for p in paths[:clusters]
                ),
                timeout=60,
                message="every cluster's ConfigMaps reconciled",
            )
            print(f"Every cluster reconciled: {clusters} clusters x {per_cluster} ConfigMaps")
            _print_table(mgr, reporter)

            newcomer = servers[clusters]
            await newcomer.start()
            await _create_configmaps(newcomer, f"cluster-{clusters}", per_cluster)
            write_kubeconfig(newcomer.kubeconfig, paths[clusters])
            print(f"Added cluster-{clusters}: wrote {paths[clusters].name}")
            await eventually(
                lambda: len(_greetings(reporter, _cluster_of(mgr, paths[clusters]))) >= per_cluster,
                timeout=60,
                message="the new cluster reconciled",
            )
            _print_table(mgr, reporter)

            gone = _cluster_of(mgr, paths[0])
            paths[0].unlink()
            print(f"Removed cluster-0: deleted {paths[0].name}")
            await eventually(
                lambda: gone not in {i.name for i in mgr.clusters()},
                timeout=60,
                message="cluster-0 disengaged",
            )
            _print_table(mgr, reporter)
            if forever:
                print("Running until Ctrl-C …")
                await manager_task
        finally:
            manager_task.cancel()
            await asyncio.gather(manager_task, return_exceptions=True)
        return {name: dict(keys) for name, keys in reporter.seen.items()}
    finally:
        await asyncio.gather(*(s.stop() for s in servers), return_exceptions=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="mcr quickstart: a controller across a local fleet")
    parser.add_argument("--clusters", type=int, default=3, help="how many servers to start (default 3)")
    parser.add_argument("--configmaps", type=int, default=2, help="ConfigMaps to create per cluster")
    parser.add_argument("--forever", action="store_true", help="keep running until Ctrl-C")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every reconcile")
    args = parser.parse_args(argv)
    if args.clusters < 1:
        parser.error("--clusters must be at least 1")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    # The reconciler's own log lines are the point of the demo: show them even without -v.
    logging.getLogger("uniform-reconciler").setLevel(logging.INFO)
    try:
        asyncio.run(run(args.clusters, args.forever, args.configmaps))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
