"""``python -m bench.anchors.profile_summary FILE...``: CPU shares by component of the anchors' profiles.

Reads the per-phase profiles that ``MCR_ANCHOR_PROFILE_DIR=DIR python -m bench anchors ...`` leaves
in ``DIR``: py-spy's collapsed stacks of the mcr worker (``mcr-*.txt``) and the Go program's pprof
files (``go-*.pprof``, read through ``go tool pprof -traces``). Every sample is charged to the
first component of the tables below (in their order) that matches any frame of its stack; a sample
matching none is ``other``. Prints one line per file: samples, then each
component's share, largest first, and the ten hottest innermost frames.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

# (component, pattern on one frame), in priority order: a sample goes to the first component with
# a pattern that matches any frame of its stack, so the specific (GC, decoding, TLS, the reconcile's
# body) come before the layers that call them (HTTP, informer, queue, dispatch, the loop).
PY_RULES: list[tuple[str, str]] = [
    ("GC", r"gc_collect|collect_with_callback|subtract_refs|visit_reachable|move_unreachable|gc\.collect"),
    ("JSON decode", r"orjson|json/decoder"),
    ("TLS", r"libssl|libcrypto|ssl\.py|sslproto|SSLObject|_ssl\.c|_ssl__"),
    ("reconcile body (cache read, copy)", r"amain\.<locals>\.(get|noop)|Client\.get"),
    ("HTTP (aiohttp)", r"aiohttp/|_http_parser|multidict|yarl/"),
    ("work queue", r"mcr/workqueue/"),
    ("informer, handlers", r"mcr/cache/|mcr/source/|mcr/handler/|mcr/event"),
    ("reconcile dispatch, metrics", r"mcr/controller/|mcr/metrics/|mcr/manager/|prometheus_client"),
    ("epoll / selector", r"epoll|selectors\.py|select \("),
    ("event loop", r"asyncio/|_asynciomodule|uvloop|libuv|uv__"),
]
GO_RULES: list[tuple[str, str]] = [
    (
        "GC",
        r"runtime\.(gcBgMarkWorker|gcDrain|scanobject|markroot|bgsweep|sweepone|gcAssistAlloc|gcStart"
        r"|bgscavenge|wbBuf)",
    ),
    ("JSON decode", r"encoding/json|sigs\.k8s\.io/json|serializer/json|util/json|json-iterator|protobuf"),
    ("TLS", r"crypto/"),
    (
        "reconcile body (cache read, copy)",
        r"^main\.main\.func|DeepCopy|controller-runtime/pkg/client\.|cache/internal\.\(\*CacheReader\)",
    ),
    ("HTTP", r"net/http|golang\.org/x/net/http2"),
    ("watch stream", r"apimachinery/pkg/watch|rest/watch|streaming"),
    ("work queue", r"util/workqueue|priorityqueue"),
    (
        "informer, handlers",
        r"client-go/tools/cache|controller-runtime/pkg/cache|pkg/handler|pkg/source|pkg/internal/source",
    ),
    ("reconcile dispatch, metrics", r"pkg/internal/controller|multicluster-runtime|prometheus"),
    ("allocation", r"runtime\.(mallocgc|newobject|makeslice|growslice|makemap|mapassign)"),
    (
        "scheduler, netpoll, syscalls",
        r"runtime\.(schedule|findRunnable|netpoll|park_m|mcall|notesleep|futex|usleep|stealWork|checkTimers"
        r"|sysmon)|^syscall\.|internal/poll|internal/runtime/syscall",
    ),
    ("runtime other", r"^runtime\."),
]


def classify(frames: list[str], rules: list[tuple[str, str]]) -> str:
    """The first component (in ``rules``' order) with a pattern matching any of ``frames``."""
    for name, pattern in rules:
        regex = re.compile(pattern)
        if any(regex.search(frame) for frame in frames):
            return name
    return "other"


def pyspy_samples(path: Path) -> list[tuple[list[str], int]]:
    """py-spy ``--format raw``: ``frame;frame;... count`` per line, root first; the main thread's
    only (the worker's other threads wait on stdin and on child processes)."""
    out = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit() and "Thread._bootstrap" not in stack:
            out.append((stack.split(";"), int(count)))
    return out


def pprof_samples(path: Path) -> list[tuple[list[str], int]]:
    """``go tool pprof -traces``: blocks of ``value frame`` / ``frame`` lines, leaf first."""
    text = subprocess.run(
        ["go", "tool", "pprof", "-traces", str(path)], capture_output=True, text=True, check=True
    ).stdout
    out: list[tuple[list[str], int]] = []
    for block in text.split("-----------+-------------------------------------------------------")[1:]:
        lines = [x.strip() for x in block.strip().splitlines() if x.strip()]
        if not lines:
            continue
        value, _, leaf = lines[0].partition(" ")
        frames = [leaf.strip(), *lines[1:]]
        ms = float(value.rstrip("ms").rstrip("µ")) if value.endswith("ms") else _duration_ms(value)
        out.append((frames[::-1], max(1, round(ms * 10))))  # 0.1 ms units
    return out


def _duration_ms(value: str) -> float:
    for unit, scale in (("us", 1e-3), ("µs", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if value.endswith(unit):
            return float(value[: -len(unit)]) * scale
    return float(value)


def summarize(path: Path) -> str:
    go = path.suffix == ".pprof"
    samples = pprof_samples(path) if go else pyspy_samples(path)
    rules = GO_RULES if go else PY_RULES
    total = sum(n for _, n in samples) or 1
    shares: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for frames, n in samples:
        shares[classify(frames, rules)] += n
        leaves[re.sub(r" \(.*", "", frames[-1])] += n
    parts = ", ".join(f"{name} {100 * n / total:.0f}%" for name, n in shares.most_common())
    hot = ", ".join(f"{name} {100 * n / total:.0f}%" for name, n in leaves.most_common(10))
    unit = "CPU ms" if go else "samples"
    size = total / 10 if go else total
    return f"{path.name}: {size:.0f} {unit}\n  components: {parts}\n  hottest leaves: {hot}"


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])]
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    for path in paths:
        print(summarize(path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
