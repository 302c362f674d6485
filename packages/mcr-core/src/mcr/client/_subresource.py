"""Clients for subresources (``status``, ``scale``, ``eviction``, ``token``, …)."""

from __future__ import annotations

from typing import Any

import orjson

from mcr.client._options import PatchType, encode_body, write_query
from mcr.client._requests import JSON, Connection, apply_object, decode, patch_object, put_object, target

__all__ = ["SubResourceClient"]


class SubResourceClient:
    """Reads and writes one subresource (``status``, ``scale``, ``eviction``, …) of objects.

    Always talks to the server (subresources are not cached).
    """

    def __init__(self, client: Connection, subresource: str) -> None:
        self._client = client
        self.subresource = subresource

    def __repr__(self) -> str:
        return f"SubResourceClient({self.subresource!r}, {self._client!r})"

    async def get(self, kind_or_obj: Any, name: str | None = None, *, namespace: str | None = None) -> Any:
        c = self._client
        m, ns, name, cls = await target(c.rest_mapper, kind_or_obj, name, namespace)
        resp = await c.transport.request("GET", m.path(ns, name, self.subresource))
        return decode(resp.body, cls)

    async def create(
        self,
        obj: Any,
        body: Any,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> Any:
        """POST ``body`` (e.g. an Eviction, a TokenRequest) to ``obj``'s subresource; returns a dict."""
        c = self._client
        m, ns, name, _ = await target(c.rest_mapper, obj, None, None)
        query = write_query(
            dry_run=dry_run, field_manager=field_manager if field_manager is not None else c.field_manager
        )
        resp = await c.transport.request(
            "POST",
            m.path(ns, name, self.subresource),
            query=query,
            body=encode_body(body),
            content_type=JSON,
        )
        return orjson.loads(resp.body) if resp.body else None

    async def update(
        self,
        obj: Any,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
    ) -> Any:
        return await put_object(self._client, obj, self.subresource, dry_run, field_manager, field_validation)

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
        return await patch_object(
            self._client,
            kind_or_obj,
            name,
            patch,
            self.subresource,
            patch_type,
            namespace,
            dry_run,
            field_manager,
            field_validation,
            force,
        )

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
        return await apply_object(
            self._client, obj, self.subresource, field_manager, force, namespace, dry_run, field_validation
        )
