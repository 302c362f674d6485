"""Kind ⇄ resource mapping for one cluster, from the API server's discovery documents.

:class:`RESTMapper` loads discovery lazily (aggregated discovery v2 when the server offers it:
two requests; else the legacy ``/api``, ``/apis`` and one request per group-version). Asking for
a kind it does not know refreshes discovery once, so a CRD created after start maps without a
restart; refreshes are shared by concurrent callers and spaced at least ``min_refresh_interval``
apart.

Clusters whose servers answer discovery with the same documents (a fleet of one Kubernetes
version) share one parsed snapshot: it is looked up by a digest of the documents' bytes before any
parsing, and kept only while some mapper holds it. A snapshot is never changed once built.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from mcr.errors import APIError, NoKindMatchError, NotAcceptableError
from mcr.rest.kinds import GVK, GVR, gvk_of
from mcr.rest.transport import Transport

__all__ = ["Mapping", "RESTMapper"]

log = logging.getLogger("mcr.rest.mapper")

AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


@dataclass(frozen=True, slots=True)
class Mapping:
    """How one kind is served: its resource, scope, verbs and subresources."""

    gvk: GVK
    gvr: GVR
    namespaced: bool
    verbs: frozenset[str] = frozenset()
    subresources: frozenset[str] = frozenset()
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return self.gvk.kind

    @property
    def api_path(self) -> str:
        """``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.gvr.group}/{self.gvr.version}" if self.gvr.group else f"/api/{self.gvr.version}"

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path of the collection (``name=None``) or of one object (and its subresource).

        For namespaced kinds, ``namespace=None`` means "all namespaces" (collections only).
        """
        parts = [self.api_path]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.gvr.resource)
        if name is not None:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


@dataclass
class _Snapshot:
    by_gvk: dict[GVK, Mapping] = field(default_factory=dict)
    by_gvr: dict[GVR, GVK] = field(default_factory=dict)
    # (group, kind) → mappings in the server's version preference order
    by_group_kind: dict[tuple[str, str], list[Mapping]] = field(default_factory=dict)

    def add(self, m: Mapping) -> None:
        if m.gvk in self.by_gvk:
            return
        self.by_gvk[m.gvk] = m
        self.by_gvr.setdefault(m.gvr, m.gvk)
        self.by_group_kind.setdefault((m.gvk.group, m.gvk.kind), []).append(m)


_shared: weakref.WeakValueDictionary[bytes, _Snapshot] = weakref.WeakValueDictionary()
"""Snapshots by the digest of the discovery documents they were built from."""


def _interned(documents: Iterable[bytes], build: Callable[[], _Snapshot]) -> _Snapshot:
    """The snapshot of ``documents``: one built earlier from the same bytes, else ``build()``."""
    digest = hashlib.sha256()
    for doc in documents:
        digest.update(len(doc).to_bytes(8, "big"))
        digest.update(doc)
    key = digest.digest()
    snap = _shared.get(key)
    if snap is None:
        snap = _shared[key] = build()
    return snap


class RESTMapper:
    """Maps GVKs to resources (and back) for the cluster behind ``transport``.

    Raises :class:`~mcr.errors.NoKindMatchError` for kinds the server does not serve even after
    a refresh. Transport and API errors during discovery propagate.
    """

    def __init__(self, transport: Transport, *, min_refresh_interval: float = 0.5) -> None:
        self.transport = transport
        self.min_refresh_interval = min_refresh_interval
        self._snapshot: _Snapshot | None = None
        self._refreshed_at = -1e9
        self._refreshing: asyncio.Task[_Snapshot] | None = None
        self.refreshes = 0

    async def mapping(self, gvk: GVK) -> Mapping:
        """The mapping of ``gvk``; refreshes discovery once if it is unknown."""
        snap = await self._current()
        found = snap.by_gvk.get(gvk)
        if found is None:
            snap = await self._refresh_for_miss()
            found = snap.by_gvk.get(gvk)
        if found is None:
            raise NoKindMatchError(str(gvk), cluster=self.transport.cluster_name, hint=_hint(snap, gvk))
        return found

    async def resolve(self, kind_like: object) -> Mapping:
        """The mapping for a model class, GVK, ``"group/version/Kind"`` string or bare kind.

        A bare kind (``"Widget"``) or a GVK with an empty version uses the server's preferred
        version; a bare kind matches any group (core first).
        """
        if isinstance(kind_like, str) and "/" not in kind_like:
            return await self._by_kind(None, kind_like)
        if isinstance(kind_like, GVK) and not kind_like.version:
            return await self._by_kind(kind_like.group, kind_like.kind)
        return await self.mapping(gvk_of(kind_like))

    async def _by_kind(self, group: str | None, kind: str) -> Mapping:
        for attempt in range(2):
            snap = await self._current() if attempt == 0 else await self._refresh_for_miss()
            matches = [
                ms[0]
                for (g, k), ms in snap.by_group_kind.items()
                if k == kind and (group is None or g == group)
            ]
            if matches:
                matches.sort(key=lambda m: (m.gvk.group != "", m.gvk.group))
                return matches[0]
        what = f"{group}/{kind}" if group else kind
        raise NoKindMatchError(
            what, cluster=self.transport.cluster_name, hint=_hint(snap, GVK(group or "", "", kind), bare=True)
        )

    async def kind_for(self, gvr: GVR) -> GVK:
        """The kind served at ``gvr`` (a plural resource); refreshes once if unknown."""
        snap = await self._current()
        found = snap.by_gvr.get(gvr)
        if found is None:
            snap = await self._refresh_for_miss()
            found = snap.by_gvr.get(gvr)
        if found is None:
            raise NoKindMatchError(str(gvr), cluster=self.transport.cluster_name)
        return found

    async def mappings(self) -> list[Mapping]:
        """Every kind the server serves (all versions)."""
        return list((await self._current()).by_gvk.values())

    async def refresh(self) -> None:
        """Reload discovery now (shared with concurrent refreshes)."""
        await self._do_refresh()

    async def _current(self) -> _Snapshot:
        if self._snapshot is not None:
            return self._snapshot
        return await self._do_refresh()

    async def _refresh_for_miss(self) -> _Snapshot:
        wait = self._refreshed_at + self.min_refresh_interval - time.monotonic()
        if wait > 0 and self._refreshing is None:
            await asyncio.sleep(wait)
        return await self._do_refresh()

    async def _do_refresh(self) -> _Snapshot:
        task = self._refreshing
        if task is None:
            task = asyncio.ensure_future(self._load())
            self._refreshing = task

            def done(t: asyncio.Task[_Snapshot]) -> None:
                if self._refreshing is t:
                    self._refreshing = None
                if not t.cancelled():
                    t.exception()  # retrieved here: callers may all have been cancelled meanwhile

            task.add_done_callback(done)
        # shield: one caller being cancelled must not cancel the refresh others wait for
        snap = await asyncio.shield(task)
        self._snapshot = snap
        return snap

    async def _load(self) -> _Snapshot:
        started = time.monotonic()
        snap = await self._load_aggregated()
        if snap is None:
            snap = await self._load_legacy()
        self._refreshed_at = started
        self.refreshes += 1
        return snap

    # --- aggregated discovery v2 ------------------------------------------------------------

    async def _load_aggregated(self) -> _Snapshot | None:
        bodies: list[bytes] = []
        for path in ("/api", "/apis"):
            try:
                resp = await self.transport.request("GET", path, headers={"Accept": AGGREGATED_ACCEPT})
            except NotAcceptableError:
                return None
            ctype = resp.headers.get("Content-Type", "")
            if "as=APIGroupDiscoveryList" not in ctype:
                return None
            bodies.append(resp.body)

        def build() -> _Snapshot:
            snap = _Snapshot()
            for body in bodies:
                for item in orjson.loads(body).get("items") or []:
                    group = (item.get("metadata") or {}).get("name") or ""
                    for ver in item.get("versions") or []:
                        version = ver.get("version") or ""
                        for res in ver.get("resources") or []:
                            snap.add(_from_aggregated(group, version, res))
            return snap

        return _interned([b"aggregated", *bodies], build)

    # --- legacy discovery ---------------------------------------------------------------------

    async def _load_legacy(self) -> _Snapshot:
        core_body = (await self.transport.request("GET", "/api")).body
        groups_body = (await self.transport.request("GET", "/apis")).body
        core = orjson.loads(core_body)
        gvs: list[tuple[str, str]] = [("", v) for v in core.get("versions") or []]
        for g in orjson.loads(groups_body).get("groups") or []:
            preferred = (g.get("preferredVersion") or {}).get("version")
            versions = [v.get("version") for v in g.get("versions") or [] if v.get("version")]
            versions.sort(key=lambda v: v != preferred)
            gvs.extend((g.get("name") or "", v) for v in versions)
        docs = await asyncio.gather(*(self._group_version(g, v) for g, v in gvs))

        def build() -> _Snapshot:
            snap = _Snapshot()
            for (group, version), doc in zip(gvs, docs, strict=True):
                if doc is not None:
                    for m in _from_resource_list(group, version, orjson.loads(doc).get("resources") or []):
                        snap.add(m)
            return snap

        # Keyed by the group-versions and their documents (the /api and /apis lists also carry
        # each server's own address); a group-version whose discovery failed is an empty document.
        served = orjson.dumps(gvs)
        return _interned([b"legacy", served, *(doc or b"" for doc in docs)], build)

    async def _group_version(self, group: str, version: str) -> bytes | None:
        """The raw discovery document of one group-version (``None`` if it failed: logged)."""
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            return (await self.transport.request("GET", path)).body
        except APIError as exc:
            # An unavailable aggregated API must not hide every other group.
            log.warning(
                "discovery of %s failed: %s", path, exc, extra={"cluster": self.transport.cluster_name}
            )
            return None


_MAX_LISTED = 40


def _listing(kinds: Iterable[str]) -> str:
    names = sorted(set(kinds))
    more = len(names) - _MAX_LISTED
    shown = ", ".join(names[:_MAX_LISTED])
    return f"{shown} and {more} more" if more > 0 else shown


def _hint(snap: _Snapshot, gvk: GVK, *, bare: bool = False) -> str:
    """What ``snap`` serves near ``gvk``, for the message of a kind it does not serve.

    ``bare``: only the kind (and perhaps the group) was given, any version would do.
    """
    kinds_in: dict[tuple[str, str], set[str]] = {}
    versions: dict[str, list[str]] = {}
    for m in snap.by_gvk.values():
        kinds_in.setdefault((m.gvk.group, m.gvk.version), set()).add(m.gvk.kind)
        in_group = versions.setdefault(m.gvk.group, [])
        if m.gvk.version not in in_group:
            in_group.append(m.gvk.version)

    def spelled_alike(group: str | None) -> str:
        """``did you mean ...?`` for served kinds named like ``gvk.kind`` but for case ("" if none)."""
        wanted = gvk.kind.lower()
        found = sorted(
            str(ms[0].gvk)
            for (g, k), ms in snap.by_group_kind.items()
            if k.lower() == wanted and (group is None or g == group)
        )
        return f"did you mean {' or '.join(found)}? " if found else ""

    def group_kinds(group: str) -> str:
        return _listing(k for (g, _), ks in kinds_in.items() if g == group for k in ks)

    if bare:
        if gvk.group and gvk.group not in versions:
            return f"{spelled_alike(None)}the group {gvk.group!r} is not served".strip()
        return (spelled_alike(gvk.group or None) or spelled_alike(None)).strip()
    if not gvk.group and gvk.version in versions and gvk.version not in versions[""]:
        # "apps/Deployment" reads as version "apps" of the core group, but "apps" is a group.
        return (
            f"{gvk.version!r} is an API group, not a version (name kinds '<group>/<version>/<kind>'): "
            f"{spelled_alike(gvk.version) or f'it serves {group_kinds(gvk.version)}'}"
        ).strip()
    alike = spelled_alike(gvk.group) or spelled_alike(None)
    served = kinds_in.get((gvk.group, gvk.version))
    if served is not None:
        return f"{alike}{gvk.api_version} serves {_listing(served)}"
    if gvk.group in versions:
        name = repr(gvk.group) if gvk.group else "core"
        return f"{alike}the {name} group is served at {', '.join(versions[gvk.group])}"
    if gvk.group:
        return f"{alike}the group {gvk.group!r} is not served".strip()
    return f"{alike}the core group has no version {gvk.version!r}".strip()


def _from_aggregated(group: str, version: str, res: dict[str, Any]) -> Mapping:
    kind = (res.get("responseKind") or {}).get("kind") or ""
    subs = frozenset(s.get("subresource") for s in res.get("subresources") or [] if s.get("subresource"))
    return Mapping(
        gvk=GVK(group, version, kind),
        gvr=GVR(group, version, res.get("resource") or ""),
        namespaced=res.get("scope") == "Namespaced",
        verbs=frozenset(res.get("verbs") or ()),
        subresources=subs,
        singular=res.get("singularResource") or "",
        short_names=tuple(res.get("shortNames") or ()),
        categories=tuple(res.get("categories") or ()),
    )


def _from_resource_list(group: str, version: str, resources: Iterable[dict[str, Any]]) -> list[Mapping]:
    subs: dict[str, set[str]] = {}
    mains = []
    for r in resources:
        name = r.get("name") or ""
        if "/" in name:
            base, _, sub = name.partition("/")
            subs.setdefault(base, set()).add(sub)
        else:
            mains.append(r)
    return [
        Mapping(
            gvk=GVK(group, version, r.get("kind") or ""),
            gvr=GVR(group, version, r["name"]),
            namespaced=bool(r.get("namespaced")),
            verbs=frozenset(r.get("verbs") or ()),
            subresources=frozenset(subs.get(r["name"], ())),
            singular=r.get("singularName") or "",
            short_names=tuple(r.get("shortNames") or ()),
            categories=tuple(r.get("categories") or ()),
        )
        for r in mains
    ]
