"""Scale-out: 3 replicas share 300 clusters with the ShardedCoordinator.

``python -m bench sharding [--replicas 3] [--clusters 300]`` starts an mcr-envtest server in a
subprocess with N namespaces (one ConfigMap each) — the clusters, through the namespace provider —
then R replica processes with default timings (lease 15 s, renew 5 s, retry 2 s). It samples the
fence Leases every 0.2 s and reports the time from starting the replicas until every cluster's
fence is held by the replica rendezvous hashing names (converged), and the clusters per replica.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import mcr
from bench.provider_namespace import _populate, _serve
from mcr.sharding import owner


async def _fences(config: mcr.RestConfig) -> dict[str, str]:
    async with mcr.Cluster(config, name="observer") as c:
        leases = await c.api_reader.list(
            "coordination.k8s.io/v1/Lease",
            namespace="mcr-sharding",
            label_selector={"sharding.mcr.io/role": "fence"},
        )
    return {
        lease["metadata"]["annotations"]["sharding.mcr.io/cluster"]: lease["spec"].get("holderIdentity") or ""
        for lease in leases
    }


async def _run(config: mcr.RestConfig, kubeconfig: Path, replicas: int, clusters: int) -> dict[str, Any]:
    async with mcr.Cluster(config, name="setup") as c:
        await c.api_reader.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mcr-sharding"}}
        )
    identities = [f"replica-{i}" for i in range(replicas)]
    expected = {
        f"tenant-{i:05d}": owner(f"tenant-{i:05d}", dict.fromkeys(identities, 1.0)) for i in range(clusters)
    }
    started = time.monotonic()
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.sharding._worker",
            str(kubeconfig),
            identity,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for identity in identities
    ]
    try:
        while True:
            fences = await _fences(config)
            if fences == expected:
                converged = time.monotonic() - started
                break
            if time.monotonic() - started > 300:
                raise RuntimeError(f"not converged in 300 s: {len(fences)} fences")
            await asyncio.sleep(0.2)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            await asyncio.gather(*(p.wait() for p in procs))
    per = Counter(fences.values())
    return {
        "replicas": replicas,
        "clusters": clusters,
        "converged_s": round(converged, 1),
        "clusters_per_replica": dict(sorted(per.items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench sharding")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--clusters", type=int, default=300)
    args, _ = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        server, kubeconfig = _serve(Path(tmp))
        try:
            config = mcr.RestConfig.from_kubeconfig(str(kubeconfig))
            asyncio.run(_populate(config, args.clusters))
            result = asyncio.run(_run(config, kubeconfig, args.replicas, args.clusters))
        finally:
            server.terminate()
            server.wait(30)
    result["python"] = sys.version.split()[0]
    print(json.dumps(result), flush=True)
    return 0
