"""/metrics of a running manager shows controller-runtime's metrics moving, with their labels."""

from __future__ import annotations

import asyncio
import json

import aiohttp
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mcr import metrics
from mcr.builder import controller_managed_by
from mcr.manager import Manager
from mcr.reconcile import Request
from mcr.rest.config import load_config
from mcr.testing import eventually
from mcr_envtest import ServerThread

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _this_tests_lines(text: str, controller: str, lease: str) -> str:
    """The exposition lines of one controller and one lease, plus the engagement and REST request
    counts, without histogram buckets. The registry is the process's: earlier tests' controllers
    and clusters left their series in it, and parsing all of them on every poll keeps a loaded
    machine's event loop busy for seconds at a time."""
    own = (f'controller="{controller}"', f'name="{lease}"')
    return "\n".join(
        line
        for line in text.splitlines()
        if "_bucket{" not in line
        and (
            any(label in line for label in own)
            or line.startswith(("mcr_engaged_clusters{", "rest_client_requests_total{"))
        )
    )


def _value(samples: Samples, metric: str, **labels: str) -> float | None:
    return samples.get((metric, tuple(sorted(labels.items()))))


def test_metric_names_and_labels_match_controller_runtime() -> None:
    expected = {
        metrics.RECONCILE_TOTAL: ("controller_runtime_reconcile_total", ["controller", "result", "cluster"]),
        metrics.RECONCILE_ERRORS_TOTAL: (
            "controller_runtime_reconcile_errors_total",
            ["controller", "cluster"],
        ),
        metrics.TERMINAL_RECONCILE_ERRORS_TOTAL: (
            "controller_runtime_terminal_reconcile_errors_total",
            ["controller", "cluster"],
        ),
        metrics.RECONCILE_TIME_SECONDS: (
            "controller_runtime_reconcile_time_seconds_count",
            ["controller", "cluster"],
        ),
        metrics.MAX_CONCURRENT_RECONCILES: ("controller_runtime_max_concurrent_reconciles", ["controller"]),
        metrics.ACTIVE_WORKERS: ("controller_runtime_active_workers", ["controller"]),
        metrics.WORKQUEUE_DEPTH: ("workqueue_depth", ["name", "controller"]),
        metrics.WORKQUEUE_ADDS_TOTAL: ("workqueue_adds_total", ["name", "controller"]),
        metrics.WORKQUEUE_RETRIES_TOTAL: ("workqueue_retries_total", ["name", "controller"]),
        metrics.WORKQUEUE_QUEUE_DURATION_SECONDS: (
            "workqueue_queue_duration_seconds_count",
            ["name", "controller"],
        ),
        metrics.WORKQUEUE_WORK_DURATION_SECONDS: (
            "workqueue_work_duration_seconds_count",
            ["name", "controller"],
        ),
        metrics.WORKQUEUE_UNFINISHED_WORK_SECONDS: (
            "workqueue_unfinished_work_seconds",
            ["name", "controller"],
        ),
        metrics.WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS: (
            "workqueue_longest_running_processor_seconds",
            ["name", "controller"],
        ),
        metrics.LEADER_ELECTION_MASTER_STATUS: ("leader_election_master_status", ["name"]),
        metrics.REST_CLIENT_REQUESTS_TOTAL: (
            "rest_client_requests_total",
            ["code", "method", "host", "cluster"],
        ),
        metrics.ENGAGED_CLUSTERS: ("mcr_engaged_clusters", ["state"]),
        metrics.CLUSTER_ENGAGE_TOTAL: ("mcr_cluster_engage_total", ["result"]),
    }
    for metric, (_, labels) in expected.items():
        metric.labels(**dict.fromkeys(labels, "names-test"))  # a ValueError if the label names differ
    # One scrape for all: the process-wide registry holds the series of every earlier test.
    samples = _samples(generate_latest(metrics.REGISTRY).decode())
    for metric, (sample_name, labels) in expected.items():
        values = dict.fromkeys(labels, "names-test")
        assert (sample_name, tuple(sorted(values.items()))) in samples, sample_name
        metric.remove(*values.values())
    assert metrics.RECONCILE_TIME_BUCKETS[:4] == (0.005, 0.01, 0.025, 0.05)
    assert metrics.RECONCILE_TIME_BUCKETS[-1] == 60.0
    assert len(metrics.RECONCILE_TIME_BUCKETS) == 40
    assert metrics.WORKQUEUE_DURATION_BUCKETS[0] == 1e-08
    assert len(metrics.WORKQUEUE_DURATION_BUCKETS) == 12


