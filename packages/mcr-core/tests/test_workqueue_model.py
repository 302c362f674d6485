"""The work queue against a reference model, under random operations.

The queue's hot paths (per-priority deques with stale entries, the single-cluster fast path,
bulk adds) must hand out exactly what a plain model hands out: per cluster the highest priority
first and first-in-first-out within a priority, clusters served round-robin, an item added while
processing requeued by ``done``, a raised priority moving the item behind others of the new
priority. The model keeps a sorted list per cluster and recomputes everything the slow way.
"""

from __future__ import annotations

import random

import pytest

from mcr.reconcile import Request
from mcr.workqueue import WorkQueue


class Model:
    """The queue's contract, written for clarity instead of speed."""

    def __init__(self) -> None:
        self.seq = 0
        self.queued: dict[Request, tuple[int, int]] = {}  # item -> (priority, seq)
        self.rr: list[str] = []  # clusters with ready items, in turn order
        self.processing: set[Request] = set()
        self.dirty: dict[Request, int] = {}

    def _enqueue(self, item: Request, priority: int) -> None:
        self.seq += 1
        self.queued[item] = (priority, self.seq)
        if item.cluster_name not in self.rr:
            self.rr.append(item.cluster_name)

    def add(self, item: Request, priority: int) -> None:
        if item in self.processing:
            if item not in self.dirty or priority > self.dirty[item]:
                self.dirty[item] = priority
            return
        if item in self.queued:
            if priority > self.queued[item][0]:
                self._enqueue(item, priority)  # moves behind the others of the new priority
            return
        self._enqueue(item, priority)

    def pop(self) -> Request | None:
        if not self.rr:
            return None
        cluster = self.rr.pop(0)
        mine = [(-p, seq, item) for item, (p, seq) in self.queued.items() if item.cluster_name == cluster]
        _, _, item = min(mine)
        del self.queued[item]
        if len(mine) > 1:
            self.rr.append(cluster)
        self.processing.add(item)
        return item

    def done(self, item: Request) -> None:
        self.processing.discard(item)
        if item in self.dirty:
            self._enqueue(item, self.dirty.pop(item))

    def forget_cluster(self, cluster: str) -> None:
        for item in [i for i in self.queued if i.cluster_name == cluster]:
            del self.queued[item]
        if cluster in self.rr:
            self.rr.remove(cluster)
        for item in [i for i in self.dirty if i.cluster_name == cluster]:
            del self.dirty[item]


@pytest.mark.parametrize("seed", range(12))
async def test_queue_hands_out_what_the_model_does(seed: int) -> None:
    rnd = random.Random(seed)
    clusters = ["", "east", "west"][: 1 + seed % 3]
    priorities = [-100, 0, 0, 0, 10]
    keys = [Request("ns", f"o{i}", c) for c in clusters for i in range(12)]
    queue: WorkQueue[Request] = WorkQueue(f"model-{seed}")
    model = Model()
    taken: list[Request] = []
    for step in range(3000):
        op = rnd.random()
        if op < 0.35:
            item, priority = rnd.choice(keys), rnd.choice(priorities)
            queue.add(item, priority)
            model.add(item, priority)
        elif op < 0.45:
            cluster = rnd.choice(clusters)
            priority = rnd.choice(priorities)
            batch = rnd.sample([k for k in keys if k.cluster_name == cluster], rnd.randint(1, 6))
            queue.add_many(batch, priority, cluster=cluster)
            for item in batch:
                model.add(item, priority)
        elif op < 0.75:
            got = queue.get_nowait()
            assert got == model.pop(), f"seed {seed}, step {step}"
            if got is not None:
                taken.append(got)
        elif op < 0.97:
            if taken:
                item = taken.pop(rnd.randrange(len(taken)))
                queue.done(item)
                model.done(item)
        else:
            cluster = rnd.choice(clusters)
            queue.forget_cluster(cluster)
            model.forget_cluster(cluster)
        assert len(queue) == len(model.queued), f"seed {seed}, step {step}"
    # Drain: the remaining order must match too.
    while (got := queue.get_nowait()) is not None:
        assert got == model.pop()
        queue.done(got)
        model.done(got)
    assert model.pop() is None
    queue.flush_metrics()
