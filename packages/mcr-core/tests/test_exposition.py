"""``WithoutCreated.exposition()`` writes what ``generate_latest`` writes, metric by metric.

The fast path is checked to be taken where it should be (otherwise the comparisons would only
compare ``generate_latest`` with itself), and to step aside where only prometheus_client knows
the layout.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Enum,
    Gauge,
    Histogram,
    Info,
    Summary,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from mcr import metrics
from mcr.metrics.exposition import WithoutCreated, _metric

HOST = "https://h:6443"
AWKWARD = ["plain", 'quote " inside', "back\\slash", "new\nline", "ünïcödé", ""]


class Custom:
    """A collector of the user's own, registered beside the metrics."""

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("custom_things", "Things, by colour.", labels=["colour"])
        family.add_metric(["red"], 3)
        yield family


def _populated() -> tuple[CollectorRegistry, dict[str, object]]:
    reg = CollectorRegistry(auto_describe=True)
    counter = Counter("things_total", 'Things; "quoted" \\ and\nsplit.', ["cluster", "code"], registry=reg)
    idle = Counter("idle_total", "A counter without series.", ["cluster"], registry=reg)
    gauge = Gauge("depth", "Depth.", ["name", "controller"], registry=reg)
    unlabelled = Gauge("up_now", "No labels.", registry=reg)
    # Labels that sort before and after "le" ("level" just after it), and a bucket that needs Go's
    # exponent form.
    hist = Histogram(
        "latency_seconds",
        "Latency.",
        ["verb", "cluster", "level", "host"],
        buckets=(0.005, 1, 2.5e7),
        registry=reg,
    )
    negative = Histogram(
        "offset", "Starts below zero: no _sum.", ["cluster"], buckets=(-1, 0, 1), registry=reg
    )
    summary = Summary("sizes", "A summary.", ["cluster"], registry=reg)
    Info("build", "Build info.", registry=reg).info({"version": "1.2.3"})
    Enum("phase", "Phase.", ["cluster"], states=["a", "b"], registry=reg).labels("x").state("b")
    reg.register(Custom())
    for i, value in enumerate(AWKWARD):
        counter.labels(value, str(200 + i)).inc(i + 0.5)
        gauge.labels(value, "ctl").set(float(i) * 1e9)
        hist.labels("GET", value, "info", "h").observe(i * 0.4)
        negative.labels(value).observe(-i)
        summary.labels(value).observe(i)
    gauge.labels("special", "ctl").set(float("inf"))
    gauge.labels("nan", "ctl").set(float("nan"))
    gauge.labels("neg", "ctl").set(-0.25)
    unlabelled.set(1)
    return reg, {
        "counter": counter,
        "idle": idle,
        "gauge": gauge,
        "unlabelled": unlabelled,
        "hist": hist,
        "negative": negative,
        "summary": summary,
    }


def test_the_same_text_as_generate_latest_for_every_kind_of_metric() -> None:
    reg, _ = _populated()
    served = WithoutCreated(reg)
    assert served.exposition() == generate_latest(served)
    assert b"_created" not in served.exposition()


def test_the_fast_path_writes_counters_gauges_and_histograms_itself() -> None:
    _, m = _populated()
    for name in ("counter", "idle", "gauge", "hist", "negative"):
        text = _metric(m[name])
        assert text is not None, name
        assert text == generate_latest(WithoutCreated(m[name])).decode(), name
    # generate_latest keeps these: a summary's layout, a metric without labels.
    assert _metric(m["summary"]) is None
    assert _metric(m["unlabelled"]) is None


def test_a_gauge_child_with_a_function_is_left_to_generate_latest() -> None:
    reg = CollectorRegistry()
    gauge = Gauge("live", "Live.", ["cluster"], registry=reg)
    gauge.labels("a").set(1)
    values = iter(range(10, 100))
    gauge.labels("b").set_function(lambda: float(next(values)))
    assert _metric(gauge) is None
    served = WithoutCreated(reg)
    first, second = served.exposition(), generate_latest(served)
    assert b'live{cluster="b"} 10.0' in first
    assert b'live{cluster="b"} 11.0' in second  # the function is called at every collection


def test_a_registry_with_target_info_is_written_by_generate_latest() -> None:
    reg, _ = _populated()
    reg.set_target_info({"service": "mcr"})
    served = WithoutCreated(reg)
    assert served.exposition() == generate_latest(served)
    assert served.exposition().startswith(b"# HELP target_info")


def test_a_collector_that_is_not_a_registry_is_written_by_generate_latest() -> None:
    served = WithoutCreated(Custom())
    assert served.exposition() == generate_latest(served) == generate_latest(Custom())


@pytest.mark.parametrize("clusters", [1, 50])
def test_mcrs_own_registry_as_served(clusters: int) -> None:
    names = [f"exposition-{i}" for i in range(clusters)]
    try:
        for name in names:
            metrics.RECONCILE_TOTAL.labels("exp-ctl", "success", name).inc()
            metrics.RECONCILE_TIME_SECONDS.labels("exp-ctl", name).observe(0.2)
            for verb in ("GET", "WATCH"):
                metrics.REST_CLIENT_REQUESTS_TOTAL.labels("200", verb, "https://h:6443", name).inc()
                metrics.REST_CLIENT_REQUEST_DURATION_SECONDS.labels(verb, "https://h:6443", name).observe(
                    0.01
                )
                metrics.REST_CLIENT_RESPONSE_SIZE_BYTES.labels(verb, "https://h:6443", name).observe(4096)
        text = metrics.SERVED.exposition()
        assert text == generate_latest(metrics.SERVED)
        assert text.count(b'cluster="exposition-') == clusters * (1 + 43 + 2 * (1 + 15 + 11))
    finally:
        metrics.forget_clusters(names)
