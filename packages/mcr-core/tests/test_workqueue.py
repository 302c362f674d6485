from __future__ import annotations

import asyncio
import time

import pytest

from mcr import metrics
from mcr.reconcile import Request
from mcr.testing import eventually
from mcr.workqueue import LOW_PRIORITY, QueueShutDown, WorkQueue
from mcr.workqueue.ratelimit import BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter


def req(name: str, cluster: str = "") -> Request:
    return Request("ns", name, cluster)


async def test_dedup_of_queued_items() -> None:
    q: WorkQueue[Request] = WorkQueue()
    q.add(req("a"))
    q.add(req("a"))
    q.add(req("b"))
    assert len(q) == 2
    assert await q.get() == req("a")
    assert await q.get() == req("b")
    assert q.get_nowait() is None


async def test_add_while_processing_marks_dirty_and_requeues_after_done() -> None:
    q: WorkQueue[Request] = WorkQueue()
    q.add(req("a"))
    item = await q.get()
    q.add(req("a"))
    q.add(req("a"))
    assert len(q) == 0, "a processing item must not be handed out again before done()"
    assert q.get_nowait() is None
    q.done(item)
    assert len(q) == 1
    assert await q.get() == req("a")
    q.done(req("a"))
    assert q.get_nowait() is None


async def test_priority_first_and_raised_on_re_add() -> None:
    q: WorkQueue[Request] = WorkQueue()
    q.add(req("low"), LOW_PRIORITY)
    q.add(req("normal"))
    q.add(req("high"), 10)
    q.add(req("raised"), LOW_PRIORITY)
    q.add(req("raised"), 20)
    got = [await q.get() for _ in range(4)]
    assert got == [req("raised"), req("high"), req("normal"), req("low")]


async def test_fifo_within_one_priority() -> None:
    q: WorkQueue[Request] = WorkQueue()
    for i in range(50):
        q.add(req(str(i)))
    assert [(await q.get()).name for _ in range(50)] == [str(i) for i in range(50)]


async def test_fair_across_clusters_with_a_big_backlog() -> None:
    q: WorkQueue[Request] = WorkQueue()
    for i in range(10_000):
        q.add(req(f"a{i}", "A"))
    q.add(req("b0", "B"))
    first = [await q.get() for _ in range(3)]
    assert req("b0", "B") in first[:2], first


async def test_round_robin_over_three_clusters() -> None:
    q: WorkQueue[Request] = WorkQueue()
    for i in range(3):
        for c in "XYZ":
            q.add(req(f"{c}{i}", c))
    order = [(await q.get()).cluster_name for _ in range(9)]
    assert order == list("XYZXYZXYZ")


async def test_add_after_waits_and_earliest_deadline_wins() -> None:
    q: WorkQueue[Request] = WorkQueue()
    start = time.monotonic()
    q.add_after(req("a"), 3.0)
    q.add_after(req("a"), 0.05)  # earlier wins
    q.add_after(req("a"), 10.0)  # later is ignored
    assert len(q) == 0
    assert q.waiting() == 1
    # Well before the 3 s deadline, however loaded the machine: the 0.05 s one won.
    assert await asyncio.wait_for(q.get(), 2.5) == req("a")
    elapsed = time.monotonic() - start
    assert 0.05 <= elapsed < 3.0


async def test_add_drops_a_pending_delay() -> None:
    q: WorkQueue[Request] = WorkQueue()
    q.add_after(req("a"), 0.05)
    q.add(req("a"))
    assert await q.get() == req("a")
    q.done(req("a"))
    await asyncio.sleep(0.1)  # past the old deadline: it must not fire a second time
    assert len(q) == 0
    assert q.waiting() == 0


async def test_delays_share_one_timer_and_fire_in_deadline_order() -> None:
    q: WorkQueue[Request] = WorkQueue()
    tasks_before = len(asyncio.all_tasks())
    deadlines: dict[str, float] = {}
    for i in range(30):
        delay = 0.01 + (29 - i) * 0.01  # added last, due first; 10 ms apart (more than load jitter)
        deadlines[str(i)] = time.monotonic() + delay
        q.add_after(req(str(i)), delay)
    assert len(asyncio.all_tasks()) == tasks_before, "delays must not create a task per item"
    got = []
    for _ in range(30):
        item = await asyncio.wait_for(q.get(), 2)
        assert time.monotonic() >= deadlines[item.name] - 0.001, "handed out before its deadline"
        got.append(item.name)
    assert got == sorted(deadlines, key=deadlines.__getitem__)


