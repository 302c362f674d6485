"""Memory of the namespace provider: what one more namespace cluster costs over the shared cache.

``python -m bench provider_namespace [--namespaces 1000 100]`` starts an ``mcr-envtest`` server in a
subprocess, creates N namespaces with one ConfigMap each, then in this process:

1. syncs a host cluster's Namespace and ConfigMap informers (the objects, cached once);
2. runs a manager over a ``NamespaceProvider`` on that host with a no-op controller for ConfigMaps,
   until every namespace is engaged and its ConfigMap reconciled.

It reports Python heap growth (tracemalloc, after a full collection) of step 1 per namespace (the
cached objects) and of step 2 per namespace (the bookkeeping of one namespace cluster: its
``NamespaceCluster``, engagement tasks, the controller's per-cluster state, the dispatch entry).
Step 2 grows with N only by bookkeeping: no informer, watch or object copy per namespace.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import mcr
from mcr.testing import eventually
from mcr_provider_namespace import NamespaceProvider


def _serve(directory: Path) -> tuple[subprocess.Popen[bytes], Path]:
    kubeconfig = directory / "kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from mcr_envtest.cli import main; main()",
            "serve",
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not kubeconfig.exists() or not kubeconfig.read_text().strip():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("mcr-envtest serve did not start")
        time.sleep(0.05)
    return proc, kubeconfig


async def _populate(config: mcr.RestConfig, n: int) -> None:
    async with mcr.Cluster(config, name="populate") as admin:
        sem = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            async with sem:
                ns = f"tenant-{i:05d}"
                await admin.api_reader.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                )
                await admin.api_reader.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": "settings", "namespace": ns},
                    }
                )

        await asyncio.gather(*(one(i) for i in range(n)))


def _heap() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def _measure(config: mcr.RestConfig, n: int) -> dict[str, Any]:
    tracemalloc.start()
    base = _heap()
    host = mcr.Cluster(config, name="host")
    await host.start()
    for kind in ("v1/Namespace", "v1/ConfigMap"):
        informer = await host.cache.get_informer(kind)
        await informer.wait_for_sync(60)
    cached = _heap()
    seen: set[str] = set()

    async def reconcile(req: mcr.Request) -> None:
        seen.add(req.cluster_name)

    system = {"default", "kube-system", "kube-public", "kube-node-lease"}
    provider = NamespaceProvider(host, exclude=system)
    mgr = mcr.Manager(provider=provider, metrics_bind_address="0", health_probe_bind_address="0")
    mcr.controller_managed_by(mgr).named("bench-namespaces").for_("v1/ConfigMap").complete(reconcile)
    started = time.perf_counter()
    runner = asyncio.create_task(mgr.start(handle_signals=False))
    try:
        await eventually(
            lambda: len(seen) >= n, timeout=600, interval=0.2, message="all namespaces reconciled"
        )
        engage_s = time.perf_counter() - started
        engaged = _heap()
    finally:
        mgr.stop()
        await asyncio.wait_for(runner, 60)
        await host.stop()
        tracemalloc.stop()
    return {
        "namespaces": n,
        "engage_and_reconcile_s": round(engage_s, 2),
        "cached_objects_bytes_per_namespace": round((cached - base) / n),
        "namespace_cluster_bytes_per_namespace": round((engaged - cached) / n),
        "namespace_clusters_total_mib": round((engaged - cached) / 2**20, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench provider_namespace")
    parser.add_argument("--namespaces", type=int, nargs="+", default=[1000, 100])
    args, _ = parser.parse_known_args(argv)
    for n in args.namespaces:
        with tempfile.TemporaryDirectory() as tmp:
            proc, kubeconfig = _serve(Path(tmp))
            try:
                config = mcr.RestConfig.from_kubeconfig(str(kubeconfig))
                asyncio.run(_populate(config, n))
                result = asyncio.run(_measure(config, n))
            finally:
                proc.terminate()
                proc.wait(30)
        result["python"] = sys.version.split()[0]
        result["pid"] = os.getpid()
        print(json.dumps(result), flush=True)
    return 0
