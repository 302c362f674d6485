"""The Prometheus text exposition of a registry, as ``generate_latest`` writes it, without ``*_created``.

prometheus_client's ``generate_latest`` builds a sample object per line and escapes every label of
every line. A fleet makes that the cost of a scrape: 1000 clusters' controller and REST series are
hundreds of thousands of lines, seconds of CPU per scrape. :meth:`WithoutCreated.exposition`
writes the same bytes, working out each series' labels once and each histogram's ``le`` values
once per metric.

The fast path reads the children of prometheus_client's own ``Counter``, ``Gauge`` and
``Histogram`` (as laid out in 0.24-0.26). Any other collector, a metric whose names need escaping,
a child with a function (``Gauge.set_function``) or a layout it does not know goes through
``generate_latest`` itself, so the output stays the same either way; the tests compare the two.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = ["WithoutCreated"]

_LEGACY_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LEGACY_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_TYPES: dict[type, str] = {Counter: "counter", Gauge: "gauge", Histogram: "histogram"}
_go: Callable[[float], str] = floatToGoString  # how generate_latest writes a value (Go's way)


class WithoutCreated:
    """A collector's collection without the ``*_created`` samples (what ``/metrics`` serves).

    ``collect()`` serves ``generate_latest`` and other prometheus_client consumers;
    :meth:`exposition` writes the same text as ``generate_latest(self)``, faster.
    """

    def __init__(self, registry: Collector) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            # Families are built afresh on every collection: trimming their samples is safe.
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family

    def exposition(self) -> bytes:
        """``generate_latest(self)``: the text format, worked out metric by metric (see the module)."""
        registry = self.registry
        if not isinstance(registry, CollectorRegistry):
            return generate_latest(self)
        with registry._lock:
            collectors = list(registry._collector_to_names)
            target_info = registry._target_info
        if target_info:
            return generate_latest(self)
        parts: list[str] = []
        for collector in collectors:
            text = _metric(collector)
            parts.append(generate_latest(WithoutCreated(collector)).decode() if text is None else text)
        return "".join(parts).encode()


def _metric(metric: Any) -> str | None:
    """One metric's text, or None where only ``generate_latest`` knows how to write it."""
    kind = _TYPES.get(type(metric))
    try:
        name: str = metric._name
        labelnames: tuple[str, ...] = tuple(metric._labelnames)
        if kind is None or not labelnames or metric._labelvalues or not _LEGACY_NAME.match(name):
            return None
        if not all(_LEGACY_LABEL.match(label) for label in labelnames):
            return None
        with metric._lock:
            children = list(metric._metrics.items())
        documentation = metric._documentation.replace("\\", r"\\").replace("\n", r"\n")
        family = f"{name}_total" if kind == "counter" else name
        lines = [f"# HELP {family} {documentation}\n# TYPE {family} {kind}\n"]
        if kind == "histogram":
            bounds = [_go(b) for b in metric._upper_bounds]
            with_sum = metric._upper_bounds[0] >= 0
            counts: dict[float, str] = {}  # most buckets of most series hold the same few counts
            for values, child in children:
                lines.extend(_histogram(name, labelnames, values, child, bounds, with_sum, counts))
        else:
            for values, child in children:
                if "_child_samples" in vars(child):  # Gauge.set_function
                    return None
                value = _go(child._value.get())
                lines.append(f"{family}{{{_labels(labelnames, values)}}} {value}\n")
    except AttributeError:  # a prometheus_client laid out otherwise
        return None
    return "".join(lines)


def _histogram(
    name: str,
    labelnames: tuple[str, ...],
    values: tuple[str, ...],
    child: Any,
    bounds: list[str],
    with_sum: bool,
    counts: dict[float, str],
) -> Iterable[str]:
    """One series' lines; ``counts`` caches the text of counts (sums of non-negative counts)."""
    pairs = sorted(zip(labelnames, values, strict=True))
    written = [f'{k}="{_escape(v)}"' for k, v in pairs]
    at = sum(k < "le" for k, _ in pairs)  # where le sorts among the series' labels
    before, after = "".join(f"{w}," for w in written[:at]), "".join(f",{w}" for w in written[at:])
    head, tail = f'{name}_bucket{{{before}le="', f'"{after}}} '
    count = 0.0
    text = ""
    for bound, bucket in zip(bounds, child._buckets, strict=True):
        count += bucket.get()
        text = counts.get(count) or counts.setdefault(count, _go(count))
        yield f"{head}{bound}{tail}{text}\n"
    labels = ",".join(written)
    yield f"{name}_count{{{labels}}} {text}\n"
    if with_sum:
        yield f"{name}_sum{{{labels}}} {_go(child._sum.get())}\n"


def _labels(labelnames: tuple[str, ...], values: tuple[str, ...]) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(zip(labelnames, values, strict=True)))


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
