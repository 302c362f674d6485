"""Prometheus metrics of one server, served at ``/metrics`` in the text exposition format with
kube-apiserver's names: ``apiserver_request_total``, ``apiserver_request_duration_seconds``,
``apiserver_current_inflight_requests``, ``apiserver_storage_objects`` and
``process_start_time_seconds``.

Only resource requests are counted (by verb, group, version, resource, subresource, scope, dry run
and HTTP code), as the apiserver's request metrics break them out. Counting is synchronous and
cheap; nothing here blocks or awaits.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CONTENT_TYPE", "Metrics", "RequestLabels"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
_BUCKETS = (
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0,
    15.0, 20.0, 30.0, 45.0, 60.0,
)  # fmt: skip


@dataclass(frozen=True)
class RequestLabels:
    """What a resource request is, as the request metrics label it (verb upper-case: ``GET``,
    ``LIST``, ``WATCH``, ``POST``, ``PUT``, ``PATCH``, ``APPLY``, ``DELETE``,
    ``DELETECOLLECTION``; scope ``resource``, ``namespace`` or ``cluster``)."""

    verb: str
    group: str
    version: str
    resource: str
    subresource: str
    scope: str
    dry_run: bool = False

    def pairs(self) -> list[tuple[str, str]]:
        return [
            ("component", "apiserver"),
            ("dry_run", "All" if self.dry_run else ""),
            ("group", self.group),
            ("resource", self.resource),
            ("scope", self.scope),
            ("subresource", self.subresource),
            ("verb", self.verb),
            ("version", self.version),
        ]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _number(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


class Metrics:
    """Request counters and gauges of one server (not thread-safe: use it from the server's
    event loop)."""

    def __init__(self) -> None:
        self.start_time = time.time()
        self._requests: dict[tuple[RequestLabels, int], int] = {}
        self._durations: dict[RequestLabels, tuple[list[int], list[float]]] = {}
        self._inflight = {"mutating": 0, "readOnly": 0}

    def request_started(self, method: str) -> None:
        """Count a request in flight (``GET``/``HEAD`` read-only, anything else mutating)."""
        self._inflight["readOnly" if method in ("GET", "HEAD") else "mutating"] += 1

    def request_finished(self, method: str, labels: RequestLabels | None, code: int, seconds: float) -> None:
        """End a request :meth:`request_started` counted; ``labels`` None for a request that was
        not a resource request (or failed before it was parsed): it is not counted."""
        kind = "readOnly" if method in ("GET", "HEAD") else "mutating"
        self._inflight[kind] = max(0, self._inflight[kind] - 1)
        if labels is None:
            return
        key = (labels, code)
        self._requests[key] = self._requests.get(key, 0) + 1
        counts, total = self._durations.setdefault(labels, ([0] * (len(_BUCKETS) + 1), [0.0]))
        counts[bisect.bisect_left(_BUCKETS, seconds)] += 1
        total[0] += seconds

    def exposition(self, storage_objects: dict[str, int]) -> bytes:
        """The text exposition; ``storage_objects`` maps ``<resource>[.<group>]`` to the number
        of stored objects."""
        out: list[str] = []

        def family(name: str, kind: str, stability: str, help_text: str) -> None:
            out.append(f"# HELP {name} [{stability}] {help_text}")
            out.append(f"# TYPE {name} {kind}")

        family(
            "apiserver_current_inflight_requests",
            "gauge",
            "STABLE",
            "Maximal number of currently used inflight request limit of this apiserver per request kind "
            "in last second.",
        )
        for kind in ("mutating", "readOnly"):
            out.append(f'apiserver_current_inflight_requests{{request_kind="{kind}"}} {self._inflight[kind]}')
        family(
            "apiserver_request_duration_seconds",
            "histogram",
            "STABLE",
            "Response latency distribution in seconds for each verb, dry run value, group, version, "
            "resource, subresource, scope and component.",
        )
        name = "apiserver_request_duration_seconds"
        for labels in sorted(self._durations, key=lambda lb: lb.pairs()):
            counts, total = self._durations[labels]
            pairs = labels.pairs()
            running = 0
            for bound, count in zip(_BUCKETS, counts, strict=False):
                running += count
                out.append(f"{name}_bucket{_labels([*pairs, ('le', _number(bound))])} {running}")
            running += counts[-1]
            out.append(f"{name}_bucket{_labels([*pairs, ('le', '+Inf')])} {running}")
            out.append(f"{name}_sum{_labels(pairs)} {total[0]!r}")
            out.append(f"{name}_count{_labels(pairs)} {running}")
        family(
            "apiserver_request_total",
            "counter",
            "STABLE",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, "
            "resource, scope, component, and HTTP response code.",
        )
        for (labels, code), count in sorted(
            self._requests.items(), key=lambda kv: (kv[0][0].pairs(), kv[0][1])
        ):
            pairs = [("code", str(code)), *labels.pairs()]
            out.append(f"apiserver_request_total{_labels(pairs)} {count}")
        family(
            "apiserver_storage_objects",
            "gauge",
            "STABLE",
            "Number of stored objects at the time of last check split by kind. In case of a fetching "
            "error, the value will be -1.",
        )
        for resource, count in sorted(storage_objects.items()):
            out.append(f"apiserver_storage_objects{_labels([('resource', resource)])} {count}")
        out.append(
            "# HELP process_start_time_seconds [ALPHA] Start time of the process since unix epoch in seconds."
        )
        out.append("# TYPE process_start_time_seconds gauge")
        out.append(f"process_start_time_seconds {self.start_time!r}")
        return ("\n".join(out) + "\n").encode()
