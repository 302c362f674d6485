"""The cost of one ``/metrics`` scrape at fleet size: the text of mcr's registry for K clusters.

``python -m bench metrics [--counts 100,1000] [--repeat 5]`` gives mcr's registry, in this process,
the series one controller and its REST client leave for each of K clusters: a reconcile counter,
the error counters and the 40-bucket reconcile-time histogram; and, for GET, PATCH and POST, the
request counter and the request-duration and response-size histograms, the request-size histogram
for PATCH and POST, and the rate-limiter histogram for GET. These are the label sets the
controller and the transport write (the values differ, which costs nothing). It then times, in CPU
seconds, what the manager's ``/metrics`` endpoint runs per scrape, ``SERVED.exposition()``,
against prometheus_client's ``generate_latest(SERVED)``, alternating, and checks that both wrote
the same bytes. The figure is the median of the repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from prometheus_client import generate_latest

from mcr import metrics

HOST = "https://10.0.0.1:6443"


def _populate(clusters: list[str]) -> None:
    for name in clusters:
        metrics.RECONCILE_TOTAL.labels("configmaps", "success", name).inc(7)
        metrics.RECONCILE_ERRORS_TOTAL.labels("configmaps", name)
        metrics.TERMINAL_RECONCILE_ERRORS_TOTAL.labels("configmaps", name)
        metrics.RECONCILE_TIME_SECONDS.labels("configmaps", name).observe(0.003)
        for method in ("GET", "PATCH", "POST"):
            metrics.REST_CLIENT_REQUESTS_TOTAL.labels("200", method, HOST, name).inc(3)
            metrics.REST_CLIENT_REQUEST_DURATION_SECONDS.labels(method, HOST, name).observe(0.02)
            metrics.REST_CLIENT_RESPONSE_SIZE_BYTES.labels(method, HOST, name).observe(2048)
            if method != "GET":
                metrics.REST_CLIENT_REQUEST_SIZE_BYTES.labels(method, HOST, name).observe(512)
        metrics.REST_CLIENT_RATE_LIMITER_DURATION_SECONDS.labels("GET", HOST, name).observe(0.0)


def _cpu(fn: Callable[[], bytes]) -> tuple[float, bytes]:
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def measure(count: int, repeat: int) -> dict[str, float]:
    """Median CPU seconds of both writers for ``count`` clusters' series; the registry is restored."""
    names = [f"bench-{i:05d}" for i in range(count)]
    _populate(names)
    try:
        ours: list[float] = []
        theirs: list[float] = []
        size = lines = 0
        for _ in range(repeat):
            t_ours, a = _cpu(metrics.SERVED.exposition)
            t_theirs, b = _cpu(lambda: generate_latest(metrics.SERVED))
            if a != b:
                raise SystemExit("SERVED.exposition() and generate_latest(SERVED) wrote different text")
            ours.append(t_ours)
            theirs.append(t_theirs)
            size, lines = len(a), a.count(b"\n")
        return {
            "clusters": count,
            "lines": lines,
            "kib": size / 1024,
            "exposition_s": statistics.median(ours),
            "generate_latest_s": statistics.median(theirs),
        }
    finally:
        metrics.forget_clusters(names)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench metrics")
    parser.add_argument("--counts", default="100,1000", help="cluster counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    args, _ = parser.parse_known_args(argv)
    columns = [("clusters", 8), ("lines", 8), ("KiB", 7), ("exposition", 11)]
    columns += [("generate_latest", 16), ("speed-up", 9)]
    print(" ".join(f"{title:>{width}}" for title, width in columns))
    for count in (int(c) for c in args.counts.split(",")):
        r = measure(count, args.repeat)
        print(
            f"{r['clusters']:>8} {r['lines']:>8} {r['kib']:>7.0f} {r['exposition_s']:>10.3f}s"
            f" {r['generate_latest_s']:>15.3f}s {r['generate_latest_s'] / r['exposition_s']:>8.1f}x",
            flush=True,
        )
    return 0
