"""The harness of the chaos tests: the hub, replica processes, the proxies between them and the
hub, and what they logged.

:class:`HubProcess` runs the hub — the server holding the Leases — as a process of its own
(``mcr-envtest serve``, which serves the real control plane when ``KUBEBUILDER_ASSETS`` names it),
so that neither the test process nor the member server slows it down. A :class:`ChaosFleet` has
that hub, a member server, and
``clusters`` kubeconfig files naming the member (each a cluster of its own to the file provider,
so many clusters cost one server, in either test lane). Each replica is a ``sharding_worker.py
--chaos`` process that reaches the hub through a :class:`~chaos_proxy.ChaosProxy` of its own and
the members directly; it reconciles every cluster it runs all the time and logs each reconcile's
start and end on ``time.monotonic()`` (one clock for all processes of the host). The test process
reads the hub directly (never through a proxy) and samples who holds what.

:func:`overlaps` is the check that matters: no two replicas' reconciles of one cluster (with
``global_=True``: of anything) overlap in time, as they ran (:func:`as_worked`: what a frozen
replica could not have run is not counted against it).
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from mcr.cluster import Cluster
from mcr.sharding import owner
from mcr.testing import import_script

ChaosProxy = import_script(Path(__file__).with_name("chaos_proxy.py")).ChaosProxy

WORKER = Path(__file__).with_name("sharding_worker.py")
RUNNABLE = import_script(WORKER).RUNNABLE  # the "cluster" of the leader-only runnable's work
LEASE = "coordination.k8s.io/v1/Lease"


class HubProcess:
    """``mcr-envtest serve`` in a process of its own; ``kubeconfig`` is its admin kubeconfig (a
    dict). :meth:`freeze` and :meth:`thaw` stop and continue that process (with mcr-envtest, the
    server itself; the real control plane runs in child processes they do not touch)."""

    def __init__(self, tmp: Path) -> None:
        path = tmp / "hub.kubeconfig"
        self.log = tmp / "hub.log"
        code = "import sys; from mcr_envtest.cli import main; sys.exit(main())"
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code, "serve", "--port", "0", "--kubeconfig", str(path)],
                stdout=subprocess.PIPE,
                stderr=err,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()  # "mcr-envtest serving <url>; kubeconfig: <path>"
        if "serving" not in line:
            self.close()
            raise RuntimeError(f"mcr-envtest serve did not start: {line!r} {self.log.read_text()[-2000:]}")
        self.kubeconfig: dict[str, Any] = yaml.safe_load(path.read_text())

    def freeze(self) -> float:
        self.proc.send_signal(signal.SIGSTOP)
        while _state(self.proc.pid) not in ("T", "t"):
            time.sleep(0.001)
        return time.monotonic()

    def thaw(self) -> float:
        continued = time.monotonic()
        self.proc.send_signal(signal.SIGCONT)
        return continued

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubProcess]:
    """A :class:`HubProcess` for one test (a test module takes it with ``hub = chaos.hub``),
    closed after the test."""
    process = HubProcess(tmp_path)
    yield process
    process.close()


@dataclass
class Replica:
    """One replica process; ``identity`` is unique per process (a restart gets a new one)."""

    identity: str
    proxy: Any  # a ChaosProxy
    host_kubeconfig: Path
    log: Path
    proc: subprocess.Popen[bytes]
    frozen: list[tuple[float, float]] = field(default_factory=list)  # (stopped, continued)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def freeze(self) -> float:
        """SIGSTOP; returns the monotonic time once the kernel reports the process stopped."""
        self.proc.send_signal(signal.SIGSTOP)
        while _state(self.proc.pid) not in ("T", "t"):
            time.sleep(0.001)
        return time.monotonic()

    def thaw(self, stopped: float) -> float:
        """SIGCONT; returns the monotonic time just before it (the end of the freeze)."""
        continued = time.monotonic()
        self.proc.send_signal(signal.SIGCONT)
        self.frozen.append((stopped, continued))
        return continued


def _balanced(clusters: list[str], slots: tuple[str, ...]) -> int:
    """A suffix for the replicas' identities with which rendezvous hashing gives each of them at
    least two of ``clusters`` (cluster names hold the test's directory, so a split differs per run)."""
    for salt in range(1000):
        peers = {f"{slot}-{salt}": 1.0 for slot in slots}
        shares = Counter(owner(c, peers) for c in clusters)
        if all(shares[p] >= 2 for p in peers):
            return salt
    raise AssertionError(f"no identities give each of {slots} two of {len(clusters)} clusters")


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


class ChaosFleet:
    """Hub, member, kubeconfigs and replica processes (see the module docstring)."""

    def __init__(
        self,
        hub: Any,
        member: Any,
        tmp: Path,
        *,
        clusters: int,
        timings: dict[str, float],
        slots: tuple[str, ...],
        leader: bool = False,
    ) -> None:
        self.hub = hub
        self.member = member
        self.tmp = tmp
        self.timings = timings
        self.leader = leader
        self.fleet_dir = tmp / "fleet"
        self.fleet_dir.mkdir()
        context = member.kubeconfig["current-context"]
        self.clusters: list[str] = []  # the names the file provider gives them
        for i in range(clusters):
            path = self.fleet_dir / f"c{i:02d}.kubeconfig"
            path.write_text(json.dumps(member.kubeconfig))
            self.clusters.append(f"{os.path.abspath(path)}+{context}")
        self._salt = 0 if leader else _balanced(self.clusters, slots)
        self.replicas: dict[str, Replica] = {}
        self.retired: list[Replica] = []
        # (monotonic time, {fence: (holder, acquireTime)}): from every watch event and every read
        self.samples: list[tuple[float, dict[str, tuple[str, str]]]] = []
        self._latest: dict[str, tuple[str, str]] = {}
        self.hub_view = Cluster.from_kubeconfig(hub.kubeconfig, name="hub-observer")
        self.member_view = Cluster.from_kubeconfig(member.kubeconfig, name="member-observer")
        self._serial = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._read: dict[Path, tuple[int, list[dict[str, Any]]]] = {}  # log → (bytes read, entries)

    async def __aenter__(self) -> ChaosFleet:
        tick = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tick", "namespace": "default"}}
        await self.member_view.api_reader.create(tick)
        await self.hub_view.start()
        informer = await self.hub_view.cache.get_informer(LEASE)
        informer.add_event_handler(_LeaseWatch(self._record))
        await informer.wait_for_sync(None)
        self._tasks.append(asyncio.create_task(self._sample()))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for r in [*self.replicas.values(), *self.retired]:
            if r.alive():
                r.proc.send_signal(signal.SIGCONT)
                r.proc.send_signal(signal.SIGKILL)
                r.proc.wait()
            r.proxy.close()
        await self.hub_view.stop()
        await self.member_view.stop()

    # -- replicas --------------------------------------------------------------------------------

    def start(self, slot: str) -> Replica:
        """Start (or restart) the replica of ``slot`` behind its own proxy to the hub."""
        old = self.replicas.pop(slot, None)
        if old is not None:
            self.retired.append(old)
        proxy = old.proxy if old is not None else self._proxy()
        identity = f"{slot}-{self._salt}" if old is None else f"{slot}-{self._salt}-{next(self._serial)}"
        host = self.tmp / f"host-{slot}.kubeconfig"
        if not host.exists():
            config = json.loads(json.dumps(self.hub.kubeconfig))
            for entry in config["clusters"]:
                entry["cluster"]["server"] = proxy.url
            host.write_text(json.dumps(config))
        log = self.tmp / f"{identity}.jsonl"
        args = [sys.executable, str(WORKER), str(host), str(self.fleet_dir), identity, str(log), "--chaos"]
        args += ["--timings", json.dumps(self.timings)]
        if self.leader:
            args.append("--leader")
        with (self.tmp / f"{identity}.err").open("wb") as err:
            proc = subprocess.Popen(
                args,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            )
        replica = self.replicas[slot] = Replica(identity, proxy, host, log, proc)
        return replica

    def _proxy(self) -> Any:
        server = urlsplit(self.hub.kubeconfig["clusters"][0]["cluster"]["server"])
        assert server.hostname is not None
        assert server.port is not None
        proxy = ChaosProxy(server.hostname, server.port)
        proxy.start()
        return proxy

    def identities(self) -> set[str]:
        return {r.identity for r in self.replicas.values() if r.alive()}

    def stderr(self, replica: Replica, *, tail: int | None = 4000) -> str:
        """The replica's log (its last ``tail`` characters; all with ``tail=None``)."""
        text = (self.tmp / f"{replica.identity}.err").read_text(errors="replace")
        return text if tail is None else text[-tail:]

    # -- observation -----------------------------------------------------------------------------

    def _key(self, lease: dict[str, Any]) -> str | None:
        """The sample key of ``lease``: ``"<leader>"``, a fence's cluster, or ``None`` (a peer)."""
        meta = lease.get("metadata") or {}
        if self.leader:
            return "<leader>" if meta.get("name") == "chaos-leader" else None
        if (meta.get("labels") or {}).get("sharding.mcr.io/role") != "fence":
            return None
        return str((meta.get("annotations") or {})["sharding.mcr.io/cluster"])

    def _record(self, lease: dict[str, Any]) -> None:
        """A watch event: a sample holding every fence's latest state, stamped when it arrived."""
        key = self._key(lease)
        if key is None:
            return
        spec = lease.get("spec") or {}
        self._latest[key] = (spec.get("holderIdentity") or "", spec.get("acquireTime") or "")
        self.samples.append((time.monotonic(), dict(self._latest)))

    async def _sample(self) -> None:
        """Every 100 ms: each fence's (sharding) or the leader Lease's (``"<leader>"``) holder and
        ``acquireTime``, with the monotonic time the answer came. The watch (:meth:`_record`) sees
        every write; these reads are a second witness, independent of the watch."""
        reader = self.hub_view.api_reader
        while True:
            try:
                leases = await reader.list(LEASE, namespace="default")
            except LookupError:
                leases = []
            sample = {}
            for lease in leases:
                key = self._key(lease)
                if key is not None:
                    spec = lease.get("spec") or {}
                    sample[key] = (spec.get("holderIdentity") or "", spec.get("acquireTime") or "")
            self.samples.append((time.monotonic(), sample))
            await asyncio.sleep(0.1)

    def holders(self) -> dict[str, str]:
        """The latest sample: holder per fence (or ``"<leader>"``), ``""`` when released."""
        return {k: holder for k, (holder, _) in (self.samples[-1][1] if self.samples else {}).items()}

    def fence_samples(self) -> list[tuple[float, dict[str, tuple[str, str]]]]:
        """Every sample so far: (monotonic time, {fence: (holder, acquireTime)})."""
        return list(self.samples)

    def entries(self) -> list[dict[str, Any]]:
        """Every reconcile logged so far by every replica process (also the retired ones)."""
        out: list[dict[str, Any]] = []
        for r in [*self.retired, *self.replicas.values()]:
            done, parsed = self._read.get(r.log, (0, []))
            if r.log.exists():
                with r.log.open("rb") as f:
                    f.seek(done)
                    data = f.read()
                complete = data[: data.rfind(b"\n") + 1]  # a line being written waits for its end
                parsed = parsed + [json.loads(line) for line in complete.splitlines()]
                self._read[r.log] = (done + len(complete), parsed)
            out += parsed
        return out

    def explain(self, entry: dict[str, Any], *, before: float = 8.0, after: float = 2.0) -> str:
        """What the record holds around ``entry`` (a reconcile): its cluster's fence acquisitions,
        the replicas' freezes, and each replica's log lines on that cluster, from ``before`` seconds
        before its start to ``after`` seconds after (for a failing check's message)."""
        start, cluster = entry["s"], entry["c"]
        lo, hi = start - before, start + after
        short = cluster.rsplit("/", 1)[-1]
        lines = [f"reconcile of {short} by {entry['r']} at {start:.3f}-{entry['e']:.3f}:"]
        taken = history(self.samples).get(cluster, [])
        lines += [f"  {at:.3f} fence taken by {who}" for at, who in taken if lo <= at <= hi]
        for identity, spans in self.frozen().items():
            lines += [f"  {a:.3f}-{b:.3f} {identity} frozen" for a, b in spans if b >= lo and a <= hi]
        tag = f"[{short}]"
        for r in [*self.retired, *self.replicas.values()]:
            for line in self.stderr(r, tail=None).splitlines():
                stamp = line.split(" ", 1)[0]
                if tag in line and stamp.replace(".", "", 1).isdigit() and lo <= float(stamp) <= hi:
                    lines.append(f"  {r.identity}: {line}")
        return "\n".join(lines)

    def frozen(self) -> dict[str, list[tuple[float, float]]]:
        return {r.identity: r.frozen for r in [*self.retired, *self.replicas.values()] if r.frozen}


class _LeaseWatch:
    """The hub's Lease informer handler: hands each Lease state it sees to ``record``."""

    def __init__(self, record: Any) -> None:
        self.record = record

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self.record(obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.record(new)

    def on_delete(self, obj: Any) -> None:
        return None


def as_worked(
    entries: list[dict[str, Any]], frozen: dict[str, list[tuple[float, float]]]
) -> list[dict[str, Any]]:
    """The logged pieces of work as they ran, given when each replica was frozen.

    A frozen process runs no code, and mcr checks a fenced piece's fence before each of its steps
    (a piece begins after such a check and the worker takes one more after reading its end), so
    only a *cancelled* piece can straddle a freeze, and only what ran before the stop counts:

    - a piece in flight when its replica was stopped, cancelled after it resumed, ends where the
      freeze began (after the resumption ran only the unwinding of its cancellation);
    - a task's first piece after its replica resumed (the reconciles' worker's, the leader-only
      runnable's), if cancelled, passed its check before the stop: the process stopped before
      the piece's first clock reading, and the piece was cancelled at its first step once it
      resumed. It did no work and is left out.

    A completed piece keeps its interval: its fence held at a step after its end.
    """
    left_out: set[int] = set()
    for replica, freezes in frozen.items():
        mine = sorted((e for e in entries if e["r"] == replica), key=lambda e: e["s"])
        for _, continued in freezes:
            for runnable in (False, True):
                first = next(
                    (e for e in mine if e["s"] >= continued and (e["c"] == RUNNABLE) is runnable), None
                )
                if first is not None and first.get("x"):
                    left_out.add(id(first))
    worked = []
    for e in entries:
        if id(e) in left_out:
            continue
        end = e["e"]
        if e.get("x"):
            for stopped, continued in frozen.get(e["r"], ()):
                if e["s"] < stopped and end >= continued:
                    end = stopped
                    break
        worked.append({**e, "e": end})
    return worked


def overlaps(
    entries: list[dict[str, Any]], *, global_: bool = False
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs of pieces of work by different replicas whose intervals overlap: on one cluster, or
    (``global_``, leadership) on anything. Give it the pieces :func:`as_worked` when replicas
    were frozen."""
    work: defaultdict[str, list[tuple[float, float, dict[str, Any]]]] = defaultdict(list)
    for e in entries:
        work["*" if global_ else e["c"]].append((e["s"], e["e"], e))
    found = []
    for items in work.values():
        items.sort(key=lambda item: item[0])
        for i, (_, a_end, a) in enumerate(items):
            for b_start, _, b in items[i + 1 :]:
                if b_start >= a_end:
                    break
                if a["r"] != b["r"]:
                    found.append((a, b))
    return found


def history(samples: list[tuple[float, dict[str, Any]]]) -> dict[str, list[tuple[float, str]]]:
    """Per cluster, every fence acquisition seen: (monotonic time of acquireTime, holder), sorted."""
    offset = time.time() - time.monotonic()
    seen: defaultdict[str, set[tuple[float, str]]] = defaultdict(set)
    for _, holders in samples:
        for cluster, (holder, acquired) in holders.items():
            if holder and acquired:
                wall = datetime.datetime.strptime(acquired, "%Y-%m-%dT%H:%M:%S.%fZ")
                at = wall.replace(tzinfo=datetime.UTC).timestamp() - offset
                seen[cluster].add((at, holder))
    return {c: sorted(v) for c, v in seen.items()}


def unfenced(entries: list[dict[str, Any]], acquisitions: dict[str, list[tuple[float, str]]]) -> list[Any]:
    """Reconciles that started while their replica was not the latest to have taken the fence."""
    bad = []
    for e in entries:
        taken = [holder for at, holder in acquisitions.get(e["c"], []) if at <= e["s"]]
        if not taken or taken[-1] != e["r"]:
            bad.append((e, taken[-1:]))
    return bad
