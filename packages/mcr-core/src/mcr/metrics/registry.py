"""The Prometheus registry mcr reports to and the metrics it defines, with controller-runtime's names.

Every metric mcr produces lives in :data:`REGISTRY` (not prometheus_client's global default
registry), so a process can embed several libraries without name clashes and the manager's
``/metrics`` endpoint serves exactly mcr's series. Metric names and label names match
controller-runtime and client-go, so existing dashboards and alerts work unchanged; where a
metric concerns one cluster, mcr adds a ``cluster`` label (``""`` is the local cluster).

Metrics are defined once, here; other modules import the objects and only call
``.labels(...)``. Users may register their own collectors on :data:`REGISTRY` too.
:func:`forget_clusters` removes the series of clusters (the manager calls it some time after
the cluster was disengaged; see ``Manager(metrics_cluster_retention=...)``).

The ``*_created`` series prometheus_client adds to counters and histograms are left out of what
the manager's ``/metrics`` serves (:data:`SERVED`): controller-runtime exposes none and they double
the series count. Importing mcr changes nothing in prometheus_client's process-wide settings, so
an application's own metrics keep whatever it configured.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from mcr.metrics.exposition import WithoutCreated

__all__ = [
    "ACTIVE_WORKERS",
    "CLUSTER_ENGAGE_TOTAL",
    "ENGAGED_CLUSTERS",
    "LEADER_ELECTION_MASTER_STATUS",
    "LEADER_ELECTION_SLOWPATH_TOTAL",
    "MAX_CONCURRENT_RECONCILES",
    "PER_CLUSTER",
    "RECONCILE_ERRORS_TOTAL",
    "RECONCILE_PANICS_TOTAL",
    "RECONCILE_TIMEOUTS_TOTAL",
    "RECONCILE_TIME_BUCKETS",
    "RECONCILE_TIME_SECONDS",
    "RECONCILE_TOTAL",
    "REGISTRY",
    "REST_CLIENT_RATE_LIMITER_DURATION_SECONDS",
    "REST_CLIENT_REQUESTS_TOTAL",
    "REST_CLIENT_REQUEST_DURATION_SECONDS",
    "REST_CLIENT_REQUEST_RETRIES_TOTAL",
    "REST_CLIENT_REQUEST_SIZE_BYTES",
    "REST_CLIENT_RESPONSE_SIZE_BYTES",
    "SERVED",
    "SHARDING_ACQUISITIONS_TOTAL",
    "SHARDING_HANDOVERS_TOTAL",
    "SHARDING_OWNED_CLUSTERS",
    "SHARDING_PEERS",
    "TERMINAL_RECONCILE_ERRORS_TOTAL",
    "WORKQUEUE_ADDS_TOTAL",
    "WORKQUEUE_DEPTH",
    "WORKQUEUE_DURATION_BUCKETS",
    "WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS",
    "WORKQUEUE_QUEUE_DURATION_SECONDS",
    "WORKQUEUE_RETRIES_TOTAL",
    "WORKQUEUE_UNFINISHED_WORK_SECONDS",
    "WORKQUEUE_WORK_DURATION_SECONDS",
    "WithoutCreated",
    "forget_clusters",
]


REGISTRY = CollectorRegistry(auto_describe=True)
"""The registry every mcr metric is registered in; the manager's ``/metrics`` serves it."""


SERVED = WithoutCreated(REGISTRY)
""":data:`REGISTRY` as the manager's ``/metrics`` endpoint serves it."""

# --- controller (controller-runtime pkg/internal/controller/metrics) ---------------------------

RECONCILE_TIME_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05,
    0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
    0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0,
    2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
    6.0, 7.0, 8.0, 9.0, 10.0,
    15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
)  # fmt: skip
"""controller-runtime's buckets for ``controller_runtime_reconcile_time_seconds``."""

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result", "cluster"],
    registry=REGISTRY,
)
"""``result`` is one of ``success``, ``error``, ``requeue``, ``requeue_after``."""

RECONCILE_ERRORS_TOTAL = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller", "cluster"],
    registry=REGISTRY,
)

TERMINAL_RECONCILE_ERRORS_TOTAL = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller", "cluster"],
    registry=REGISTRY,
)