async def test_rate_limited_backoff_doubles_from_5ms() -> None:
    q: WorkQueue[Request] = WorkQueue()
    item = req("a")
    delays = []
    for _ in range(7):
        start = time.monotonic()
        q.add_rate_limited(item)
        got = await asyncio.wait_for(q.get(), 5)
        delays.append(time.monotonic() - start)
        q.done(got)
    assert q.num_requeues(item) == 7
    for n, measured in enumerate(delays):
        expected = 0.005 * 2**n
        assert expected - 0.002 <= measured <= expected + 0.15, (n, measured, delays)
    q.forget(item)
    assert q.num_requeues(item) == 0


async def test_rate_limited_with_bucket_spaces_a_burst() -> None:
    rl = MaxOfRateLimiter(ItemExponentialFailureRateLimiter(0.001, 1.0), BucketRateLimiter(qps=50, burst=2))
    q: WorkQueue[Request] = WorkQueue(rate_limiter=rl)
    start = time.monotonic()
    for i in range(4):
        q.add_rate_limited(req(str(i)))
    for _ in range(4):
        await asyncio.wait_for(q.get(), 2)
    # two immediate tokens, then two more at 50 qps: the last one after ~40 ms
    assert time.monotonic() - start >= 0.038


async def test_forget_cluster_purges_queued_delayed_dirty_and_backoff() -> None:
    q: WorkQueue[Request] = WorkQueue()
    for i in range(5):
        q.add(req(f"q{i}", "gone"))
    q.add_after(req("delayed", "gone"), 0.05)
    q.add_rate_limited(req("backoff", "gone"))
    q.add_rate_limited(req("backoff", "stay"))
    assert q.backed_off == {req("backoff", "gone"), req("backoff", "stay")}
    q.add(req("inflight", "gone"))
    q.add(req("keep", "stay"))
    q.add_after(req("keep-delayed", "stay"), 0.05)
    inflight = await q.get()  # round-robin: "gone" was first
    assert inflight == req("q0", "gone")
    q.add(inflight)  # dirty while processing
    dropped = q.forget_cluster("gone")
    assert dropped == 7  # queued q1..q4 and "inflight", waiting "delayed" and "backoff"
    assert q.depth_by_cluster() == {"stay": 1}
    assert q.num_requeues(req("backoff", "gone")) == 0
    assert q.backed_off == {req("backoff", "stay")}, "the other cluster's backoff stays"
    q.forget(req("backoff", "stay"))
    assert not q.backed_off
    q.done(inflight)  # was dirty, but purged: not requeued
    await asyncio.sleep(0.08)
    got = [q.get_nowait(), q.get_nowait(), q.get_nowait(), q.get_nowait()]
    assert set(got) == {req("keep", "stay"), req("keep-delayed", "stay"), req("backoff", "stay"), None}
    # the cluster can come back and is served again
    q.add(req("again", "gone"))
    assert await q.get() == req("again", "gone")


async def test_shutdown_wakes_getters_and_ignores_adds() -> None:
    q: WorkQueue[Request] = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    await q.shutdown()
    with pytest.raises(QueueShutDown):
        await getter
    q.add(req("a"))
    assert len(q) == 0
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_shutdown_with_drain_waits_for_processing_items() -> None:
    q: WorkQueue[Request] = WorkQueue()
    q.add(req("a"))
    item = await q.get()
    drain = asyncio.create_task(q.shutdown(drain=True))
    await asyncio.sleep(0.02)
    assert not drain.done(), "drain must wait for the in-flight item"
    q.done(item)
    await asyncio.wait_for(drain, 1)


async def test_cancelled_get_passes_its_wakeup_on() -> None:
    q: WorkQueue[Request] = WorkQueue()
    g1 = asyncio.create_task(q.get())
    g2 = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add(req("a"))  # wakes g1
    g1.cancel()
    assert await asyncio.wait_for(g2, 1) == req("a")
    with pytest.raises(asyncio.CancelledError):
        await g1


