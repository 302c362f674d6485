"""Background controllers: ownerReference garbage collection, namespace termination, CRD cleanup,
ClusterRole aggregation, PersistentVolume and claim protection, the ``kube-root-ca.crt`` ConfigMap
of every namespace (when given the CA).

The :class:`Collector` listens to every committed store event and queues work; a single task
drains the queue in the server's loop. ``owner_gc=False`` switches ownerReference collection off
(like upstream envtest, which has no garbage collector); namespace and CRD cleanup always run, so
namespaces and CRDs finish deleting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from . import errors, root_ca, storage_protection
from .resources import ResourceInfo
from .schema.default_roles import labels_match
from .store import Event
from .write_rules import deep_copy
from .writer import CRD_FINALIZER, Writer

__all__ = ["Collector"]

log = logging.getLogger(__name__)
CRD_GR = ("apiextensions.k8s.io", "customresourcedefinitions")
RBAC = "rbac.authorization.k8s.io"
AGGREGATOR = "clusterrole-aggregation-controller"

Work = tuple[str, Any]


class Collector:
    """Queue-driven cleanup; :meth:`start` spawns the worker, :meth:`stop` cancels and awaits it."""

    def __init__(self, writer: Writer, *, owner_gc: bool = True, root_ca: str | None = None) -> None:
        self.writer = writer
        self.root_ca = root_ca
        self.store = writer.store
        self.registry = writer.registry
        self.owner_gc = owner_gc
        self._queue: asyncio.Queue[Work] | None = None
        self._queued: set[Work] = set()
        self._task: asyncio.Task[None] | None = None
        self.store.listeners.append(self._on_event)

    def start(self) -> None:
        """Start the worker task in the running loop (idempotent); requeues pending lifecycles."""
        if self._task is not None:
            return
        self._queue = asyncio.Queue()
        self._queued.clear()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="mcr-envtest-gc")
        for ns in self.store.list_objects("", "namespaces"):
            if ns["metadata"].get("deletionTimestamp"):
                self._put(("ns", ns["metadata"]["name"]))
        for ns in self.store.list_objects("", "namespaces"):
            self._put(("rootca", ns["metadata"]["name"]))
        for crd in self.store.list_objects(*CRD_GR):
            if crd["metadata"].get("deletionTimestamp"):
                self._put(("crd", crd["metadata"]["name"]))
        for gr in storage_protection.FINALIZERS:
            for obj in self.store.list_objects(*gr):
                if obj["metadata"].get("deletionTimestamp"):
                    self._put(
                        ("protect", (*gr, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
                    )

    async def stop(self) -> None:
        """Cancel and await the worker; queued work is dropped (restart requeues lifecycles)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._queue = None

    def _put(self, work: Work) -> None:
        if self._queue is None or work in self._queued:
            return
        self._queued.add(work)
        self._queue.put_nowait(work)

    def _on_event(self, ev: Event) -> None:
        meta = ev.obj.get("metadata") or {}
        gr = (ev.group, ev.resource)
        if gr == (RBAC, "clusterroles"):
            before = ((ev.prev or {}).get("metadata") or {}).get("labels") or {}
            labels = (before, meta.get("labels") or {})
            self._put(("agg", (ev.name, tuple(tuple(sorted(ls.items())) for ls in labels))))
        if (gr == ("", "namespaces") and ev.type == "ADDED") or (
            gr == ("", "configmaps") and ev.name == root_ca.NAME
        ):
            self._put(("rootca", ev.namespace or ev.name))
        if gr == ("", "pods"):
            for pod in (ev.obj, ev.prev or {}):
                for claim in storage_protection.claims_of_pod(pod):
                    self._put(("protect", (*storage_protection.PVC, ev.namespace, claim)))
        elif gr in storage_protection.FINALIZERS and meta.get("deletionTimestamp"):
            self._put(("protect", (*gr, ev.namespace, ev.name)))
        if ev.type == "DELETED":
            uid = meta.get("uid")
            if uid and self.owner_gc and self.store.dependents(uid):
                self._put(("owner", uid))
            if ev.namespace:
                ns = self.store.get("", "namespaces", "", ev.namespace)
                if ns is not None and ns["metadata"].get("deletionTimestamp"):
                    self._put(("ns", ev.namespace))
            for ref in meta.get("ownerReferences") or ():
                okey = self.store.by_uid(ref.get("uid", ""))
                if okey is not None:
                    self._put(("fg", okey))
            if ev.group and gr != CRD_GR:
                info = self.registry.storage_info(ev.group, ev.resource)
                if info is not None and info.crd is not None:
                    crd = self.store.get(*CRD_GR, "", info.crd["metadata"]["name"])
                    if crd is not None and crd["metadata"].get("deletionTimestamp"):
                        self._put(("crd", crd["metadata"]["name"]))
            return
        refs = meta.get("ownerReferences")
        if refs and self.owner_gc and refs != ((ev.prev or {}).get("metadata") or {}).get("ownerReferences"):
            self._put(("owners", (ev.group, ev.resource, ev.namespace, ev.name)))
        if not meta.get("deletionTimestamp"):
            return
        if gr == ("", "namespaces"):
            self._put(("ns", ev.name))
        elif gr == CRD_GR:
            self._put(("crd", ev.name))
        fins = meta.get("finalizers") or ()
        if "foregroundDeletion" in fins:
            self._put(("fg", (ev.group, ev.resource, ev.namespace, ev.name)))
        if "orphan" in fins:
            self._put(("orphan", (ev.group, ev.resource, ev.namespace, ev.name)))

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            work = await queue.get()
            self._queued.discard(work)
            try:
                self._handle(work)
            except errors.StatusError as exc:
                log.debug("envtest gc: %s: %s", work, exc.message)
            # yield between items so API requests interleave with cleanup
            await asyncio.sleep(0)

    def _info(self, group: str, resource: str) -> ResourceInfo | None:
        return self.registry.storage_info(group, resource)

    def _delete(self, info: ResourceInfo, ns: str, name: str, policy: str = "Background") -> None:
        with contextlib.suppress(errors.StatusError):
            self.writer.delete(info, ns, name, {"propagationPolicy": policy})

    def _handle(self, work: Work) -> None:
        kind, arg = work
        if kind == "owner":
            self._collect_dependents(arg)
        elif kind == "fg":
            self._foreground(arg)
        elif kind == "orphan":
            self._orphan(arg)
        elif kind == "ns":
            self._namespace(arg)
        elif kind == "crd":
            self._crd(arg)
        elif kind == "agg":
            self._aggregate(arg)
        elif kind == "rootca":
            if self.root_ca is not None:
                root_ca.publish(self.writer, arg, self.root_ca)
        elif kind == "owners":
            self._check_owners(arg)
        elif kind == "protect":
            self._protect(arg)

    def _protect(self, key: tuple[str, str, str, str]) -> None:
        """Drop a deleted volume's or claim's protection finalizer once nothing uses it."""
        obj, info = self.store.get(*key), self._info(key[0], key[1])
        pods = self.store.list_objects("", "pods", key[2]) if key[2] else []
        if obj is not None and info is not None and storage_protection.releasable(key[:2], obj, pods):
            self.writer.remove_finalizer(info, key[2], key[3], storage_protection.FINALIZERS[key[:2]])

    def _aggregate(self, arg: tuple[str, tuple[tuple[tuple[str, Any], ...], ...]]) -> None:
        """Refill the rules of every aggregating ClusterRole that selected or selects the changed
        role (labels before and after), or is it: the rules of the roles its selectors match, by
        role name, without repeats."""
        changed, label_sets = arg
        roles = sorted(self.store.list_objects(RBAC, "clusterroles"), key=lambda r: r["metadata"]["name"])
        info = self._info(RBAC, "clusterroles")
        for role in roles:
            selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
            name = role["metadata"]["name"]
            if not selectors or (
                name != changed and not any(labels_match(s, dict(ls)) for s in selectors for ls in label_sets)
            ):
                continue
            rules: list[Any] = []
            for other in roles:
                labels = other["metadata"].get("labels") or {}
                if other is not role and any(labels_match(s, labels) for s in selectors):
                    rules.extend(r for r in other.get("rules") or () if r not in rules)
            if rules != (role.get("rules") or []) and info is not None:
                new = deep_copy(role)
                new["rules"] = rules
                with contextlib.suppress(errors.StatusError):
                    self.writer.update(info, new, "", name, manager=AGGREGATOR)

    def _collect_dependents(self, owner_uid: str) -> None:
        for key in self.store.dependents(owner_uid):
            self._check_owners(key)

    def _owner_exists(self, ref: Any, namespace: str) -> bool:
        okey = self.store.by_uid(ref.get("uid", "")) if isinstance(ref, dict) else None
        # a namespaced owner counts only in its dependent's namespace
        return okey is not None and okey[2] in ("", namespace)

    def _check_owners(self, key: tuple[str, str, str, str]) -> None:
        """Delete a dependent none of whose owners exist; drop the references to missing owners
        of one that has others."""
        group, resource, ns, name = key
        obj = self.store.get(*key)
        info = self._info(group, resource)
        if obj is None or info is None or obj["metadata"].get("deletionTimestamp"):
            return
        refs = obj["metadata"].get("ownerReferences") or []
        alive = [r for r in refs if self._owner_exists(r, ns)]
        if not alive:
            self._delete(info, ns, name)
        elif len(alive) != len(refs):
            new = deep_copy(obj)
            new["metadata"]["ownerReferences"] = alive
            self.store.commit(group, resource, new)

    def _foreground(self, key: tuple[str, str, str, str]) -> None:
        owner = self.store.get(*key)
        info = self._info(key[0], key[1])
        if owner is None or info is None or not owner["metadata"].get("deletionTimestamp"):
            return
        if "foregroundDeletion" not in (owner["metadata"].get("finalizers") or ()):
            return
        uid = owner["metadata"]["uid"]
        deps = self.store.dependents(uid)
        for group, resource, ns, name in deps:
            dinfo = self._info(group, resource)
            dep = self.store.get(group, resource, ns, name)
            if dinfo is not None and dep is not None and not dep["metadata"].get("deletionTimestamp"):
                self._delete(dinfo, ns, name, "Foreground")
        blocking = [
            d
            for d in self.store.dependents(uid)
            if any(
                r.get("uid") == uid and r.get("blockOwnerDeletion")
                for r in (self.store.get(*d) or {"metadata": {}})["metadata"].get("ownerReferences") or ()
            )
        ]
        if not blocking:
            self.writer.remove_finalizer(info, key[2], key[3], "foregroundDeletion")

    def _orphan(self, key: tuple[str, str, str, str]) -> None:
        owner = self.store.get(*key)
        info = self._info(key[0], key[1])
        if owner is None or info is None:
            return
        uid = owner["metadata"]["uid"]
        for d in self.store.dependents(uid):
            dep = self.store.get(*d)
            if dep is None:
                continue
            new = deep_copy(dep)
            refs = [r for r in new["metadata"].get("ownerReferences") or () if r.get("uid") != uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self.store.commit(d[0], d[1], new)
        self.writer.remove_finalizer(info, key[2], key[3], "orphan")

    def _namespace(self, name: str) -> None:
        ns = self.store.get("", "namespaces", "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        remaining = 0
        for group, resource in self.store.resources():
            info = self._info(group, resource)
            if info is None or not info.namespaced:
                continue
            for obj in self.store.list_objects(group, resource, name):
                remaining += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    self._delete(info, name, obj["metadata"]["name"])
        left = sum(self.store.count(g, r, name) for g, r in self.store.resources())
        if left == 0:
            self.writer.finish_namespace(name)
            if self.store.get("", "namespaces", "", name) is not None:
                self._put(("ns", name))

    def _crd(self, name: str) -> None:
        crd = self.store.get(*CRD_GR, "", name)
        if crd is None or not crd["metadata"].get("deletionTimestamp"):
            return
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        info = self._info(group, plural)
        if info is not None:
            for obj in self.store.list_objects(group, plural):
                if not obj["metadata"].get("deletionTimestamp"):
                    self._delete(info, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if self.store.count(group, plural) == 0:
            crd_info = self._info(*CRD_GR)
            assert crd_info is not None
            self.writer.remove_finalizer(crd_info, "", name, CRD_FINALIZER)
