"""One request about one object: what it addresses, the write it sends, how its answer decodes.

What :class:`~mcr.client.Client` and :class:`~mcr.client.SubResourceClient` share: resolving a
kind and name (or an object) to its mapping, namespace and name; the PUT, PATCH and apply writes
of an object or of one of its subresources; decoding an answer as a dict or as the caller's model.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import orjson

from mcr.client._options import PATCH_CONTENT_TYPES, encode_body, write_query
from mcr.rest.kinds import gvk_of, is_model_class, to_dict, to_model
from mcr.rest.mapper import Mapping as RESTMapping
from mcr.rest.mapper import RESTMapper
from mcr.rest.transport import Transport

__all__ = [
    "JSON",
    "Connection",
    "Target",
    "apply_object",
    "as_kind",
    "decode",
    "is_object",
    "metadata_of",
    "namespace_for",
    "patch_object",
    "put_object",
    "selector",
    "target",
]

JSON = "application/json"


class Connection(Protocol):
    """What a request needs of its client: the cluster's transport and REST mapper, and the
    default field manager of writes."""

    transport: Transport
    rest_mapper: RESTMapper
    field_manager: str | None


class Target(NamedTuple):
    """The object a request addresses: its mapping, namespace (``None``: cluster-scoped), name,
    and the model class answers decode to (``None``: dicts)."""

    mapping: RESTMapping
    namespace: str | None
    name: str
    model: type[Any] | None


def selector(sel: str | Mapping[str, str] | None) -> str | None:
    """A label or field selector as a string (``{"a": "b"}`` → ``"a=b"``; empty → ``None``)."""
    if sel is None or isinstance(sel, str):
        return sel or None
    return ",".join(f"{k}={v}" for k, v in sel.items()) or None


def is_object(x: object) -> bool:
    """Whether ``x`` is an object (a dict or a model instance) rather than a kind."""
    return isinstance(x, Mapping) or (not isinstance(x, type) and is_model_class(type(x)))


def metadata_of(d: Mapping[str, Any]) -> Mapping[str, Any]:
    """``d["metadata"]``, or an empty mapping when it has none."""
    meta = d.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def namespace_for(m: RESTMapping, namespace: str | None) -> str | None:
    """The namespace a request uses: none for cluster-scoped kinds, else ``"default"`` if unset."""
    if not m.namespaced:
        return None
    return namespace or "default"


async def target(mapper: RESTMapper, kind_or_obj: object, name: str | None, namespace: str | None) -> Target:
    """The :class:`Target` of a kind and name, or of an object (its own name and namespace unless
    given). ``ValueError`` when no name is known."""
    if is_object(kind_or_obj):
        d = to_dict(kind_or_obj)
        cls = None if isinstance(kind_or_obj, Mapping) else type(kind_or_obj)
        m = await mapper.resolve(cls if cls is not None else gvk_of(d))
        meta = metadata_of(d)
        name = name or meta.get("name")
        namespace = namespace or meta.get("namespace")
    else:
        cls = kind_or_obj if is_model_class(kind_or_obj) else None  # type: ignore[assignment]  # a model class when is_model_class says so
        m = await mapper.resolve(kind_or_obj)
    if not name:
        raise ValueError(f"no name given for {m.gvk}")
    return Target(m, namespace_for(m, namespace), name, cls)


def decode(data: bytes | dict[str, Any], cls: type[Any] | None, m: RESTMapping | None = None) -> Any:
    """An answer as a dict (``cls`` ``None``) or as ``cls``; ``m`` fills in a missing
    ``apiVersion``/``kind``. An answer of another kind than ``cls`` (a Scale, say) stays a dict."""
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


def as_kind(kind: object, obj: Any) -> Any:
    """``obj`` as a model of ``kind`` when ``kind`` is a model class and ``obj`` a dict; else ``obj``."""
    if is_model_class(kind) and isinstance(obj, Mapping):
        return to_model(kind, obj)  # type: ignore[arg-type]  # kind is a model class on this branch
    return obj


async def put_object(
    conn: Connection,
    obj: Any,
    subresource: str | None,
    dry_run: bool,
    field_manager: str | None,
    field_validation: str | None,
) -> Any:
    """Replace ``obj`` (or its ``subresource``) with a PUT; returns the stored object."""
    m, ns, name, cls = await target(conn.rest_mapper, obj, None, None)
    query = write_query(
        dry_run=dry_run,
        field_manager=field_manager if field_manager is not None else conn.field_manager,
        field_validation=field_validation,
    )
    resp = await conn.transport.request(
        "PUT", m.path(ns, name, subresource), query=query, body=encode_body(obj), content_type=JSON
    )
    return decode(resp.body, cls, m)


async def patch_object(
    conn: Connection,
    kind_or_obj: Any,
    name: str | None,
    body: Any,
    subresource: str | None,
    patch_type: str,
    namespace: str | None,
    dry_run: bool,
    field_manager: str | None,
    field_validation: str | None,
    force: bool | None,
) -> Any:
    """PATCH an object (or its ``subresource``) with ``body`` of ``patch_type``; returns the result.

    ``ValueError`` for a missing body or an unknown patch type.
    """
    if body is None:
        raise ValueError("patch() needs a patch body")
    content_type = PATCH_CONTENT_TYPES.get(patch_type)
    if content_type is None:
        raise ValueError(f"patch_type must be one of {sorted(PATCH_CONTENT_TYPES)}, not {patch_type!r}")
    m, ns, name, cls = await target(conn.rest_mapper, kind_or_obj, name, namespace)
    query = write_query(
        dry_run=dry_run,
        field_manager=field_manager if field_manager is not None else conn.field_manager,
        field_validation=field_validation,
        force=force,
    )
    resp = await conn.transport.request(
        "PATCH",
        m.path(ns, name, subresource),
        query=query,
        body=encode_body(body),
        content_type=content_type,
    )
    return decode(resp.body, cls, m)


async def apply_object(
    conn: Connection,
    obj: Any,
    subresource: str | None,
    field_manager: str | None,
    force: bool,
    namespace: str | None,
    dry_run: bool,
    field_validation: str | None,
) -> Any:
    """Server-side apply ``obj`` (or its ``subresource``); its managedFields are left out.

    ``ValueError`` when neither ``field_manager`` nor the connection's default is set.
    """
    manager = field_manager if field_manager is not None else conn.field_manager
    if not manager:
        raise ValueError("apply needs a field_manager (pass one, or give the Client a default)")
    d = to_dict(obj)
    if "managedFields" in metadata_of(d):
        d = copy.copy(d)
        d["metadata"] = {k: v for k, v in metadata_of(d).items() if k != "managedFields"}
    m, ns, name, cls = await target(conn.rest_mapper, obj, None, namespace)
    d.setdefault("apiVersion", m.gvk.api_version)
    d.setdefault("kind", m.gvk.kind)
    query = write_query(
        dry_run=dry_run, field_manager=manager, field_validation=field_validation, force=force
    )
    resp = await conn.transport.request(
        "PATCH",
        m.path(ns, name, subresource),
        query=query,
        body=orjson.dumps(d),
        content_type=PATCH_CONTENT_TYPES["apply"],
    )
    return decode(resp.body, cls, m)
