"""The REST client: typed or dict objects, any GVK, optional cache-backed reads."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Protocol, TypeVar, overload, runtime_checkable

import orjson

from mcr.client._options import PATCH_CONTENT_TYPES, PatchType, delete_options, encode_body, write_query
from mcr.client._pager import list_all
from mcr.client._subresource import SubResourceClient
from mcr.kinds import GVK, gvk_of, is_model_class, to_dict, to_model
from mcr.restmapper import Mapping as RESTMapping
from mcr.restmapper import RESTMapper
from mcr.transport import Transport

__all__ = ["Client", "Reader", "SubResourceClient"]

_JSON = "application/json"

M = TypeVar("M")


@runtime_checkable
class Reader(Protocol):
    """Something that answers reads, e.g. the informer cache (``mcr.cache.InformerCache``)."""

    async def get(self, kind: Any, name: str, namespace: str | None = None) -> Any: ...

    async def list(
        self,
        kind: Any,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Any]: ...


def _selector(sel: str | Mapping[str, str] | None) -> str | None:
    if sel is None or isinstance(sel, str):
        return sel or None
    return ",".join(f"{k}={v}" for k, v in sel.items()) or None


def _is_object(x: object) -> bool:
    return isinstance(x, Mapping) or (not isinstance(x, type) and is_model_class(type(x)))


def _meta(d: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = d.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


class Client:
    """Reads and writes objects of any kind on one cluster.

    Objects are plain dicts unless the caller passes a ``kubernetes.client`` model class as the
    kind (or a model instance as the object): then models come back. With a ``reader`` (the
    informer cache), :meth:`get` and :meth:`list` read from it; writes always go to the server.
    :attr:`api_reader` is the same client without the reader. Errors are the
    :mod:`mcr.errors` API errors (``NotFoundError``, ``ConflictError``, …) carrying the Status.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        rest_mapper: RESTMapper | None = None,
        reader: Reader | None = None,
        field_manager: str | None = None,
    ) -> None:
        self.transport = transport
        self.rest_mapper = rest_mapper if rest_mapper is not None else RESTMapper(transport)
        self.reader = reader
        self.field_manager = field_manager

    def __repr__(self) -> str:
        cached = ", cached" if self.reader is not None else ""
        return f"Client(cluster={self.transport.cluster_name!r}, host={self.transport.host!r}{cached})"

    @property
    def cluster_name(self) -> str:
        return self.transport.cluster_name

    @property
    def status(self) -> SubResourceClient:
        """The ``status`` subresource client (made per access: stored, it would form a reference
        cycle with this client, keeping a stopped cluster's cache alive until a full collection).
        """
        return SubResourceClient(self, "status")

    @property
    def api_reader(self) -> Client:
        """This client without the reader: reads go to the API server."""
        if self.reader is None:
            return self
        return Client(self.transport, rest_mapper=self.rest_mapper, field_manager=self.field_manager)

    def with_reader(self, reader: Reader | None) -> Client:
        """A client sharing transport and mapper whose reads go to ``reader``."""
        return Client(
            self.transport, rest_mapper=self.rest_mapper, reader=reader, field_manager=self.field_manager
        )

    def subresource(self, name: str) -> SubResourceClient:
        """A client for a subresource (``"status"``, ``"scale"``, ``"eviction"``, ``"token"``, …)."""
        return SubResourceClient(self, name)

    # --- helpers ------------------------------------------------------------------------------

    async def _target(
        self, kind_or_obj: object, name: str | None, namespace: str | None
    ) -> tuple[RESTMapping, str | None, str, type[Any] | None]:
        """(mapping, namespace, name, model class) for a kind+name or an object."""
        if _is_object(kind_or_obj):
            d = to_dict(kind_or_obj)
            cls = None if isinstance(kind_or_obj, Mapping) else type(kind_or_obj)
            m = await self.rest_mapper.resolve(cls if cls is not None else gvk_of(d))
            meta = _meta(d)
            name = name or meta.get("name")
            namespace = namespace or meta.get("namespace")
        else:
            cls = kind_or_obj if is_model_class(kind_or_obj) else None  # type: ignore[assignment]  # a model class when is_model_class says so
            m = await self.rest_mapper.resolve(kind_or_obj)
        if not name:
            raise ValueError(f"no name given for {m.gvk}")
        return m, self._namespace(m, namespace), name, cls

    @staticmethod
    def _namespace(m: RESTMapping, namespace: str | None) -> str | None:
        if not m.namespaced:
            return None
        return namespace or "default"

    @staticmethod
    def _decode(data: bytes | dict[str, Any], cls: type[Any] | None, m: RESTMapping | None = None) -> Any:
        d: dict[str, Any] = orjson.loads(data) if isinstance(data, bytes) else data
        if m is not None:
            d.setdefault("apiVersion", m.gvk.api_version)
            d.setdefault("kind", m.gvk.kind)
        if cls is None:
            return d
        if d.get("kind") and d.get("apiVersion"):
            try:
                if gvk_of(d) != gvk_of(cls):
                    return d  # a different kind (e.g. Scale from a Deployment's scale subresource)
            except ValueError:
                return d
        return to_model(cls, d)

    def _as(self, kind: object, obj: Any) -> Any:
        if is_model_class(kind) and isinstance(obj, Mapping):
            return to_model(kind, obj)  # type: ignore[arg-type]  # kind is a model class on this branch
        return obj

    def _field_manager(self, field_manager: str | None) -> str | None:
        return field_manager if field_manager is not None else self.field_manager

    # --- reads --------------------------------------------------------------------------------

    @overload
    async def get(self, kind: type[M], name: str, *, namespace: str | None = None) -> M: ...
    @overload
    async def get(self, kind: GVK | str, name: str, *, namespace: str | None = None) -> dict[str, Any]: ...
    async def get(self, kind: Any, name: str, *, namespace: str | None = None) -> Any:
        """The object ``name`` of ``kind`` (namespaced kinds default to namespace ``"default"``).

        Raises :class:`~mcr.errors.NotFoundError` if it does not exist.
        """
        if self.reader is not None:
            if namespace is None:
                namespace = self._namespace(await self.rest_mapper.resolve(kind), None)
            return self._as(kind, await self.reader.get(kind, name, namespace=namespace))
        m, ns, name, cls = await self._target(kind, name, namespace)
        resp = await self.transport.request("GET", m.path(ns, name))
        return self._decode(resp.body, cls, m)

    @overload
    async def list(
        self,
        kind: type[M],
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> list[M]: ...
    @overload
    async def list(
        self,
        kind: GVK | str,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]: ...
    async def list(
        self,
        kind: Any,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> list[Any]:
        """Every object of ``kind`` (in ``namespace``, or all namespaces when ``None``).

        ``limit`` is the page size: all pages are followed. When a continue token expires
        (410), the list restarts once without pagination, as client-go's pager does.
        """
        ls, fs = _selector(label_selector), _selector(field_selector)
        if self.reader is not None:
            items = await self.reader.list(kind, namespace=namespace, label_selector=ls, field_selector=fs)
            return [self._as(kind, o) for o in items]
        lst = await self.list_object(
            kind, namespace=namespace, label_selector=ls, field_selector=fs, limit=limit
        )
        cls = kind if is_model_class(kind) else None
        if cls is None:
            return list(lst["items"])
        return [to_model(cls, d) for d in lst["items"]]

    async def list_object(
        self,
        kind: Any,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """The whole list as one ``<Kind>List`` dict (``metadata.resourceVersion`` from the first page),
        always from the server. Items carry ``apiVersion`` and ``kind``."""
        m = await self.rest_mapper.resolve(kind)
        return await list_all(
            self.transport, m, namespace, _selector(label_selector), _selector(field_selector), limit
        )

    # --- writes -------------------------------------------------------------------------------

    @overload
    async def create(
        self,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
    ) -> dict[str, Any]: ...
    @overload
    async def create(
        self,
        obj: M,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
    ) -> M: ...
    async def create(
        self,
        obj: Any,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
    ) -> Any:
        """Create ``obj``; returns the stored object. :class:`~mcr.errors.AlreadyExistsError` if taken."""
        d = to_dict(obj)
        cls = None if isinstance(obj, Mapping) else type(obj)
        m = await self.rest_mapper.resolve(cls if cls is not None else gvk_of(d))
        ns = self._namespace(m, namespace or _meta(d).get("namespace"))
        query = write_query(
            dry_run=dry_run,
            field_manager=self._field_manager(field_manager),
            field_validation=field_validation,
        )
        resp = await self.transport.request(
            "POST", m.path(ns), query=query, body=encode_body(d), content_type=_JSON
        )
        return self._decode(resp.body, cls, m)

    @overload
    async def update(
        self,
        obj: dict[str, Any],
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
    ) -> dict[str, Any]: ...
    @overload
    async def update(
        self,
        obj: M,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
    ) -> M: ...
    async def update(
        self,
        obj: Any,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
    ) -> Any:
        """Replace ``obj`` (PUT). With ``metadata.resourceVersion`` set, a stale object raises
        :class:`~mcr.errors.ConflictError`."""
        return await self._put(obj, None, dry_run, field_manager, field_validation)

    async def _put(
        self,
        obj: Any,
        subresource: str | None,
        dry_run: bool,
        field_manager: str | None,
        field_validation: str | None,
    ) -> Any:
        m, ns, name, cls = await self._target(obj, None, None)
        query = write_query(
            dry_run=dry_run,
            field_manager=self._field_manager(field_manager),
            field_validation=field_validation,
        )
        resp = await self.transport.request(
            "PUT", m.path(ns, name, subresource), query=query, body=encode_body(obj), content_type=_JSON
        )
        return self._decode(resp.body, cls, m)

    async def patch(
        self,
        kind_or_obj: Any,
        name: str | None = None,
        patch: Any = None,
        *,
        patch_type: PatchType = "merge",
        namespace: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
        force: bool | None = None,
    ) -> Any:
        """Patch an object named by kind+name or by ``kind_or_obj`` itself.

        ``patch_type``: ``"merge"`` (RFC 7386), ``"json"`` (RFC 6902 list of operations),
        ``"strategic"`` (built-in kinds only) or ``"apply"``. ``patch`` is a dict/list, a model,
        or pre-encoded bytes/str.
        """
        return await self._patch(
            kind_or_obj,
            name,
            patch,
            None,
            patch_type,
            namespace,
            dry_run,
            field_manager,
            field_validation,
            force,
        )

    async def _patch(
        self,
        kind_or_obj: Any,
        name: str | None,
        patch: Any,
        subresource: str | None,
        patch_type: str,
        namespace: str | None,
        dry_run: bool,
        field_manager: str | None,
        field_validation: str | None,
        force: bool | None,
    ) -> Any:
        if patch is None:
            raise ValueError("patch() needs a patch body")
        content_type = PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise ValueError(f"patch_type must be one of {sorted(PATCH_CONTENT_TYPES)}, not {patch_type!r}")
        m, ns, name, cls = await self._target(kind_or_obj, name, namespace)
        query = write_query(
            dry_run=dry_run,
            field_manager=self._field_manager(field_manager),
            field_validation=field_validation,
            force=force,
        )
        resp = await self.transport.request(
            "PATCH",
            m.path(ns, name, subresource),
            query=query,
            body=encode_body(patch),
            content_type=content_type,
        )
        return self._decode(resp.body, cls, m)

    @overload
    async def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str | None = None,
        force: bool = False,
        namespace: str | None = None,
        dry_run: bool = False,
        field_validation: str | None = None,
    ) -> dict[str, Any]: ...
    @overload
    async def apply(
        self,
        obj: M,
        *,
        field_manager: str | None = None,
        force: bool = False,
        namespace: str | None = None,
        dry_run: bool = False,
        field_validation: str | None = None,
    ) -> M: ...
    async def apply(
        self,
        obj: Any,
        *,
        field_manager: str | None = None,
        force: bool = False,
        namespace: str | None = None,
        dry_run: bool = False,
        field_validation: str | None = None,
    ) -> Any:
        """Server-side apply ``obj`` (creates it if missing).

        ``field_manager`` (or the client's default) is required. Conflicts with other managers
        raise :class:`~mcr.errors.ConflictError` unless ``force``.
        """
        return await self._apply(obj, None, field_manager, force, namespace, dry_run, field_validation)

    async def _apply(
        self,
        obj: Any,
        subresource: str | None,
        field_manager: str | None,
        force: bool,
        namespace: str | None,
        dry_run: bool,
        field_validation: str | None,
    ) -> Any:
        manager = self._field_manager(field_manager)
        if not manager:
            raise ValueError("apply needs a field_manager (pass one, or give the Client a default)")
        d = to_dict(obj)
        if "managedFields" in _meta(d):
            d = copy.copy(d)
            d["metadata"] = {k: v for k, v in _meta(d).items() if k != "managedFields"}
        m, ns, name, cls = await self._target(obj, None, namespace)
        d.setdefault("apiVersion", m.gvk.api_version)
        d.setdefault("kind", m.gvk.kind)
        query = write_query(
            dry_run=dry_run, field_manager=manager, field_validation=field_validation, force=force
        )
        resp = await self.transport.request(
            "PATCH",
            m.path(ns, name, subresource),
            query=query,
            body=orjson.dumps(d),
            content_type=PATCH_CONTENT_TYPES["apply"],
        )
        return self._decode(resp.body, cls, m)

    async def delete(
        self,
        kind_or_obj: Any,
        name: str | None = None,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, str] | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        """Delete one object. Raises :class:`~mcr.errors.NotFoundError` if it does not exist,
        :class:`~mcr.errors.ConflictError` if ``preconditions`` (uid, resourceVersion) fail."""
        m, ns, name, _ = await self._target(kind_or_obj, name, namespace)
        body = delete_options(
            propagation_policy=propagation_policy,
            preconditions=preconditions,
            grace_period_seconds=grace_period_seconds,
            dry_run=dry_run,
        )
        query = {"dryRun": "All"} if dry_run else None
        await self.transport.request(
            "DELETE", m.path(ns, name), query=query, body=orjson.dumps(body), content_type=_JSON
        )

    async def delete_all_of(
        self,
        kind: Any,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | Mapping[str, str] | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        """Delete every object of ``kind`` matching the selectors (deletecollection).

        Namespaced kinds need ``namespace``.
        """
        m = await self.rest_mapper.resolve(kind)
        if m.namespaced and not namespace:
            raise ValueError(f"delete_all_of({m.gvk}) needs a namespace")
        query: dict[str, str] = {}
        if ls := _selector(label_selector):
            query["labelSelector"] = ls
        if fs := _selector(field_selector):
            query["fieldSelector"] = fs
        if dry_run:
            query["dryRun"] = "All"
        body = delete_options(
            propagation_policy=propagation_policy, grace_period_seconds=grace_period_seconds, dry_run=dry_run
        )
        await self.transport.request(
            "DELETE", m.path(namespace), query=query, body=orjson.dumps(body), content_type=_JSON
        )