async def test_metrics_follow_the_queue() -> None:
    name = "wq-metrics-test"
    labels = {"name": name, "controller": name}
    q: WorkQueue[Request] = WorkQueue(name)

    def sample(metric: str) -> float:
        value = metrics.REGISTRY.get_sample_value(metric, labels)
        assert value is not None, metric
        return value

    q.add(req("a"))
    q.add(req("b"))
    q.add(req("a"))
    assert sample("workqueue_depth") == 2
    assert sample("workqueue_adds_total") == 2
    item = await q.get()
    assert sample("workqueue_depth") == 1
    assert sample("workqueue_queue_duration_seconds_count") == 1
    await asyncio.sleep(0.02)
    assert sample("workqueue_unfinished_work_seconds") >= 0.015
    assert sample("workqueue_longest_running_processor_seconds") >= 0.015
    q.done(item)
    assert sample("workqueue_work_duration_seconds_count") == 1
    assert sample("workqueue_unfinished_work_seconds") == 0
    q.add_rate_limited(req("c"))
    assert sample("workqueue_retries_total") == 1
    # The gauge is flushed in batches: about a second after the delay, longer on a loaded machine.
    await eventually(lambda: sample("workqueue_depth") == 2, timeout=10)


async def test_worker_fast_path_finish_and_mirrored_work_duration() -> None:
    # The public interface a worker uses: get_nowait, popped_at on the queue's clock, finish
    # (done without recording), and a histogram of its own mirrored into the work duration.
    name = "wq-finish-test"
    labels = {"name": name, "controller": name}
    now = [100.0]
    q: WorkQueue[Request] = WorkQueue(name, clock=lambda: now[0])
    batch = q.metrics_batch
    assert batch is not None
    child = metrics.RECONCILE_TIME_SECONDS.labels("wq-finish-test", "")
    mine = batch.histogram(child)
    q.mirror_work_duration(mine)
    q.add(req("a"))
    now[0] = 101.0
    item = q.get_nowait()
    assert item == req("a")
    assert q.popped_at == 101.0
    q.add(req("a"))  # while processing: dirty
    now[0] = 103.5
    mine.observe(now[0] - q.popped_at)
    q.finish(item)
    assert q.processing() == []
    assert len(q) == 1, "a dirty item is queued again by finish()"
    batch.flush()
    assert metrics.REGISTRY.get_sample_value("workqueue_work_duration_seconds_count", labels) == 1
    assert metrics.REGISTRY.get_sample_value("workqueue_work_duration_seconds_sum", labels) == 2.5
    assert metrics.REGISTRY.get_sample_value("workqueue_queue_duration_seconds_sum", labels) == 1.0


async def test_shutdown_hands_out_no_queued_item_even_while_draining() -> None:
    q: WorkQueue[Request] = WorkQueue()
    q.add(req("in-flight"))
    q.add(req("queued"))
    item = await q.get()
    drain = asyncio.create_task(q.shutdown(drain=True))
    await asyncio.sleep(0)
    with pytest.raises(QueueShutDown):
        await q.get()  # "queued" was waiting when the shutdown came: it must not start now
    assert q.get_nowait() is None
    q.done(item)
    await asyncio.wait_for(drain, 1)


async def test_take_hands_out_a_run_in_get_order() -> None:
    q: WorkQueue[Request] = WorkQueue("wq-take-test")
    for i in range(3):
        q.add(req(f"a{i}", "a"))
        q.add(req(f"b{i}", "b"))
    run = q.take(4)
    assert run == [req("a0", "a"), req("b0", "b"), req("a1", "a"), req("b1", "b")]  # round-robin
    assert sorted(q.processing()) == sorted(run)
    assert len(q) == 2
    # One cluster left: the fast path takes a stretch of its deque.
    q.add_many([req(f"c{i}") for i in range(5)], cluster="")
    assert q.take(3) == [req("a2", "a"), req("b2", "b"), req("c0")]
    rest = q.take(100)
    assert rest == [req(f"c{i}") for i in range(1, 5)]
    rest.append(req("c0"))
    assert q.take(1) == []
    q.add(req("a0", "a"))  # processing: dirty, requeued by finish()
    for item in run + rest:
        q.finish(item)
    assert q.take(5) == [req("a0", "a")]
    await q.shutdown()
    q.add(req("late"))
    assert q.take(5) == []


