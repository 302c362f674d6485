"""Listing every page of a collection, the way client-go's pager does."""

from __future__ import annotations

from typing import Any

from mcr.errors import GoneError
from mcr.rest.mapper import Mapping
from mcr.rest.transport import Transport

__all__ = ["list_all"]


async def list_all(
    transport: Transport,
    m: Mapping,
    namespace: str | None,
    label_selector: str | None,
    field_selector: str | None,
    limit: int | None,
) -> dict[str, Any]:
    """GET every page of ``m``'s collection and return one ``<Kind>List`` dict.

    ``limit`` is the page size (``None``: one request). A continue token that expired (410) restarts
    the list once without pagination. ``metadata.resourceVersion`` is the first page's; items carry
    ``apiVersion`` and ``kind``. Errors propagate as the transport raises them.
    """
    path = m.path(namespace if m.namespaced else None)
    base: dict[str, str] = {}
    if label_selector:
        base["labelSelector"] = label_selector
    if field_selector:
        base["fieldSelector"] = field_selector
    items: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    cont = ""
    paged = bool(limit)
    while True:
        query = dict(base)
        if paged:
            query["limit"] = str(limit)
        if cont:
            query["continue"] = cont
        try:
            page = (await transport.request("GET", path, query=query)).json()
        except GoneError:
            if not cont:
                raise
            items, first, cont, paged = [], None, "", False  # expired token: one full list
            continue
        if first is None:
            first = page
        items.extend(page.get("items") or [])
        cont = (page.get("metadata") or {}).get("continue") or ""
        if not cont:
            break
    for item in items:
        item.setdefault("apiVersion", m.gvk.api_version)
        item.setdefault("kind", m.gvk.kind)
    assert first is not None
    meta = dict(first.get("metadata") or {})
    meta.pop("continue", None)
    meta.pop("remainingItemCount", None)
    return {"apiVersion": m.gvk.api_version, "kind": f"{m.gvk.kind}List", "metadata": meta, "items": items}