RECONCILE_PANICS_TOTAL = Counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics per controller (unexpected exceptions escaping the runtime)",
    ["controller", "cluster"],
    registry=REGISTRY,
)

RECONCILE_TIMEOUTS_TOTAL = Counter(
    "controller_runtime_reconcile_timeouts_total",
    "Total number of reconciliation timeouts per controller",
    ["controller", "cluster"],
    registry=REGISTRY,
)

RECONCILE_TIME_SECONDS = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller", "cluster"],
    buckets=RECONCILE_TIME_BUCKETS,
    registry=REGISTRY,
)

MAX_CONCURRENT_RECONCILES = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
    registry=REGISTRY,
)

ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
    registry=REGISTRY,
)

# --- workqueue (controller-runtime pkg/internal/metrics/workqueue.go) --------------------------

WORKQUEUE_DURATION_BUCKETS: tuple[float, ...] = tuple(10e-9 * 10**i for i in range(12))
"""``ExponentialBuckets(10e-9, 10, 12)``: 10 ns to 1000 s."""

WORKQUEUE_DEPTH = Gauge(
    "workqueue_depth",
    "Current depth of workqueue",
    ["name", "controller"],
    registry=REGISTRY,
)

WORKQUEUE_ADDS_TOTAL = Counter(
    "workqueue_adds_total",
    "Total number of adds handled by workqueue",
    ["name", "controller"],
    registry=REGISTRY,
)

WORKQUEUE_RETRIES_TOTAL = Counter(
    "workqueue_retries_total",
    "Total number of retries handled by workqueue",
    ["name", "controller"],
    registry=REGISTRY,
)

WORKQUEUE_QUEUE_DURATION_SECONDS = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["name", "controller"],
    buckets=WORKQUEUE_DURATION_BUCKETS,
    registry=REGISTRY,
)

WORKQUEUE_WORK_DURATION_SECONDS = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes",
    ["name", "controller"],
    buckets=WORKQUEUE_DURATION_BUCKETS,
    registry=REGISTRY,
)

WORKQUEUE_UNFINISHED_WORK_SECONDS = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
    "threads by observing the rate at which this increases.",
    ["name", "controller"],
    registry=REGISTRY,
)

WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["name", "controller"],
    registry=REGISTRY,
)

# --- leader election (client-go tools/leaderelection metrics) ----------------------------------

LEADER_ELECTION_MASTER_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
    "1 indicates master. 'name' is the string used to identify the lease.",
    ["name"],
    registry=REGISTRY,
)

LEADER_ELECTION_SLOWPATH_TOTAL = Counter(
    "leader_election_slowpath_total",
    "Total number of slow path exercised in renewing leader leases. 'name' is the string used to "
    "identify the lease.",
    ["name"],
    registry=REGISTRY,
)

# --- REST client (client-go tools/metrics, as controller-runtime registers them) ---------------

_REST_LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
_REST_SIZE_BUCKETS = tuple(64.0 * 4**i for i in range(8))

REST_CLIENT_REQUESTS_TOTAL = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host", "cluster"],
    registry=REGISTRY,
)
"""``code`` is the HTTP status as a string, or ``"<error>"`` when no response arrived."""

REST_CLIENT_REQUEST_DURATION_SECONDS = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host", "cluster"],
    buckets=_REST_LATENCY_BUCKETS,
    registry=REGISTRY,
)

REST_CLIENT_REQUEST_SIZE_BYTES = Histogram(
    "rest_client_request_size_bytes",
    "Request size in bytes. Broken down by verb and host.",
    ["verb", "host", "cluster"],
    buckets=_REST_SIZE_BUCKETS,
    registry=REGISTRY,
)

REST_CLIENT_RESPONSE_SIZE_BYTES = Histogram(
    "rest_client_response_size_bytes",
    "Response size in bytes. Broken down by verb and host.",
    ["verb", "host", "cluster"],
    buckets=_REST_SIZE_BUCKETS,
    registry=REGISTRY,
)

REST_CLIENT_RATE_LIMITER_DURATION_SECONDS = Histogram(
    "rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host", "cluster"],
    buckets=_REST_LATENCY_BUCKETS,
    registry=REGISTRY,
)

REST_CLIENT_REQUEST_RETRIES_TOTAL = Counter(
    "rest_client_request_retries_total",
    "Number of request retries, partitioned by status code, verb, and host.",
    ["code", "verb", "host", "cluster"],
    registry=REGISTRY,
)