async def test_take_records_each_items_time_in_the_queue() -> None:
    # A run queued by one add_many waited as long for every item (one value, counted); a run
    # that spans several adds gets each item's own time.
    name = "wq-take-durations-test"
    labels = {"name": name, "controller": name}
    now = [10.0]
    q: WorkQueue[Request] = WorkQueue(name, clock=lambda: now[0])
    q.add_many([req(f"a{i}") for i in range(4)], cluster="")
    now[0] = 12.0
    q.add_many([req("b0"), req("b1")], cluster="")
    now[0] = 13.0
    q.add(req("c"))
    now[0] = 20.0
    assert q.take(2) == [req("a0"), req("a1")]  # one add_many: 10 s each
    now[0] = 21.0
    assert q.take(3) == [req("a2"), req("a3"), req("b0")]  # 11, 11 and 9 s
    now[0] = 22.5
    assert q.take(10) == [req("b1"), req("c")]  # 10.5 and 9.5 s
    q.add_many([req("d")], cluster="")
    now[0] = 24.0
    assert q.take(10) == [req("d")]  # a run of one: 1.5 s
    q.flush_metrics()

    def sample(suffix: str, **extra: str) -> float | None:
        return metrics.REGISTRY.get_sample_value(f"workqueue_queue_duration_seconds_{suffix}", labels | extra)

    assert sample("count") == 8
    assert sample("sum") == 10 + 10 + 11 + 11 + 9 + 10.5 + 9.5 + 1.5
    assert sample("bucket", le="1.0") == 0
    assert sample("bucket", le="10.0") == 5  # 1.5, 9, 9.5 and the two 10s
    await q.shutdown()


async def test_wait_returns_once_an_item_is_ready_and_takes_nothing() -> None:
    q: WorkQueue[Request] = WorkQueue()
    waiter = asyncio.create_task(q.wait())
    await asyncio.sleep(0.01)
    assert not waiter.done(), "nothing is ready yet"
    q.add_after(req("later"), 0.02)
    q.add(req("now"))
    await asyncio.wait_for(waiter, 1)
    assert len(q) == 1, "wait() takes nothing"
    assert q.processing() == []
    await q.wait()  # ready already: returns at once
    assert q.take(5) == [req("now")]
    await asyncio.wait_for(q.wait(), 1)  # the delayed item becomes ready
    assert q.take(5) == [req("later")]


async def test_cancelled_wait_passes_its_wakeup_on_and_shutdown_ends_waits() -> None:
    q: WorkQueue[Request] = WorkQueue()
    w1 = asyncio.create_task(q.wait())
    w2 = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add(req("a"))  # wakes w1
    w1.cancel()
    assert await asyncio.wait_for(w2, 1) == req("a")
    with pytest.raises(asyncio.CancelledError):
        await w1
    w3 = asyncio.create_task(q.wait())
    await asyncio.sleep(0)
    await q.shutdown()
    with pytest.raises(QueueShutDown):
        await w3
    with pytest.raises(QueueShutDown):
        await q.wait()


async def test_finish_all_ends_a_run_and_requeues_what_was_added_meanwhile() -> None:
    q: WorkQueue[Request] = WorkQueue("wq-finish-all-test")
    q.add_many([req(f"c{i}") for i in range(4)], cluster="")
    run = q.take(10)
    assert len(run) == 4
    assert len(q.processing()) == 4
    q.add(req("c1"))  # processing: dirty
    q.finish(req("c3"))  # finished on its own already: finish_all skips it
    q.finish_all(run)
    assert q.processing() == []
    assert q.take(10) == [req("c1")], "the item added during the run is queued again"
    drain = asyncio.create_task(q.shutdown(drain=True))
    await asyncio.sleep(0)
    assert not drain.done()
    q.finish_all([req("c1")])
    await asyncio.wait_for(drain, 1)
