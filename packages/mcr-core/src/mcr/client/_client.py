"""The REST client: typed or dict objects, any GVK, optional cache-backed reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar, overload, runtime_checkable

import orjson

from mcr.client._options import PatchType, delete_options, encode_body, write_query
from mcr.client._pager import list_all
from mcr.client._requests import (
    JSON,
    apply_object,
    as_kind,
    decode,
    metadata_of,
    namespace_for,
    patch_object,
    put_object,
    selector,
    target,
)
from mcr.client._subresource import SubResourceClient
from mcr.rest.kinds import GVK, gvk_of, is_model_class, to_dict, to_model
from mcr.rest.mapper import RESTMapper
from mcr.rest.transport import Transport

__all__ = ["Client", "Reader", "SubResourceClient"]

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
                namespace = namespace_for(await self.rest_mapper.resolve(kind), None)
            return as_kind(kind, await self.reader.get(kind, name, namespace=namespace))
        m, ns, name, cls = await target(self.rest_mapper, kind, name, namespace)
        resp = await self.transport.request("GET", m.path(ns, name))
        return decode(resp.body, cls, m)

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
        ls, fs = selector(label_selector), selector(field_selector)
        if self.reader is not None:
            items = await self.reader.list(kind, namespace=namespace, label_selector=ls, field_selector=fs)
            return [as_kind(kind, o) for o in items]
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
            self.transport, m, namespace, selector(label_selector), selector(field_selector), limit
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
        ns = namespace_for(m, namespace or metadata_of(d).get("namespace"))
        query = write_query(
            dry_run=dry_run,
            field_manager=field_manager if field_manager is not None else self.field_manager,
            field_validation=field_validation,
        )
        resp = await self.transport.request(
            "POST", m.path(ns), query=query, body=encode_body(d), content_type=JSON
        )
        return decode(resp.body, cls, m)

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
        return await put_object(self, obj, None, dry_run, field_manager, field_validation)

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
        return await patch_object(
            self,
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
        return await apply_object(self, obj, None, field_manager, force, namespace, dry_run, field_validation)

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
        m, ns, name, _ = await target(self.rest_mapper, kind_or_obj, name, namespace)
        body = delete_options(
            propagation_policy=propagation_policy,
            preconditions=preconditions,
            grace_period_seconds=grace_period_seconds,
            dry_run=dry_run,
        )
        query = {"dryRun": "All"} if dry_run else None
        await self.transport.request(
            "DELETE", m.path(ns, name), query=query, body=orjson.dumps(body), content_type=JSON
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
        if ls := selector(label_selector):
            query["labelSelector"] = ls
        if fs := selector(field_selector):
            query["fieldSelector"] = fs
        if dry_run:
            query["dryRun"] = "All"
        body = delete_options(
            propagation_policy=propagation_policy, grace_period_seconds=grace_period_seconds, dry_run=dry_run
        )
        await self.transport.request(
            "DELETE", m.path(namespace), query=query, body=orjson.dumps(body), content_type=JSON
        )