# --- mcr's own: engagement --------------------------------------------------------------------

ENGAGED_CLUSTERS = Gauge(
    "mcr_engaged_clusters",
    "Number of clusters engaged with the manager, by engagement state (pending, synced, failed, error).",
    ["state"],
    registry=REGISTRY,
)

CLUSTER_ENGAGE_TOTAL = Counter(
    "mcr_cluster_engage_total",
    "Cluster engagements handled by the manager, by result (engaged, replaced, disengaged, failed, skipped).",
    ["result"],
    registry=REGISTRY,
)

# --- sharding (mcr.sharding.ShardedCoordinator) --------------------------------------------------

SHARDING_OWNED_CLUSTERS = Gauge(
    "mcr_sharding_owned_clusters",
    "Clusters this replica owns: it holds their fence Lease and runs their controllers.",
    registry=REGISTRY,
)

SHARDING_PEERS = Gauge(
    "mcr_sharding_peers",
    "Live replicas (peer Leases renewed within the peer TTL), this one included.",
    registry=REGISTRY,
)

SHARDING_ACQUISITIONS_TOTAL = Counter(
    "mcr_sharding_acquisitions_total",
    "Clusters this replica took over (acquired their fence Lease).",
    registry=REGISTRY,
)

SHARDING_HANDOVERS_TOTAL = Counter(
    "mcr_sharding_handovers_total",
    "Clusters this replica stopped owning, by reason: rebalanced (another replica owns it now; "
    "drained, then released), lost (the fence could not be renewed or was taken), released "
    "(disengaged or stopping).",
    ["reason"],
    registry=REGISTRY,
)

# --- per-cluster series ----------------------------------------------------------------------------

PER_CLUSTER = (
    RECONCILE_TOTAL,
    RECONCILE_ERRORS_TOTAL,
    TERMINAL_RECONCILE_ERRORS_TOTAL,
    RECONCILE_PANICS_TOTAL,
    RECONCILE_TIMEOUTS_TOTAL,
    RECONCILE_TIME_SECONDS,
    REST_CLIENT_REQUESTS_TOTAL,
    REST_CLIENT_REQUEST_DURATION_SECONDS,
    REST_CLIENT_REQUEST_SIZE_BYTES,
    REST_CLIENT_RESPONSE_SIZE_BYTES,
    REST_CLIENT_RATE_LIMITER_DURATION_SECONDS,
    REST_CLIENT_REQUEST_RETRIES_TOTAL,
)
"""The metrics with a ``cluster`` label: every series of one cluster is in one of these."""


def forget_clusters(names: Collection[str]) -> None:
    """Remove every series labelled with one of ``names`` as ``cluster`` from :data:`PER_CLUSTER`.

    Their values are gone from ``/metrics`` (Prometheus marks the series stale); a later use of a
    name starts its series from zero, which ``rate()`` and ``increase()`` treat as a counter
    reset. One pass over each metric's series whatever the number of names; thread-safe, like
    prometheus_client's own ``remove``.
    """
    wanted = frozenset(names)
    if not wanted:
        return
    for metric in PER_CLUSTER:
        if not _forget_in_one_pass(metric, wanted):
            _forget_by_name(metric, wanted)


def _forget_in_one_pass(metric: Any, wanted: frozenset[str]) -> bool:
    """Drop ``metric``'s children of the ``wanted`` clusters in one pass over its children, as its
    ``remove_by_labels`` does for one name; ``False`` if the metric is not laid out as
    prometheus_client (0.24 to 0.26 at least) lays out labelled metrics."""
    children = getattr(metric, "_metrics", None)
    lock = getattr(metric, "_lock", None)
    labelnames = getattr(metric, "_labelnames", None)
    if not isinstance(children, dict) or lock is None or not isinstance(labelnames, tuple):
        return False
    at = labelnames.index("cluster")
    with lock:
        for key in [key for key in children if key[at] in wanted]:
            del children[key]
    return True


def _forget_by_name(metric: Any, wanted: frozenset[str]) -> None:
    """The same through the public ``remove_by_labels``: one pass per name."""
    for name in wanted:
        metric.remove_by_labels({"cluster": name})