async def test_scraped_metrics_move_with_reconciles(apiserver: ServerThread) -> None:
    config = load_config(apiserver.kubeconfig)
    mgr = Manager(
        config,
        metrics_bind_address="127.0.0.1:0",
        leader_election=True,
        leader_election_id="metrics-test",
        leader_election_namespace="default",
        # The default timings: this test is about metrics, and a loaded CI machine can take longer
        # than a second to answer a lease renewal (test_leader_* cover the fast timings).
    )
    fail_once: set[str] = set()
    reconciled: set[str] = set()

    async def reconcile(req: Request) -> None:
        if req.name.startswith("bad") and req.name not in fail_once:
            fail_once.add(req.name)
            raise RuntimeError("first attempt fails")
        reconciled.add(f"{req.namespace}/{req.name}")

    controller_managed_by(mgr).named("metrics-cm").for_("v1/ConfigMap").complete(reconcile)
    task = asyncio.create_task(mgr.start(handle_signals=False))
    try:
        await eventually(lambda: mgr.metrics_url and mgr.elected.is_set(), timeout=10)
        async with config.transport() as t, aiohttp.ClientSession() as http:

            async def scrape(*, whole: bool = False) -> Samples:
                async with http.get(f"{mgr.metrics_url}/metrics") as resp:
                    assert resp.status == 200
                    text = await resp.text()
                if whole:  # the whole exposition parses (off the loop: it is large by now)
                    return await asyncio.to_thread(_samples, text)
                return _samples(_this_tests_lines(text, "metrics-cm", "metrics-test"))

            def successes(s: Samples) -> float:
                return (
                    _value(
                        s,
                        "controller_runtime_reconcile_total",
                        controller="metrics-cm",
                        result="success",
                        cluster="",
                    )
                    or 0.0
                )

            # A real cluster has ConfigMaps of its own: their first reconciles end before `before`.
            listed = (await t.request("GET", "/api/v1/configmaps")).json()["items"]
            existing = {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in listed}
            await eventually(lambda: existing <= reconciled, timeout=15)

            async def counted() -> Samples | None:
                s = await scrape()
                return s if successes(s) >= len(existing) else None

            before = await eventually(counted, timeout=30, interval=0.5)
            for name in ("good-1", "good-2", "bad-1"):
                body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
                await t.request(
                    "POST",
                    "/api/v1/namespaces/default/configmaps",
                    body=body.encode(),
                    content_type="application/json",
                )

            async def moved() -> Samples | None:
                s = await scrape()
                return s if successes(s) >= successes(before) + 3 else None

            await eventually(moved, timeout=30, interval=0.5)
            after = await scrape(whole=True)
            assert successes(after) >= successes(before) + 3
            c = {"controller": "metrics-cm"}
            assert _value(after, "controller_runtime_reconcile_total", **c, result="error", cluster="") == 1.0
            assert _value(after, "controller_runtime_reconcile_errors_total", **c, cluster="") == 1.0
            assert (
                _value(after, "controller_runtime_reconcile_time_seconds_count", **c, cluster="") or 0
            ) >= 4
            assert _value(after, "controller_runtime_max_concurrent_reconciles", **c) == 1.0
            assert _value(after, "controller_runtime_active_workers", **c) is not None
            q = {"name": "metrics-cm", "controller": "metrics-cm"}
            assert (_value(after, "workqueue_adds_total", **q) or 0) >= 4
            assert (_value(after, "workqueue_retries_total", **q) or 0) >= 1
            assert (_value(after, "workqueue_work_duration_seconds_count", **q) or 0) >= 4
            assert _value(after, "workqueue_depth", **q) is not None
            assert _value(after, "leader_election_master_status", name="metrics-test") == 1.0
            assert _value(after, "mcr_engaged_clusters", state="synced") == 1.0
            rest = [k for k in after if k[0] == "rest_client_requests_total"]
            assert rest, "no rest_client_requests_total series"
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 10)


def test_importing_mcr_leaves_the_applications_metrics_alone() -> None:
    """prometheus_client's process-wide settings are the application's: mcr changes none of them,
    so an application's own counters keep their ``*_created`` series, while mcr's ``/metrics``
    output leaves them out."""
    import subprocess
    import sys

    code = (
        "from prometheus_client import Counter, generate_latest\n"
        "c = Counter('app_jobs', 'jobs'); c.inc()\n"
        "before = generate_latest().decode()\n"
        "import mcr, mcr.metrics\n"
        "after = generate_latest().decode()\n"
        "assert 'app_jobs_created' in before, before\n"
        "assert 'app_jobs_created' in after, after\n"
        "mcr.metrics.CLUSTER_ENGAGE_TOTAL.labels('engaged').inc()\n"
        "served = generate_latest(mcr.metrics.SERVED).decode()\n"
        "assert 'mcr_cluster_engage_total' in served and '_created' not in served, served\n"
        "assert 'mcr_cluster_engage_created' in generate_latest(mcr.metrics.REGISTRY).decode()\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
