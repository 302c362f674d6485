"""kopf operators for the anchors, one per cluster; run with the kopf venv's interpreter.

``python bench/anchors/kopf_operator.py --fleet DIR/fleet.json --clusters I,J,... --out FILE``
runs one kopf operator per listed fleet entry: the first in the main thread (as ``kopf run`` does),
every further one in its own thread with its own event loop, registry and settings (kopf's
documented embedding). Each operator logs in with the entry's URL, CA and token, watches
``v1/ConfigMap`` cluster-wide, standalone (no peering), with posting of Kubernetes events off,
and an async ``on.event`` handler (kopf runs a plain ``def`` handler in a thread pool) that reads
``data.t`` (the commit time) like mcr's reconcile. Every 0.2 s the process replaces ``FILE`` with
``{"n": events handled, "clusters": {...}, "lat": [...]}``.
It stops on SIGTERM/SIGINT (main thread) and takes the threads' operators down with it.

Not part of the ``bench`` package's imports: kopf is installed only in the bench's own venv
(``bench/anchors/requirements.txt``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import threading
import time
from typing import Any

import kopf  # type: ignore[import-not-found]  # kopf lives in the bench's own venv, not the typed one

_lock = threading.Lock()
_counts: dict[str, int] = {}
_lat: list[float] = []


def _operator(index: int, entry: dict[str, Any], stop: threading.Event | None) -> None:
    registry = kopf.OperatorRegistry()
    name = f"c{index}"

    # kopf ships no type hints for its decorators:
    @kopf.on.login(registry=registry)  # type: ignore[untyped-decorator]
    def login(**_: Any) -> Any:
        return kopf.ConnectionInfo(server=entry["url"], ca_path=entry["ca_file"], token=entry["token"])

    @kopf.on.event("v1", "configmaps", registry=registry)  # type: ignore[untyped-decorator]
    async def handle(body: Any, **_: Any) -> None:
        data = body.get("data") or {}
        now = time.time()
        with _lock:
            _counts[name] = _counts.get(name, 0) + 1
            if "t" in data:
                _lat.append(now - float(data["t"]))

    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    settings.posting.enabled = False

    async def main() -> None:
        flag: asyncio.Future[None] | None = None
        if stop is not None:
            loop = asyncio.get_running_loop()
            flag = loop.create_future()
            threading.Thread(
                target=lambda: (stop.wait(), loop.call_soon_threadsafe(flag.set_result, None)), daemon=True
            ).start()
        await kopf.operator(
            registry=registry, settings=settings, clusterwide=True, standalone=True, stop_flag=flag
        )

    asyncio.run(main())


def _reporter(path: str, stop: threading.Event) -> None:
    while not stop.wait(0.2):
        with _lock:
            state = {"n": sum(_counts.values()), "clusters": dict(_counts), "lat": list(_lat)}
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fleet", required=True)
    parser.add_argument("--clusters", required=True, help="fleet indexes, comma-separated")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    kopf.configure(verbose=False, debug=False, quiet=True)
    with open(args.fleet) as f:
        fleet = json.load(f)
    indexes = [int(i) for i in args.clusters.split(",")]
    stop = threading.Event()
    threads = [
        threading.Thread(target=_operator, args=(i, fleet[i % len(fleet)], stop), daemon=True)
        for i in indexes[1:]
    ]
    for t in threads:
        t.start()
    threading.Thread(target=_reporter, args=(args.out, stop), daemon=True).start()
    try:
        _operator(indexes[0], fleet[indexes[0] % len(fleet)], None)
    finally:
        stop.set()
        for t in threads:
            t.join(10)


if __name__ == "__main__":
    main()
